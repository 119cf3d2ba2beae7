/*
 * Confined paths: normalization, link targets and opens that cannot
 * leave their root.
 */
#define _GNU_SOURCE /* O_PATH, O_TMPFILE */
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Test hook: when set, syncpath_openat walks components itself as on a
 * kernel without openat2 (before 5.6), so that path is tested too.  The
 * prototype is here, not in path.h: nothing but the tests may call it.
 */
void syncpath__test_no_openat2(int on);

static int no_openat2;

/*
 * Bytes of s to quote in a message: at most 160, cut before a UTF-8
 * continuation byte so that the message stays valid UTF-8 (it may end up
 * in a JSON reply).
 */
static int
clipn(const char *s, size_t n)
{
  if (n <= 160)
    return (int)n;
  n = 160;
  while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
    n--;
  return (int)n;
}

static int
clip(const char *s)
{
  return clipn(s, strlen(s));
}

void
syncpath__test_no_openat2(int on)
{
  no_openat2 = on;
}

int
syncpath_normalize(const char *in, char *out, size_t outlen, struct err *e)
{
  const char *src = in != NULL ? in : "";
  const char *p = src;
  size_t n = 0;

  if (outlen == 0)
    return err_set(e, ERR_INVALID, "path '%.*s': no room", clip(src),
                   src);
  if (*p == '/')
    return err_set(e, ERR_INVALID, "path '%.*s': must be relative",
                   clip(src), src);
  while (*p != '\0') {
    const char *c = p;
    size_t clen;

    while (*p != '\0' && *p != '/')
      p++;
    clen = (size_t)(p - c);
    while (*p == '/')
      p++;
    if (clen == 0 || (clen == 1 && c[0] == '.'))
      continue;
    if (clen == 2 && c[0] == '.' && c[1] == '.')
      return err_set(e, ERR_INVALID, "path '%.*s': '..' is not allowed",
                     clip(src), src);
    if (clen > SYNCPATH_NAME_MAX)
      return err_set(e, ERR_INVALID, "path '%.*s': a component is "
                     "longer than %d bytes", clip(src), src,
                     SYNCPATH_NAME_MAX);
    /* The separator, the component and the NUL must fit. */
    if (n + (n > 0) + clen > SYNCPATH_MAX)
      return err_set(e, ERR_INVALID, "path '%.*s': longer than %d "
                     "bytes", clip(src), src, SYNCPATH_MAX);
    if (n + (n > 0) + clen + 1 > outlen)
      return err_set(e, ERR_INVALID, "path '%.*s': too long", clip(src),
                     src);
    if (n > 0)
      out[n++] = '/';
    memcpy(out + n, c, clen);
    n += clen;
  }
  if (n == 0)
    return err_set(e, ERR_INVALID, "path '%.*s': empty", clip(src), src);
  out[n] = '\0';
  return 0;
}

int
syncpath_is_normal(const char *path)
{
  const char *p = path;
  size_t total;

  if (path == NULL || *path == '\0' || *path == '/')
    return 0;
  total = strlen(path);
  if (total > SYNCPATH_MAX)
    return 0;
  while (*p != '\0') {
    const char *c = p;
    size_t clen;

    while (*p != '\0' && *p != '/')
      p++;
    clen = (size_t)(p - c);
    if (clen == 0 || clen > SYNCPATH_NAME_MAX)
      return 0;
    if (c[0] == '.' && (clen == 1 || (clen == 2 && c[1] == '.')))
      return 0;
    if (*p == '/') {
      p++;
      if (*p == '\0')
        return 0; /* a trailing '/' */
    }
  }
  return 1;
}

int
syncpath_link_inside(const char *link_path, const char *target)
{
  long depth = 0;
  int named = 0; /* a name component was seen */
  const char *p;

  if (link_path == NULL || target == NULL || *target == '\0' ||
      *target == '/')
    return 0;
  /* The link's directory is as deep as the link's path has slashes. */
  for (p = link_path; *p != '\0'; p++)
    if (*p == '/')
      depth++;
  p = target;
  while (*p != '\0') {
    const char *c = p;
    size_t clen;

    while (*p != '\0' && *p != '/')
      p++;
    clen = (size_t)(p - c);
    while (*p == '/')
      p++;
    if (clen == 0 || (clen == 1 && c[0] == '.'))
      continue;
    if (clen == 2 && c[0] == '.' && c[1] == '.') {
      /* ".." after a name could climb out of a directory that is itself
       * a link ("a/../.." with a -> "."): only leading ".." components
       * are allowed, and those climb real directories. */
      if (named || --depth < 0)
        return 0;
    } else {
      named = 1;
      depth++;
    }
  }
  return 1;
}

static int
name_char(char c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9');
}

int
syncpath_valid_name(const char *name)
{
  size_t i;

  if (name == NULL || !name_char(name[0]))
    return 0;
  for (i = 1; name[i] != '\0'; i++) {
    if (i >= 64)
      return 0;
    if (!name_char(name[i]) && name[i] != '.' && name[i] != '_' &&
        name[i] != '-')
      return 0;
  }
  return 1;
}

/* 1 when name beneath dirfd is a symlink (without following it). */
static int
is_symlink_at(int dirfd, const char *name)
{
  struct stat st;

  return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISLNK(st.st_mode);
}

/* The error for errno err from opening rel. */
static int
open_error(int err, const char *rel, int via_link, struct err *e)
{
  if (err == ENOENT)
    return err_set(e, ERR_NOT_FOUND, "path '%.*s': not found", clip(rel),
                   rel);
  if (err == ELOOP || via_link)
    return err_set(e, ERR_INVALID, "path '%.*s': a symlink on the way",
                   clip(rel), rel);
  if (err == EXDEV)
    return err_set(e, ERR_INVALID, "path '%.*s': escapes its root",
                   clip(rel), rel);
  return err_set(e, ERR_IO, "path '%.*s': %s", clip(rel), rel,
                 strerror(err));
}

/*
 * Kernels without openat2: open one component at a time, never following
 * a link.  rel is normalized, so no component is "." or "..", and each
 * step is a plain name beneath the directory opened before.
 */
static int
walk_openat(int dirfd, const char *rel, int flags, mode_t mode,
            struct err *e)
{
  char name[SYNCPATH_NAME_MAX + 1];
  const char *p = rel;
  int cur = dirfd;
  int fd = -1;

  for (;;) {
    const char *c = p;
    size_t clen;
    int last;

    while (*p != '\0' && *p != '/')
      p++;
    clen = (size_t)(p - c);
    memcpy(name, c, clen);
    name[clen] = '\0';
    last = *p == '\0';
    if (last)
      fd = openat(cur, name, flags | O_NOFOLLOW, mode);
    else
      fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                  O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      int link = err == ENOTDIR && is_symlink_at(cur, name);

      if (cur != dirfd)
        close(cur);
      return open_error(err, rel, link, e);
    }
    if (cur != dirfd)
      close(cur);
    if (last)
      break;
    cur = fd;
    p++;
  }
  /* O_PATH | O_NOFOLLOW opens a link itself; that is following it too. */
  if (flags & O_PATH) {
    struct stat st;

    if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
      close(fd);
      return open_error(ELOOP, rel, 1, e);
    }
  }
  return fd;
}

int
syncpath_openat(int dirfd, const char *rel, int flags, mode_t mode,
                struct err *e)
{
  struct open_how how;
  long fd;

  /* "." (the directory itself) is accepted for the dataset's top. */
  if (strcmp(rel, ".") != 0 && !syncpath_is_normal(rel))
    return err_set(e, ERR_INVALID, "path '%.*s': not normalized",
                   clip(rel), rel);
  /* Descriptors never leak into children the process may spawn. */
  flags |= O_CLOEXEC;
  if (!no_openat2) {
    memset(&how, 0, sizeof(how));
    /* RESOLVE_NO_SYMLINKS refuses a link in any component, the last
     * included, with ELOOP; O_NOFOLLOW would instead open a link with
     * O_PATH or turn it into ENOTDIR with O_DIRECTORY. */
    how.flags = (uint64_t)(unsigned)(flags & ~O_NOFOLLOW);
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
      how.mode = mode;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                  RESOLVE_NO_MAGICLINKS;
    fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
    if (fd >= 0)
      return (int)fd;
    /* Old seccomp profiles (containers) answer EPERM for a syscall
     * they do not know; the walk below is as safe, only slower. */
    if (errno != ENOSYS && errno != EPERM)
      return open_error(errno, rel, 0, e);
  }
  if (strcmp(rel, ".") == 0) {
    fd = openat(dirfd, ".", flags, mode);
    return fd >= 0 ? (int)fd : open_error(errno, rel, 0, e);
  }
  return walk_openat(dirfd, rel, flags, mode, e);
}

int
syncpath_mkdirs(int dirfd, const char *rel, mode_t mode, struct err *e)
{
  char name[SYNCPATH_NAME_MAX + 1];
  const char *p = rel;
  int cur = dirfd;
  int rc = 0;

  if (strcmp(rel, ".") == 0)
    return 0;
  if (!syncpath_is_normal(rel))
    return err_set(e, ERR_INVALID, "path '%.*s': not normalized",
                   clip(rel), rel);
  for (;;) {
    const char *c = p;
    size_t clen;
    int fd, shown;

    while (*p != '\0' && *p != '/')
      p++;
    clen = (size_t)(p - c);
    memcpy(name, c, clen);
    name[clen] = '\0';
    /* Messages name the path up to this component. */
    shown = clipn(rel, (size_t)(p - rel));
    if (mkdirat(cur, name, mode) < 0 && errno != EEXIST) {
      rc = err_set(e, ERR_IO, "mkdir '%.*s': %s", shown, rel,
                   strerror(errno));
      break;
    }
    /* Whatever exists there must be a directory, not a link to one. */
    fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      int link = (err == ENOTDIR || err == ELOOP) && is_symlink_at(cur, name);

      if (link)
        rc = err_set(e, ERR_INVALID, "path '%.*s': a symlink on the way",
                     shown, rel);
      else
        rc = err_set(e, ERR_IO, "mkdir '%.*s': %s", shown, rel,
                     strerror(err));
      break;
    }
    if (cur != dirfd)
      close(cur);
    cur = fd;
    if (*p == '\0')
      break;
    p++;
  }
  if (cur != dirfd)
    close(cur);
  return rc;
}
