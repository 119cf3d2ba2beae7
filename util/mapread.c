/*
 * mapread.h: a range of a file read through a mapping, SIGBUS guarded.
 */
#include "util/mapread.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"

/* Mapped at once: the callers' ranges are segments of at most 16 MiB; a
 * longer one goes window by window (a multiple of MAPREAD_CHUNK, so the
 * chunks still start at off + k x MAPREAD_CHUNK). */
#define MAP_WINDOW ((uint64_t)64 << 20)
/* Shorter ranges are copied: a mapping's two system calls and its page
 * faults cost more than copying a few pages. */
#define MAP_MIN ((uint64_t)256 << 10)

static _Thread_local sigjmp_buf *guard;
static struct sigaction before; /* the handler ours replaced */
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;

static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
  struct sigaction dfl;

  if (guard != NULL)
    siglongjmp(*guard, 1);
  if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction != NULL) {
    before.sa_sigaction(sig, si, uc);
    return;
  }
  if (!(before.sa_flags & SA_SIGINFO) && before.sa_handler != SIG_DFL &&
      before.sa_handler != SIG_IGN) {
    before.sa_handler(sig);
    return;
  }
  /* Not a guarded read: the default action, when the access that
   * raised it runs again on return. */
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  (void)sigaction(SIGBUS, &dfl, NULL);
}

static int
is_ours(const struct sigaction *sa)
{
  return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_sigbus;
}

/*
 * Whether our handler is in place, putting it there if not: checked on
 * every mapped read (one system call), since whatever installs a SIGBUS
 * handler later (a test framework around each test does) replaces it,
 * and a guarded read without it would kill the process.
 */
static int
guard_installed(void)
{
  struct sigaction cur, sa;
  int ok = 1;

  if (sigaction(SIGBUS, NULL, &cur) < 0)
    return 0;
  if (is_ours(&cur))
    return 1;
  pthread_mutex_lock(&install_mu);
  if (sigaction(SIGBUS, NULL, &cur) < 0) {
    ok = 0;
  } else if (!is_ours(&cur)) {
    before = cur;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    /* NODEFER: a guarded read leaves the handler by siglongjmp, which
     * must not leave SIGBUS blocked on that thread. */
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    ok = sigaction(SIGBUS, &sa, NULL) == 0;
  }
  pthread_mutex_unlock(&install_mu);
  return ok;
}

static int
short_file(uint64_t size, uint64_t want, struct err *e)
{
  return err_set(e, ERR_CONFLICT, "the file has %llu bytes, fewer than "
                 "the %llu to read", (unsigned long long)size,
                 (unsigned long long)want);
}

/* The walk over mapped bytes, apart so that nothing it changes is read
 * after a siglongjmp out of it. */
static int
walk(const uint8_t *p, uint64_t len,
     int (*fn)(void *arg, const uint8_t *p, size_t n), void *arg)
{
  int rc = 0;

  while (rc == 0 && len > 0) {
    size_t n = len < MAPREAD_CHUNK ? (size_t)len : MAPREAD_CHUNK;

    rc = fn(arg, p, n);
    p += n;
    len -= n;
  }
  return rc;
}

/* One window through a mapping; 1 when it cannot be mapped (then it is
 * read). */
static int
map_window(int fd, uint64_t off, uint64_t len,
           int (*fn)(void *arg, const uint8_t *p, size_t n), void *arg,
           struct err *e)
{
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t at = off / page * page;
  size_t mlen = (size_t)(off - at + len);
  sigjmp_buf jb;
  sigjmp_buf *outer = guard;
  uint8_t *m;
  int rc;

  m = mmap(NULL, mlen, PROT_READ, MAP_SHARED, fd, (off_t)at);
  if (m == MAP_FAILED)
    return 1;
  if (sigsetjmp(jb, 0) == 0) {
    guard = &jb;
    rc = walk(m + (off - at), len, fn, arg);
    guard = outer;
  } else {
    guard = outer;
    rc = err_set(e, ERR_CONFLICT, "the file shrank while bytes "
                 "%llu-%llu were read", (unsigned long long)off,
                 (unsigned long long)(off + len));
  }
  munmap(m, mlen);
  return rc;
}

static int
read_window(int fd, uint64_t off, uint64_t len,
            int (*fn)(void *arg, const uint8_t *p, size_t n), void *arg,
            struct err *e)
{
  size_t cap = len < MAPREAD_CHUNK ? (size_t)len : MAPREAD_CHUNK;
  uint8_t *buf = xmalloc(cap > 0 ? cap : 1);
  int rc = 0;

  while (rc == 0 && len > 0) {
    size_t n = len < cap ? (size_t)len : cap, got = 0;

    while (rc == 0 && got < n) {
      ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));

      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        rc = err_set(e, ERR_IO, "cannot read at %llu: %s",
                     (unsigned long long)(off + got), strerror(errno));
      else if (r == 0)
        rc = short_file(off + got, off + len, e);
      else
        got += (size_t)r;
    }
    if (rc == 0)
      rc = fn(arg, buf, n);
    off += n;
    len -= n;
  }
  free(buf);
  return rc;
}

int
mapread(int fd, uint64_t off, uint64_t len,
        int (*fn)(void *arg, const uint8_t *p, size_t n), void *arg,
        struct err *e)
{
  struct stat st;
  int mapped, rc = 0;

  if (fstat(fd, &st) < 0)
    return err_set(e, ERR_IO, "cannot stat the file: %s", strerror(errno));
  if ((uint64_t)st.st_size < off + len)
    return short_file((uint64_t)st.st_size, off + len, e);
  mapped = len >= MAP_MIN && guard_installed();
  while (rc == 0 && len > 0) {
    uint64_t w = len < MAP_WINDOW ? len : MAP_WINDOW;

    rc = mapped ? map_window(fd, off, w, fn, arg, e) : 1;
    if (rc == 1)
      rc = read_window(fd, off, w, fn, arg, e);
    off += w;
    len -= w;
  }
  return rc;
}
