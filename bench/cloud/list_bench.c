/*
 * A reconcile listing of many tagged VMs, timed on the loop that makes
 * it (issue 24: 1,000 VMs per provider through the fakes, < 200 ms of
 * loop time).
 *
 * The real VM pool (adapters/cloud.c) over the real provider of the
 * config's kind, against a fake cloud that bench/cloud/run started (its
 * emulator told never to boot them): the pool launches VMS nodes of the
 * first shape through cloud_scale, as tenbind's autoscaler orders them,
 * LAUNCH_WINDOW at a time, then reconciles every reconcile_s as it does
 * in tenbind.  The nodes carry no job: a listing matches VMs to nodes
 * and never looks at jobs.  The provider is wrapped in one that passes
 * every call through and times each listing:
 *
 *   wall      from the tick's list() call to the end of the pool's
 *             on_listed, the fake's own time included;
 *   busy      the part of wall the loop was not waiting in epoll
 *             (uv_metrics_idle_time): building, signing and sending
 *             each page's request, libcurl reading the answer, the
 *             provider parsing it, and on_listed.  This is the loop time
 *             the target is about: nothing else runs on this loop while
 *             a listing is out but the pool's 1 s tick;
 *   cpu       the loop thread's CPU time over the same span (check on
 *             busy: the same work, less the time the host took the core
 *             away);
 *   reconcile the pool's on_listed alone (matching 1,000 VMs to 1,000
 *             nodes).
 *
 * The node store is in memory: tenbind's writes to SQLite happen for
 * launches, not for a listing that changes nothing.
 *
 * usage: bench_cloud_list SITE.json VMS LISTINGS
 *   SITE.json  one site object as tenbind's config has it (kind aws, gcp
 *              or azure; max_nodes >= VMS)
 * Prints one line per listing, then one "BENCH key=value ..." line of
 * medians and maxima (ms).  Exit 1 when a listing failed or missed VMs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <uv.h>

#include "adapters/cloud_int.h"
#include "util/alloc.h"
#include "util/log.h"

#define MAX_VMS 10000
#define MAX_LISTINGS 1000
#define LAUNCH_WINDOW 32      /* launches out at once */
#define GUARD_S 900           /* give up on a stuck fake */

/* A node as the in-memory store keeps it. */
struct snode {
  char state[16];
  int has_vm;
};

/* One listing's figures, ns. */
struct sample {
  int64_t wall, busy, cpu, reconcile;
  size_t vms;
};

struct bench {
  uv_loop_t loop;
  const struct cloud_provider *real;
  void *ctx;                 /* the pool */
  int closed;
  struct snode nodes[MAX_VMS + 1];
  int64_t nnodes;
  int64_t launched;          /* nodes whose VM id came back */
  int64_t failed;            /* nodes that ended before their VM came */
  int64_t vms;               /* nodes wanted */
  int armed;                 /* every VM is up: listings count */
  struct sample s[MAX_LISTINGS];
  int ns, want;
  int bad;                   /* a listing failed or missed VMs */
};

static struct bench B;

/* What a wrapped provider context holds. */
struct wrap {
  void *inner;
};

/* One listing out. */
struct wlist {
  cloud_list_cb cb;
  void *arg;
  int64_t t0, idle0, cpu0;
  int counts;                /* began after every VM was up */
};

static int64_t
now_ns(clockid_t c)
{
  struct timespec ts;

  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the wrapped provider ---- */

static int
w_open(const struct cloud_env *env, const json_t *config, void **pctx,
       struct err *e)
{
  struct wrap *w = xcalloc(1, sizeof(*w));
  int rc = B.real->open(env, config, &w->inner, e);

  if (rc < 0) {
    free(w);
    return rc;
  }
  *pctx = w;
  return 0;
}

static void
w_launch(void *pctx, const struct cloud_launch *l, cloud_launch_cb cb,
         void *arg)
{
  B.real->launch(((struct wrap *)pctx)->inner, l, cb, arg);
}

static void
w_listed(void *arg, const struct cloud_result *r, const struct cloud_vm *vms,
         size_t n)
{
  struct wlist *wl = arg;
  int64_t t1 = now_ns(CLOCK_MONOTONIC), t2;
  struct sample *s;

  wl->cb(wl->arg, r, vms, n);
  t2 = now_ns(CLOCK_MONOTONIC);
  if (wl->counts && B.ns < B.want && B.ns < MAX_LISTINGS) {
    s = &B.s[B.ns++];
    s->wall = t2 - wl->t0;
    s->busy = s->wall - ((int64_t)uv_metrics_idle_time(&B.loop) - wl->idle0);
    s->cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - wl->cpu0;
    s->reconcile = t2 - t1;
    s->vms = r->rc == 0 ? n : 0;
    if (r->rc < 0 || (int64_t)n < B.vms) {
      fprintf(stderr, "bench_cloud_list: listing %d: %zu VMs (want %" PRId64
              ")%s%s\n", B.ns, n, B.vms, r->rc < 0 ? ": " : "",
              r->rc < 0 ? r->msg : "");
      B.bad = 1;
    }
    printf("listing %d: %zu VMs, wall %.1f ms, busy %.1f ms, cpu %.1f ms, "
           "reconcile %.2f ms\n", B.ns, n, s->wall / 1e6, s->busy / 1e6,
           s->cpu / 1e6, s->reconcile / 1e6);
    fflush(stdout);
  }
  free(wl);
}

static void
w_list(void *pctx, const char *instance, cloud_list_cb cb, void *arg)
{
  struct wlist *wl = xcalloc(1, sizeof(*wl));

  wl->cb = cb;
  wl->arg = arg;
  wl->counts = B.armed;
  wl->t0 = now_ns(CLOCK_MONOTONIC);
  wl->idle0 = (int64_t)uv_metrics_idle_time(&B.loop);
  wl->cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  B.real->list(((struct wrap *)pctx)->inner, instance, w_listed, wl);
}

static void
w_terminate(void *pctx, const struct cloud_vm *vm, cloud_done_cb cb,
            void *arg)
{
  B.real->terminate(((struct wrap *)pctx)->inner, vm, cb, arg);
}

static void
w_close(void *pctx, void (*cb)(void *arg), void *arg)
{
  struct wrap *w = pctx;
  void *inner = w->inner;

  free(w);
  B.real->close(inner, cb, arg);
}

static struct cloud_provider wrapped = {
    .open = w_open,
    .launch = w_launch,
    .list = w_list,
    .terminate = w_terminate,
    .close = w_close,
};

/* ---- the in-memory node store ---- */

static int
st_create(void *arg, struct adapter_node *n, char *token, size_t tokenlen,
          struct err *e)
{
  (void)arg;
  if (B.nnodes >= MAX_VMS)
    return err_set(e, ERR_TOO_LARGE, "bench: over %d nodes", MAX_VMS);
  n->id = ++B.nnodes;
  snprintf(B.nodes[n->id].state, sizeof(B.nodes[n->id].state), "%s",
           n->state);
  snprintf(token, tokenlen, "tok-%" PRId64, n->id);
  return 0;
}

static int
st_update(void *arg, const struct adapter_node *n, struct err *e)
{
  struct snode *s;

  (void)arg;
  if (n->id < 1 || n->id > B.nnodes)
    return err_set(e, ERR_NOT_FOUND, "bench: no node %" PRId64, n->id);
  s = &B.nodes[n->id];
  snprintf(s->state, sizeof(s->state), "%s", n->state);
  if (!s->has_vm && n->vm_id != NULL && n->vm_id[0] != '\0') {
    s->has_vm = 1;
    B.launched++;
  } else if (!s->has_vm && strcmp(n->state, "ended") == 0) {
    fprintf(stderr, "bench_cloud_list: node %" PRId64 " ended: %s\n", n->id,
            n->reason != NULL ? n->reason : "?");
    B.failed++;
  }
  return 0;
}

static int
st_list(void *arg, adapter_node_cb cb, void *cb_arg, struct err *e)
{
  (void)arg;
  (void)cb;
  (void)cb_arg;
  (void)e;
  return 0; /* a fresh pool */
}

static int
st_token(void *arg, int64_t id, char *token, size_t tokenlen, struct err *e)
{
  (void)arg;
  (void)e;
  snprintf(token, tokenlen, "tok-%" PRId64, id);
  return 0;
}

static int
st_bill_idle(void *arg, const struct adapter_node *n, int64_t from_ms,
             int64_t to_ms, int64_t gpus, struct err *e)
{
  (void)from_ms;
  (void)to_ms;
  (void)gpus;
  return st_update(arg, n, e);
}

static const struct adapter_node_store store = {
    .create = st_create,
    .update = st_update,
    .list = st_list,
    .token = st_token,
    .bill_idle = st_bill_idle,
};

static void
on_update(void *arg, const struct adapter_update *u, size_t n)
{
  (void)arg;
  (void)u;
  (void)n;
}

/* ---- driving it ---- */

static const struct cloud_provider *
provider_of(const char *kind)
{
  if (strcmp(kind, "aws") == 0)
    return &cloud_aws_provider;
  if (strcmp(kind, "gcp") == 0)
    return &cloud_gcp_provider;
  if (strcmp(kind, "azure") == 0)
    return &cloud_azure_provider;
  return NULL;
}

/* Launch count more nodes of the first shape, as the autoscaler's
 * plan would (cloud_scale); the pool commits each node and sends its
 * launch before this returns. */
static int
launch_more(int64_t count, struct err *e)
{
  int64_t launch[1] = {count};

  return cloud_scale(B.ctx, launch, 1, NULL, 0, "list bench", e);
}

/* A count argument in lo..hi, or -1. */
static long
count_arg(const char *s, long lo, long hi)
{
  char *end;
  long v;

  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    return -1;
  return v;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void
on_closed(void *arg)
{
  (void)arg;
  B.closed = 1;
}

static int
cmp64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

  return (x > y) - (x < y);
}

/* Median and maximum of field off of the samples, in ms. */
static void
stat_of(size_t off, double *med, double *max)
{
  int64_t v[MAX_LISTINGS];

  for (int i = 0; i < B.ns; i++)
    v[i] = *(const int64_t *)((const char *)&B.s[i] + off);
  qsort(v, (size_t)B.ns, sizeof(v[0]), cmp64);
  *med = v[B.ns / 2] / 1e6;
  *max = v[B.ns - 1] / 1e6;
}

int
main(int argc, char **argv)
{
  char state_dir[] = "/tmp/tenbin-list-bench.XXXXXX";
  char instance[17];
  struct adapter_env env = {0};
  json_error_t je;
  json_t *config = NULL;
  struct err e = {0};
  const char *kind;
  int64_t asked = 0;           /* nodes ordered so far */
  time_t start;
  int rc = 1;

  if (argc == 4) {
    B.vms = count_arg(argv[2], 1, MAX_VMS);
    B.want = (int)count_arg(argv[3], 1, MAX_LISTINGS);
  }
  if (argc != 4 || B.vms < 0 || B.want < 0) {
    fprintf(stderr, "usage: bench_cloud_list SITE.json VMS(1..%d) "
            "LISTINGS(1..%d)\n", MAX_VMS, MAX_LISTINGS);
    return 2;
  }
  config = json_load_file(argv[1], 0, &je);
  if (config == NULL) {
    fprintf(stderr, "bench_cloud_list: %s: %s\n", argv[1], je.text);
    return 2;
  }
  kind = json_string_value(json_object_get(config, "kind"));
  B.real = kind != NULL ? provider_of(kind) : NULL;
  if (B.real == NULL) {
    fprintf(stderr, "bench_cloud_list: %s: want kind aws, gcp or azure\n",
            argv[1]);
    goto out;
  }
  log_set_level(LOG_WARN);
  wrapped.kind = B.real->kind;
  wrapped.fields = B.real->fields;
  if (mkdtemp(state_dir) == NULL) {
    perror("bench_cloud_list: mkdtemp");
    goto out;
  }
  /* A broker id of this run's own: VMs of an earlier run in the same
   * fake are another broker's, not listed. */
  snprintf(instance, sizeof(instance), "%08lx%08lx",
           (unsigned long)time(NULL) & 0xffffffffUL,
           (unsigned long)getpid() & 0xffffffffUL);
  uv_loop_init(&B.loop);
  uv_loop_configure(&B.loop, UV_METRICS_IDLE_TIME);
  env = (struct adapter_env){.loop = &B.loop,
                             .site_name = "bench",
                             .state_dir = state_dir,
                             .self_exe = "/bin/true",
                             .instance = instance,
                             .update = on_update,
                             .nodes = &store};
  if (cloud_open(&wrapped, &env, config, &B.ctx, &e) < 0) {
    fprintf(stderr, "bench_cloud_list: open: %s\n", e.msg);
    goto close_loop;
  }
  start = time(NULL);
  /* Launch: a window of nodes out at once, as a busy queue would. */
  while (B.launched + B.failed < B.vms) {
    int64_t pending = asked - B.launched - B.failed;
    int64_t more = B.vms - asked;

    if (more > LAUNCH_WINDOW - pending)
      more = LAUNCH_WINDOW - pending;
    if (more > 0) {
      if (launch_more(more, &e) < 0) {
        fprintf(stderr, "bench_cloud_list: launching %" PRId64 " nodes: %s\n",
                more, e.msg);
        goto close_pool;
      }
      /* The pool stops at max_nodes without saying so: count what it
       * created, not what was asked. */
      if (B.nnodes == asked) {
        fprintf(stderr, "bench_cloud_list: the pool launched none of %"
                PRId64 " more nodes (max_nodes below %" PRId64 "?)\n", more,
                B.vms);
        goto close_pool;
      }
      asked = B.nnodes;
    }
    if (time(NULL) - start > GUARD_S) {
      fprintf(stderr, "bench_cloud_list: %" PRId64 " of %" PRId64
              " VMs after %d s\n", B.launched, B.vms, GUARD_S);
      goto close_pool;
    }
    uv_run(&B.loop, UV_RUN_ONCE);
  }
  if (B.failed > 0) {
    fprintf(stderr, "bench_cloud_list: %" PRId64 " launches failed\n",
            B.failed);
    goto close_pool;
  }
  printf("%s: %" PRId64 " VMs launched in %ld s\n", kind, B.launched,
         (long)(time(NULL) - start));
  fflush(stdout);
  /* Listings that begin from now on count: one already out may have
   * begun among the launches. */
  B.armed = 1;
  while (B.ns < B.want) {
    if (time(NULL) - start > 2 * GUARD_S) {
      fprintf(stderr, "bench_cloud_list: %d of %d listings\n", B.ns, B.want);
      goto close_pool;
    }
    uv_run(&B.loop, UV_RUN_ONCE);
  }
  {
    double wm, wx, bm, bx, cm, cx, rm, rx;

    stat_of(offsetof(struct sample, wall), &wm, &wx);
    stat_of(offsetof(struct sample, busy), &bm, &bx);
    stat_of(offsetof(struct sample, cpu), &cm, &cx);
    stat_of(offsetof(struct sample, reconcile), &rm, &rx);
    printf("BENCH kind=%s vms=%" PRId64 " listings=%d busy_p50_ms=%.1f "
           "busy_max_ms=%.1f cpu_p50_ms=%.1f cpu_max_ms=%.1f "
           "reconcile_p50_ms=%.2f reconcile_max_ms=%.2f wall_p50_ms=%.1f "
           "wall_max_ms=%.1f\n", kind, B.vms, B.ns, bm, bx, cm, cx, rm, rx,
           wm, wx);
  }
  rc = B.bad;
close_pool:
  cloud_close(B.ctx, on_closed, NULL);
  while (!B.closed)
    uv_run(&B.loop, UV_RUN_ONCE);
close_loop:
  uv_run(&B.loop, UV_RUN_DEFAULT);
  uv_loop_close(&B.loop);
  nftw(state_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
out:
  json_decref(config);
  return rc;
}
