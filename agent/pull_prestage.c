/*
 * Prestaging (docs/SYNC.md "Prestaging"): right after a pull of NAME@V
 * completes, the destination links V's files into a tree of the same
 * shape, prestage/NAME/V, off the transfer's path.  The next pull of
 * NAME whose basis is V takes that tree as its staging directory and
 * only removes what changed: a version of 20,000 small files with a few
 * hundred changes then costs a few hundred file operations while it
 * transfers, not 20,000 links (~10 us each here, half the destination's
 * CPU in the bench's tree case).
 *
 * Trust comes from renames.  A tree is built under V.tmp by one job at a
 * time and renamed to V once whole; it is never changed under that name.
 * Whoever takes it renames it away first (a pull, to its staging path
 * with ".r"; a new job, to a trash name before deleting it), so exactly
 * one owner ever changes it, and a pull's staging path appears only when
 * its reconciliation finished.  A crash leaves a .tmp, .r or trash tree,
 * which is deleted, never used.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync/path.h"
#include "agent/pull_int.h"
#include "agent/store.h"
#include "util/alloc.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/parallel.h"

/* ---- removing a tree ---- */

static int remove_in(int dirfd, int depth);

/* Remove name (of any type) in dirfd, a directory's content first. */
static int
remove_at(int dirfd, const char *name, int depth)
{
  int fd;

  if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -1;
  if (depth > 256)
    return -1;
  fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  if (remove_in(fd, depth + 1) < 0)
    return -1;
  return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0
                                                                     : -1;
}

/* Remove everything in the directory fd (closed here). */
static int
remove_in(int fd, int depth)
{
  DIR *d = fdopendir(fd);
  struct dirent *de;
  int rc = 0;

  if (d == NULL) {
    close(fd);
    return -1;
  }
  while (rc == 0 && (de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    rc = remove_at(dirfd(d), de->d_name, depth);
  }
  closedir(d);
  return rc;
}

/* Remove the tree at path, whatever is in it: 0, or -1 (errno). */
static int
pull_remove_tree(const char *path)
{
  char dir[PATH_MAX];
  char *slash;
  int fd, rc;

  snprintf(dir, sizeof(dir), "%s", path);
  slash = strrchr(dir, '/');
  if (slash == NULL)
    return -1;
  *slash = '\0';
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  rc = remove_at(fd, slash + 1, 0);
  close(fd);
  return rc;
}

/* ---- building a tree (pool) ---- */

struct prestage_work {
  uv_work_t w;
  struct agent *a;
  char *name;
  char v[MANIFEST_ID_HEX + 1];
  atomic_int stop;             /* set by the loop: the agent is closing */
};

/* Everything in prestage/NAME goes, each tree renamed to a trash name
 * first (see the top of the file). */
static void
clear_dir(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *de;
  unsigned k = 0;

  if (d == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    char from[PATH_MAX * 2], to[PATH_MAX * 2];

    if (de->d_name[0] == '.' &&
        (de->d_name[1] == '\0' || strcmp(de->d_name, "..") == 0))
      continue;
    if (strncmp(de->d_name, ".trash.", 7) == 0) {
      snprintf(to, sizeof(to), "%s/%s", dir, de->d_name);
    } else {
      snprintf(from, sizeof(from), "%s/%s", dir, de->d_name);
      snprintf(to, sizeof(to), "%s/.trash.%d.%u", dir, (int)getpid(), k++);
      if (rename(from, to) < 0)
        continue;
    }
    (void)pull_remove_tree(to);
  }
  closedir(d);
}

/* V's tree of links into tmp (a new directory). */
static int
link_tree(int datafd, int tmpfd, const struct manifest *m,
          struct prestage_work *pw)
{
  for (size_t i = 0; i < m->n; i++) {
    const struct manifest_entry *e = &m->v[i];
    int rc = 0;

    if (atomic_load(&pw->stop))
      return -1;
    if (e->type == MANIFEST_DIR)
      rc = mkdirat(tmpfd, e->path, 0755);
    else if (e->type == MANIFEST_LINK)
      rc = symlinkat(e->target, tmpfd, e->path);
    else
      rc = linkat(datafd, e->path, tmpfd, e->path, 0);
    if (rc < 0) {
      log_warn("prestage: '%s': %s", e->path, strerror(errno));
      return -1;
    }
  }
  return 0;
}

static void
prestage_run(uv_work_t *w)
{
  struct prestage_work *pw = w->data;
  struct store *s = pw->a->store;
  struct manifest m;
  char dir[PATH_MAX], tmp[PATH_MAX + 80], fin[PATH_MAX + 80];
  char path[PATH_MAX];
  char *text = NULL;
  size_t len;
  int datafd = -1, tmpfd = -1, ok = 0;

  manifest_init(&m);
  store_prestage_dir(s, pw->name, dir, sizeof(dir));
  clear_dir(dir);
  if (file_mkdirs(dir, 0755, NULL) < 0)
    goto out;
  store_manifest_path(s, pw->name, pw->v, path, sizeof(path));
  if (file_read(path, MANIFEST_MAX_TEXT, &text, &len, NULL) < 0 ||
      manifest_decode(text, len, &m, NULL) < 0)
    goto out;
  store_data_dir(s, pw->name, pw->v, path, sizeof(path));
  datafd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, pw->v);
  snprintf(fin, sizeof(fin), "%s/%s", dir, pw->v);
  if (datafd < 0 || mkdir(tmp, 0755) < 0)
    goto out;
  tmpfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ok = tmpfd >= 0 && link_tree(datafd, tmpfd, &m, pw) == 0 &&
       rename(tmp, fin) == 0;
  if (!ok)
    (void)pull_remove_tree(tmp);

out:
  if (datafd >= 0)
    close(datafd);
  if (tmpfd >= 0)
    close(tmpfd);
  free(text);
  manifest_release(&m);
}

static void
work_free(struct prestage_work *pw)
{
  if (pw != NULL)
    free(pw->name);
  free(pw);
}

static void prestage_done(uv_work_t *w, int status);

static void
prestage_start(struct agent *a, struct prestage_work *pw)
{
  a->prestaging = pw;
  a->background++;
  pw->w.data = pw;
  agent_queue(a, &pw->w, prestage_run, prestage_done);
}

static void
prestage_done(uv_work_t *w, int status)
{
  struct prestage_work *pw = w->data;
  struct agent *a = pw->a;

  (void)status;
  work_free(pw);
  a->prestaging = NULL;
  a->background--;
  /* One job at a time (clear_dir must never meet a tree being built);
   * the newest request waited. */
  if (a->prestage_next != NULL && !a->closing) {
    pw = a->prestage_next;
    a->prestage_next = NULL;
    prestage_start(a, pw);
  }
  agent_work_done(a);
}

void
pull_prestage_queue(struct pull *p)
{
  struct agent *a = p->a;
  struct prestage_work *pw;

  if (a->closing)
    return;
  pw = xcalloc(1, sizeof(*pw));
  pw->a = a;
  pw->name = xstrdup(p->name);
  snprintf(pw->v, sizeof(pw->v), "%s", p->v);
  atomic_init(&pw->stop, 0);
  if (a->prestaging == NULL) {
    prestage_start(a, pw);
    return;
  }
  work_free(a->prestage_next);
  a->prestage_next = pw;
}

void
pull_prestage_cancel(struct agent *a)
{
  if (a->prestaging != NULL)
    atomic_store(&a->prestaging->stop, 1);
}

void
pull_prestage_free(struct agent *a)
{
  work_free(a->prestage_next);
  a->prestage_next = NULL;
}

/* ---- taking a tree (pool, in the plan) ---- */

/* Whether the prestaged entry ve of the basis can stay as entry we of
 * the new version: both directories, or files of the same content, mode
 * and mtime (a hard link: the two share an inode).  A symlink is made
 * again (there are few). */
static int
same_entry(const struct manifest_entry *ve, const struct manifest_entry *we)
{
  if (ve->type != we->type || ve->type == MANIFEST_LINK)
    return 0;
  if (ve->type == MANIFEST_DIR)
    return 1;
  return ve->size == we->size && ve->mode == we->mode &&
         ve->mtime_ns == we->mtime_ns &&
         memcmp(ve->sha256, we->sha256, 32) == 0;
}

/* Entries of a tree to remove, split between two threads. */
struct removal {
  int dirfd;
  const struct manifest *vm;
  const uint32_t *gone;        /* indexes into vm, files and links */
  size_t n;
  atomic_size_t next;
  atomic_int failed;
};

static void
remove_run(void *arg, size_t task)
{
  struct removal *r = arg;
  size_t k;

  (void)task;
  while ((k = atomic_fetch_add(&r->next, 1)) < r->n) {
    const char *path = r->vm->v[r->gone[k]].path;

    if (unlinkat(r->dirfd, path, 0) < 0 && errno != ENOENT) {
      log_warn("prestage: cannot remove '%s': %s", path, strerror(errno));
      atomic_store(&r->failed, 1);
      break;
    }
  }
}

/*
 * Turn the tree at dirfd, the basis vm's shape, into the part of m it
 * already holds: every entry of vm that m does not have as it is goes,
 * and keep[i] is set for each file of m left in place.  from (or NULL),
 * as manifest_delta_apply gives it against vm, names the entries known
 * to be the same, so only the others are looked up.  Files and links go
 * on two threads (hundreds of unlinkat, ~10 us each here, on the plan's
 * path), then directories, children first.  That each kept file is
 * still there as recorded is checked by the link stage, off the plan's
 * path.
 */
static int
reconcile(int dirfd, const struct manifest *vm, const struct manifest *m,
          const uint32_t *from, uint8_t *keep)
{
  uint8_t *same = xcalloc(vm->n > 0 ? vm->n : 1, 1);
  uint32_t *gone = xmalloc((vm->n > 0 ? vm->n : 1) * sizeof(*gone));
  uint32_t *dirs = xmalloc((vm->n > 0 ? vm->n : 1) * sizeof(*dirs));
  size_t ngone = 0, ndirs = 0;
  struct removal r;
  int rc = 0;

  for (size_t j = 0; from != NULL && j < m->n; j++) {
    if (from[j] == UINT32_MAX)
      continue;
    same[from[j]] = 1;
    keep[j] = m->v[j].type == MANIFEST_FILE;
  }
  for (size_t i = vm->n; i-- > 0;) {
    const struct manifest_entry *ve = &vm->v[i];
    ssize_t j;

    if (same[i])
      continue;
    j = manifest_find(m, ve->path);
    if (j >= 0 && same_entry(ve, &m->v[j])) {
      keep[j] = ve->type == MANIFEST_FILE;
      continue;
    }
    if (ve->type == MANIFEST_DIR)
      dirs[ndirs++] = (uint32_t)i; /* reverse path order: children first */
    else
      gone[ngone++] = (uint32_t)i;
  }
  r.dirfd = dirfd;
  r.vm = vm;
  r.gone = gone;
  r.n = ngone;
  atomic_init(&r.next, 0);
  atomic_init(&r.failed, 0);
  /* A thread is worth its start for more than a few removals. */
  (void)parallel_run(ngone >= 64 ? 2 : 1, remove_run, &r, NULL);
  rc = atomic_load(&r.failed) ? -1 : 0;
  for (size_t k = 0; rc == 0 && k < ndirs; k++) {
    const char *path = vm->v[dirs[k]].path;

    if (unlinkat(dirfd, path, AT_REMOVEDIR) < 0 && errno != ENOENT) {
      log_warn("prestage: cannot remove '%s': %s", path, strerror(errno));
      rc = -1;
    }
  }
  free(same);
  free(gone);
  free(dirs);
  return rc;
}

int
pull_prestage_take(struct plan_work *pw, const char *basis_v,
                   const struct manifest *basis, const uint32_t *from,
                   uint8_t *keep)
{
  struct pull *p = pw->p;
  char dir[PATH_MAX], tree[PATH_MAX + 72], work[PATH_MAX + 4];
  int fd, rc;

  snprintf(work, sizeof(work), "%s.r", p->staging);
  if (pull_remove_tree(work) < 0) /* a crashed reconciliation's */
    return 0;
  store_prestage_dir(p->a->store, p->name, dir, sizeof(dir));
  snprintf(tree, sizeof(tree), "%s/%s", dir, basis_v);
  *strrchr(work, '/') = '\0';
  if (file_mkdirs(work, 0755, NULL) < 0)
    return 0;
  snprintf(work, sizeof(work), "%s.r", p->staging);
  if (rename(tree, work) < 0)
    return 0; /* none, or a job took it */
  fd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  rc = fd >= 0 && reconcile(fd, basis, &pw->m, from, keep) == 0 &&
       rename(work, p->staging) == 0;
  if (fd >= 0)
    close(fd);
  if (!rc) {
    memset(keep, 0, pw->m.n);
    (void)pull_remove_tree(work);
  }
  return rc;
}
