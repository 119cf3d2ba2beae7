/*
 * Reading secrets from files with a mode check, and telling loopback
 * hosts from the rest.
 */
#include "secret.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fileio.h"

static void
wipe(void *p, size_t n)
{
  /* A volatile pointer, so that the stores are not optimised away. */
  volatile unsigned char *v = p;

  while (n-- > 0)
    *v++ = 0;
}

void
secret_free(char *s)
{
  if (s == NULL)
    return;
  wipe(s, strlen(s));
  free(s);
}

int
secret_read_file(const char *path, unsigned flags, char **out, size_t *len,
                 struct err *e)
{
  struct stat st;
  char *text = NULL;
  size_t n = 0;
  ssize_t got;
  int fd;
  int rc;

  *out = NULL;
  /* Never blocks on a fifo; refuses anything but a regular file. */
  fd = file_open_regular(path, O_RDONLY, e);
  if (fd == ERR_NOT_FOUND)
    return err_set(e, ERR_NOT_FOUND, "cannot open '%s': %s", path,
                   strerror(ENOENT));
  if (fd < 0)
    return fd;
  /* fstat of the open file: no window between the check and the read. */
  if (fstat(fd, &st) < 0) {
    rc = err_set(e, ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    goto out;
  }
  if ((st.st_mode & 077) != 0) {
    rc = err_set(e, ERR_FORBIDDEN, "'%s' has mode %04o: group or others "
                 "may read or write it; run chmod 600 on it",
                 path, (unsigned)(st.st_mode & 07777));
    goto out;
  }
  if ((size_t)st.st_size > SECRET_FILE_MAX) {
    rc = err_set(e, ERR_TOO_LARGE, "'%s' is larger than %u bytes", path,
                 SECRET_FILE_MAX);
    goto out;
  }
  text = xmalloc(SECRET_FILE_MAX + 1);
  for (;;) {
    got = read(fd, text + n, SECRET_FILE_MAX + 1 - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      rc = err_set(e, ERR_IO, "cannot read '%s': %s", path,
                   strerror(errno));
      goto out;
    }
    if (got == 0)
      break;
    n += (size_t)got;
    if (n > SECRET_FILE_MAX) {
      rc = err_set(e, ERR_TOO_LARGE, "'%s' is larger than %u bytes",
                   path, SECRET_FILE_MAX);
      goto out;
    }
  }
  text[n] = '\0';
  if ((flags & SECRET_FIRST_LINE) != 0) {
    n = strcspn(text, "\r\n");
    while (n > 0 && isspace((unsigned char)text[n - 1]))
      n--;
    wipe(text + n, strlen(text + n));
    if (n == 0) {
      rc = err_set(e, ERR_INVALID, "'%s' holds no token", path);
      goto out;
    }
  }
  if (len != NULL)
    *len = n;
  *out = text;
  text = NULL;
  rc = 0;

out:
  if (text != NULL) {
    wipe(text, SECRET_FILE_MAX + 1);
    free(text);
  }
  close(fd);
  return rc;
}

bool
secret_host_is_loopback(const char *host)
{
  char tmp[64];
  size_t n;
  struct in_addr a4;
  struct in6_addr a6;

  if (host == NULL)
    return false;
  n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    host++;
    n -= 2;
  }
  if (n == 0 || n >= sizeof(tmp))
    return false;
  memcpy(tmp, host, n);
  tmp[n] = '\0';
  /* curl answers "localhost" itself, without asking DNS. */
  if (strcasecmp(tmp, "localhost") == 0)
    return true;
  if (inet_pton(AF_INET, tmp, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, tmp, &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6))
      return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
  }
  return false;
}
