/*
 * Whole-file helpers (see fileio.h).
 */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"

/* New string "dir/name". */
static char *
join(const char *dir, const char *name)
{
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = xmalloc(n);

  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int
write_all(int fd, const char *data, size_t len)
{
  while (len > 0) {
    ssize_t k = write(fd, data, len);

    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return -1;
    data += k;
    len -= (size_t)k;
  }
  return 0;
}

int
file_sync_dir(const char *dir, struct err *e)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = 0;

  if (fd < 0 || fsync(fd) < 0)
    rc = err_set(e, ERR_IO, "cannot sync directory '%s': %s", dir,
                 strerror(errno));
  if (fd >= 0)
    close(fd);
  return rc;
}

int
file_write_atomic(const char *dir, const char *name, const void *data,
                  size_t len, mode_t mode, struct err *e)
{
  char *tmp = NULL;
  char *dst = NULL;
  char tmpname[64];
  int fd = -1;
  int rc = ERR_IO;

  /* The pid makes the temporary name unique between tenbind and a shim
   * writing in the same directory. */
  snprintf(tmpname, sizeof(tmpname), ".%.32s.%ld.tmp", name, (long)getpid());
  tmp = join(dir, tmpname);
  dst = join(dir, name);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    err_set(e, ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    goto out;
  }
  /* open() applies the umask; a script must stay executable. */
  if (fchmod(fd, mode) < 0 || write_all(fd, data, len) < 0 ||
      fsync(fd) < 0) {
    err_set(e, ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    goto out;
  }
  if (close(fd) < 0) {
    fd = -1;
    err_set(e, ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    goto out;
  }
  fd = -1;
  if (rename(tmp, dst) < 0) {
    err_set(e, ERR_IO, "cannot rename '%s' to '%s': %s", tmp, dst,
            strerror(errno));
    goto out;
  }
  /* The rename itself is durable only once the directory is synced. */
  if (file_sync_dir(dir, e) < 0)
    goto out;
  rc = 0;
out:
  if (fd >= 0)
    close(fd);
  if (rc < 0)
    unlink(tmp);
  free(tmp);
  free(dst);
  return rc;
}

const char *
file_kind(mode_t mode)
{
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a fifo";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  return "not a regular file";
}

int
file_open_regular(const char *path, int flags, struct err *e)
{
  struct stat st;
  int fd;

  fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return err_set(e, ERR_NOT_FOUND, "'%s' does not exist", path);
    if (errno == ELOOP && (flags & O_NOFOLLOW))
      return err_set(e, ERR_INVALID, "'%s' is a symlink, not a regular "
                     "file", path);
    return err_set(e, ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  }
  if (fstat(fd, &st) < 0) {
    int err = errno;

    close(fd);
    return err_set(e, ERR_IO, "cannot stat '%s': %s", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return err_set(e, ERR_INVALID, "'%s' is %s, not a regular file", path,
                   file_kind(st.st_mode));
  }
  return fd;
}

int
file_read(const char *path, size_t max, char **out, size_t *len_out,
          struct err *e)
{
  struct buf b;
  char chunk[4096];
  int fd;
  int rc = ERR_IO;

  fd = file_open_regular(path, O_RDONLY, e);
  if (fd < 0)
    return fd;
  buf_init(&b, max);
  for (;;) {
    ssize_t k = read(fd, chunk, sizeof(chunk));

    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0) {
      err_set(e, ERR_IO, "cannot read '%s': %s", path, strerror(errno));
      goto out;
    }
    if (k == 0)
      break;
    if (buf_add(&b, chunk, (size_t)k) < 0) {
      rc = err_set(e, ERR_TOO_LARGE, "'%s' is larger than %zu bytes", path,
                   max);
      goto out;
    }
  }
  *out = buf_take(&b, len_out);
  rc = 0;
out:
  close(fd);
  buf_release(&b);
  return rc;
}

int
file_mkdirs(const char *path, mode_t mode, struct err *e)
{
  char *p = xstrdup(path);
  int rc = 0;

  /* Create each prefix in turn; existing ones are fine. */
  for (char *s = p + 1;; s++) {
    char c = *s;

    if (c != '/' && c != '\0')
      continue;
    *s = '\0';
    if (mkdir(p, mode) < 0 && errno != EEXIST) {
      rc = err_set(e, ERR_IO, "cannot create directory '%s': %s", p,
                   strerror(errno));
      break;
    }
    *s = c;
    if (c == '\0')
      break;
  }
  free(p);
  return rc;
}

int
file_read_chunks(int fd, uint64_t off, uint64_t len, void *buf,
                 size_t buflen,
                 int (*fn)(void *arg, const uint8_t *p, size_t n), void *arg,
                 struct err *e)
{
  uint64_t done = 0;

  while (done < len) {
    size_t want = len - done < buflen ? (size_t)(len - done) : buflen;
    size_t got = 0;
    int rc;

    while (got < want) {
      ssize_t r = pread(fd, (char *)buf + got, want - got,
                        (off_t)(off + done + got));

      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return err_set(e, ERR_IO, "read at offset %llu: %s",
                       (unsigned long long)(off + done + got),
                       strerror(errno));
      if (r == 0)
        return err_set(e, ERR_CONFLICT, "file ends at offset %llu, before "
                       "%llu", (unsigned long long)(off + done + got),
                       (unsigned long long)(off + len));
      got += (size_t)r;
    }
    rc = fn(arg, buf, want);
    if (rc < 0)
      return rc;
    done += want;
  }
  return 0;
}
