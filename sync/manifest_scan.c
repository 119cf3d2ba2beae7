/*
 * Scanning a tree into a manifest (docs/SYNC.md "Publishing"): one
 * thread per core lists directories, stats their entries and hashes the
 * files whose stat identity changed since the last publish.
 */
#include "sync/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "sync/manifest_int.h"
#include "sync/path.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/hash.h"
#include "util/parallel.h"
#include "util/utf8.h"

#define READ_CHUNK ((size_t)1 << 20)

struct scan_item {
  struct manifest_entry me;
  struct manifest_check ck;
};

#define SCAN_THREADS_MAX 8

/*
 * A tree is listed by one thread per core (at most SCAN_THREADS_MAX),
 * a directory at a time: stat of every entry and the hashing of changed
 * small files are most of a republish of many small files.  The jobs
 * still to do are shared; each thread keeps its own entries, merged and
 * sorted at the end.  A job lists a directory, or looks at one path a
 * watch saw change (manifest_scan_changes).
 */
struct scan_job {
  const char *path;                     /* borrowed */
  const struct manifest_change *change; /* NULL: list the directory */
};

struct scan_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct scan_job *jobs;
  size_t njobs, jcap;
  unsigned busy;       /* threads doing one (they may add more) */
  int failed;          /* a thread failed: the others stop */
  atomic_size_t entries;
  /* prev's one-segment files by inode, built before the threads start
   * (read-only then): 1 + index into prev, 0 empty. */
  uint32_t *by_ino;
  size_t ino_mask;
};

struct scan {
  struct scan_queue *q;
  int topfd;
  int at_root; /* the dataset is the agent's root: skip ".tenbin" */
  const struct manifest_dir_hook *hook;
  const struct manifest *prev;
  const struct manifest_checks *prev_checks;
  struct scan_item *v;
  size_t n, cap;
  uint8_t *buf;      /* READ_CHUNK bytes */
  EVP_MD_CTX *seg_ctx, *root_ctx;
  XXH3_state_t *xs;
  struct manifest_scan_stats st;
  struct err *e;     /* &err */
  struct err err;
  int rc;
};

static struct scan_item *
scan_add(struct scan *sc, const char *path, enum manifest_type type)
{
  struct scan_item *it;

  if (sc->n == sc->cap) {
    sc->cap = sc->cap ? sc->cap * 2 : 256;
    sc->v = xrealloc(sc->v, sc->cap * sizeof(*sc->v));
  }
  it = &sc->v[sc->n++];
  memset(it, 0, sizeof(*it));
  it->me.path = xstrdup(path);
  it->me.type = type;
  return it;
}

static size_t
ino_slot(uint64_t dev, uint64_t ino, size_t mask)
{
  return (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ dev) & mask;
}

/* Index prev's one-segment files by inode, for files moved since. */
static void
index_inodes(struct scan_queue *q, const struct manifest *prev,
             const struct manifest_checks *pcs)
{
  size_t cap = 16;

  if (prev == NULL || pcs == NULL || pcs->n != prev->n)
    return;
  while (cap < 2 * prev->n)
    cap *= 2;
  q->by_ino = xcalloc(cap, sizeof(*q->by_ino));
  q->ino_mask = cap - 1;
  for (size_t i = 0; i < prev->n; i++) {
    const struct manifest_check *pc = &pcs->v[i];
    size_t k;

    if (prev->v[i].type != MANIFEST_FILE || prev->v[i].nsegs != 1 ||
        pc->xxh == NULL)
      continue;
    for (k = ino_slot(pc->dev, pc->ino, q->ino_mask); q->by_ino[k] != 0;
         k = (k + 1) & q->ino_mask)
      ;
    q->by_ino[k] = (uint32_t)i + 1;
  }
}

/*
 * The previous entry that may hold its content when its stat identity
 * changed: the same path, or else the same inode (a file moved within
 * the tree; a rename changes the ctime).  scan_read keeps its SHA-256
 * when the XXH3-128 it recorded matches, as a large file's segments do.
 * j: prev's entry of the same path, or -1.
 */
static ssize_t
scan_candidate(const struct scan *sc, const struct scan_item *it, ssize_t j)
{
  const struct scan_queue *q = sc->q;

  if (j < 0 && q->by_ino != NULL) {
    for (size_t k = ino_slot(it->ck.dev, it->ck.ino, q->ino_mask);
         q->by_ino[k] != 0; k = (k + 1) & q->ino_mask) {
      const struct manifest_check *pc = &sc->prev_checks->v[q->by_ino[k] - 1];

      if (pc->ino == it->ck.ino && pc->dev == it->ck.dev) {
        j = (ssize_t)q->by_ino[k] - 1;
        break;
      }
    }
  }
  if (j < 0 || sc->prev->v[j].type != MANIFEST_FILE ||
      sc->prev->v[j].nsegs != 1 || sc->prev->v[j].size != it->me.size ||
      sc->prev_checks->v[j].xxh == NULL || it->me.size > READ_CHUNK)
    return -1;
  return j;
}

/* Reuse the hashes of prev when the stat identity is unchanged: 1 done;
 * else 0 and *jp prev's entry of the path, or -1. */
static int
scan_reuse(struct scan *sc, struct scan_item *it, ssize_t *jp)
{
  const struct manifest_entry *pe;
  const struct manifest_check *pc;
  ssize_t j;

  *jp = -1;
  if (sc->prev == NULL || sc->prev_checks == NULL ||
      sc->prev_checks->n != sc->prev->n)
    return 0;
  j = manifest_find(sc->prev, it->me.path);
  *jp = j;
  if (j < 0)
    return 0;
  pe = &sc->prev->v[j];
  pc = &sc->prev_checks->v[j];
  if (pe->type != MANIFEST_FILE || pe->size != it->me.size ||
      pc->size != it->ck.size || pc->dev != it->ck.dev ||
      pc->ino != it->ck.ino || pc->mtime_ns != it->ck.mtime_ns ||
      pc->ctime_ns != it->ck.ctime_ns || pc->xxh == NULL ||
      pc->nsegs != pe->nsegs ||
      (pe->nsegs > 1 && (pc->fp == NULL ||
                         pc->nfp != manifest_seg_fp(pe, pe->nsegs))))
    return 0;
  memcpy(it->me.sha256, pe->sha256, 32);
  it->me.nsegs = pe->nsegs;
  it->ck.nsegs = pc->nsegs;
  if (pe->nsegs > 1) {
    uint64_t *lens = xmalloc((size_t)pe->nsegs * sizeof(*lens));

    for (uint32_t k = 0; k < pe->nsegs; k++)
      lens[k] = pe->segoff[k + 1] - pe->segoff[k];
    manifest_set_segments(&it->me, lens, pe->nsegs);
    free(lens);
    it->me.segs = xmalloc((size_t)pe->nsegs * 32);
    memcpy(it->me.segs, pe->segs, (size_t)pe->nsegs * 32);
  }
  it->ck.xxh = xmalloc((size_t)pc->nsegs * 16);
  memcpy(it->ck.xxh, pc->xxh, (size_t)pc->nsegs * 16);
  if (pc->fp != NULL) {
    it->ck.nfp = pc->nfp;
    it->ck.fp = xmalloc((size_t)pc->nfp * 16);
    memcpy(it->ck.fp, pc->fp, (size_t)pc->nfp * 16);
  }
  return 1;
}

static void
set_identity(struct scan_item *it, const struct stat *st)
{
  it->ck.dev = (uint64_t)st->st_dev;
  it->ck.ino = (uint64_t)st->st_ino;
  it->ck.size = (uint64_t)st->st_size;
  it->ck.mtime_ns = manifest_ns(&st->st_mtim);
  it->ck.ctime_ns = manifest_ns(&st->st_ctim);
  it->me.size = it->ck.size;
  it->me.mtime_ns = it->ck.mtime_ns;
  it->me.mode = (uint32_t)st->st_mode & 07777;
  it->me.nsegs = 1; /* until a large file is cut */
  it->ck.nsegs = 1;
}

/* Up to want (> 0) more bytes of the file: their count, or ERR_IO
 * naming it (a file that ends before its size shrank). */
static ssize_t
read_more(struct scan *sc, int fd, const struct scan_item *it, void *buf,
          size_t want)
{
  ssize_t r;

  do {
    r = read(fd, buf, want);
  } while (r < 0 && errno == EINTR);
  if (r < 0)
    return err_set(sc->e, ERR_IO, "cannot read '%.200s': %s", it->me.path,
                   strerror(errno));
  if (r == 0)
    return err_set(sc->e, ERR_IO, "file '%.200s' shrank while being read",
                   it->me.path);
  return r;
}

/* 0 when fd, read to its size, has nothing more. */
static int
read_end(struct scan *sc, int fd, const struct scan_item *it)
{
  ssize_t r;

  do {
    r = read(fd, sc->buf, 1);
  } while (r < 0 && errno == EINTR);
  if (r != 0)
    return err_set(sc->e, ERR_IO, "file '%.200s' grew while being read",
                   it->me.path);
  return 0;
}

/* scan_read of a file of at most READ_CHUNK bytes with a candidate. */
static int
scan_read_small(struct scan *sc, int fd, struct scan_item *it, ssize_t cand)
{
  struct manifest_entry *me = &it->me;
  XXH128_canonical_t canon;
  size_t got = 0;
  ssize_t r;

  while (got < me->size) {
    r = read_more(sc, fd, it, sc->buf + got, (size_t)me->size - got);
    if (r < 0)
      return (int)r;
    got += (size_t)r;
  }
  sc->st.bytes_hashed += got;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(sc->buf, got));
  memcpy(it->ck.xxh[0], canon.digest, 16);
  if (memcmp(canon.digest, sc->prev_checks->v[cand].xxh[0], 16) == 0) {
    memcpy(me->sha256, sc->prev->v[cand].sha256, 32);
    sc->st.segments_reused++;
  } else {
    hash_sha256(sc->buf, got, me->sha256);
  }
  return read_end(sc, fd, it);
}

/* Read a file of one segment once, hashing it with XXH3-128 and
 * SHA-256, or keeping the SHA-256 of prev's entry cand (or -1) when the
 * file fits the buffer and its XXH3-128 is the one recorded there. */
static int
scan_read(struct scan *sc, int fd, struct scan_item *it, ssize_t cand)
{
  struct manifest_entry *me = &it->me;
  XXH128_canonical_t canon;
  unsigned int mdlen = 0;
  uint64_t left = me->size;
  ssize_t r;

  it->ck.xxh = xcalloc(1, 16);
  if (cand >= 0)
    return scan_read_small(sc, fd, it, cand);
  EVP_DigestInit_ex(sc->seg_ctx, EVP_sha256(), NULL);
  XXH3_128bits_reset(sc->xs);
  while (left > 0) {
    size_t want = left < READ_CHUNK ? (size_t)left : READ_CHUNK;

    r = read_more(sc, fd, it, sc->buf, want);
    if (r < 0)
      return (int)r;
    EVP_DigestUpdate(sc->seg_ctx, sc->buf, (size_t)r);
    XXH3_128bits_update(sc->xs, sc->buf, (size_t)r);
    left -= (uint64_t)r;
    sc->st.bytes_hashed += (uint64_t)r;
  }
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(sc->xs));
  memcpy(it->ck.xxh[0], canon.digest, 16);
  EVP_DigestFinal_ex(sc->seg_ctx, me->sha256, &mdlen);
  return read_end(sc, fd, it);
}

/* scan_read for a file that may be more than one segment. */
static int
scan_read_large(struct scan *sc, int fd, struct scan_item *it)
{
  const struct manifest_entry *pe = NULL;
  const struct manifest_check *pc = NULL;
  int rc;

  if (sc->prev != NULL && sc->prev_checks != NULL &&
      sc->prev_checks->n == sc->prev->n) {
    ssize_t j = manifest_find(sc->prev, it->me.path);

    if (j >= 0) {
      pe = &sc->prev->v[j];
      pc = &sc->prev_checks->v[j];
    }
  }
  rc = manifest_scan_large(fd, &it->me, &it->ck, pe, pc, &sc->st, sc->e);
  return rc == 1 ? scan_read(sc, fd, it, -1) : rc;
}

static int
scan_file(struct scan *sc, int dirfd, const char *name, const char *path,
          const struct stat *lst)
{
  struct scan_item *it = scan_add(sc, path, MANIFEST_FILE);
  struct stat st, after;
  ssize_t j;
  int fd, rc;

  set_identity(it, lst);
  if (it->me.size > MANIFEST_MAX_FILE_SIZE)
    return err_set(sc->e, ERR_INVALID, "file '%.200s': %llu bytes, more "
                   "than the limit of 2^50", path,
                   (unsigned long long)it->me.size);
  if (scan_reuse(sc, it, &j)) {
    sc->st.files_reused++;
    return 0;
  }
  /* O_NONBLOCK: if a fifo took the file's place, do not wait on it. */
  fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
              O_CLOEXEC);
  if (fd < 0)
    return err_set(sc->e, ERR_IO, "cannot open '%.200s': %s", path,
                   strerror(errno));
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
      st.st_dev != lst->st_dev || st.st_ino != lst->st_ino) {
    rc = err_set(sc->e, ERR_IO, "file '%.200s' changed while scanning",
                 path);
    goto out;
  }
  /* Record what was read: the identity of the open file. */
  set_identity(it, &st);
  if (it->me.size > MANIFEST_MAX_FILE_SIZE) {
    rc = err_set(sc->e, ERR_IO, "file '%.200s' changed while scanning",
                 path);
    goto out;
  }
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  if (it->me.size > MANIFEST_SEG_MIN)
    rc = scan_read_large(sc, fd, it);
  else
    rc = scan_read(sc, fd, it, sc->prev_checks != NULL
                                   ? scan_candidate(sc, it, j) : -1);
  if (rc < 0)
    goto out;
  if (fstat(fd, &after) < 0 || after.st_size != st.st_size ||
      manifest_ns(&after.st_mtim) != it->ck.mtime_ns) {
    rc = err_set(sc->e, ERR_IO, "file '%.200s' changed while being read",
                 path);
    goto out;
  }
  sc->st.files_hashed++;

out:
  close(fd);
  return rc;
}

static int
scan_link(struct scan *sc, int dirfd, const char *name, const char *path)
{
  char target[SYNCPATH_MAX + 2];
  char shown[128];
  struct scan_item *it;
  ssize_t r = readlinkat(dirfd, name, target, sizeof(target));

  if (r < 0)
    return err_set(sc->e, ERR_IO, "cannot read link '%.200s': %s", path,
                   strerror(errno));
  if ((size_t)r > SYNCPATH_MAX)
    return err_set(sc->e, ERR_INVALID, "link '%.200s': target longer than "
                   "%d bytes", path, SYNCPATH_MAX);
  target[r] = '\0';
  manifest_escape(target, shown, sizeof(shown));
  if (!utf8_valid(target, (size_t)r))
    return err_set(sc->e, ERR_INVALID, "link '%.100s': target '%s' is not "
                   "valid UTF-8", path, shown);
  if (!syncpath_link_inside(path, target))
    return err_set(sc->e, ERR_INVALID, "link '%.100s' -> '%s' points "
                   "outside the dataset", path, shown);
  it = scan_add(sc, path, MANIFEST_LINK);
  it->me.target = xstrdup(target);
  return 0;
}

static const char *
kind_name(mode_t mode)
{
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISFIFO(mode))
    return "a fifo";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "of an unknown type";
}

/* A directory to list (path "" for the top), or a change to look at. */
static void
scan_push(struct scan_queue *q, const char *path,
          const struct manifest_change *change)
{
  pthread_mutex_lock(&q->mu);
  GROW(q->jobs, q->njobs + 1, q->jcap);
  q->jobs[q->njobs].path = path;
  q->jobs[q->njobs++].change = change;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

/* The next job into *job: 0, or -1 when there is none and no thread can
 * add one, or a thread failed. */
static int
scan_take(struct scan_queue *q, struct scan_job *job)
{
  int rc = -1;

  pthread_mutex_lock(&q->mu);
  while (q->njobs == 0 && q->busy > 0 && !q->failed)
    pthread_cond_wait(&q->cv, &q->mu);
  if (q->njobs > 0 && !q->failed) {
    *job = q->jobs[--q->njobs];
    q->busy++;
    rc = 0;
  }
  pthread_mutex_unlock(&q->mu);
  return rc;
}

static void
scan_done_job(struct scan_queue *q, int rc)
{
  pthread_mutex_lock(&q->mu);
  q->busy--;
  if (rc < 0)
    q->failed = 1;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

/* 1 when prev lists a directory at path. */
static int
prev_has_dir(const struct scan *sc, const char *path)
{
  ssize_t j;

  if (sc->prev == NULL)
    return 0;
  j = manifest_find(sc->prev, path);
  return j >= 0 && sc->prev->v[j].type == MANIFEST_DIR;
}

/*
 * Entry name of directory dir (path "" for the top), open at dirfd.
 * Listing, change is NULL and a directory found is listed in turn.  For
 * a change, a path gone is no entry, and a directory is listed only when
 * it is new or was created, deleted or moved since (its own mode changed
 * otherwise: what is beneath it comes from prev and its own changes).
 */
static int
scan_child(struct scan *sc, int dirfd, const char *dir, const char *name,
           const struct manifest_change *change)
{
  char path[SYNCPATH_MAX + 1];
  char shown[128];
  size_t dlen = strlen(dir), nlen = strlen(name);
  struct stat st;

  if (dlen == 0 && strcmp(name, SYNCPATH_STORE) == 0) {
    if (sc->at_root)
      return 0;
    return err_set(sc->e, ERR_INVALID, "'%s' at the top of a dataset is "
                   "reserved for the agent", SYNCPATH_STORE);
  }
  if (!utf8_valid(name, nlen)) {
    manifest_escape(name, shown, sizeof(shown));
    return err_set(sc->e, ERR_INVALID, "name '%s' in '%.100s' is not valid "
                   "UTF-8", shown, dlen > 0 ? dir : ".");
  }
  if (dlen + (dlen > 0) + nlen > SYNCPATH_MAX)
    return err_set(sc->e, ERR_INVALID, "path '%.100s/%.100s': longer than "
                   "%d bytes", dir, name, SYNCPATH_MAX);
  /* Built by hand: snprintf here was a tenth of a 20,000-file scan. */
  memcpy(path, dir, dlen);
  if (dlen > 0)
    path[dlen++] = '/';
  memcpy(path + dlen, name, nlen + 1);
  if (atomic_fetch_add(&sc->q->entries, 1) >= MANIFEST_MAX_ENTRIES)
    return err_set(sc->e, ERR_INVALID, "more than %u entries",
                   MANIFEST_MAX_ENTRIES);
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (change != NULL && errno == ENOENT)
      return 0;
    return err_set(sc->e, ERR_IO, "cannot stat '%.200s': %s", path,
                   strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    struct scan_item *it = scan_add(sc, path, MANIFEST_DIR);

    it->me.mode = (uint32_t)st.st_mode & 07777;
    if (change == NULL || (change->flags & MANIFEST_CHANGED_TREE) ||
        !prev_has_dir(sc, path))
      scan_push(sc->q, it->me.path, NULL);
    return 0;
  }
  if (S_ISREG(st.st_mode))
    return scan_file(sc, dirfd, name, path, &st);
  if (S_ISLNK(st.st_mode))
    return scan_link(sc, dirfd, name, path);
  return err_set(sc->e, ERR_INVALID, "'%.200s' is %s: only files, "
                 "directories and symlinks can be published", path,
                 kind_name(st.st_mode));
}

static int
scan_dir(struct scan *sc, const char *dir)
{
  struct dirent *de;
  DIR *dp;
  int fd, rc = 0;

  /* Each directory is opened from the top, never following a link, so
   * a thread has one directory open at a time however deep the tree is. */
  if (*dir == '\0')
    fd = openat(sc->topfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  else
    fd = syncpath_openat(sc->topfd, dir, O_RDONLY | O_DIRECTORY, 0, sc->e);
  if (fd < 0 && *dir == '\0')
    return err_set(sc->e, ERR_IO, "cannot open the dataset: %s",
                   strerror(errno));
  if (fd < 0)
    return fd;
  if (sc->hook != NULL)
    sc->hook->fn(sc->hook->arg, fd, dir);
  dp = fdopendir(fd);
  if (dp == NULL) {
    close(fd);
    return err_set(sc->e, ERR_IO, "cannot list '%.200s': %s",
                   *dir ? dir : ".", strerror(errno));
  }
  for (;;) {
    errno = 0;
    de = readdir(dp);
    if (de == NULL) {
      if (errno != 0)
        rc = err_set(sc->e, ERR_IO, "cannot list '%.200s': %s",
                     *dir ? dir : ".", strerror(errno));
      break;
    }
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    rc = scan_child(sc, dirfd(dp), dir, de->d_name, NULL);
    if (rc < 0)
      break;
  }
  closedir(dp);
  return rc;
}

static int
item_cmp(const void *a, const void *b)
{
  return strcmp(((const struct scan_item *)a)->me.path,
                ((const struct scan_item *)b)->me.path);
}

/* Look at one changed path, its parent opened from the top.  A parent
 * gone, or a link now, means the path is gone too: the change that
 * removed the parent is in the list as well. */
static int
scan_change(struct scan *sc, const struct manifest_change *change)
{
  char parent[SYNCPATH_MAX + 1];
  const char *slash = strrchr(change->path, '/');
  struct err pe;
  int fd, rc;

  if (slash == NULL)
    return scan_child(sc, sc->topfd, "", change->path, change);
  memcpy(parent, change->path, (size_t)(slash - change->path));
  parent[slash - change->path] = '\0';
  fd = syncpath_openat(sc->topfd, parent, O_RDONLY | O_DIRECTORY, 0, &pe);
  if (fd == ERR_NOT_FOUND || fd == ERR_INVALID)
    return 0;
  if (fd < 0) {
    *sc->e = pe;
    return fd;
  }
  rc = scan_child(sc, fd, parent, slash + 1, change);
  close(fd);
  return rc;
}

static void
scan_worker(struct scan *sc)
{
  struct scan_job job;

  while (scan_take(sc->q, &job) == 0) {
    sc->rc = job.change != NULL ? scan_change(sc, job.change)
                                : scan_dir(sc, job.path);
    scan_done_job(sc->q, sc->rc);
    if (sc->rc < 0)
      break;
  }
}

static void
scan_thread_init(struct scan *sc, struct scan_queue *q, int topfd,
                 int at_root, const struct manifest_dir_hook *hook,
                 const struct manifest *prev,
                 const struct manifest_checks *prev_checks)
{
  memset(sc, 0, sizeof(*sc));
  sc->q = q;
  sc->topfd = topfd;
  sc->at_root = at_root;
  sc->hook = hook;
  sc->prev = prev;
  sc->prev_checks = prev_checks;
  sc->e = &sc->err;
  sc->buf = xmalloc(READ_CHUNK);
  sc->seg_ctx = EVP_MD_CTX_new();
  sc->root_ctx = EVP_MD_CTX_new();
  sc->xs = XXH3_createState();
  if (sc->seg_ctx == NULL || sc->root_ctx == NULL || sc->xs == NULL)
    abort(); /* the alloc.h policy for small allocations */
}

static void
scan_thread_release(struct scan *sc)
{
  for (size_t i = 0; i < sc->n; i++) {
    manifest_entry_release(&sc->v[i].me);
    free(sc->v[i].ck.xxh);
    free(sc->v[i].ck.fp);
  }
  free(sc->v);
  free(sc->buf);
  EVP_MD_CTX_free(sc->seg_ctx);
  EVP_MD_CTX_free(sc->root_ctx);
  XXH3_freeState(sc->xs);
}

/* ---- one scan: its threads, their jobs and what they found ---- */

struct scan_run {
  struct scan_queue q;
  struct scan sc[SCAN_THREADS_MAX];
  size_t nt;
  int topfd;
  struct scan_item *items; /* every thread's, sorted (run_items) */
  size_t n;
};

static int
run_open(struct scan_run *r, int rootfd, const char *rel,
         const struct manifest_dir_hook *hook, const struct manifest *prev,
         const struct manifest_checks *prev_checks, struct err *e)
{
  memset(r, 0, sizeof(*r));
  r->nt = parallel_cores(SCAN_THREADS_MAX);
  r->topfd = syncpath_openat(rootfd, rel, O_RDONLY | O_DIRECTORY, 0, e);
  if (r->topfd < 0)
    return r->topfd;
  pthread_mutex_init(&r->q.mu, NULL);
  pthread_cond_init(&r->q.cv, NULL);
  atomic_init(&r->q.entries, 0);
  index_inodes(&r->q, prev, prev_checks);
  for (size_t t = 0; t < r->nt; t++)
    scan_thread_init(&r->sc[t], &r->q, r->topfd, strcmp(rel, ".") == 0,
                     hook, prev, prev_checks);
  return 0;
}

static void
run_worker(void *arg, size_t t)
{
  struct scan_run *r = arg;

  scan_worker(&r->sc[t]);
}

/* Do the jobs pushed, and what they push, on every thread; then gather
 * their entries, sorted: readdir order is arbitrary, and a depth-first
 * one is not strcmp order either ('/' sorts before most characters). */
static int
run_jobs(struct scan_run *r, struct err *e)
{
  size_t k = 0;

  /* A worker finds no job left only when none is busy, so workers run
   * one after another (no thread to be had) still do every job. */
  (void)parallel_run(r->nt, run_worker, r, NULL);
  for (size_t t = 0; t < r->nt; t++) {
    if (r->sc[t].rc < 0) {
      *e = r->sc[t].err;
      return r->sc[t].rc;
    }
  }
  for (size_t t = 0; t < r->nt; t++)
    r->n += r->sc[t].n;
  r->items = xmalloc((r->n > 0 ? r->n : 1) * sizeof(*r->items));
  for (size_t t = 0; t < r->nt; t++) {
    if (r->sc[t].n > 0)
      memcpy(r->items + k, r->sc[t].v, r->sc[t].n * sizeof(*r->items));
    k += r->sc[t].n;
    r->sc[t].n = 0; /* moved */
  }
  if (r->n > 1)
    qsort(r->items, r->n, sizeof(*r->items), item_cmp);
  return 0;
}

static void
run_stats(const struct scan_run *r, struct manifest_scan_stats *st)
{
  memset(st, 0, sizeof(*st));
  for (size_t t = 0; t < r->nt; t++) {
    st->files_hashed += r->sc[t].st.files_hashed;
    st->bytes_hashed += r->sc[t].st.bytes_hashed;
    st->files_reused += r->sc[t].st.files_reused;
    st->segments_reused += r->sc[t].st.segments_reused;
    st->segments_cut_ahead += r->sc[t].st.segments_cut_ahead;
  }
}

/* Free what is left: items[from..n) were not moved out. */
static void
run_close(struct scan_run *r, size_t from)
{
  for (size_t i = from; i < r->n; i++) {
    manifest_entry_release(&r->items[i].me);
    free(r->items[i].ck.xxh);
    free(r->items[i].ck.fp);
  }
  free(r->items);
  for (size_t t = 0; t < r->nt; t++)
    scan_thread_release(&r->sc[t]);
  free(r->q.jobs);
  free(r->q.by_ino);
  pthread_mutex_destroy(&r->q.mu);
  pthread_cond_destroy(&r->q.cv);
  close(r->topfd);
}

/* out and checks with room for n entries. */
static void
out_reserve(struct manifest *out, struct manifest_checks *checks, size_t n)
{
  out->v = xcalloc(n > 0 ? n : 1, sizeof(*out->v));
  out->cap = n;
  checks->v = xcalloc(n > 0 ? n : 1, sizeof(*checks->v));
}

/* Append an entry whose contents out and checks now own. */
static void
out_push(struct manifest *out, struct manifest_checks *checks,
         const struct manifest_entry *me, const struct manifest_check *ck)
{
  out->v[out->n++] = *me;
  checks->v[checks->n++] = *ck;
  if (me->type == MANIFEST_DIR) {
    out->dirs++;
  } else if (me->type == MANIFEST_LINK) {
    out->links++;
  } else {
    out->files++;
    out->bytes += me->size;
  }
}

int
manifest_scan(int rootfd, const char *rel, const struct manifest *prev,
              const struct manifest_checks *prev_checks,
              const struct manifest_dir_hook *hook, struct manifest *out,
              struct manifest_checks *checks,
              struct manifest_scan_stats *st, struct err *e)
{
  struct scan_run r;
  int rc;

  manifest_release(out);
  manifest_checks_release(checks);
  rc = run_open(&r, rootfd, rel, hook, prev, prev_checks, e);
  if (rc < 0)
    return rc;
  scan_push(&r.q, "", NULL);
  rc = run_jobs(&r, e);
  if (rc < 0)
    goto out;
  out_reserve(out, checks, r.n);
  for (size_t i = 0; i < r.n; i++)
    out_push(out, checks, &r.items[i].me, &r.items[i].ck);
  if (st != NULL)
    run_stats(&r, st);
  r.n = 0; /* moved */

out:
  run_close(&r, 0);
  return rc;
}

/* ---- rescanning what changed ---- */

static const struct manifest_change *
find_change(const struct manifest_change *v, size_t n, const char *path)
{
  size_t lo = 0, hi = n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(v[mid].path, path);

    if (c == 0)
      return &v[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* 1 when a directory above path was created, deleted or moved: listing
 * it whole covers path. */
static int
under_tree_change(const struct manifest_change *v, size_t n,
                  const char *path)
{
  char up[SYNCPATH_MAX + 1];
  size_t len = strlen(path);

  if (len > SYNCPATH_MAX)
    return 0;
  memcpy(up, path, len + 1);
  for (char *s = strrchr(up, '/'); s != NULL; s = strrchr(up, '/')) {
    const struct manifest_change *c;

    *s = '\0';
    c = find_change(v, n, up);
    if (c != NULL && (c->flags & MANIFEST_CHANGED_TREE))
      return 1;
  }
  return 0;
}

static const struct scan_item *
find_item(const struct scan_run *r, const char *path)
{
  size_t lo = 0, hi = r->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(r->items[mid].me.path, path);

    if (c == 0)
      return &r->items[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* Mark the entries of prev that change replaces: its own, and those
 * beneath it when it was created, deleted or moved, or is no directory
 * now (the scan listed again what is beneath it now). */
static void
drop_replaced(const struct scan_run *r, const struct manifest *prev,
              const struct manifest_change *change, uint8_t *drop)
{
  const struct scan_item *now = find_item(r, change->path);
  ssize_t j = manifest_find(prev, change->path);
  size_t len = strlen(change->path), lo = 0, hi = prev->n;

  if (j >= 0)
    drop[j] = 1;
  if (!(change->flags & MANIFEST_CHANGED_TREE) && now != NULL &&
      now->me.type == MANIFEST_DIR)
    return;
  /* Entries beneath path sort together, right after "path/". */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strncmp(prev->v[mid].path, change->path, len);

    if (c < 0 || (c == 0 && prev->v[mid].path[len] < '/'))
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < prev->n && strncmp(prev->v[lo].path, change->path, len) == 0 &&
         prev->v[lo].path[len] == '/';
       lo++)
    drop[lo] = 1;
}

/* 0 when every new entry's parent is a directory of the result, else
 * ERR_CONFLICT (changes the list missed). */
static int
parents_present(const struct scan_run *r, const struct manifest *prev,
                const uint8_t *drop, struct err *e)
{
  char up[SYNCPATH_MAX + 1];

  for (size_t i = 0; i < r->n; i++) {
    const char *path = r->items[i].me.path;
    const char *slash = strrchr(path, '/');
    const struct scan_item *pit;
    ssize_t j;

    if (slash == NULL)
      continue;
    memcpy(up, path, (size_t)(slash - path));
    up[slash - path] = '\0';
    pit = find_item(r, up);
    if (pit != NULL && pit->me.type == MANIFEST_DIR)
      continue;
    j = pit == NULL ? manifest_find(prev, up) : -1;
    if (j >= 0 && !drop[j] && prev->v[j].type == MANIFEST_DIR)
      continue;
    return err_set(e, ERR_CONFLICT, "'%.200s' found, but not a change to "
                   "its directory", path);
  }
  return 0;
}

/* prev's entries not dropped, copied, and the scan's, moved, in order;
 * r->n is then what was left unmoved (on an error). */
static int
merge(struct scan_run *r, const struct manifest *prev,
      const struct manifest_checks *prev_checks, const uint8_t *drop,
      struct manifest *out, struct manifest_checks *checks, size_t *moved,
      struct err *e)
{
  size_t total = r->n, i = 0, j = 0;

  for (size_t k = 0; k < prev->n; k++)
    total += !drop[k];
  if (total > MANIFEST_MAX_ENTRIES)
    return err_set(e, ERR_INVALID, "more than %u entries",
                   MANIFEST_MAX_ENTRIES);
  out_reserve(out, checks, total);
  while (i < prev->n || j < r->n) {
    struct manifest_entry me;
    struct manifest_check ck;
    int c;

    if (i < prev->n && drop[i]) {
      i++;
      continue;
    }
    c = i == prev->n ? 1 : j == r->n ? -1
        : strcmp(prev->v[i].path, r->items[j].me.path);
    if (c == 0) {
      *moved = j;
      return err_set(e, ERR_CONFLICT, "'%.200s' is both kept and found "
                     "again", prev->v[i].path);
    }
    if (c < 0) {
      manifest_entry_copy(&me, &prev->v[i]);
      manifest_check_copy(&ck, &prev_checks->v[i]);
      out_push(out, checks, &me, &ck);
      i++;
    } else {
      out_push(out, checks, &r->items[j].me, &r->items[j].ck);
      j++;
    }
  }
  *moved = j;
  return 0;
}

int
manifest_scan_changes(int rootfd, const char *rel,
                      const struct manifest *prev,
                      const struct manifest_checks *prev_checks,
                      const struct manifest_change *changes, size_t nchanges,
                      const struct manifest_dir_hook *hook,
                      struct manifest *out, struct manifest_checks *checks,
                      struct manifest_scan_stats *st, struct err *e)
{
  struct scan_run r;
  uint8_t *drop = NULL;
  size_t moved = 0;
  int rc;

  manifest_release(out);
  manifest_checks_release(checks);
  if (prev_checks->n != prev->n)
    return err_set(e, ERR_CONFLICT, "the last publish has no checks");
  for (size_t i = 0; i < nchanges; i++) {
    if (!syncpath_is_normal(changes[i].path) ||
        (i > 0 && strcmp(changes[i - 1].path, changes[i].path) >= 0))
      return err_set(e, ERR_CONFLICT, "change %zu: not a normal path, or "
                     "out of order", i);
  }
  rc = run_open(&r, rootfd, rel, hook, prev, prev_checks, e);
  if (rc < 0)
    return rc;
  for (size_t i = 0; i < nchanges; i++) {
    if (!under_tree_change(changes, nchanges, changes[i].path))
      scan_push(&r.q, changes[i].path, &changes[i]);
  }
  rc = run_jobs(&r, e);
  if (rc < 0)
    goto out;
  drop = xcalloc(prev->n > 0 ? prev->n : 1, 1);
  for (size_t i = 0; i < nchanges; i++) {
    if (!under_tree_change(changes, nchanges, changes[i].path))
      drop_replaced(&r, prev, &changes[i], drop);
  }
  rc = parents_present(&r, prev, drop, e);
  if (rc < 0)
    goto out;
  rc = merge(&r, prev, prev_checks, drop, out, checks, &moved, e);
  if (rc < 0)
    goto out;
  if (st != NULL) {
    run_stats(&r, st);
    st->files_reused += out->files - (st->files_hashed + st->files_reused);
  }

out:
  if (rc < 0) {
    manifest_release(out);
    manifest_checks_release(checks);
  }
  free(drop);
  run_close(&r, moved);
  return rc;
}
