/*
 * What a pull does on the thread pool: plan from what is here already,
 * prepare batches (signatures of the old files), patch and verify the
 * answers into staging, and publish the finished tree by one rename.
 */
#define _GNU_SOURCE /* syncfs, gettid */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync/delta.h"
#include "sync/path.h"
#include "agent/pull_int.h"
#include "util/alloc.h"
#include "util/fault.h"
#include "util/fileio.h"
#include "util/grow.h"
#include "util/hash.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/parallel.h"

#define SIG_MAX ((size_t)64 << 20)
#define INDEX_VERSIONS 4 /* newest replicas searched for equal content */

void
pull_files_free(struct pull_file *v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(v[i].basis);
    free(v[i].fp);
    free(v[i].basis_fp);
    free(v[i].seg_attempts);
    free(v[i].basis_segoff);
    free(v[i].basis_segfp);
  }
  free(v);
}

/* ---- planning ---- */

/* Where some content already is here: entry e of replica dir. */
struct have {
  const uint8_t *sha;
  const struct manifest_entry *e;
  const char *dir;
};

struct plan_local {
  struct store_version *vs;
  size_t nv;
  const struct manifest *m[INDEX_VERSIONS]; /* own[k] or borrowed */
  struct manifest own[INDEX_VERSIONS];
  size_t nm;
  struct have *have;
  size_t nhave;
  /* have[] by content: open addressing on the hash's first 8 bytes
   * (uniform already), 1 + index, 0 empty; mask + 1 slots. */
  uint32_t *slot;
  size_t mask;
};

static void
local_release(struct plan_local *l)
{
  for (size_t i = 0; i < INDEX_VERSIONS; i++)
    manifest_release(&l->own[i]);
  free(l->vs);
  free(l->have);
  free(l->slot);
}

static size_t
slot_of(const struct plan_local *l, const uint8_t sha[32])
{
  uint64_t h;

  memcpy(&h, sha, sizeof(h));
  return (size_t)h & l->mask;
}

/* Index have[] by content; the first of equal contents (the newest
 * version's) wins. */
static void
index_have(struct plan_local *l)
{
  size_t n = 16;

  while (n < 2 * l->nhave)
    n *= 2;
  l->mask = n - 1;
  l->slot = xcalloc(n, sizeof(*l->slot));
  for (size_t i = 0; i < l->nhave; i++) {
    size_t s = slot_of(l, l->have[i].sha);

    while (l->slot[s] != 0 &&
           memcmp(l->have[l->slot[s] - 1].sha, l->have[i].sha, 32) != 0)
      s = (s + 1) & l->mask;
    if (l->slot[s] == 0)
      l->slot[s] = (uint32_t)i + 1;
  }
}

/* A manifest the plan was handed decoded (a completed pull's), or NULL. */
static const struct manifest *
known_find(const struct plan_work *pw, const char *v)
{
  for (size_t i = 0; i < pw->nknown; i++)
    if (strcmp(pw->known[i].v, v) == 0)
      return pw->known[i].m;
  return NULL;
}

/* Load the newest replicas' manifests and index their files by hash.
 * l->m[0], when there is one, is the previous version: the delta basis.
 * A manifest still decoded in memory is used as it is. */
static void
local_load(const struct plan_work *pw, struct plan_local *l)
{
  struct pull *p = pw->p;
  struct store *s = p->a->store;

  memset(l, 0, sizeof(*l));
  for (size_t k = 0; k < INDEX_VERSIONS; k++)
    manifest_init(&l->own[k]);
  if (store_versions(s, p->name, &l->vs, &l->nv, NULL) < 0)
    return;
  for (size_t i = 0; i < l->nv && l->nm < INDEX_VERSIONS; i++) {
    char path[PATH_MAX];
    char *text = NULL;
    size_t len;

    if (l->vs[i].source || strcmp(l->vs[i].version, p->v) == 0)
      continue;
    l->m[l->nm] = known_find(pw, l->vs[i].version);
    if (l->m[l->nm] == NULL) {
      store_manifest_path(s, p->name, l->vs[i].version, path, sizeof(path));
      if (file_read(path, MANIFEST_MAX_TEXT, &text, &len, NULL) == 0 &&
          manifest_decode(text, len, &l->own[l->nm], NULL) == 0)
        l->m[l->nm] = &l->own[l->nm];
      else
        manifest_release(&l->own[l->nm]);
      free(text);
      text = NULL;
    }
    if (l->m[l->nm] != NULL) {
      /* Keep the directory next to its manifest: vs[i] moves to slot nm. */
      if (i != l->nm) {
        struct store_version t = l->vs[l->nm];

        l->vs[l->nm] = l->vs[i];
        l->vs[i] = t;
      }
      l->nm++;
    }
  }
  for (size_t k = 0; k < l->nm; k++) {
    const struct manifest *m = l->m[k];

    l->have = xrealloc(l->have, (l->nhave + m->n + 1) * sizeof(*l->have));
    for (size_t i = 0; i < m->n; i++) {
      if (m->v[i].type != MANIFEST_FILE)
        continue;
      l->have[l->nhave].sha = m->v[i].sha256;
      l->have[l->nhave].e = &m->v[i];
      l->have[l->nhave].dir = l->vs[k].path;
      l->nhave++;
    }
  }
  index_have(l);
}

static const struct have *
local_find(const struct plan_local *l, const uint8_t sha[32])
{
  if (l->slot == NULL)
    return NULL;
  for (size_t s = slot_of(l, sha); l->slot[s] != 0; s = (s + 1) & l->mask)
    if (memcmp(l->have[l->slot[s] - 1].sha, sha, 32) == 0)
      return &l->have[l->slot[s] - 1];
  return NULL;
}

static int
set_meta(int fd, const struct manifest_entry *e)
{
  struct timespec ts[2];

  ts[0].tv_sec = e->mtime_ns / 1000000000;
  ts[0].tv_nsec = e->mtime_ns % 1000000000;
  ts[1] = ts[0];
  if (fchmod(fd, (mode_t)e->mode) < 0 || futimens(fd, ts) < 0)
    return -1;
  return 0;
}

/* Whether path in dirfd is a regular file with e's size, mode and mtime
 * (a hard link shares its inode's mode and mtime). */
static int
staged_as(int dirfd, const char *path, const struct manifest_entry *e)
{
  struct stat st;

  return fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(st.st_mode) && (uint64_t)st.st_size == e->size &&
         (uint32_t)(st.st_mode & 07777) == e->mode &&
         (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec ==
             e->mtime_ns;
}

/* Verify a file already in staging against e: 1 good, 0 not. */
static int
verify_file(int dirfd, const char *path, const struct manifest_entry *e)
{
  struct err ignore = {0};
  uint8_t sha[32];
  uint8_t all[32];
  int fd = syncpath_openat(dirfd, path, O_RDONLY | O_CLOEXEC, 0, &ignore);
  struct stat st;
  int ok = 0;

  if (fd < 0)
    return 0;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size != e->size)
    goto out;
  if (e->nsegs <= 1 || e->segs == NULL) {
    ok = delta_hash_range(fd, 0, e->size, sha, NULL, &ignore) == 0 &&
         memcmp(sha, e->sha256, 32) == 0;
    goto out;
  }
  ok = 1;
  for (uint32_t k = 0; ok && k < e->nsegs; k++) {
    uint64_t off, len;

    manifest_seg_range(e, k, &off, &len);
    ok = delta_hash_range(fd, off, len, all, NULL, &ignore) == 0 &&
         memcmp(all, e->segs[k], 32) == 0;
  }

out:
  close(fd);
  return ok;
}

/* Copy content that is here under another inode (same bytes, other
 * metadata): local I/O only, nothing crosses the network.  Through
 * delta_copy, so that zeros become holes as in every write of a pull
 * (copy_file_range writes a sparse file's holes out on ext4). */
static int
copy_local(const char *from, int dirfd, const char *to,
           const struct manifest_entry *e, struct err *ex)
{
  /* from is in a replica jobs may have changed: a fifo there must not
   * block (fileio.h), a link must not be followed. */
  int in = file_open_regular(from, O_RDONLY | O_NOFOLLOW, NULL);
  int out = -1;
  int rc = -1;

  if (in < 0)
    return -1;
  out = syncpath_openat(dirfd, to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        0600, ex);
  if (out < 0)
    goto out;
  if (delta_copy(in, 0, out, 0, e->size, NULL, NULL, ex) < 0)
    goto out;
  rc = set_meta(out, e);

out:
  if (out >= 0)
    close(out);
  close(in);
  return rc;
}

static void
part_name(const char *path, const char *suffix, char *out, size_t outlen)
{
  snprintf(out, outlen, "%s.tenbin-%s", path, suffix);
}

/* Segments of a large file already verified by an earlier attempt, with
 * their fingerprints into fp. */
static void
resume_segments(int dirfd, const struct manifest_entry *e, uint8_t *done,
                uint8_t (*fp)[16])
{
  char part[PATH_MAX], segs[PATH_MAX];
  struct err ignore = {0};
  int pfd, sfd;

  memset(done, 0, e->nsegs);
  part_name(e->path, "part", part, sizeof(part));
  part_name(e->path, "segs", segs, sizeof(segs));
  sfd = syncpath_openat(dirfd, segs, O_RDONLY | O_CLOEXEC, 0, &ignore);
  pfd = syncpath_openat(dirfd, part, O_RDONLY | O_CLOEXEC, 0, &ignore);
  if (sfd < 0 || pfd < 0)
    goto out;
  if (pread(sfd, done, e->nsegs, 0) < 0)
    memset(done, 0, e->nsegs);
  /* The marks survive a crash of this process, not necessarily of the
   * machine: check each claimed segment again (a local read). */
  for (uint32_t k = 0; k < e->nsegs; k++) {
    uint64_t off, len;
    uint8_t sha[32];

    if (done[k] != '1')
      continue;
    manifest_seg_range(e, k, &off, &len);
    if (delta_hash_range(pfd, off, len, sha, fp + manifest_seg_fp(e, k),
                         &ignore) < 0 ||
        memcmp(sha, e->segs[k], 32) != 0) {
      done[k] = 0;
      memset(fp + manifest_seg_fp(e, k), 0,
             manifest_nfp(len) * sizeof(*fp));
    }
  }

out:
  if (sfd >= 0)
    close(sfd);
  if (pfd >= 0)
    close(pfd);
}

/* The basis' segments, and its fingerprints when this agent recorded
 * them on receiving it; a record of the wrong size is ignored (copies
 * then use SHA-256). */
static void
load_basis(struct store *s, struct pull_file *f,
              const struct manifest_entry *basis)
{
  uint64_t nfp = manifest_seg_fp(basis, basis->nsegs);
  size_t at = ((size_t)basis->nsegs + 1) * sizeof(uint64_t);
  char path[PATH_MAX];
  char *data = NULL;
  size_t len = 0;

  store_xxh_path(s, f->basis_sha, path, sizeof(path));
  if (file_read(path, (size_t)nfp * 16, &data, &len, NULL) == 0 &&
      len == (size_t)nfp * 16) {
    f->basis_fp = (uint8_t (*)[16])data; /* malloc'd: aligned for it */
    data = NULL;
  }
  free(data);
  f->basis_nsegs = basis->nsegs;
  f->basis_segoff = memcpy(xmalloc(at), basis->segoff, at);
  f->basis_segfp = memcpy(xmalloc(at), basis->segfp, at);
}

/* Basis segments by SHA-256, to find where a new segment's bytes are. */
static int
seg_sha_cmp(const void *a, const void *b, void *arg)
{
  const struct manifest_entry *basis = arg;

  return memcmp(basis->segs[*(const uint32_t *)a],
                basis->segs[*(const uint32_t *)b], 32);
}

static uint32_t *
index_segs(const struct manifest_entry *basis)
{
  uint32_t *ix = xmalloc((size_t)basis->nsegs * sizeof(*ix));

  for (uint32_t k = 0; k < basis->nsegs; k++)
    ix[k] = k;
  qsort_r(ix, basis->nsegs, sizeof(*ix), seg_sha_cmp, (void *)basis);
  return ix;
}

/* A basis segment with the bytes of segment k of e, or UINT32_MAX. */
static uint32_t
basis_seg_with(const struct manifest_entry *basis, const uint32_t *ix,
               const struct manifest_entry *e, uint32_t k)
{
  size_t lo = 0, hi = basis->nsegs;
  uint64_t off, len, boff, blen;

  manifest_seg_range(e, k, &off, &len);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = memcmp(basis->segs[ix[mid]], e->segs[k], 32);

    if (c == 0) {
      manifest_seg_range(basis, ix[mid], &boff, &blen);
      return blen == len ? ix[mid] : UINT32_MAX;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return UINT32_MAX;
}

/* At most this much of the old file is signed for one segment. */
#define RANGE_MAX (4 * MANIFEST_SEG_MAX)

/*
 * The old range that segment k (not found in the old file) and the run
 * of such segments around it replace, between the segments found on
 * either side: from the end of the old segment before the run to the
 * start of the one after it (the file's ends count as found), when the
 * run is longer or shorter than the range (an insert or a delete).  A
 * signature of that range alone is smaller than the whole file's, and
 * finer, so an insert costs little more than its bytes.
 */
static void
replaced_range(const struct manifest_entry *basis,
               const struct manifest_entry *e, const uint32_t *from,
               uint32_t k, struct pull_seg *q)
{
  uint32_t n = e->nsegs, a = k, b = k, lo, hi;

  q->rfrom = q->rto = UINT32_MAX;
  while (a > 0 && from[a - 1] == UINT32_MAX)
    a--;
  while (b + 1 < n && from[b + 1] == UINT32_MAX)
    b++;
  lo = a == 0 ? 0 : from[a - 1] + 1;
  hi = b + 1 == n ? basis->nsegs : from[b + 1];
  if (lo >= hi || basis->segoff[hi] - basis->segoff[lo] > RANGE_MAX)
    return;
  /* Bytes rewritten in place (the run as long as the range) are better
   * served by the whole file's signature and fingerprint table: their
   * unchanged MiBs become COPYs unread, and that signature is cached. */
  if (basis->segoff[hi] - basis->segoff[lo] ==
      e->segoff[b + 1] - e->segoff[a])
    return;
  q->rfrom = lo;
  q->rto = hi;
}

static void
plan_add_file(struct plan_work *pw, int dirfd, const struct plan_local *l,
              const struct manifest_entry *e, uint32_t entry)
{
  struct pull_file *f;
  const struct manifest_entry *basis = NULL;
  uint8_t *done = xcalloc(e->nsegs, 1);
  uint32_t *ix = NULL, *from = NULL;
  uint32_t need = 0;
  char part[PATH_MAX];

  GROW(pw->files, pw->nfiles + 1, pw->capfiles);
  f = &pw->files[pw->nfiles];
  memset(f, 0, sizeof(*f));
  f->entry = entry;
  if (e->nsegs > 1) {
    f->fp = xcalloc(manifest_seg_fp(e, e->nsegs), sizeof(*f->fp));
    if (!pw->fresh)
      resume_segments(dirfd, e, done, f->fp);
  } else if (!pw->fresh) {
    part_name(e->path, "part", part, sizeof(part));
    (void)unlinkat(dirfd, part, 0);
  }
  if (l->nm > 0 && e->size >= PULL_DELTA_MIN) {
    ssize_t i = manifest_find(l->m[0], e->path);

    if (i >= 0 && l->m[0]->v[i].type == MANIFEST_FILE &&
        l->m[0]->v[i].size >= PULL_DELTA_MIN) {
      char path[PATH_MAX * 2];

      basis = &l->m[0]->v[i];
      snprintf(path, sizeof(path), "%s/%s", l->vs[0].path, e->path);
      f->basis = xstrdup(path);
      memcpy(f->basis_sha, basis->sha256, 32);
      f->basis_size = basis->size;
      if (e->nsegs > 1 && basis->nsegs > 1) {
        load_basis(pw->p->a->store, f, basis);
        ix = index_segs(basis);
        from = xmalloc((size_t)e->nsegs * sizeof(*from));
        for (uint32_t k = 0; k < e->nsegs; k++)
          from[k] = basis_seg_with(basis, ix, e, k);
      }
    }
  }
  for (uint32_t k = 0; k < e->nsegs; k++) {
    uint64_t off, len;
    struct pull_seg *q;

    manifest_seg_range(e, k, &off, &len);
    if (done[k] == '1') {
      pw->bytes_done += len;
      continue;
    }
    GROW(pw->queue, pw->qlen + 1, pw->capqueue);
    q = &pw->queue[pw->qlen++];
    q->file = (uint32_t)pw->nfiles;
    q->seg = k;
    q->from = from != NULL ? from[k] : UINT32_MAX;
    q->local = q->from != UINT32_MAX;
    q->rfrom = q->rto = UINT32_MAX;
    if (!q->local && from != NULL)
      replaced_range(basis, e, from, k, q);
    need++;
  }
  f->segs_left = need;
  pw->nfiles++;
  free(from);
  free(ix);
  free(done);
}

#define LINK_THREADS 8
/* Links a thread claims at once: consecutive in path order, so mostly in
 * one directory, whose lock two threads would otherwise spin on. */
#define LINK_CHUNK 512

/* A file whose content is here already: linked or copied by link_run;
 * or (have NULL) kept from a prestaged tree, and checked there. */
struct plan_link {
  uint32_t entry;
  const struct have *have;
  int ok;
};

struct link_job {
  struct plan_work *pw;
  int dirfd;
  atomic_size_t *next;
};

static int plan_fetch(struct plan_work *pw, int dirfd, const struct plan_local *l,
                      uint32_t entry);

static void
plan_link_add(struct plan_work *pw, uint32_t entry, const struct have *h)
{
  if (pw->nlinks == pw->caplinks) {
    pw->caplinks = pw->caplinks ? 2 * pw->caplinks : 256;
    pw->links = xrealloc(pw->links, pw->caplinks * sizeof(*pw->links));
  }
  pw->links[pw->nlinks++] = (struct plan_link){entry, h, 0};
}

/* A file of the version: resumed, to link or copy (plan_links), or to
 * fetch. */
static int
plan_file(struct plan_work *pw, int dirfd, const struct plan_local *l,
          uint32_t entry)
{
  const struct manifest_entry *e = &pw->man->v[entry];
  const struct have *h;
  struct stat st;

  if (!pw->fresh && fstatat(dirfd, e->path, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (staged_as(dirfd, e->path, e) && verify_file(dirfd, e->path, e)) {
      pw->files_done++;
      pw->files_resumed++;
      pw->bytes_done += e->size;
      return 0;
    }
    if (unlinkat(dirfd, e->path, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
      return err_set(&pw->e, ERR_IO, "cannot replace '%s' in staging: %s",
                     e->path, strerror(errno));
  }
  h = local_find(l, e->sha256);
  if (h != NULL) {
    plan_link_add(pw, entry, h);
    return 0;
  }
  return plan_fetch(pw, dirfd, l, entry);
}

/* A directory kept open while consecutive entries are in it. */
struct dir_cache {
  char path[PATH_MAX * 2];
  int fd;                  /* -1: none open */
};

static void
dir_cache_close(struct dir_cache *c)
{
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

/* fd of directory dir (its first len bytes), reopened only when it
 * changed; negative when it cannot be opened.  An absolute dir (at is
 * AT_FDCWD) is a replica's, opened as it is; one in a staging directory
 * (at) is resolved beneath it following no link (syncpath_openat). */
static int
dir_cache_open(struct dir_cache *c, int at, const char *dir, size_t len,
               struct err *e)
{
  int fd;

  if (len >= sizeof(c->path))
    return err_set(e, ERR_INVALID, "path too long");
  if (c->fd >= 0 && strncmp(c->path, dir, len) == 0 && c->path[len] == '\0')
    return c->fd;
  dir_cache_close(c);
  memcpy(c->path, dir, len);
  c->path[len] = '\0';
  if (at == AT_FDCWD) {
    fd = open(c->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
      return err_set(e, ERR_IO, "'%s': %s", c->path, strerror(errno));
  } else {
    fd = syncpath_openat(at, len > 0 ? c->path : ".", O_PATH | O_DIRECTORY,
                         0, e);
    if (fd < 0)
      return fd;
  }
  c->fd = fd;
  return fd;
}

/* A link thread's open directories: consecutive links mostly share
 * both, and linkat relative to them skips walking two paths per file. */
struct link_dirs {
  struct dir_cache from, to; /* from: absolute; to: in staging */
};

static void
link_one(const struct link_job *j, struct link_dirs *d, struct plan_link *k)
{
  const struct manifest_entry *e = &j->pw->man->v[k->entry];
  const struct manifest_entry *he;
  char from[PATH_MAX * 2];
  const char *fbase, *tbase, *tname;
  struct err ignore = {0};
  int ffd, tfd, tat;

  /* The staged name: in its open directory, else by its whole path. */
  tbase = strrchr(e->path, '/');
  tbase = tbase != NULL ? tbase + 1 : e->path;
  tfd = dir_cache_open(&d->to, j->dirfd, e->path,
                       tbase == e->path ? 0 : (size_t)(tbase - 1 - e->path),
                       NULL);
  tat = tfd >= 0 ? tfd : j->dirfd;
  tname = tfd >= 0 ? tbase : e->path;
  if (k->have == NULL) {
    k->ok = staged_as(tat, tname, e);
    return;
  }
  he = k->have->e;
  snprintf(from, sizeof(from), "%s/%s", k->have->dir, he->path);
  /* A hard link shares mode and mtime with the older version, so it is
   * used only where they agree; else the bytes are copied locally. */
  if (he->mode == e->mode && he->mtime_ns == e->mtime_ns) {
    fbase = strrchr(from, '/') + 1;
    ffd = dir_cache_open(&d->from, AT_FDCWD, from,
                         (size_t)(fbase - 1 - from), NULL);
    if ((ffd >= 0 ? linkat(ffd, fbase, tat, tname, 0)
                  : linkat(AT_FDCWD, from, tat, tname, 0)) == 0) {
      /* Still as the older version recorded it?  A replica written or
       * touched behind the agent's back is fetched instead (not copied:
       * its bytes are what is in doubt). */
      k->ok = staged_as(tat, tname, e);
      if (!k->ok)
        (void)unlinkat(tat, tname, 0);
      return;
    }
  }
  k->ok = copy_local(from, j->dirfd, e->path, e, &ignore) == 0;
}

/* Link (or copy) every file found here, on one thread per core: tens of
 * thousands of linkat calls are most of a small-file version's plan. */
static void
link_run(void *arg, size_t task)
{
  struct link_job *j = arg;
  struct link_dirs d = {.from.fd = -1, .to.fd = -1};
  size_t i;

  (void)task;
  while ((i = atomic_fetch_add(j->next, LINK_CHUNK)) < j->pw->nlinks) {
    size_t end = i + LINK_CHUNK < j->pw->nlinks ? i + LINK_CHUNK
                                                : j->pw->nlinks;

    for (; i < end; i++)
      link_one(j, &d, &j->pw->links[i]);
  }
  dir_cache_close(&d.from);
  dir_cache_close(&d.to);
}

static int
plan_links(struct plan_work *pw, int dirfd, const struct plan_local *l)
{
  atomic_size_t next = 0;
  struct link_job j = {pw, dirfd, &next};
  size_t n = parallel_cores(LINK_THREADS);
  int rc = 0;

  if (n > 1 + pw->nlinks / (2 * LINK_CHUNK))
    n = 1 + pw->nlinks / (2 * LINK_CHUNK);
  (void)parallel_run(n, link_run, &j, NULL);
  for (size_t i = 0; rc == 0 && i < pw->nlinks; i++) {
    const struct manifest_entry *e = &pw->man->v[pw->links[i].entry];

    if (pw->links[i].ok) {
      pw->files_done++;
      pw->bytes_done += e->size;
      pw->bytes_linked += e->size;
      continue;
    }
    /* Not as the prestaged tree promised (removed behind the agent's
     * back, say): the name goes before anything is written there. */
    if (pw->links[i].have == NULL && unlinkat(dirfd, e->path, 0) < 0 &&
        errno != ENOENT)
      rc = err_set(&pw->e, ERR_IO, "cannot replace '%s' in staging: %s",
                   e->path, strerror(errno));
    if (rc == 0)
      rc = plan_fetch(pw, dirfd, l, pw->links[i].entry);
  }
  return rc;
}

/* A file nothing here has: empty, or fetched from the source. */
static int
plan_fetch(struct plan_work *pw, int dirfd, const struct plan_local *l,
           uint32_t entry)
{
  const struct manifest_entry *e = &pw->man->v[entry];

  if (e->size == 0) {
    int fd = syncpath_openat(dirfd, e->path,
                             O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600,
                             &pw->e);

    if (fd < 0)
      return fd;
    if (set_meta(fd, e) < 0) {
      close(fd);
      return err_set(&pw->e, ERR_IO, "cannot set mode of '%s': %s",
                     e->path, strerror(errno));
    }
    close(fd);
    pw->files_done++;
    return 0;
  }
  plan_add_file(pw, dirfd, l, e, entry);
  return 0;
}

/* The manifest from a delta against p->delta_base, decoded here: its
 * whole text replaces the delta in pw->text. */
static int
apply_delta(struct plan_work *pw)
{
  struct pull *p = pw->p;
  const struct manifest *base = known_find(pw, p->delta_base);
  char path[PATH_MAX];
  char *text = NULL, *btext = NULL;
  size_t len, btlen = 0;
  int rc;

  if (base == NULL) {
    pw->refetch = 1;
    return err_set(&pw->e, ERR_SITE, "its base is no longer decoded here");
  }
  /* The base's kept entries are copied from its text as stored (written
   * anew when it cannot be read). */
  store_manifest_path(p->a->store, p->name, p->delta_base, path,
                      sizeof(path));
  if (file_read(path, MANIFEST_MAX_TEXT, &btext, &btlen, NULL) < 0)
    btext = NULL;
  rc = manifest_delta_apply(base, p->delta_base, btext, btlen, pw->text,
                            pw->len, MANIFEST_MAX_ENTRIES, &text, &len,
                            &pw->m, &pw->from, &pw->e);
  free(btext);
  if (rc < 0) {
    pw->refetch = 1;
    return rc;
  }
  free(pw->text);
  pw->text = text;
  pw->len = len;
  return 0;
}

static void
hash_text(struct plan_work *pw)
{
  hash_sha256_hex(pw->text, pw->len, pw->hex);
}

/* What a new staging tree starts from: the local versions, and a
 * prestaged tree reconciled into m (keep[i] set for each file of m left
 * in place). */
static void
plan_start(struct plan_work *pw, uint8_t *keep)
{
  struct pull *p = pw->p;
  struct stat st;

  pw->fresh = stat(p->staging, &st) < 0 && errno == ENOENT;
  pw->local = xcalloc(1, sizeof(*pw->local));
  local_load(pw, pw->local);
  if (!pw->fresh || pw->local->nm == 0)
    return;
  (void)pull_prestage_take(pw, pw->local->vs[0].version, pw->local->m[0],
                            strcmp(pw->local->vs[0].version,
                                   p->delta_base) == 0 ? pw->from : NULL,
                            keep);
}

/* Whether the manifest's text is the version asked for. */
static int
check_hash(struct plan_work *pw)
{
  if (strcmp(pw->hex, pw->p->v) == 0)
    return 0;
  /* A delta that gave other bytes is the source's to explain, but the
   * whole manifest may still be right. */
  pw->refetch = pw->delta;
  return err_set(&pw->e, ERR_SITE, "the source's manifest hashes to %.12s, "
                 "not to the version asked for", pw->hex);
}

static int
make_symlink(const char *target, int dirfd, const char *path)
{
#ifdef TENBIN_FAULTS
  /* Test-only fault switch: a file system with no room for a link. */
  if (fault_armed("symlink-enospc")) {
    errno = ENOSPC;
    return -1;
  }
#endif
  return symlinkat(target, dirfd, path);
}

/* e's link in the staging tree, replacing what is at its name.  Any
 * failure fails the plan: a replica is never published without one of
 * its links. */
static int
plan_symlink(struct plan_work *pw, const struct manifest_entry *e)
{
  int r = make_symlink(e->target, pw->dirfd, e->path);

  if (r < 0 && errno == EEXIST) {
    (void)unlinkat(pw->dirfd, e->path, 0);
    r = make_symlink(e->target, pw->dirfd, e->path);
  }
  if (r < 0)
    return err_set(&pw->e, ERR_IO, "cannot create link '%.200s': %s",
                   e->path, strerror(errno));
  return 0;
}

void
pull_plan_run(uv_work_t *w)
{
  struct plan_work *pw = w->data;
  struct pull *p = pw->p;
  uint8_t *keep = NULL;
  int rc;

  pw->dirfd = -1;
  pw->man = &pw->m;
  /* A delta is decoded as it is applied; the text it gives must then
   * be the version's too. */
  rc = pw->delta ? apply_delta(pw) : 0;
  if (rc == 0) {
    hash_text(pw);
    rc = check_hash(pw);
  }
  if (rc == 0 && !pw->delta) {
    rc = manifest_decode(pw->text, pw->len, &pw->m, &pw->e);
    if (rc < 0)
      err_prefix(&pw->e, "manifest from the source");
  }
  if (rc < 0)
    goto out;
  keep = xcalloc(pw->m.n > 0 ? pw->m.n : 1, 1);
  plan_start(pw, keep);
  rc = file_mkdirs(p->staging, 0755, &pw->e);
  if (rc < 0)
    goto out;
  pw->dirfd = open(p->staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pw->dirfd < 0) {
    rc = err_set(&pw->e, ERR_IO, "cannot open '%s': %s", p->staging,
                 strerror(errno));
    goto out;
  }
  for (size_t i = 0; rc == 0 && i < pw->m.n; i++) {
    const struct manifest_entry *e = &pw->m.v[i];

    if (keep[i]) {
      /* in place from the prestaged tree, to check with the links */
      pw->kept++;
      plan_link_add(pw, (uint32_t)i, NULL);
      continue;
    }
    switch (e->type) {
    case MANIFEST_DIR:
      rc = syncpath_mkdirs(pw->dirfd, e->path, 0755, &pw->e);
      break;
    case MANIFEST_LINK:
      rc = plan_symlink(pw, e);
      break;
    case MANIFEST_FILE:
      rc = plan_file(pw, pw->dirfd, pw->local, (uint32_t)i);
      break;
    }
  }

out:
  free(keep);
  pw->rc = rc;
}

/* The verified manifest's text into the store. */
static int
store_manifest(const struct pull *p, struct err *e)
{
  struct store *s = p->a->store;
  char path[PATH_MAX];
  int rc;

  store_manifest_path(s, p->name, p->v, path, sizeof(path));
  *strrchr(path, '/') = '\0';
  rc = file_mkdirs(path, 0755, e);
  if (rc < 0)
    return rc;
  store_manifest_path(s, p->name, p->v, path, sizeof(path));
  return store_write_file(path, p->mtext, p->mlen, e);
}

void
pull_links_run(uv_work_t *w)
{
  struct plan_work *pw = w->data;

  pw->rc = plan_links(pw, pw->dirfd, pw->local);
  /* The manifest too, while the batches run: the finish then has only
   * the rename (and the sync) left. */
  if (pw->rc == 0)
    pw->stored = store_manifest(pw->p, NULL) == 0;
}

void
pull_plan_release(struct plan_work *pw)
{
  free(pw->text);
  pw->text = NULL;
  free(pw->from);
  pw->from = NULL;
  manifest_release(&pw->m);
  pull_files_free(pw->files, pw->nfiles);
  pw->files = NULL;
  pw->nfiles = 0;
  pw->capfiles = 0;
  free(pw->queue);
  pw->queue = NULL;
  pw->qlen = 0;
  pw->capqueue = 0;
  free(pw->links);
  pw->links = NULL;
  pw->nlinks = pw->caplinks = 0;
  if (pw->dirfd >= 0)
    close(pw->dirfd);
  pw->dirfd = -1;
  if (pw->local != NULL)
    local_release(pw->local);
  free(pw->local);
  pw->local = NULL;
}

/* ---- preparing a batch ---- */

/* Write a cache file without fsync: a torn one only costs a failed
 * verification and a retry without delta. */
static void
sig_cache_put(const char *path, const void *data, size_t len)
{
  char tmp[PATH_MAX + 16];
  int fd;
  ssize_t n;

  snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)gettid());
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  n = write(fd, data, len);
  close(fd);
  if (n != (ssize_t)len || rename(tmp, path) < 0)
    (void)unlink(tmp);
}

/* The signature of a file's basis: from the cache, or computed now. */
static int
basis_signature(struct store *s, const struct pull_file *f, struct buf *out,
                struct err *e)
{
  char path[PATH_MAX];
  char *text = NULL;
  size_t len;
  int fd;
  int rc;

  store_sig_path(s, f->basis_sha, delta_block_len(f->basis_size), path,
                 sizeof(path));
  if (file_read(path, SIG_MAX, &text, &len, NULL) == 0) {
    rc = buf_add(out, text, len);
    free(text);
    return rc < 0 ? err_set(e, rc, "signature too large") : 0;
  }
  /* The basis is the replica jobs read, which they may have changed. */
  fd = file_open_regular(f->basis, O_RDONLY | O_NOFOLLOW, e);
  if (fd < 0)
    return fd;
  rc = delta_signature(fd, f->basis_size, out, e);
  close(fd);
  if (rc == 0)
    sig_cache_put(path, out->data, out->len);
  return rc;
}

/* At most this much fingerprint table goes with a signature (a basis of
 * up to ~800 GiB); a larger basis is delta'd without one. */
#define FP_TABLE_MAX ((size_t)16 << 20)

static int
fp_entry_cmp(const void *a, const void *b)
{
  return memcmp(a, b, 16);
}

/*
 * With the signature of a large file's basis, its fingerprint table: the
 * XXH3-128 of each whole MiB, sorted, with its block index, so that the
 * source sends any block of the new file that the basis has (unchanged,
 * moved, or shifted by whole MiB) as a COPY without reading or delta-ing
 * it.  Only fingerprints recorded here when the basis was verified.
 */
static int
put_fp_table(struct buf *body, const struct pull_file *f)
{
  static const uint8_t zero[16];
  uint64_t nfp;
  uint8_t *tab;
  size_t n = 0;
  int rc;

  if (f->basis_fp == NULL)
    return 0;
  nfp = f->basis_segfp[f->basis_nsegs];
  if (nfp * WIRE_FP_ENTRY > FP_TABLE_MAX)
    return 0;
  tab = xmalloc((size_t)nfp * WIRE_FP_ENTRY + 1);
  for (uint32_t j = 0; j < f->basis_nsegs; j++) {
    for (uint64_t k = f->basis_segfp[j]; k < f->basis_segfp[j + 1]; k++) {
      if (memcmp(f->basis_fp[k], zero, 16) == 0)
        continue;
      memcpy(tab + n * WIRE_FP_ENTRY, f->basis_fp[k], 16);
      wire_put_le64(tab + n * WIRE_FP_ENTRY + 16,
                    f->basis_segoff[j] +
                        (k - f->basis_segfp[j]) * MANIFEST_FP_BLOCK);
      n++;
    }
  }
  qsort(tab, n, WIRE_FP_ENTRY, fp_entry_cmp);
  rc = n == 0 ? 0 : wire_put(body, WIRE_BLOCKS, f->entry, 0, tab,
                             (uint32_t)(n * WIRE_FP_ENTRY));
  free(tab);
  return rc;
}

/* Segment i of a batch goes with the range signature just sent for the
 * segment before it (a run that replaced one old range). */
static int
same_range(const struct batch_req *br, size_t i)
{
  const struct pull_seg *s = &br->segs[i], *t = &br->segs[i - 1];

  return i > 0 && br->sigmode[i - 1] == WIRE_SIGRANGE && t->file == s->file &&
         t->rfrom == s->rfrom && t->rto == s->rto;
}

/* Into out: the old range's offset (u64 LE) and its signature, made now:
 * it is a few hundred KB of reading, not worth caching. */
static int
range_signature(const struct pull_file *f, const struct pull_seg *s,
                struct buf *out, struct err *e)
{
  uint64_t off = f->basis_segoff[s->rfrom];
  uint64_t len = f->basis_segoff[s->rto] - off;
  uint8_t le[8];
  int fd, rc;

  wire_put_le64(le, off);
  if (buf_add(out, le, sizeof(le)) < 0)
    return err_set(e, ERR_TOO_LARGE, "signature too large");
  /* The basis is the replica jobs read, which they may have changed. */
  fd = file_open_regular(f->basis, O_RDONLY | O_NOFOLLOW, e);
  if (fd < 0)
    return fd;
  rc = delta_signature_range(fd, off, len, out, e);
  close(fd);
  return rc;
}

void
pull_prep_run(uv_work_t *w)
{
  struct batch_req *br = w->data;
  struct pull *p = br->p;
  struct buf sig;
  int rc = 0;

  buf_init(&br->body, AGENT_BATCH_MAX);
  buf_init(&sig, SIG_MAX);
  for (size_t i = 0; rc == 0 && i < br->nsegs; i++) {
    const struct pull_file *f = &p->files[br->segs[i].file];
    uint32_t entry = f->entry;

    if (br->sigmode[i] == WIRE_SIG) {
      buf_reset(&sig);
      rc = basis_signature(p->a->store, f, &sig, &br->e);
      if (rc < 0)
        break;
      if (p->m.v[entry].nsegs > 1)
        hash_sha256(sig.data, sig.len, br->carrier_sha);
      rc = wire_put(&br->body, WIRE_SIG, entry, 0, sig.data,
                    (uint32_t)sig.len);
      if (rc == 0 && p->m.v[entry].nsegs > 1)
        rc = put_fp_table(&br->body, f);
    } else if (br->sigmode[i] == WIRE_SIGREF) {
      rc = wire_put(&br->body, WIRE_SIGREF, entry, 0, br->sigref[i], 32);
    } else if (br->sigmode[i] == WIRE_SIGRANGE &&
               !same_range(br, i)) {
      buf_reset(&sig);
      rc = range_signature(f, &br->segs[i], &sig, &br->e);
      if (rc < 0)
        break;
      rc = wire_put(&br->body, WIRE_SIGRANGE, entry, br->segs[i].seg,
                    sig.data, (uint32_t)sig.len);
    }
    if (rc == 0)
      rc = wire_put(&br->body, WIRE_SEG, entry, br->segs[i].seg, NULL, 0);
    if (rc == ERR_TOO_LARGE)
      err_set(&br->e, rc, "batch request too large");
  }
  buf_release(&sig);
  br->rc = rc;
}

/* ---- applying an answer ---- */

/* Open files of one batch, by files[] index. */
struct open_file {
  uint32_t file;
  int part, basis, segs;
};

static struct open_file *
open_slot(struct open_file **v, size_t *n, size_t *cap, uint32_t file)
{
  for (size_t i = 0; i < *n; i++) {
    if ((*v)[i].file == file)
      return &(*v)[i];
  }
  GROW(*v, *n + 1, *cap);
  (*v)[*n] = (struct open_file){file, -1, -1, -1};
  return &(*v)[(*n)++];
}

static ssize_t
find_seg(const struct batch_req *br, const struct pull *p, uint32_t entry,
         uint32_t seg)
{
  for (size_t i = 0; i < br->nsegs; i++) {
    if (p->files[br->segs[i].file].entry == entry && br->segs[i].seg == seg)
      return (ssize_t)i;
  }
  return -1;
}

/* Mark every seg of this entry in the batch with r (if still pending). */
static void
mark_entry(struct batch_req *br, const struct pull *p, uint32_t entry,
           int8_t r)
{
  for (size_t i = 0; i < br->nsegs; i++) {
    if (p->files[br->segs[i].file].entry == entry &&
        br->result[i] == SEG_PENDING)
      br->result[i] = r;
  }
}

static void
error_frame(struct batch_req *br, const struct pull *p,
            const struct wire_frame *f)
{
  json_t *v = NULL;
  const char *code = "INTERNAL";
  const char *msg = "error without a message";
  struct err ignore = {0};

  if (jsonx_parse_object((const char *)f->payload, f->len, &v,
                         &ignore) == 0) {
    if (jsonx_str(v, "code") != NULL)
      code = jsonx_str(v, "code");
    if (jsonx_str(v, "message") != NULL)
      msg = jsonx_str(v, "message");
  }
  if (strcmp(code, "NOT_FOUND") == 0) {
    mark_entry(br, p, f->file, SEG_SIG_MISSING);
  } else if (strcmp(code, "CONFLICT") == 0) {
    mark_entry(br, p, f->file, SEG_CONFLICT);
    if (br->msg[0] == '\0')
      snprintf(br->msg, sizeof(br->msg), "%s", msg);
  } else {
    /* A read error at the source: counts as a failed attempt. */
    mark_entry(br, p, f->file, SEG_CORRUPT);
  }
  json_decref(v);
}

/* Record that segment seg of e is verified in its part file, so that a
 * resumed pull does not fetch it again. */
static int
mark_segment(int dirfd, const struct manifest_entry *e, struct open_file *of,
             uint32_t seg, struct err *we)
{
  char segs[PATH_MAX];
  char one = '1';

  if (of->segs < 0) {
    part_name(e->path, "segs", segs, sizeof(segs));
    of->segs = syncpath_openat(dirfd, segs, O_WRONLY | O_CREAT | O_CLOEXEC,
                               0600, we);
    if (of->segs < 0)
      return of->segs;
  }
  if (pwrite(of->segs, &one, 1, seg) != 1)
    return err_set(we, ERR_IO, "%s", strerror(errno));
  return 0;
}

/* The staging tree of the batch's pull, or -1 with the batch failed. */
static int
open_staging(struct batch_req *br)
{
  int fd = open(br->p->staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0) {
    br->fatal = ERR_IO;
    snprintf(br->msg, sizeof(br->msg), "cannot open '%.160s': %s",
             br->p->staging, strerror(errno));
  }
  return fd;
}

/* A new file at path in staging, for writing: never an inode that is
 * there already (it may be shared with a replica), so an earlier
 * attempt's goes first.  Its directory stays open for the next file. */
static int
create_fresh(struct dir_cache *dc, int dirfd, const char *path,
             struct err *e)
{
  const char *base = strrchr(path, '/');
  int pfd, fd;

  base = base != NULL ? base + 1 : path;
  pfd = dir_cache_open(dc, dirfd, path,
                       base == path ? 0 : (size_t)(base - 1 - path), e);
  if (pfd < 0)
    return pfd;
  if (unlinkat(pfd, base, 0) < 0 && errno != ENOENT)
    return err_set(e, ERR_IO, "cannot replace it: %s", strerror(errno));
  fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return err_set(e, ERR_IO, "cannot create it: %s", strerror(errno));
  return fd;
}

/* Patch or write one answered segment and verify it. */
static int
apply_seg(struct batch_req *br, struct pull *p, int dirfd,
          struct dir_cache *dc, size_t i, struct open_file *of,
          const struct wire_frame *f)
{
  const struct pull_file *pf = &p->files[br->segs[i].file];
  const struct manifest_entry *e = &p->m.v[pf->entry];
  uint64_t off, len;
  uint8_t sha[32];
  struct err we = {0};
  int rc;

  manifest_seg_range(e, f->seg, &off, &len);
  if (of->part < 0) {
    char part[PATH_MAX];

    /* A file of one segment is written under its own name: it counts
     * as staged only once its mode and mtime are set, after it
     * verified (staged_as); a large one under a part name, as its
     * segments verify one by one. */
    if (e->nsegs == 1) {
      of->part = create_fresh(dc, dirfd, e->path, &we);
    } else {
      part_name(e->path, "part", part, sizeof(part));
      of->part = syncpath_openat(dirfd, part, O_WRONLY | O_CREAT |
                                 O_CLOEXEC, 0600, &we);
    }
    if (of->part < 0)
      goto fatal;
  }
  if (f->kind == WIRE_DELTA) {
    if (of->basis < 0 && pf->basis != NULL)
      of->basis = file_open_regular(pf->basis, O_RDONLY | O_NOFOLLOW,
                                    NULL);
    rc = delta_patch(of->basis, f->payload, f->len, of->part, off, len, sha,
                     pf->fp ? pf->fp + manifest_seg_fp(e, f->seg) : NULL, &we);
  } else if (f->len != len) {
    br->result[i] = SEG_CORRUPT;
    return 0;
  } else {
    rc = delta_write(of->part, off, f->payload, f->len, sha,
                     pf->fp ? pf->fp + manifest_seg_fp(e, f->seg) : NULL, &we);
  }
  br->literal += f->len;
  if (rc == ERR_INVALID || (rc == 0 &&
                            memcmp(sha, manifest_seg_sha(e, f->seg), 32))) {
    log_warn("pull %s@%.12s: '%s' segment %u did not verify; retrying",
             p->name, p->v, e->path, f->seg);
    if (pf->fp != NULL)
      memset(pf->fp + manifest_seg_fp(e, f->seg), 0,
             manifest_nfp(len) * sizeof(*pf->fp));
    br->result[i] = SEG_CORRUPT;
    return 0;
  }
  if (rc < 0)
    goto fatal;
  if (e->nsegs > 1) {
    if (mark_segment(dirfd, e, of, f->seg, &we) < 0)
      goto fatal;
  } else if (set_meta(of->part, e) < 0) {
    err_set(&we, ERR_IO, "%s", strerror(errno));
    goto fatal;
  }
  br->result[i] = SEG_OK;
  return 0;

fatal:
  br->fatal = we.code < 0 ? we.code : ERR_IO;
  snprintf(br->msg, sizeof(br->msg), "writing '%s' at %s: %s", e->path,
           store_root(p->a->store), err_msg(&we));
  return -1;
}

void
pull_apply_run(uv_work_t *w)
{
  struct batch_req *br = w->data;
  struct pull *p = br->p;
  struct open_file *of = NULL;
  size_t nof = 0, capof = 0, pos = 0;
  struct wire_frame f;
  struct dir_cache dc = {.fd = -1};
  struct err e = {0};
  int dirfd;
  int rc;

  dirfd = open_staging(br);
  if (dirfd < 0)
    return;
  while ((rc = wire_next(br->answer, br->answer_len, &pos, &f, &e)) == 1) {
    ssize_t i;

    if (f.kind == WIRE_ERROR) {
      error_frame(br, p, &f);
      continue;
    }
    if (f.kind != WIRE_DELTA && f.kind != WIRE_DATA)
      continue;
    i = find_seg(br, p, f.file, f.seg);
    if (i < 0 || br->result[i] != SEG_PENDING)
      continue;
    if (apply_seg(br, p, dirfd, &dc, (size_t)i,
                  open_slot(&of, &nof, &capof, br->segs[i].file), &f) < 0)
      break;
  }
  /* A garbled answer leaves the rest pending: they are fetched again. */
  for (size_t k = 0; k < nof; k++) {
    if (of[k].part >= 0)
      close(of[k].part);
    if (of[k].basis >= 0)
      close(of[k].basis);
    if (of[k].segs >= 0)
      close(of[k].segs);
  }
  free(of);
  dir_cache_close(&dc);
  close(dirfd);
}

/* The basis' recorded fingerprints of its segment j, or NULL when any is
 * unknown. */
static const uint8_t (*basis_fps(const struct pull_file *pf, uint32_t j))[16]
{
  static const uint8_t zero[16];

  if (pf->basis_fp == NULL)
    return NULL;
  for (uint64_t i = pf->basis_segfp[j]; i < pf->basis_segfp[j + 1]; i++)
    if (memcmp(pf->basis_fp[i], zero, 16) == 0)
      return NULL;
  return (const uint8_t (*)[16])pf->basis_fp + pf->basis_segfp[j];
}

/* Copy segment `from` of the basis into segment k of the part file and
 * verify it: by the fingerprints recorded when the basis was verified
 * here, else by SHA-256.  Returns 1 verified, 0 not, or a write error. */
static int
copy_segment(const struct pull_file *pf, const struct manifest_entry *e,
             uint32_t k, uint32_t from, int basis, int part, struct err *we)
{
  const uint8_t (*want)[16];
  uint8_t (*fp)[16];
  uint64_t off, len, boff;
  uint8_t sha[32];
  int rc;

  manifest_seg_range(e, k, &off, &len);
  fp = pf->fp + manifest_seg_fp(e, k);
  want = basis_fps(pf, from);
  boff = pf->basis_segoff[from];
  rc = delta_copy(basis, boff, part, off, len, want != NULL ? NULL : sha, fp,
                  we);
  if (rc == ERR_IO)
    return rc;
  if (rc < 0)
    return 0;
  if (want != NULL)
    return memcmp(fp, want, manifest_nfp(len) * 16) == 0;
  return memcmp(sha, manifest_seg_sha(e, k), 32) == 0;
}

void
pull_local_run(uv_work_t *w)
{
  struct batch_req *br = w->data;
  struct pull *p = br->p;
  int dirfd = open_staging(br);

  if (dirfd < 0)
    return;
  for (size_t i = 0; i < br->nsegs; i++) {
    const struct pull_file *pf = &p->files[br->segs[i].file];
    const struct manifest_entry *e = &p->m.v[pf->entry];
    struct open_file of = {br->segs[i].file, -1, -1, -1};
    struct err we = {0};
    char part[PATH_MAX];
    int rc;

    part_name(e->path, "part", part, sizeof(part));
    of.part = syncpath_openat(dirfd, part, O_WRONLY | O_CREAT | O_CLOEXEC,
                              0600, &we);
    of.basis = pf->basis ? file_open_regular(pf->basis,
                                             O_RDONLY | O_NOFOLLOW, NULL)
                         : -1;
    if (of.part < 0 || of.basis < 0) {
      br->result[i] = SEG_CORRUPT;
    } else {
      rc = copy_segment(pf, e, br->segs[i].seg, br->segs[i].from, of.basis,
                        of.part, &we);
      if (rc < 0) {
        br->fatal = ERR_IO;
        snprintf(br->msg, sizeof(br->msg), "writing '%s' at %s: %s",
                 e->path, store_root(p->a->store), err_msg(&we));
      } else if (rc == 0) {
        uint64_t off, len;

        manifest_seg_range(e, br->segs[i].seg, &off, &len);
        memset(pf->fp + manifest_seg_fp(e, br->segs[i].seg), 0,
               manifest_nfp(len) * sizeof(*pf->fp));
        br->result[i] = SEG_CORRUPT;
      } else {
        br->result[i] = SEG_OK;
        rc = mark_segment(dirfd, e, &of, br->segs[i].seg, &we);
        if (rc < 0) {
          br->fatal = ERR_IO;
          snprintf(br->msg, sizeof(br->msg), "writing '%s': %s", e->path,
                   err_msg(&we));
        }
      }
    }
    if (of.part >= 0)
      close(of.part);
    if (of.basis >= 0)
      close(of.basis);
    if (of.segs >= 0)
      close(of.segs);
    if (br->fatal < 0)
      break;
  }
  close(dirfd);
}

int
pull_file_finish(const struct pull *p, const struct pull_file *f,
                 struct err *e)
{
  const struct manifest_entry *me = &p->m.v[f->entry];
  char part[PATH_MAX], segs[PATH_MAX];
  int dirfd = open(p->staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = -1;
  int rc = 0;

  if (dirfd < 0)
    return err_set(e, ERR_IO, "cannot open '%s': %s", p->staging,
                   strerror(errno));
  part_name(me->path, "part", part, sizeof(part));
  part_name(me->path, "segs", segs, sizeof(segs));
  fd = syncpath_openat(dirfd, part, O_WRONLY | O_CLOEXEC, 0, e);
  if (fd < 0) {
    rc = fd;
    goto out;
  }
  if (ftruncate(fd, (off_t)me->size) < 0 || set_meta(fd, me) < 0 ||
      renameat(dirfd, part, dirfd, me->path) < 0) {
    rc = err_set(e, ERR_IO, "cannot finish '%s': %s", me->path,
                 strerror(errno));
    goto out;
  }
  (void)unlinkat(dirfd, segs, 0);

out:
  if (fd >= 0)
    close(fd);
  close(dirfd);
  return rc;
}

/* ---- publishing the replica ---- */

void
pull_finish_run(uv_work_t *w)
{
  struct finish_work *fw = w->data;
  struct pull *p = fw->p;
  struct store *s = p->a->store;
  char path[PATH_MAX];
  int dirfd = -1;
  int rc;

  dirfd = open(p->staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    rc = err_set(&fw->e, ERR_IO, "cannot open '%s': %s", p->staging,
                 strerror(errno));
    goto out;
  }
  /* Modes of directories last, deepest first, so a read-only directory
   * did not stop its own files from being written. */
  for (size_t i = p->m.n; i-- > 0;) {
    const struct manifest_entry *e = &p->m.v[i];

    if (e->type == MANIFEST_DIR &&
        fchmodat(dirfd, e->path, (mode_t)e->mode, 0) < 0) {
      rc = err_set(&fw->e, ERR_IO, "cannot set the mode of '%s': %s",
                   e->path, strerror(errno));
      goto out;
    }
  }
  /* The manifest first: a complete replica always has its manifest (a
   * manifest alone is no replica, so the link stage may store it). */
  if (!p->mstored) {
    rc = store_manifest(p, &fw->e);
    if (rc < 0)
      goto out;
  }
  if (store_fsync_publish(s) && syncfs(dirfd) < 0) {
    rc = err_set(&fw->e, ERR_IO, "cannot sync '%s': %s", p->staging,
                 strerror(errno));
    goto out;
  }
  snprintf(path, sizeof(path), "%s", p->data);
  *strrchr(path, '/') = '\0';
  rc = file_mkdirs(path, 0755, &fw->e);
  if (rc < 0)
    goto out;
  if (rename(p->staging, p->data) < 0) {
    rc = err_set(&fw->e, ERR_IO, "cannot publish '%s': %s", p->data,
                 strerror(errno));
    goto out;
  }
  {
    int pfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (pfd >= 0) {
      (void)fsync(pfd);
      close(pfd);
    }
  }

out:
  fw->rc = rc;
  if (dirfd >= 0)
    close(dirfd);
}

/* ---- background signatures ---- */

void
pull_sigs_run(uv_work_t *w)
{
  struct sig_work *sw = w->data;
  struct buf sig;

  buf_init(&sig, SIG_MAX);
  for (size_t i = 0; i < sw->n; i++) {
    const struct sig_item *it = &sw->items[i];
    char path[PATH_MAX], file[PATH_MAX * 2];
    int fd;

    if (it->fp != NULL) {
      store_xxh_path(sw->a->store, it->sha, path, sizeof(path));
      if (access(path, F_OK) != 0)
        sig_cache_put(path, it->fp, (size_t)it->nfp * 16);
    }
    store_sig_path(sw->a->store, it->sha, delta_block_len(it->size), path,
                   sizeof(path));
    if (access(path, F_OK) == 0)
      continue;
    snprintf(file, sizeof(file), "%s/%s", sw->dir, it->path);
    fd = file_open_regular(file, O_RDONLY | O_NOFOLLOW, NULL);
    if (fd < 0)
      continue;
    buf_reset(&sig);
    if (delta_signature(fd, it->size, &sig, NULL) == 0)
      sig_cache_put(path, sig.data, sig.len);
    close(fd);
  }
  buf_release(&sig);
}
