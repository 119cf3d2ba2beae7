/*
 * Files and processes for the local adapter and its shim: paths, and the
 * /proc start time that tells a shim apart from a later process reusing
 * its pid.  Durable atomic writes (what makes the job directory
 * trustworthy after a crash) are util/fileio.h's.
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

char *
adapter_local__path(const char *dir, const char *name)
{
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = xmalloc(n);

  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

int
adapter_local__exists(const char *path)
{
  struct stat st;

  return stat(path, &st) == 0;
}

int
adapter_local__proc_start(pid_t pid, unsigned long long *start)
{
  char path[64];
  char *text = NULL;
  char *p;
  int rc;

  snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
  rc = file_read(path, 4096, &text, NULL, NULL);
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
