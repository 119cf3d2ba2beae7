/*
 * The agent's store on the file system (see store.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync/path.h"
#include "agent/store.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/hash.h"

#define STORE_ROOT_MAX 1024

struct store {
  int rootfd;
  int fsync_publish;
  char root[PATH_MAX];
  char base[PATH_MAX]; /* root/.tenbin */
};

/*
 * snprintf for paths.  The root is at most STORE_ROOT_MAX bytes and names
 * and ids are short, so store paths always fit PATH_MAX; going through
 * vsnprintf keeps the compiler's truncation warnings for real cases.
 */
static void pathf(char *out, size_t len, const char *fmt, ...)
    PRINTF_LIKE(3, 4);

static void
pathf(char *out, size_t len, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  (void)vsnprintf(out, len, fmt, ap);
  va_end(ap);
}

static const char *const store_dirs[] = {"manifests", "published", "data",
                                         "staging", "sigs", NULL};

int
store_open(const char *root, int fsync_publish, struct store **out,
           struct err *e)
{
  struct store *s;
  char path[PATH_MAX];
  int rc;

  s = xcalloc(1, sizeof(*s));
  s->rootfd = -1;
  s->fsync_publish = fsync_publish;
  if (realpath(root, s->root) == NULL) {
    rc = err_set(e, ERR_CONFIG, "root '%s': %s", root, strerror(errno));
    goto fail;
  }
  if (strlen(s->root) > STORE_ROOT_MAX) {
    rc = err_set(e, ERR_CONFIG, "root '%.64s...': longer than %d bytes",
                 s->root, STORE_ROOT_MAX);
    goto fail;
  }
  s->rootfd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (s->rootfd < 0) {
    rc = err_set(e, ERR_CONFIG, "root '%s': %s", s->root, strerror(errno));
    goto fail;
  }
  pathf(s->base, sizeof(s->base), "%s/%s", s->root, SYNCPATH_STORE);
  for (size_t i = 0; store_dirs[i] != NULL; i++) {
    pathf(path, sizeof(path), "%s/%s", s->base, store_dirs[i]);
    rc = file_mkdirs(path, 0755, e);
    if (rc < 0)
      goto fail;
  }
  *out = s;
  return 0;

fail:
  store_close(s);
  return rc;
}

void
store_close(struct store *s)
{
  if (s == NULL)
    return;
  if (s->rootfd >= 0)
    close(s->rootfd);
  free(s);
}

int
store_rootfd(const struct store *s)
{
  return s->rootfd;
}

const char *
store_root(const struct store *s)
{
  return s->root;
}

int
store_fsync_publish(const struct store *s)
{
  return s->fsync_publish;
}

void
store_manifest_path(const struct store *s, const char *name, const char *v,
                    char *out, size_t outlen)
{
  pathf(out, outlen, "%s/manifests/%s/%s.json", s->base, name, v);
}

void
store_checks_path(const struct store *s, const char *name, const char *v,
                  char *out, size_t outlen)
{
  pathf(out, outlen, "%s/published/%s/%s.idx", s->base, name, v);
}

static void
source_path(const struct store *s, const char *name, const char *v,
            char *out, size_t outlen)
{
  pathf(out, outlen, "%s/published/%s/%s.src", s->base, name, v);
}

void
store_data_dir(const struct store *s, const char *name, const char *v,
               char *out, size_t outlen)
{
  pathf(out, outlen, "%s/data/%s/%s", s->base, name, v);
}

void
store_staging_dir(const struct store *s, const char *name, const char *v,
                  char *out, size_t outlen)
{
  pathf(out, outlen, "%s/staging/%s/%s", s->base, name, v);
}

void
store_prestage_dir(const struct store *s, const char *name, char *out,
                   size_t outlen)
{
  pathf(out, outlen, "%s/prestage/%s", s->base, name);
}

void
store_sig_path(const struct store *s, const uint8_t sha[32],
               size_t block_len, char *out, size_t outlen)
{
  char h[65];

  hash_hex(sha, 32, h);
  pathf(out, outlen, "%s/sigs/%s-%zu.sig", s->base, h, block_len);
}

void
store_xxh_path(const struct store *s, const uint8_t sha[32], char *out,
               size_t outlen)
{
  char h[65];

  hash_hex(sha, 32, h);
  pathf(out, outlen, "%s/sigs/%s.xxh", s->base, h);
}

int
store_write_file(const char *path, const void *data, size_t len,
                 struct err *e)
{
  char dir[PATH_MAX];
  char *slash;

  pathf(dir, sizeof(dir), "%s", path);
  slash = strrchr(dir, '/');
  if (slash == NULL)
    return err_set(e, ERR_INTERNAL, "'%s' is not an absolute path", path);
  *slash = '\0';
  return file_write_atomic(dir, slash + 1, data, len, 0644, e);
}

static int
is_version_id(const char *s, size_t len)
{
  if (len != MANIFEST_ID_HEX)
    return 0;
  for (size_t i = 0; i < len; i++) {
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  }
  return 1;
}

static void
push_version(struct store_version **v, size_t *n, size_t *cap,
             const struct store_version *one)
{
  if (*n == *cap) {
    *cap = *cap == 0 ? 8 : *cap * 2;
    *v = xrealloc(*v, *cap * sizeof(**v));
  }
  (*v)[(*n)++] = *one;
}

static int
newest_first(const void *a, const void *b)
{
  const struct store_version *x = a;
  const struct store_version *y = b;

  if (x->mtime_ns != y->mtime_ns)
    return x->mtime_ns > y->mtime_ns ? -1 : 1;
  return strcmp(x->version, y->version);
}

static int64_t
mtime_of(const struct stat *st)
{
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* The source directory recorded for v, into one->path: 1 ok, 0 gone. */
static int
source_dir(const struct store *s, const char *name, const char *v,
           struct store_version *one)
{
  char p[PATH_MAX];
  char *rel = NULL;
  size_t len;
  struct stat st;
  struct err e = {0};
  int found = 0;

  source_path(s, name, v, p, sizeof(p));
  if (file_read(p, PATH_MAX, &rel, &len, &e) < 0)
    return 0;
  if (stat(p, &st) == 0)
    one->mtime_ns = mtime_of(&st);
  if (strcmp(rel, ".") == 0)
    pathf(one->path, sizeof(one->path), "%s", s->root);
  else
    pathf(one->path, sizeof(one->path), "%s/%s", s->root, rel);
  found = stat(one->path, &st) == 0 && S_ISDIR(st.st_mode);
  free(rel);
  return found;
}

int
store_version_get(const struct store *s, const char *name, const char *v,
                  struct store_version *out)
{
  struct stat st;

  memset(out, 0, sizeof(*out));
  if (!is_version_id(v, strlen(v)))
    return 0;
  pathf(out->version, sizeof(out->version), "%s", v);
  store_data_dir(s, name, v, out->path, sizeof(out->path));
  if (stat(out->path, &st) == 0 && S_ISDIR(st.st_mode)) {
    out->mtime_ns = mtime_of(&st);
    return 1;
  }
  out->source = 1;
  return source_dir(s, name, v, out);
}

static int
scan_dir(const struct store *s, const char *name, int source,
         struct store_version **v, size_t *n, size_t *cap)
{
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *de;

  pathf(dir, sizeof(dir), "%s/%s/%s", s->base,
           source ? "published" : "data", name);
  d = opendir(dir);
  if (d == NULL)
    return 0;
  while ((de = readdir(d)) != NULL) {
    struct store_version one;
    size_t len = strlen(de->d_name);

    memset(&one, 0, sizeof(one));
    if (source) {
      if (len != MANIFEST_ID_HEX + 4 ||
          strcmp(de->d_name + MANIFEST_ID_HEX, ".src") != 0 ||
          !is_version_id(de->d_name, MANIFEST_ID_HEX))
        continue;
      memcpy(one.version, de->d_name, MANIFEST_ID_HEX);
      one.source = 1;
      if (!source_dir(s, name, one.version, &one))
        continue;
    } else {
      struct stat st;

      if (!is_version_id(de->d_name, len) ||
          fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
          !S_ISDIR(st.st_mode))
        continue;
      memcpy(one.version, de->d_name, MANIFEST_ID_HEX + 1);
      one.mtime_ns = mtime_of(&st);
      pathf(one.path, sizeof(one.path), "%s/%s", dir, de->d_name);
    }
    push_version(v, n, cap, &one);
  }
  closedir(d);
  return 0;
}

int
store_versions(const struct store *s, const char *name,
               struct store_version **out, size_t *n, struct err *e)
{
  struct store_version *v = NULL;
  size_t cap = 0;

  (void)e;
  *n = 0;
  (void)scan_dir(s, name, 0, &v, n, &cap);
  (void)scan_dir(s, name, 1, &v, n, &cap);
  if (*n > 1)
    qsort(v, *n, sizeof(*v), newest_first);
  *out = v;
  return 0;
}

int
store_source_set(const struct store *s, const char *name, const char *v,
                 const char *rel, struct err *e)
{
  char p[PATH_MAX];
  int rc;

  pathf(p, sizeof(p), "%s/published/%s", s->base, name);
  rc = file_mkdirs(p, 0755, e);
  if (rc < 0)
    return rc;
  source_path(s, name, v, p, sizeof(p));
  return store_write_file(p, rel, strlen(rel), e);
}

int
store_source_latest(const struct store *s, const char *name,
                    const char *rel, char v[MANIFEST_ID_HEX + 1])
{
  struct store_version *all = NULL;
  size_t n = 0;
  int found = 0;

  if (store_versions(s, name, &all, &n, NULL) < 0)
    return 0;
  for (size_t i = 0; i < n && !found; i++) {
    char p[PATH_MAX];
    char *got = NULL;
    size_t len;

    if (!all[i].source)
      continue;
    source_path(s, name, all[i].version, p, sizeof(p));
    if (file_read(p, PATH_MAX, &got, &len, NULL) == 0 &&
        strcmp(got, rel) == 0) {
      memcpy(v, all[i].version, MANIFEST_ID_HEX + 1);
      found = 1;
    }
    free(got);
  }
  free(all);
  return found;
}
