/*
 * Files and processes for the local adapter and its shim: durable atomic
 * writes (what makes the job directory trustworthy after a crash), capped
 * reads, and the /proc start time that tells a shim apart from a later
 * process reusing its pid.
 */
#define _GNU_SOURCE /* sigabbrev_np */
#include "local_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/buf.h"

char *
adapter_local__path(const char *dir, const char *name)
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

static int
fsync_dir(const char *dir)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc;

  if (fd < 0)
    return -1;
  rc = fsync(fd);
  close(fd);
  return rc;
}

int
adapter_local__write_atomic(const char *dir, const char *name,
                            const void *data, size_t len, mode_t mode,
                            struct err *e)
{
  char *tmp = NULL;
  char *dst = NULL;
  char tmpname[64];
  int fd = -1;
  int rc = ERR_IO;

  /* The pid makes the temporary name unique between tenbind and a shim
   * writing in the same directory. */
  snprintf(tmpname, sizeof(tmpname), ".%.32s.%ld.tmp", name, (long)getpid());
  tmp = adapter_local__path(dir, tmpname);
  dst = adapter_local__path(dir, name);
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
  if (fsync_dir(dir) < 0) {
    err_set(e, ERR_IO, "cannot sync directory '%s': %s", dir,
            strerror(errno));
    goto out;
  }
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

int
adapter_local__read_file(const char *path, size_t max, char **out,
                         size_t *len_out, struct err *e)
{
  struct buf b;
  char chunk[4096];
  int fd;
  int rc = ERR_IO;

  buf_init(&b, max);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return err_set(e, ERR_NOT_FOUND, "'%s' does not exist", path);
    return err_set(e, ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  }
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
adapter_local__exists(const char *path)
{
  struct stat st;

  return stat(path, &st) == 0;
}

int
adapter_local__mkdirs(const char *path, mode_t mode, struct err *e)
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
adapter_local__proc_start(pid_t pid, unsigned long long *start)
{
  char path[64];
  char *text = NULL;
  char *p;
  int rc;

  snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
  rc = adapter_local__read_file(path, 4096, &text, NULL, NULL);
  if (rc < 0)
    return ERR_NOT_FOUND;
  /* Field 2 is "(comm)", which may hold spaces and parentheses: count
   * fields from the last ')'.  Field 3 follows it; the start time is 22. */
  rc = ERR_NOT_FOUND;
  p = strrchr(text, ')');
  if (p == NULL)
    goto out;
  p++;
  for (int field = 3; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (p == NULL)
      goto out;
  }
  {
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(p + 1, &end, 10);
    if (errno != 0 || end == p + 1)
      goto out;
    *start = v;
  }
  rc = 0;
out:
  free(text);
  return rc;
}

static int
parse_pid_start(const char *s, char sep, pid_t *pid,
                unsigned long long *start)
{
  char *end;
  long p;
  unsigned long long st;

  if (s == NULL)
    return ERR_INVALID;
  errno = 0;
  p = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != sep || p <= 0 || p > INT32_MAX)
    return ERR_INVALID;
  s = end + 1;
  if (*s < '0' || *s > '9')
    return ERR_INVALID;
  st = strtoull(s, &end, 10);
  if (errno != 0 || (*end != '\0' && *end != '\n'))
    return ERR_INVALID;
  *pid = (pid_t)p;
  *start = st;
  return 0;
}

int
adapter_local__parse_remote_id(const char *s, pid_t *pid,
                               unsigned long long *start)
{
  return parse_pid_start(s, ':', pid, start);
}

int
adapter_local__parse_pid_file(const char *s, pid_t *pid,
                              unsigned long long *start)
{
  return parse_pid_start(s, ' ', pid, start);
}

void
adapter_local__signal_text(int sig, char *out, size_t outlen)
{
  const char *abbrev = sigabbrev_np(sig);

  if (abbrev != NULL)
    snprintf(out, outlen, "killed by signal %d (SIG%s)", sig, abbrev);
  else
    snprintf(out, outlen, "killed by signal %d", sig);
}
