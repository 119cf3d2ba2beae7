/*
 * Watches of published trees by inotify (watch.h).
 *
 * Each directory is added through /proc/self/fd/N of the descriptor the
 * scan opened it by, so the watch is on the directory the scan lists,
 * whatever its path turns into meanwhile.  Watch descriptors are small
 * integers counted up per instance: the directory of each is an array
 * entry.  Changed paths go into a hash set (a file written a thousand
 * times is one path), sorted when a publish takes them.
 */
#define _GNU_SOURCE
#include "agent/watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "sync/path.h"
#include "util/alloc.h"
#include "util/log.h"

#define WATCH_MASK                                                         \
  (IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM |         \
   IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR |              \
   IN_EXCL_UNLINK)
/* Descriptors past this mean an instance re-added millions of times:
 * start a new one rather than grow the table. */
#define WD_MAX (1 << 24)
/* Events of directories an extension is adding, kept until it ends. */
#define PENDING_MAX ((size_t)1 << 20)
#define LABEL_MAX 300

struct watch_build {
  struct manifest_dir_hook hook;
  int fd;
  int fresh;           /* a new instance (else w's) */
  int at_root;
  struct watch *w;     /* extending w, or NULL */
  char label[LABEL_MAX];
  pthread_mutex_t mu;  /* the rest, from the scan's threads */
  struct added {
    int wd;
    char *path;
  } *added;
  size_t n, cap;
  atomic_int failed;   /* why is set before it */
  char why[256];
};

struct change_slot {
  char *path; /* NULL: empty */
  uint64_t h;
  uint64_t seq; /* the watch's seq when last noted */
  unsigned flags;
};

struct watch {
  uv_poll_t poll;
  int fd;
  int at_root;
  char label[LABEL_MAX];
  char **dirs;          /* by wd: the directory's path, "" the top */
  size_t ndirs;
  struct change_slot *set;
  size_t cap, used;     /* cap a power of two, or 0 */
  int lost;
  unsigned extending;   /* builds adding to the instance */
  uint8_t *pending;     /* their events, as read */
  size_t plen;
  uint64_t seq;         /* changes noted, ever */
  uv_timer_t quiet;     /* fires quiet_ms after the last change */
  uint64_t quiet_ms;
  void (*quiet_cb)(void *arg);
  void *quiet_arg;
  int open_handles;     /* poll and quiet, until closed */
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* ---- building: from the scan's threads ---- */

/* Filesystems whose other clients' writes inotify cannot see. */
static const char *
remote_fs(long type)
{
  switch ((unsigned long)type) {
  case 0x6969: return "NFS";
  case 0x517b: case 0xff534d42: case 0xfe534d42: return "SMB";
  case 0x0bd00bd0: return "Lustre";
  case 0x47504653: return "GPFS";
  case 0x00c36400: return "Ceph";
  case 0x19830326: return "BeeGFS";
  case 0x65735546: return "FUSE";
  case 0x01021997: return "9p";
  case 0x6b414653: case 0x5346414f: return "AFS";
  case 0x7461636f: return "OCFS2";
  case 0x01161970: return "GFS2";
  case 0x20030528: return "OrangeFS";
  default: return NULL;
  }
}

static void
build_fail(struct watch_build *b, const char *why)
{
  pthread_mutex_lock(&b->mu);
  if (!atomic_load(&b->failed)) {
    snprintf(b->why, sizeof(b->why), "%s", why);
    atomic_store(&b->failed, 1);
  }
  pthread_mutex_unlock(&b->mu);
}

static void
build_add(void *arg, int dirfd, const char *path)
{
  struct watch_build *b = arg;
  const char *shown = *path ? path : ".";
  char proc[64], why[256];
  struct statfs sf;
  const char *remote;
  int wd;

  if (atomic_load(&b->failed))
    return;
  if (fstatfs(dirfd, &sf) == 0 && (remote = remote_fs(sf.f_type)) != NULL) {
    snprintf(why, sizeof(why), "'%.100s' is on %s, where inotify does not "
             "see other clients' changes", shown, remote);
    build_fail(b, why);
    return;
  }
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
  wd = inotify_add_watch(b->fd, proc, WATCH_MASK);
  if (wd < 0) {
    snprintf(why, sizeof(why), "cannot watch '%.100s': %s", shown,
             errno == ENOSPC ? "the limit fs.inotify.max_user_watches is "
                               "reached" : strerror(errno));
    build_fail(b, why);
    return;
  }
  pthread_mutex_lock(&b->mu);
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 64;
    b->added = xrealloc(b->added, b->cap * sizeof(*b->added));
  }
  b->added[b->n].wd = wd;
  b->added[b->n++].path = xstrdup(path);
  pthread_mutex_unlock(&b->mu);
}

static struct watch_build *
build_alloc(const char *label, int at_root)
{
  struct watch_build *b = xcalloc(1, sizeof(*b));

  b->hook.fn = build_add;
  b->hook.arg = b;
  b->at_root = at_root;
  snprintf(b->label, sizeof(b->label), "%s", label);
  pthread_mutex_init(&b->mu, NULL);
  return b;
}

struct watch_build *
watch_build_new(const char *label, int at_root)
{
  struct watch_build *b;
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

  if (fd < 0) {
    log_warn("not watching %s: inotify: %s", label, strerror(errno));
    return NULL;
  }
  b = build_alloc(label, at_root);
  b->fd = fd;
  b->fresh = 1;
  return b;
}

struct watch_build *
watch_extend(struct watch *w)
{
  struct watch_build *b = build_alloc(w->label, w->at_root);

  b->fd = w->fd;
  b->w = w;
  w->extending++;
  return b;
}

const struct manifest_dir_hook *
watch_build_hook(struct watch_build *b)
{
  return &b->hook;
}

static void
build_release(struct watch_build *b)
{
  for (size_t i = 0; i < b->n; i++)
    free(b->added[i].path);
  free(b->added);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

void
watch_build_free(struct watch_build *b)
{
  if (b == NULL)
    return;
  if (b->fresh) {
    close(b->fd);
  } else {
    b->w->extending--;
    watch_lose(b->w, "a publish failed after taking its changes");
  }
  build_release(b);
}

/* ---- the set of changed paths ---- */

static void
set_clear(struct watch *w)
{
  for (size_t i = 0; i < w->cap; i++)
    free(w->set[i].path);
  free(w->set);
  w->set = NULL;
  w->cap = w->used = 0;
}

static void
set_put(struct change_slot *set, size_t cap, struct change_slot s)
{
  size_t k = (size_t)s.h & (cap - 1);

  while (set[k].path != NULL)
    k = (k + 1) & (cap - 1);
  set[k] = s;
}

static void
note_change(struct watch *w, const char *path, unsigned flags)
{
  uint64_t h = XXH3_64bits(path, strlen(path));
  size_t k;

  if (w->used + 1 > w->cap / 2) {
    size_t cap = w->cap ? w->cap * 2 : 256;
    struct change_slot *set = xcalloc(cap, sizeof(*set));

    for (size_t i = 0; i < w->cap; i++)
      if (w->set[i].path != NULL)
        set_put(set, cap, w->set[i]);
    free(w->set);
    w->set = set;
    w->cap = cap;
  }
  for (k = (size_t)h & (w->cap - 1); w->set[k].path != NULL;
       k = (k + 1) & (w->cap - 1)) {
    if (w->set[k].h == h && strcmp(w->set[k].path, path) == 0) {
      w->set[k].flags |= flags;
      w->set[k].seq = ++w->seq;
      return;
    }
  }
  if (w->used >= WATCH_CHANGES_MAX) {
    watch_lose(w, "more changes than the watch keeps");
    return;
  }
  w->set[k].path = xstrdup(path);
  w->set[k].h = h;
  w->set[k].seq = ++w->seq;
  w->set[k].flags = flags;
  w->used++;
}

void
watch_lose(struct watch *w, const char *why)
{
  if (w->lost)
    return;
  log_info("watch of %s lost (%s): its next publish scans it whole",
           w->label, why);
  w->lost = 1;
  set_clear(w);
  free(w->pending);
  w->pending = NULL;
  w->plen = 0;
}

/* ---- events ---- */

static void
keep_pending(struct watch *w, const struct inotify_event *ev)
{
  size_t len = sizeof(*ev) + ev->len;

  if (w->plen + len > PENDING_MAX) {
    watch_lose(w, "too many events while directories were added");
    return;
  }
  w->pending = xrealloc(w->pending, w->plen + len);
  memcpy(w->pending + w->plen, ev, len);
  w->plen += len;
}

static void
apply_event(struct watch *w, const struct inotify_event *ev)
{
  char path[2 * SYNCPATH_MAX + 2];
  const char *dir;

  if (ev->mask & IN_Q_OVERFLOW) {
    watch_lose(w, "the kernel's event queue overflowed");
    return;
  }
  if (w->lost || ev->wd < 0)
    return;
  dir = (size_t)ev->wd < w->ndirs ? w->dirs[ev->wd] : NULL;
  if (dir == NULL) {
    /* A directory an extension added, not known until it ends. */
    if (w->extending > 0 && !(ev->mask & IN_IGNORED))
      keep_pending(w, ev);
    return;
  }
  if (ev->mask & IN_IGNORED) {
    free(w->dirs[ev->wd]);
    w->dirs[ev->wd] = NULL;
    return;
  }
  if ((ev->mask & (IN_MOVE_SELF | IN_UNMOUNT)) ||
      ((ev->mask & IN_DELETE_SELF) && *dir == '\0') ||
      ((ev->mask & IN_ISDIR) && (ev->mask & (IN_MOVED_FROM | IN_MOVED_TO)))) {
    watch_lose(w, "a directory was renamed, deleted or unmounted");
    return;
  }
  if (ev->mask & IN_DELETE_SELF)
    return; /* its directory noted the delete */
  if (ev->len == 0 || ev->name[0] == '\0') {
    /* The directory's own mode or times; the top's are no entry. */
    if (*dir != '\0')
      note_change(w, dir, MANIFEST_CHANGED_ENTRY);
    return;
  }
  if (*dir == '\0' && w->at_root && strcmp(ev->name, SYNCPATH_STORE) == 0)
    return;
  snprintf(path, sizeof(path), "%s%s%s", dir, *dir ? "/" : "", ev->name);
  note_change(w, path, (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                    IN_MOVED_TO))
                           ? MANIFEST_CHANGED_TREE
                           : MANIFEST_CHANGED_ENTRY);
}

static void
on_quiet(uv_timer_t *t)
{
  struct watch *w = t->data;

  if (!w->lost && w->quiet_cb != NULL)
    w->quiet_cb(w->quiet_arg);
}

static void
apply_events(struct watch *w, const uint8_t *p, size_t len)
{
  uint64_t seq = w->seq;
  size_t off = 0;

  while (off + sizeof(struct inotify_event) <= len) {
    const struct inotify_event *ev = (const void *)(p + off);

    apply_event(w, ev);
    off += sizeof(*ev) + ev->len;
  }
  /* Once per read, not per event: a quiet period starts again. */
  if (w->seq != seq && w->quiet_cb != NULL && !w->lost)
    uv_timer_start(&w->quiet, on_quiet, w->quiet_ms, 0);
}

/* Read every event queued now. */
static void
drain(struct watch *w)
{
  /* Aligned for struct inotify_event, and room for the longest name. */
  union {
    struct inotify_event ev;
    uint8_t b[64 << 10];
  } buf;
  ssize_t r;

  for (;;) {
    r = read(w->fd, buf.b, sizeof(buf.b));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    apply_events(w, buf.b, (size_t)r);
  }
  if (r < 0 && errno != EAGAIN)
    watch_lose(w, strerror(errno));
}

static void
on_readable(uv_poll_t *h, int status, int events)
{
  struct watch *w = h->data;

  (void)events;
  if (status < 0) {
    watch_lose(w, uv_strerror(status));
    uv_poll_stop(h);
    return;
  }
  drain(w);
}

/* Map b's directories in w; 0, or -1 when one cannot be. */
static int
map_added(struct watch *w, struct watch_build *b)
{
  for (size_t i = 0; i < b->n; i++) {
    size_t wd = (size_t)b->added[i].wd;

    if (wd >= WD_MAX)
      return -1;
    if (wd >= w->ndirs) {
      size_t n = w->ndirs ? w->ndirs : 64;

      while (n <= wd)
        n *= 2;
      w->dirs = xrealloc(w->dirs, n * sizeof(*w->dirs));
      memset(w->dirs + w->ndirs, 0, (n - w->ndirs) * sizeof(*w->dirs));
      w->ndirs = n;
    }
    free(w->dirs[wd]);
    w->dirs[wd] = b->added[i].path;
    b->added[i].path = NULL;
  }
  return 0;
}

struct watch *
watch_start(uv_loop_t *loop, struct watch_build *b)
{
  struct watch *w;

  if (atomic_load(&b->failed)) {
    log_info("not watching %s: %s", b->label, b->why);
    watch_build_free(b);
    return NULL;
  }
  w = xcalloc(1, sizeof(*w));
  w->fd = b->fd;
  w->at_root = b->at_root;
  snprintf(w->label, sizeof(w->label), "%s", b->label);
  if (map_added(w, b) < 0 || uv_poll_init(loop, &w->poll, w->fd) != 0) {
    /* uv_poll_init fails only for a descriptor epoll refuses. */
    log_info("not watching %s: too many directories", b->label);
    for (size_t i = 0; i < w->ndirs; i++)
      free(w->dirs[i]);
    free(w->dirs);
    free(w);
    watch_build_free(b);
    return NULL;
  }
  build_release(b);
  w->poll.data = w;
  uv_timer_init(loop, &w->quiet);
  w->quiet.data = w;
  w->open_handles = 2;
  uv_poll_start(&w->poll, UV_READABLE, on_readable);
  /* Changes during the scan are queued already. */
  drain(w);
  return w;
}

void
watch_extended(struct watch *w, struct watch_build *b)
{
  w->extending--;
  if (atomic_load(&b->failed))
    watch_lose(w, b->why);
  else if (map_added(w, b) < 0)
    watch_lose(w, "too many directories added");
  build_release(b);
  if (w->extending == 0 && w->pending != NULL) {
    uint8_t *p = w->pending;
    size_t len = w->plen;

    w->pending = NULL;
    w->plen = 0;
    apply_events(w, p, len);
    free(p);
  }
}

/* ---- taking the changes ---- */

static int
change_cmp(const void *a, const void *b)
{
  return strcmp(((const struct manifest_change *)a)->path,
                ((const struct manifest_change *)b)->path);
}

/* The changes noted after seq since into out, sorted: moved out of the
 * set (take), or copied (peek). */
static void
collect(struct watch *w, uint64_t since, int move, struct watch_changes *out)
{
  size_t k = 0;

  out->v = xmalloc((w->used > 0 ? w->used : 1) * sizeof(*out->v));
  for (size_t i = 0; i < w->cap; i++) {
    if (w->set[i].path == NULL || w->set[i].seq <= since)
      continue;
    out->v[k].path = move ? w->set[i].path : xstrdup(w->set[i].path);
    out->v[k++].flags = w->set[i].flags;
    if (move)
      w->set[i].path = NULL;
  }
  out->n = k;
  qsort(out->v, out->n, sizeof(*out->v), change_cmp);
}

int
watch_take(struct watch *w, struct watch_changes *out)
{
  memset(out, 0, sizeof(*out));
  drain(w);
  if (w->lost)
    return ERR_CONFLICT;
  collect(w, 0, 1, out);
  set_clear(w);
  return 0;
}

int
watch_peek(struct watch *w, uint64_t since, struct watch_changes *out,
           uint64_t *upto)
{
  memset(out, 0, sizeof(*out));
  drain(w);
  *upto = w->seq;
  if (w->lost)
    return ERR_CONFLICT;
  collect(w, since, 0, out);
  return 0;
}

uint64_t
watch_seq(const struct watch *w)
{
  return w->seq;
}

void
watch_on_quiet(struct watch *w, uint64_t ms, void (*cb)(void *arg),
               void *arg)
{
  w->quiet_ms = ms;
  w->quiet_cb = cb;
  w->quiet_arg = arg;
}

void
watch_changes_release(struct watch_changes *c)
{
  for (size_t i = 0; i < c->n; i++)
    free((char *)c->v[i].path);
  free(c->v);
  memset(c, 0, sizeof(*c));
}

/* ---- closing ---- */

static void
on_closed(uv_handle_t *h)
{
  struct watch *w = h->data;
  void (*cb)(void *) = w->close_cb;
  void *arg = w->close_arg;

  if (--w->open_handles > 0)
    return;
  close(w->fd);
  set_clear(w);
  for (size_t i = 0; i < w->ndirs; i++)
    free(w->dirs[i]);
  free(w->dirs);
  free(w->pending);
  free(w);
  if (cb != NULL)
    cb(arg);
}

void
watch_close(struct watch *w, void (*cb)(void *arg), void *arg)
{
  w->close_cb = cb;
  w->close_arg = arg;
  w->quiet_cb = NULL;
  uv_close((uv_handle_t *)&w->poll, on_closed);
  uv_close((uv_handle_t *)&w->quiet, on_closed);
}
