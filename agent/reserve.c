/*
 * The reserve of empty files (reserve.h).
 */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/reserve.h"
#include "util/alloc.h"
#include "util/fileio.h"
#include "util/log.h"

struct reserve {
  int dirfd;
  pthread_mutex_t mu;
  uint64_t *ids;   /* the files held, by number */
  size_t n, cap;
  uint64_t next;   /* no file was ever made under this number or above */
  int off;         /* a rename failed for good: create instead */
};

static void
name_of(uint64_t id, char out[24])
{
  snprintf(out, 24, "%" PRIu64, id);
}

/* The number a file of the reserve is called, or -1 for another name. */
static int
id_of(const char *name, uint64_t *id)
{
  char *end;

  if (name[0] < '0' || name[0] > '9' || strlen(name) > 19)
    return -1;
  errno = 0;
  *id = strtoull(name, &end, 10);
  return errno == 0 && *end == '\0' ? 0 : -1;
}

/* Add id to the files held (under mu). */
static void
push_locked(struct reserve *r, uint64_t id)
{
  if (r->n == r->cap) {
    r->cap = r->cap == 0 ? 64 : r->cap * 2;
    r->ids = xrealloc(r->ids, r->cap * sizeof(*r->ids));
  }
  r->ids[r->n++] = id;
}

static void
push(struct reserve *r, uint64_t id)
{
  pthread_mutex_lock(&r->mu);
  push_locked(r, id);
  pthread_mutex_unlock(&r->mu);
}

/* Take a number off the files held: 0, or -1 when none is left or the
 * reserve is off. */
static int
pop(struct reserve *r, uint64_t *id)
{
  int rc = -1;

  pthread_mutex_lock(&r->mu);
  if (r->n > 0 && !r->off) {
    *id = r->ids[--r->n];
    rc = 0;
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}

int
reserve_open(const char *dir, struct reserve **out, struct err *e)
{
  struct reserve *r;
  struct dirent *de;
  DIR *d;
  int rc;

  rc = file_mkdirs(dir, 0700, e);
  if (rc < 0)
    return rc;
  r = xcalloc(1, sizeof(*r));
  pthread_mutex_init(&r->mu, NULL);
  r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  d = r->dirfd >= 0 ? opendir(dir) : NULL;
  if (d == NULL) {
    rc = err_set(e, ERR_IO, "reserve '%s': %s", dir, strerror(errno));
    reserve_close(r);
    return rc;
  }
  while ((de = readdir(d)) != NULL) {
    uint64_t id;

    if (id_of(de->d_name, &id) < 0)
      continue;
    push_locked(r, id);
    if (id >= r->next)
      r->next = id + 1;
  }
  closedir(d);
  *out = r;
  return 0;
}

void
reserve_close(struct reserve *r)
{
  if (r == NULL)
    return;
  if (r->dirfd >= 0)
    close(r->dirfd);
  pthread_mutex_destroy(&r->mu);
  free(r->ids);
  free(r);
}

/* The file id of the reserve, open for writing, when it is still ours
 * alone and empty; else -1 (one that is not is dropped). */
static int
open_held(struct reserve *r, uint64_t id)
{
  char name[24];
  struct stat st;
  int fd;

  name_of(id, name);
  /* O_NONBLOCK: a FIFO put there must not block the open; it is
   * refused below, and a regular file ignores the flag. */
  fd = openat(r->dirfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK |
              O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      (void)unlinkat(r->dirfd, name, 0);
    return -1;
  }
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
      st.st_size != 0) {
    close(fd);
    (void)unlinkat(r->dirfd, name, 0);
    return -1;
  }
  return fd;
}

int
reserve_take(struct reserve *r, int dirfd, const char *name, struct err *e)
{
  uint64_t id;
  int fd;

  while (pop(r, &id) == 0) {
    char from[24];
    int err;

    fd = open_held(r, id);
    if (fd < 0)
      continue;
    name_of(id, from);
    if (renameat2(r->dirfd, from, dirfd, name, RENAME_NOREPLACE) == 0)
      return fd;
    err = errno;
    close(fd);
    push(r, id);
    if (err == EEXIST)
      return err_set(e, ERR_CONFLICT, "'%s' exists already", name);
    if (err == EXDEV || err == EINVAL || err == ENOSYS) {
      /* Another file system, or one without RENAME_NOREPLACE: the
       * reserve cannot serve this store. */
      pthread_mutex_lock(&r->mu);
      if (!r->off)
        log_warn("reserve: files cannot be renamed into place (%s); "
                 "new files are created instead", strerror(err));
      r->off = 1;
      pthread_mutex_unlock(&r->mu);
    }
    break; /* the create says what is wrong with the place, if anything */
  }
  fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
              O_CLOEXEC, 0600);
  if (fd < 0)
    return err_set(e, errno == EEXIST ? ERR_CONFLICT : ERR_IO, "'%s': %s",
                   name, strerror(errno));
  return fd;
}

int
reserve_fill(struct reserve *r, size_t want, const atomic_int *stop,
             struct err *e)
{
  if (want > RESERVE_MAX)
    want = RESERVE_MAX;
  while (!atomic_load(stop)) {
    char name[24];
    uint64_t id;
    int fd;

    pthread_mutex_lock(&r->mu);
    if (r->off || r->n >= want) {
      pthread_mutex_unlock(&r->mu);
      break;
    }
    id = r->next++;
    pthread_mutex_unlock(&r->mu);
    name_of(id, name);
    fd = openat(r->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                0600);
    if (fd < 0) {
      if (errno == EEXIST)
        continue; /* not one of ours: the next number */
      return err_set(e, ERR_IO, "reserve: cannot create a file: %s",
                     strerror(errno));
    }
    close(fd);
    push(r, id);
  }
  return 0;
}

size_t
reserve_count(struct reserve *r)
{
  size_t n;

  pthread_mutex_lock(&r->mu);
  n = r->n;
  pthread_mutex_unlock(&r->mu);
  return n;
}
