/*
 * Tests of the VM-pool site (adapters/cloud.c): its state machine over a
 * fake provider and a fake node store, on a real loop.
 *
 * The fake provider records every launch, list and terminate and answers
 * each from the loop (a zero timer), never from inside the call, with
 * results the test scripts: success, or a refusal of a class with a
 * retry_after.  A launch may be held unanswered until the test releases
 * it or the provider closes, as when tenbind dies before the cloud
 * answered.  The fake node
 * store keeps its nodes in the fixture, so a second pool opened on it is
 * a restarted tenbind; it logs its calls beside the provider's, in one
 * order.  Updates reach the fixture through the pool's 10 ms queue.
 *
 * The time-based rules run on the wall clock with a 1 s tick: the tests
 * set the smallest timeouts and run the loop until what they wait for has
 * happened, bounded by a guard.  No test measures how long anything took.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adapters/cloud_int.h"
#include "spec/jobspec.h"
#include "util/alloc.h"
#include "util/fileio.h"
#include "util/list.h"
#include "util/timeutil.h"

#define INSTANCE "abcdef0123456789"
#define SITE "pool"
/* A bound against a hang, never a timing assertion. */
#define GUARD_MS 30000
#define MAX_CALLS 1024
#define MAX_PLAN 16
#define MAX_STORED 16
#define MAX_VMS 4
#define MAX_UPDATES 128

/* ---- what the fakes record ---- */

enum call_kind { C_CREATE, C_UPDATE, C_LAUNCH, C_LIST, C_TERMINATE };

/* One call into the node store or the provider, in the order made. */
struct call {
  enum call_kind kind;
  int64_t node;                /* the node's id (0 for a list) */
  char state[16];              /* update: the state recorded; launch: the
                                  state the store held for the node */
  char zone[CLOUD_NAME_LEN];   /* launch, terminate */
  char type[CLOUD_NAME_LEN];   /* launch: the instance type */
  char token[96];              /* launch: the idempotency token */
  char tag_instance[CLOUD_NAME_LEN]; /* launch: the tags */
  char tag_node[CLOUD_NAME_LEN];
  int script_has_token;        /* launch: the script carries the node's
                                  agent token */
  char vm_id[CLOUD_ID_LEN];    /* terminate */
  int spot;                    /* launch */
  int attempt;                 /* update: the node's attempt */
  int64_t at_ms;               /* when it was made */
  int64_t answered_ms;         /* when its answer went back, or 0 */
  int lists_answered;          /* listings answered before it */
};

/* How the next launch is answered. */
struct plan {
  enum cloud_refusal why;
  int64_t retry_after_ms;
};

/* A node as the fake store holds it. */
struct stored {
  int64_t id;
  char shape[CLOUD_NAME_LEN];
  char zone[CLOUD_NAME_LEN];
  char state[16];
  char vm_id[CLOUD_ID_LEN];
  char reason[CLOUD_MSG_LEN];
  int spot;
  int attempt;
  int64_t gpus;
  int64_t created_ms, launched_ms, registered_ms, seen_ms, ended_ms;
  int64_t idle_gpus, idle_from_ms;
  int64_t idle_gpu_ms;   /* every idle piece billed, summed */
};

/* An update as the broker got it (strings copied). */
struct rec {
  int64_t job_id;
  enum job_state state;
  char *remote_id;
  char *log_path;
  char *reason;
  int exit_code;
  int64_t at_ms;
};

struct fx {
  uv_loop_t loop;
  uv_timer_t wake;       /* wakes the loop while a test waits */
  char state_dir[64];
  json_t *config;        /* the site config the next open uses */
  void *ctx;             /* the open pool, or NULL */
  int closed;
  struct call calls[MAX_CALLS];
  int ncalls;
  struct plan plan[MAX_PLAN];  /* refusals for the next launches; then
                                  each launch succeeds */
  int nplan, plan_next;
  struct plan term_plan[MAX_PLAN]; /* the same for terminates */
  int nterm_plan, term_plan_next;
  int hold_launches;     /* launches go unanswered until released */
  int64_t vm_launched_ms; /* what a launch answer says of its VM */
  struct fprov *prov;    /* the open provider, or NULL */
  struct cloud_vm vms[MAX_VMS]; /* what a listing answers */
  size_t nvms;
  int lists_answered;
  int providers_open;
  struct stored nodes[MAX_STORED];
  int nnodes;
  struct rec ups[MAX_UPDATES];
  int nups;
};

/* The fake provider's open() gets no argument of the test's: it finds
 * the fixture here. */
static struct fx *the_fx;

static struct call *
log_call(struct fx *f, enum call_kind kind, int64_t node)
{
  struct call *c;

  assert_true(f->ncalls < MAX_CALLS);
  c = &f->calls[f->ncalls++];
  memset(c, 0, sizeof(*c));
  c->kind = kind;
  c->node = node;
  c->at_ms = time_now_ms();
  c->lists_answered = f->lists_answered;
  return c;
}

/* ---- the fake node store ---- */

static struct stored *
stored(struct fx *f, int64_t id)
{
  for (int i = 0; i < f->nnodes; i++)
    if (f->nodes[i].id == id)
      return &f->nodes[i];
  return NULL;
}

static void
copy_str(char *dst, size_t len, const char *s)
{
  snprintf(dst, len, "%s", s != NULL ? s : "");
}

static void
store_write(struct stored *s, const struct adapter_node *n)
{
  copy_str(s->shape, sizeof(s->shape), n->shape);
  copy_str(s->zone, sizeof(s->zone), n->zone);
  copy_str(s->state, sizeof(s->state), n->state);
  copy_str(s->vm_id, sizeof(s->vm_id), n->vm_id);
  copy_str(s->reason, sizeof(s->reason), n->reason);
  s->spot = n->spot;
  s->attempt = n->attempt;
  s->gpus = n->gpus;
  s->launched_ms = n->launched_ms;
  s->registered_ms = n->registered_ms;
  s->seen_ms = n->seen_ms;
  s->ended_ms = n->ended_ms;
  s->idle_gpus = n->idle_gpus;
  s->idle_from_ms = n->idle_from_ms;
}

static int
store_create(void *arg, struct adapter_node *n, char *token, size_t tokenlen,
             struct err *e)
{
  struct fx *f = arg;
  struct stored *s;

  (void)e;
  assert_true(f->nnodes < MAX_STORED);
  s = &f->nodes[f->nnodes++];
  memset(s, 0, sizeof(*s));
  s->id = f->nnodes;
  s->created_ms = n->created_ms;
  store_write(s, n);
  n->id = s->id;
  snprintf(token, tokenlen, "tok-%" PRId64, s->id);
  log_call(f, C_CREATE, s->id);
  return 0;
}

static int
store_update(void *arg, const struct adapter_node *n, struct err *e)
{
  struct fx *f = arg;
  struct stored *s = stored(f, n->id);
  struct call *c;

  if (s == NULL)
    return err_set(e, ERR_NOT_FOUND, "no node %" PRId64, n->id);
  store_write(s, n);
  c = log_call(f, C_UPDATE, n->id);
  copy_str(c->state, sizeof(c->state), n->state);
  c->attempt = n->attempt;
  return 0;
}

static int
store_list(void *arg, adapter_node_cb cb, void *cb_arg, struct err *e)
{
  struct fx *f = arg;

  (void)e;
  for (int i = 0; i < f->nnodes; i++) {
    const struct stored *s = &f->nodes[i];
    struct adapter_node n = {
        .id = s->id,
        .shape = s->shape,
        .zone = s->zone,
        .spot = s->spot,
        .attempt = s->attempt,
        .state = s->state,
        .vm_id = s->vm_id[0] != '\0' ? s->vm_id : NULL,
        .gpus = s->gpus,
        .created_ms = s->created_ms,
        .launched_ms = s->launched_ms,
        .registered_ms = s->registered_ms,
        .seen_ms = s->seen_ms,
        .ended_ms = s->ended_ms,
        .reason = s->reason[0] != '\0' ? s->reason : NULL,
        .idle_gpus = s->idle_gpus,
        .idle_from_ms = s->idle_from_ms,
    };
    int rc;

    if (strcmp(s->state, "ended") == 0)
      continue;
    rc = cb(&n, cb_arg);
    if (rc < 0)
      return rc;
  }
  return 0;
}

static int
store_token(void *arg, int64_t id, char *token, size_t tokenlen,
            struct err *e)
{
  struct fx *f = arg;

  if (stored(f, id) == NULL)
    return err_set(e, ERR_NOT_FOUND, "no node %" PRId64, id);
  snprintf(token, tokenlen, "tok-%" PRId64, id);
  return 0;
}

static int
store_bill_idle(void *arg, const struct adapter_node *n, int64_t from_ms,
                int64_t to_ms, int64_t gpus, struct err *e)
{
  struct fx *f = arg;
  struct stored *s = stored(f, n->id);

  if (s == NULL)
    return err_set(e, ERR_NOT_FOUND, "no node %" PRId64, n->id);
  assert_true(to_ms >= from_ms);
  s->idle_gpu_ms += gpus * (to_ms - from_ms);
  return store_update(arg, n, e);
}

static const struct adapter_node_store fake_store = {
    .create = store_create,
    .update = store_update,
    .list = store_list,
    .token = store_token,
    .bill_idle = store_bill_idle,
};

/* ---- the fake provider ---- */

enum answer_kind { A_LAUNCH, A_LIST, A_TERMINATE };

/* An answer due from the loop. */
struct pending {
  struct list link;
  enum answer_kind kind;
  int held;              /* not before close */
  int call_ix;           /* in fx->calls */
  cloud_launch_cb launch_cb;
  cloud_list_cb list_cb;
  cloud_done_cb done_cb;
  void *arg;
  struct cloud_result r;
  struct cloud_vm vm;
};

/* One open provider (a pool's pctx). */
struct fprov {
  struct fx *f;
  uv_timer_t timer;
  struct list pending;   /* of struct pending, oldest first */
  int closing, closed;
  void (*close_cb)(void *arg);
  void *close_arg;
};

static const struct jsonx_field fake_fields[] = {{"region", JX_STRING},
                                                {NULL, 0}};

static int
fake_open(const struct cloud_env *env, const json_t *config, void **pctx,
          struct err *e)
{
  struct fprov *fp = xcalloc(1, sizeof(*fp));

  (void)config;
  (void)e;
  assert_int_equal(env->nshapes, 2);
  fp->f = the_fx;
  list_init(&fp->pending);
  uv_timer_init(env->loop, &fp->timer);
  fp->timer.data = fp;
  fp->f->providers_open++;
  fp->f->prov = fp;
  *pctx = fp;
  return 0;
}

static void
fprov_free(uv_handle_t *h)
{
  free(h->data);
}

static void
answer(struct fprov *fp, struct pending *a)
{
  struct fx *f = fp->f;

  if (fp->closing) {
    /* The contract: calls still due at close answer "unavailable". */
    memset(&a->r, 0, sizeof(a->r));
    a->r.rc = ERR_UNAVAILABLE;
    a->r.retry_after_ms = -1;
    snprintf(a->r.msg, sizeof(a->r.msg), "provider closing");
  }
  f->calls[a->call_ix].answered_ms = time_now_ms();
  switch (a->kind) {
  case A_LAUNCH:
    a->launch_cb(a->arg, &a->r, a->r.rc == 0 ? &a->vm : NULL);
    break;
  case A_LIST:
    f->lists_answered++;
    if (a->r.rc == 0)
      a->list_cb(a->arg, &a->r, f->vms, f->nvms);
    else
      a->list_cb(a->arg, &a->r, NULL, 0);
    break;
  case A_TERMINATE:
    a->done_cb(a->arg, &a->r);
    break;
  }
}

static void
fake_deliver(uv_timer_t *t)
{
  struct fprov *fp = t->data;
  struct list due, *q, *tmp;

  /* Take the batch first: an answer may make the pool call again. */
  list_init(&due);
  list_move(&fp->pending, &due);
  LIST_FOREACH_SAFE(q, tmp, &due) {
    struct pending *a = LIST_ENTRY(q, struct pending, link);

    list_remove(q);
    if (a->held && !fp->closing) {
      list_insert_tail(&fp->pending, q);
      continue;
    }
    answer(fp, a);
    free(a);
  }
  if (!fp->closing || fp->closed)
    return;
  if (!list_empty(&fp->pending)) {
    uv_timer_start(&fp->timer, fake_deliver, 0, 0);
    return;
  }
  fp->closed = 1;
  fp->f->providers_open--;
  if (fp->f->prov == fp)
    fp->f->prov = NULL;
  if (fp->close_cb != NULL)
    fp->close_cb(fp->close_arg);
  uv_close((uv_handle_t *)&fp->timer, fprov_free);
}

static struct pending *
due(struct fprov *fp, enum answer_kind kind, void *arg)
{
  struct pending *a = xcalloc(1, sizeof(*a));

  a->kind = kind;
  a->arg = arg;
  a->call_ix = fp->f->ncalls - 1;
  a->r.retry_after_ms = -1;
  list_insert_tail(&fp->pending, &a->link);
  uv_timer_start(&fp->timer, fake_deliver, 0, 0);
  return a;
}

static void
fake_launch(void *pctx, const struct cloud_launch *l, cloud_launch_cb cb,
            void *arg)
{
  struct fprov *fp = pctx;
  struct fx *f = fp->f;
  const struct stored *s = stored(f, l->node_id);
  struct call *c = log_call(f, C_LAUNCH, l->node_id);
  char want[64];
  struct pending *a;

  copy_str(c->state, sizeof(c->state), s != NULL ? s->state : "");
  copy_str(c->zone, sizeof(c->zone), l->zone);
  copy_str(c->type, sizeof(c->type), l->shape->type);
  copy_str(c->token, sizeof(c->token), l->token);
  copy_str(c->tag_instance, sizeof(c->tag_instance), l->instance);
  copy_str(c->tag_node, sizeof(c->tag_node), l->node);
  snprintf(want, sizeof(want), "TENBIN_NODE_TOKEN='tok-%" PRId64 "'",
           l->node_id);
  c->script_has_token = strstr(l->script, want) != NULL;
  c->spot = l->spot;
  a = due(fp, A_LAUNCH, arg);
  a->launch_cb = cb;
  a->held = f->hold_launches;
  if (f->plan_next < f->nplan) {
    const struct plan *p = &f->plan[f->plan_next++];

    cloud_refuse(&a->r, p->why, p->retry_after_ms, "refused (%d) in %s",
                 (int)p->why, l->zone);
    return;
  }
  snprintf(a->vm.id, sizeof(a->vm.id), "i-node%" PRId64, l->node_id);
  a->vm.state = CLOUD_VM_PENDING;
  copy_str(a->vm.zone, sizeof(a->vm.zone), l->zone);
  copy_str(a->vm.shape, sizeof(a->vm.shape), l->shape->type);
  a->vm.spot = l->spot;
  a->vm.launched_ms = f->vm_launched_ms;
  copy_str(a->vm.instance, sizeof(a->vm.instance), l->instance);
  copy_str(a->vm.node, sizeof(a->vm.node), l->node);
}

static void
fake_list(void *pctx, const char *instance, cloud_list_cb cb, void *arg)
{
  struct fprov *fp = pctx;
  struct pending *a;

  assert_string_equal(instance, INSTANCE);
  log_call(fp->f, C_LIST, 0);
  a = due(fp, A_LIST, arg);
  a->list_cb = cb;
}

static void
fake_terminate(void *pctx, const struct cloud_vm *vm, cloud_done_cb cb,
               void *arg)
{
  struct fprov *fp = pctx;
  struct call *c = log_call(fp->f, C_TERMINATE, 0);
  struct pending *a;

  copy_str(c->vm_id, sizeof(c->vm_id), vm->id);
  copy_str(c->zone, sizeof(c->zone), vm->zone);
  a = due(fp, A_TERMINATE, arg);
  a->done_cb = cb;
  if (fp->f->term_plan_next < fp->f->nterm_plan) {
    const struct plan *p = &fp->f->term_plan[fp->f->term_plan_next++];

    cloud_refuse(&a->r, p->why, p->retry_after_ms, "refused (%d)",
                 (int)p->why);
  }
}

/* Let the held launches of the open provider answer now. */
static void
release_launches(struct fx *f)
{
  struct list *q;

  assert_non_null(f->prov);
  f->hold_launches = 0;
  LIST_FOREACH(q, &f->prov->pending) {
    LIST_ENTRY(q, struct pending, link)->held = 0;
  }
  uv_timer_start(&f->prov->timer, fake_deliver, 0, 0);
}

static void
fake_close(void *pctx, void (*cb)(void *arg), void *arg)
{
  struct fprov *fp = pctx;

  fp->closing = 1;
  fp->close_cb = cb;
  fp->close_arg = arg;
  uv_timer_start(&fp->timer, fake_deliver, 0, 0);
}

static const struct cloud_provider fake_provider = {
    .kind = "aws",
    .fields = fake_fields,
    .open = fake_open,
    .launch = fake_launch,
    .list = fake_list,
    .terminate = fake_terminate,
    .close = fake_close,
};

/* ---- queries on the records ---- */

/* The index of the first call of kind for node (any node when 0) from
 * index from on, or -1. */
static int
find_call(const struct fx *f, enum call_kind kind, int64_t node, int from)
{
  for (int i = from; i < f->ncalls; i++)
    if (f->calls[i].kind == kind && (node == 0 || f->calls[i].node == node))
      return i;
  return -1;
}

static int
count_calls(const struct fx *f, enum call_kind kind, int64_t node)
{
  int n = 0;

  for (int i = 0; i < f->ncalls; i++)
    if (f->calls[i].kind == kind && (node == 0 || f->calls[i].node == node))
      n++;
  return n;
}

/* Terminate calls for VM id. */
static int
count_terminates(const struct fx *f, const char *vm_id)
{
  int n = 0;

  for (int i = 0; i < f->ncalls; i++)
    if (f->calls[i].kind == C_TERMINATE &&
        strcmp(f->calls[i].vm_id, vm_id) == 0)
      n++;
  return n;
}

/* The launch calls for node, into out[0..max); how many. */
static int
launches(struct fx *f, int64_t node, struct call **out, int max)
{
  int n = 0;

  for (int i = 0; i < f->ncalls && n < max; i++)
    if (f->calls[i].kind == C_LAUNCH && f->calls[i].node == node)
      out[n++] = &f->calls[i];
  return n;
}

static const struct rec *
update_of(const struct fx *f, int64_t job, enum job_state st)
{
  for (int i = 0; i < f->nups; i++)
    if (f->ups[i].job_id == job && f->ups[i].state == st)
      return &f->ups[i];
  return NULL;
}

static int
count_updates(const struct fx *f, int64_t job, enum job_state st)
{
  int n = 0;

  for (int i = 0; i < f->nups; i++)
    if (f->ups[i].job_id == job && f->ups[i].state == st)
      n++;
  return n;
}

static int
state_is(struct fx *f, int64_t node, const char *state)
{
  const struct stored *s = stored(f, node);

  return s != NULL && strcmp(s->state, state) == 0;
}

/* ---- the fixture ---- */

static void
on_update(void *arg, const struct adapter_update *batch, size_t n)
{
  struct fx *f = arg;

  for (size_t i = 0; i < n; i++) {
    const struct adapter_update *u = &batch[i];
    struct rec *r;

    assert_true(f->nups < MAX_UPDATES);
    r = &f->ups[f->nups++];
    r->job_id = u->job_id;
    r->state = u->state;
    r->remote_id = xstrdup(u->remote_id);
    r->log_path = xstrdup(u->log_path);
    r->reason = xstrdup(u->reason);
    r->exit_code = u->exit_code;
    r->at_ms = u->at_ms;
  }
}

/* The default site config: two shapes of one GPU type, two zones, and
 * timeouts long enough that no rule fires unless a test shortens it. */
static json_t *
config_default(void)
{
  json_t *c = json_loads(
      "{\"name\": \"" SITE "\", \"kind\": \"aws\", \"region\": \"r1\","
      " \"zones\": [\"z1\", \"z2\"],"
      " \"shapes\": [{\"name\": \"a\", \"type\": \"p5.48xlarge\","
      "   \"gpu_type\": \"h100\", \"gpus\": 8, \"market\": \"spot-fallback\"},"
      "  {\"name\": \"b\", \"type\": \"p5e.48xlarge\", \"gpu_type\": \"h100\","
      "   \"gpus\": 8}],"
      " \"min_nodes\": 0, \"max_nodes\": 4, \"idle_timeout_s\": 600,"
      " \"boot_timeout_s\": 60, \"lost_after_s\": 60, \"orphan_grace_s\": 0,"
      " \"backoff_s\": 60, \"reconcile_s\": 60,"
      " \"node_agent\": {\"server\": \"http://127.0.0.1:1\","
      "   \"path\": \"/bin/true\"}}",
      0, NULL);

  assert_non_null(c);
  return c;
}

static void
set_int(struct fx *f, const char *key, int64_t v)
{
  json_object_set_new(f->config, key, json_integer((json_int_t)v));
}

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));

  assert_int_equal(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->wake);
  snprintf(f->state_dir, sizeof(f->state_dir), "/tmp/tenbin-cloud-XXXXXX");
  assert_non_null(mkdtemp(f->state_dir));
  f->config = config_default();
  the_fx = f;
  *state = f;
  return 0;
}

static void
on_closed(void *arg)
{
  struct fx *f = arg;

  f->closed = 1;
}

static int
try_open(struct fx *f, const json_t *config, void **ctx, struct err *e)
{
  struct adapter_env env = {
      .loop = &f->loop,
      .site_name = SITE,
      .state_dir = f->state_dir,
      .instance = INSTANCE,
      .update = on_update,
      .update_arg = f,
      .nodes = &fake_store,
      .nodes_arg = f,
  };

  return cloud_open(&fake_provider, &env, config, ctx, e);
}

static void
open_pool(struct fx *f)
{
  struct err e = {0};

  assert_null(f->ctx);
  if (try_open(f, f->config, &f->ctx, &e) != 0)
    fail_msg("open: %s", e.msg);
}

static void
close_pool(struct fx *f)
{
  if (f->ctx == NULL)
    return;
  f->closed = 0;
  adapter_aws_ops.close(f->ctx, on_closed, f);
  f->ctx = NULL;
  /* The callback comes from the loop, never from inside close(). */
  assert_int_equal(f->closed, 0);
  while (!f->closed)
    uv_run(&f->loop, UV_RUN_ONCE);
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

static int
teardown(void **state)
{
  struct fx *f = *state;

  close_pool(f);
  uv_close((uv_handle_t *)&f->wake, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  /* Every provider the pools opened was closed. */
  assert_int_equal(f->providers_open, 0);
  nftw(f->state_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  for (int i = 0; i < f->nups; i++) {
    free(f->ups[i].remote_id);
    free(f->ups[i].log_path);
    free(f->ups[i].reason);
  }
  json_decref(f->config);
  the_fx = NULL;
  free(f);
  return 0;
}

static void
on_wake(uv_timer_t *t)
{
  (void)t;
}

/* Run the loop until cond holds; a guard turns a hang into a failure.
 * The wake timer makes each turn short: a turn that ran the answers of
 * the fake could otherwise sleep until the pool's next tick. */
#define RUN_UNTIL(f, cond)                                                 \
  do {                                                                     \
    int64_t until_ = time_now_ms() + GUARD_MS;                             \
    uv_timer_start(&(f)->wake, on_wake, 5, 5);                             \
    while (!(cond)) {                                                      \
      if (time_now_ms() > until_)                                          \
        fail_msg("%s:%d: never came: %s", __FILE__, __LINE__, #cond);      \
      uv_run(&(f)->loop, UV_RUN_ONCE);                                     \
    }                                                                      \
    uv_timer_stop(&(f)->wake);                                             \
  } while (0)

/* ---- jobs and heartbeats ---- */

static void
spec_init_(struct job_spec *s)
{
  jobspec_init(s);
  s->name = xstrdup("t");
  s->project = xstrdup("p");
  strv_push(&s->argv, "/bin/true");
  s->gpus = 8;
  s->gpu_type = xstrdup("h100");
  s->nodes = 1;
}

/* The autoscaler's order: launch count nodes of shape and release the
 * nodes of ids rel[0..nrel). */
static int
scale(struct fx *f, int shape, int64_t count, const int64_t *rel,
      size_t nrel, struct err *e)
{
  int64_t launch[ADAPTER_MAX_SHAPES] = {0};

  launch[shape] = count;
  return adapter_aws_ops.scale(f->ctx, launch, ADAPTER_MAX_SHAPES, rel, nrel,
                               "released by the test", e);
}

/* Submit job id as the broker does: with no node of room, the
 * autoscaler launches one of the first shape, and the next pass submits
 * the job again. */
static int
submit(struct fx *f, int64_t id, struct err *e)
{
  struct job_spec s;
  struct adapter_job j = {.id = id, .spec = &s};
  int rc;

  spec_init_(&s);
  rc = adapter_aws_ops.submit(f->ctx, &j, e);
  if (rc == ERR_UNAVAILABLE && strstr(e->msg, "autoscaler") != NULL) {
    memset(e, 0, sizeof(*e));
    rc = scale(f, 0, 1, NULL, 0, e);
    if (rc == 0)
      rc = adapter_aws_ops.submit(f->ctx, &j, e);
  }
  jobspec_release(&s);
  return rc;
}

static void
submit_ok(struct fx *f, int64_t id)
{
  struct err e = {0};

  if (submit(f, id, &e) != 0)
    fail_msg("submit %" PRId64 ": %s", id, e.msg);
}

/* Wait until every update pushed so far has arrived: the queue keeps
 * order, and a cancel of a job the pool never had answers with one. */
static void
flush_updates(struct fx *f)
{
  struct adapter_job j = {.id = 999999};
  struct err e = {0};

  assert_int_equal(adapter_aws_ops.cancel(f->ctx, &j, &e), 0);
  RUN_UNTIL(f, update_of(f, 999999, JOB_CANCELLED) != NULL);
  assert_int_equal(f->ups[f->nups - 1].job_id, 999999);
  f->nups--;
  free(f->ups[f->nups].remote_id);
  free(f->ups[f->nups].log_path);
  free(f->ups[f->nups].reason);
}

/* A job's entry in a heartbeat, as agent/node.c writes it. */
static json_t *
job_report(int64_t id, const char *state, int exit_code)
{
  return json_pack("{s:I, s:s, s:i, s:i, s:n, s:s, s:I}", "id",
                   (json_int_t)id, "state", state, "exit_code", exit_code,
                   "signal", 0, "reason", "alloc", "0,1,2,3,4,5,6,7", "at_ms",
                   (json_int_t)time_now_ms());
}

/* A heartbeat body; jobs (an array, or NULL for none) is stolen; notice
 * is the interruption's, or NULL. */
static json_t *
hb_body(json_t *jobs, const char *notice)
{
  json_t *b = json_pack("{s:s, s:s, s:i, s:s, s:o}", "hostname", "vm-1",
                        "agent_version", "test", "gpus", 8, "gpu_type",
                        "h100", "jobs", jobs != NULL ? jobs : json_array());

  assert_non_null(b);
  if (notice != NULL)
    json_object_set_new(b, "interruption",
                        json_pack("{s:s, s:s, s:I}", "provider", "aws",
                                  "notice", notice, "ends_ms",
                                  (json_int_t)time_now_ms() + 120000));
  else
    json_object_set_new(b, "interruption", json_null());
  return b;
}

/* Node node's heartbeat of body (stolen); its answer (new). */
static json_t *
heartbeat(struct fx *f, int64_t node, json_t *body)
{
  json_t *ans = NULL;
  struct err e = {0};
  int rc = adapter_aws_ops.node_heartbeat(f->ctx, node, body, &ans, &e);

  json_decref(body);
  if (rc != 0)
    fail_msg("heartbeat of node %" PRId64 ": %s", node, e.msg);
  assert_non_null(ans);
  return ans;
}

/* A heartbeat reporting one job in state. */
static json_t *
heartbeat_job(struct fx *f, int64_t node, int64_t job, const char *state,
              int exit_code)
{
  json_t *jobs = json_array();

  json_array_append_new(jobs, job_report(job, state, exit_code));
  return heartbeat(f, node, hb_body(jobs, NULL));
}

/* Whether answer's array key holds id. */
static int
has_id(const json_t *ans, const char *key, int64_t id)
{
  const json_t *a = json_object_get(ans, key);
  size_t i;
  json_t *v;

  assert_true(json_is_array(a));
  json_array_foreach(a, i, v) {
    if (json_is_integer(v) && json_integer_value(v) == id)
      return 1;
  }
  return 0;
}

/* Job job submitted, its node launched and registered, the job assigned
 * to it and reported running: the node's id. */
static int64_t
running_job(struct fx *f, int64_t job)
{
  json_t *ans;
  int64_t node;

  submit_ok(f, job);
  node = f->nodes[f->nnodes - 1].id;
  RUN_UNTIL(f, state_is(f, node, "booting"));
  ans = heartbeat(f, node, hb_body(NULL, NULL));
  assert_int_equal(json_array_size(json_object_get(ans, "assign")), 1);
  json_decref(ans);
  ans = heartbeat_job(f, node, job, "running", -1);
  json_decref(ans);
  RUN_UNTIL(f, update_of(f, job, JOB_RUNNING) != NULL);
  return node;
}

/* A VM the fake's listing answers with. */
static void
add_vm(struct fx *f, const char *id, const char *instance, const char *node,
       enum cloud_vm_state st)
{
  struct cloud_vm *vm;

  assert_true(f->nvms < MAX_VMS);
  vm = &f->vms[f->nvms++];
  memset(vm, 0, sizeof(*vm));
  copy_str(vm->id, sizeof(vm->id), id);
  vm->state = st;
  copy_str(vm->zone, sizeof(vm->zone), "z1");
  copy_str(vm->shape, sizeof(vm->shape), "p5.48xlarge");
  copy_str(vm->instance, sizeof(vm->instance), instance);
  copy_str(vm->node, sizeof(vm->node), node);
}

/* ---- launching ---- */

static void
test_node_is_committed_before_its_launch_and_resent_with_same_token(
    void **state)
{
  struct fx *f = *state;
  struct call *l[4];
  char token[96];
  int create_ix, launch_ix;

  f->hold_launches = 1;
  open_pool(f);
  submit_ok(f, 1);
  create_ix = find_call(f, C_CREATE, 1, 0);
  launch_ix = find_call(f, C_LAUNCH, 1, 0);
  assert_true(create_ix >= 0);
  assert_true(launch_ix > create_ix);
  assert_int_equal(launches(f, 1, l, 4), 1);
  /* The store held the node, as launching, when the request left. */
  assert_string_equal(l[0]->state, "launching");
  assert_string_equal(l[0]->tag_instance, INSTANCE);
  assert_string_equal(l[0]->tag_node, "1");
  assert_true(l[0]->script_has_token);
  assert_string_equal(l[0]->zone, "z1");
  assert_true(l[0]->spot);
  snprintf(token, sizeof(token), "%s", l[0]->token);
  assert_int_equal(stored(f, 1)->attempt, 1);

  /* tenbind dies before the cloud answered; a new one opens the pool on
   * the same store and sends the launch again. */
  close_pool(f);
  assert_string_equal(stored(f, 1)->state, "launching");
  assert_string_equal(stored(f, 1)->vm_id, "");
  open_pool(f);
  RUN_UNTIL(f, count_calls(f, C_LAUNCH, 1) == 2);
  assert_int_equal(launches(f, 1, l, 4), 2);
  assert_string_equal(l[1]->token, token);
  assert_string_equal(l[1]->zone, l[0]->zone);
  assert_string_equal(l[1]->type, l[0]->type);
  assert_int_equal(l[1]->spot, l[0]->spot);
  assert_true(l[1]->script_has_token);
  assert_int_equal(stored(f, 1)->attempt, 1);
  /* No second node: the same one was launched again. */
  assert_int_equal(count_calls(f, C_CREATE, 0), 1);
}

static void
test_capacity_moves_zone_then_on_demand_then_shape_then_backs_off(
    void **state)
{
  struct fx *f = *state;
  struct call *l[8];
  struct adapter_capacity cap;
  const struct rec *u;
  struct err e = {0};

  for (int i = 0; i < 6; i++)
    f->plan[f->nplan++] = (struct plan){CLOUD_REFUSED_CAPACITY, -1};
  open_pool(f);
  submit_ok(f, 1);
  RUN_UNTIL(f, update_of(f, 1, JOB_QUEUED) != NULL);
  assert_int_equal(launches(f, 1, l, 8), 6);
  /* Shape a spot in z1, z2; a on demand in z1, z2; shape b in z1, z2. */
  assert_string_equal(l[0]->type, "p5.48xlarge");
  assert_string_equal(l[0]->zone, "z1");
  assert_true(l[0]->spot);
  assert_string_equal(l[1]->type, "p5.48xlarge");
  assert_string_equal(l[1]->zone, "z2");
  assert_true(l[1]->spot);
  assert_string_equal(l[2]->type, "p5.48xlarge");
  assert_string_equal(l[2]->zone, "z1");
  assert_false(l[2]->spot);
  assert_string_equal(l[3]->type, "p5.48xlarge");
  assert_string_equal(l[3]->zone, "z2");
  assert_false(l[3]->spot);
  assert_string_equal(l[4]->type, "p5e.48xlarge");
  assert_string_equal(l[4]->zone, "z1");
  assert_false(l[4]->spot);
  assert_string_equal(l[5]->type, "p5e.48xlarge");
  assert_string_equal(l[5]->zone, "z2");
  /* Each place is a new attempt, hence a new token. */
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < i; k++)
      assert_string_not_equal(l[i]->token, l[k]->token);

  assert_string_equal(stored(f, 1)->state, "ended");
  assert_non_null(strstr(stored(f, 1)->reason, "launch failed"));
  u = update_of(f, 1, JOB_QUEUED);
  assert_non_null(u->reason);
  assert_non_null(strstr(u->reason, "refused"));
  flush_updates(f);
  assert_int_equal(count_updates(f, 1, JOB_QUEUED), 1);

  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.reachable, 0);
  assert_non_null(strstr(cap.detail, "refused"));
  assert_int_equal(cap.jobs_active, 0);
  assert_int_equal(submit(f, 2, &e), ERR_UNAVAILABLE);
  assert_non_null(strstr(e.msg, "refused"));
  /* Backing off launches nothing more. */
  assert_int_equal(count_calls(f, C_CREATE, 0), 1);
}

/* A launch refused for capacity that moves on to a larger shape counts
 * that shape's GPUs while the node lives, and none once it is gone. */
static void
test_a_launch_moved_to_a_larger_shape_counts_its_gpus_until_it_ends(
    void **state)
{
  struct fx *f = *state;
  struct adapter_capacity cap;
  struct adapter_fleet fl;
  struct err e = {0};
  json_t *ans;
  int64_t one = 1;

  json_object_set_new(
      json_array_get(json_object_get(f->config, "shapes"), 1), "gpus",
      json_integer(16));
  /* a spot in z1, z2, a on demand in z1, z2: b in z1 takes it. */
  for (int i = 0; i < 4; i++)
    f->plan[f->nplan++] = (struct plan){CLOUD_REFUSED_CAPACITY, -1};
  open_pool(f);
  assert_int_equal(scale(f, 0, 1, NULL, 0, &e), 0);
  RUN_UNTIL(f, state_is(f, 1, "booting"));
  adapter_aws_ops.fleet(f->ctx, &fl);
  assert_int_equal(fl.nnodes, 1);
  assert_int_equal(fl.nodes[0].shape, 1);
  adapter_fleet_release(&fl);
  /* 16 up or coming, and 3 more nodes of 16 the site may grow by. */
  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.pools[0].grow, 48);
  assert_int_equal(cap.pools[0].total, 64);
  ans = heartbeat(f, 1, hb_body(NULL, NULL));
  json_decref(ans);
  assert_int_equal(scale(f, 0, 0, &one, 1, &e), 0);
  RUN_UNTIL(f, state_is(f, 1, "ended"));
  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.pools[0].grow, 64);
  assert_int_equal(cap.pools[0].total, 64);
}

static void
test_quota_skips_the_other_zones_of_the_market(void **state)
{
  struct fx *f = *state;
  struct call *l[4];

  f->plan[f->nplan++] = (struct plan){CLOUD_REFUSED_QUOTA, -1};
  open_pool(f);
  submit_ok(f, 1);
  RUN_UNTIL(f, state_is(f, 1, "booting"));
  assert_int_equal(launches(f, 1, l, 4), 2);
  assert_string_equal(l[0]->zone, "z1");
  assert_true(l[0]->spot);
  /* A quota is the account's, not the zone's: on demand next. */
  assert_string_equal(l[1]->zone, "z1");
  assert_false(l[1]->spot);
  assert_string_equal(l[1]->type, "p5.48xlarge");
  assert_string_equal(stored(f, 1)->vm_id, "i-node1");
}

static void
test_throttled_launch_is_retried_with_same_token_after_retry_after(
    void **state)
{
  struct fx *f = *state;
  struct call *l[4];

  f->plan[f->nplan++] = (struct plan){CLOUD_REFUSED_THROTTLE, 1000};
  open_pool(f);
  submit_ok(f, 1);
  RUN_UNTIL(f, state_is(f, 1, "booting"));
  assert_int_equal(launches(f, 1, l, 4), 2);
  assert_string_equal(l[1]->token, l[0]->token);
  assert_string_equal(l[1]->zone, l[0]->zone);
  assert_int_equal(l[1]->spot, l[0]->spot);
  assert_int_equal(stored(f, 1)->attempt, 1);
  /* Not before the provider's own wait: a bound the pool guarantees,
   * not a measurement. */
  assert_true(l[0]->answered_ms > 0);
  assert_true(l[1]->at_ms >= l[0]->answered_ms + 1000);
  assert_string_equal(stored(f, 1)->vm_id, "i-node1");
  assert_null(update_of(f, 1, JOB_QUEUED));
}

static void
test_heartbeat_from_ended_node_is_unauthorized(void **state)
{
  struct fx *f = *state;
  json_t *body, *ans = NULL;
  struct err e = {0};
  int64_t size = -1;
  int lists;

  f->plan[f->nplan++] = (struct plan){CLOUD_REFUSED_AUTH, -1};
  set_int(f, "reconcile_s", 1);
  open_pool(f);
  submit_ok(f, 1);
  RUN_UNTIL(f, update_of(f, 1, JOB_QUEUED) != NULL);
  /* Credentials refused: no other zone or shape is tried. */
  assert_int_equal(count_calls(f, C_LAUNCH, 1), 1);
  assert_string_equal(stored(f, 1)->state, "ended");

  body = hb_body(NULL, NULL);
  assert_int_equal(adapter_aws_ops.node_heartbeat(f->ctx, 1, body, &ans, &e),
                   ERR_UNAUTHORIZED);
  assert_null(ans);
  assert_int_equal(adapter_aws_ops.node_log(f->ctx, 1, 1, 0, "x", 1, &size,
                                            &e),
                   ERR_UNAUTHORIZED);
  /* Still so once the pool has forgotten it, a tick later (each tick
   * lists, after it dropped ended nodes). */
  lists = count_calls(f, C_LIST, 0);
  RUN_UNTIL(f, count_calls(f, C_LIST, 0) > lists);
  assert_int_equal(adapter_aws_ops.node_heartbeat(f->ctx, 1, body, &ans, &e),
                   ERR_UNAUTHORIZED);
  assert_int_equal(adapter_aws_ops.node_heartbeat(f->ctx, 99, body, &ans,
                                                  &e),
                   ERR_UNAUTHORIZED);
  json_decref(body);
}

static void
test_launch_answer_after_registration_keeps_node_ready(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct adapter_job j = {.id = 1, .spec = &s, .remote_id = "node-1"};
  struct err e = {0};
  json_t *ans;
  int lists;

  set_int(f, "reconcile_s", 1);
  f->hold_launches = 1;
  open_pool(f);
  submit_ok(f, 1);
  close_pool(f);
  /* Restarted, tenbind sends the launch again and the cloud is slow to
   * answer; the VM had booted, and its agent registers first.  The
   * answer names the first launch's VM, launched long ago, as the
   * listing does. */
  f->vm_launched_ms = time_now_ms() - 3600 * 1000;
  add_vm(f, "i-node1", INSTANCE, "1", CLOUD_VM_RUNNING);
  f->vms[0].launched_ms = f->vm_launched_ms;
  open_pool(f);
  spec_init_(&s);
  assert_int_equal(adapter_aws_ops.adopt(f->ctx, &j, &e), 0);
  jobspec_release(&s);
  RUN_UNTIL(f, count_calls(f, C_LAUNCH, 1) == 2);
  ans = heartbeat(f, 1, hb_body(NULL, NULL));
  assert_int_equal(json_array_size(json_object_get(ans, "assign")), 1);
  json_decref(ans);
  assert_string_equal(stored(f, 1)->state, "idle");
  release_launches(f);
  RUN_UNTIL(f, strcmp(stored(f, 1)->vm_id, "i-node1") == 0);
  lists = count_calls(f, C_LIST, 0);
  RUN_UNTIL(f, count_calls(f, C_LIST, 0) >= lists + 2);
  assert_string_equal(stored(f, 1)->state, "idle");
  assert_int_equal(count_calls(f, C_TERMINATE, 0), 0);
  assert_null(update_of(f, 1, JOB_QUEUED));
}

/* ---- booting and the heartbeat ---- */

static void
test_node_never_heartbeating_is_terminated_after_boot_timeout(void **state)
{
  struct fx *f = *state;
  const struct rec *u;

  set_int(f, "boot_timeout_s", 1);
  open_pool(f);
  submit_ok(f, 1);
  RUN_UNTIL(f, state_is(f, 1, "booting"));
  assert_int_equal(count_terminates(f, "i-node1"), 0);
  RUN_UNTIL(f, count_terminates(f, "i-node1") == 1);
  RUN_UNTIL(f, update_of(f, 1, JOB_QUEUED) != NULL);
  u = update_of(f, 1, JOB_QUEUED);
  assert_non_null(strstr(u->reason, "never registered"));
  RUN_UNTIL(f, state_is(f, 1, "ended"));
  assert_non_null(strstr(stored(f, 1)->reason, "never registered"));
}

static void
test_heartbeat_assigns_job_reports_state_and_acks_it_next_time(void **state)
{
  struct fx *f = *state;
  json_t *ans, *a, *want;
  struct job_spec s;
  const struct rec *u;

  open_pool(f);
  submit_ok(f, 1);
  RUN_UNTIL(f, update_of(f, 1, JOB_SUBMITTED) != NULL);
  RUN_UNTIL(f, state_is(f, 1, "booting"));

  /* The first heartbeat registers the node and assigns the job. */
  ans = heartbeat(f, 1, hb_body(NULL, NULL));
  assert_string_equal(stored(f, 1)->state, "idle");
  assert_true(stored(f, 1)->registered_ms > 0);
  a = json_object_get(ans, "assign");
  assert_int_equal(json_array_size(a), 1);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 0),
                                                      "id")),
                   1);
  spec_init_(&s);
  want = jobspec_to_json(&s);
  assert_true(json_equal(json_object_get(json_array_get(a, 0), "spec"),
                         want));
  json_decref(want);
  jobspec_release(&s);
  assert_false(json_is_true(json_object_get(ans, "stop")));
  assert_true(json_integer_value(json_object_get(ans, "heartbeat_ms")) > 0);
  json_decref(ans);

  /* Running: an update, and no second assignment. */
  ans = heartbeat_job(f, 1, 1, "running", -1);
  assert_int_equal(json_array_size(json_object_get(ans, "assign")), 0);
  json_decref(ans);
  RUN_UNTIL(f, update_of(f, 1, JOB_RUNNING) != NULL);
  assert_string_equal(update_of(f, 1, JOB_RUNNING)->remote_id, "node-1");

  /* Ended: one final update; the ack waits for the next heartbeat. */
  ans = heartbeat_job(f, 1, 1, "failed", 3);
  assert_false(has_id(ans, "ack", 1));
  json_decref(ans);
  RUN_UNTIL(f, update_of(f, 1, JOB_FAILED) != NULL);
  u = update_of(f, 1, JOB_FAILED);
  assert_int_equal(u->exit_code, 3);
  ans = heartbeat_job(f, 1, 1, "failed", 3);
  assert_true(has_id(ans, "ack", 1));
  assert_false(has_id(ans, "cancel", 1));
  json_decref(ans);
  /* The job is gone from the node: nothing more to report or ack. */
  ans = heartbeat(f, 1, hb_body(NULL, NULL));
  assert_false(has_id(ans, "ack", 1));
  json_decref(ans);
  flush_updates(f);
  assert_int_equal(count_updates(f, 1, JOB_FAILED), 1);
  assert_int_equal(count_updates(f, 1, JOB_RUNNING), 1);
}

static void
test_node_log_appends_at_offset_and_conflicts_with_size_held(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  int64_t size = -1;
  char *text = NULL;
  size_t len = 0;
  const char *path;

  open_pool(f);
  running_job(f, 1);
  path = update_of(f, 1, JOB_SUBMITTED)->log_path;
  assert_non_null(path);
  assert_int_equal(strncmp(path, f->state_dir, strlen(f->state_dir)), 0);

  assert_int_equal(adapter_aws_ops.node_log(f->ctx, 1, 1, 0, "hello ", 6,
                                            &size, &e),
                   0);
  assert_int_equal(size, 6);
  assert_int_equal(adapter_aws_ops.node_log(f->ctx, 1, 1, 6, "world", 5,
                                            &size, &e),
                   0);
  assert_int_equal(size, 11);
  /* A resend of bytes already held, or a gap: the size held answers. */
  size = -1;
  assert_int_equal(adapter_aws_ops.node_log(f->ctx, 1, 1, 6, "world", 5,
                                            &size, &e),
                   ERR_CONFLICT);
  assert_int_equal(size, 11);
  size = -1;
  assert_int_equal(adapter_aws_ops.node_log(f->ctx, 1, 1, 20, "x", 1, &size,
                                            &e),
                   ERR_CONFLICT);
  assert_int_equal(size, 11);
  /* Not a job of this node. */
  assert_int_equal(adapter_aws_ops.node_log(f->ctx, 1, 7, 0, "x", 1, &size,
                                            &e),
                   ERR_NOT_FOUND);

  assert_int_equal(file_read(path, 1 << 20, &text, &len, &e), 0);
  assert_int_equal(len, 11);
  assert_memory_equal(text, "hello world", 11);
  free(text);
}

static void
test_cancelled_running_job_goes_out_in_heartbeat_cancel(void **state)
{
  struct fx *f = *state;
  struct adapter_job j = {.id = 1};
  struct err e = {0};
  json_t *ans;

  open_pool(f);
  running_job(f, 1);
  assert_int_equal(adapter_aws_ops.cancel(f->ctx, &j, &e), 0);
  ans = heartbeat_job(f, 1, 1, "running", -1);
  assert_true(has_id(ans, "cancel", 1));
  json_decref(ans);
  /* The agent stops it and says so: the final state is its. */
  ans = heartbeat_job(f, 1, 1, "cancelled", -1);
  json_decref(ans);
  RUN_UNTIL(f, update_of(f, 1, JOB_CANCELLED) != NULL);
  ans = heartbeat_job(f, 1, 1, "cancelled", -1);
  assert_true(has_id(ans, "ack", 1));
  json_decref(ans);
  flush_updates(f);
  assert_int_equal(count_updates(f, 1, JOB_CANCELLED), 1);
}

/* ---- retiring nodes ---- */

/* Job 1 ran on node 1 and ended; the node is idle. */
static void
ran_and_ended(struct fx *f)
{
  json_t *ans;

  running_job(f, 1);
  ans = heartbeat_job(f, 1, 1, "succeeded", 0);
  json_decref(ans);
  RUN_UNTIL(f, update_of(f, 1, JOB_SUCCEEDED) != NULL);
  ans = heartbeat_job(f, 1, 1, "succeeded", 0);
  assert_true(has_id(ans, "ack", 1));
  json_decref(ans);
}

static void
test_submit_takes_a_node_with_room_and_never_launches_one(void **state)
{
  struct fx *f = *state;
  struct adapter_capacity cap;
  struct job_spec s;
  struct adapter_job j = {.id = 1, .spec = &s};
  struct err e = {0};

  open_pool(f);
  spec_init_(&s);
  assert_int_equal(adapter_aws_ops.submit(f->ctx, &j, &e), ERR_UNAVAILABLE);
  assert_non_null(strstr(e.msg, "waiting for the autoscaler"));
  assert_int_equal(count_calls(f, C_CREATE, 0), 0);
  /* What the site may grow by is all of it: 4 nodes of 8. */
  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.pools[0].grow, 32);
  assert_int_equal(cap.pools[0].total, 32);
  assert_int_equal(cap.grows_on_submit, 0);
  assert_int_equal(scale(f, 0, 1, NULL, 0, &e), 0);
  RUN_UNTIL(f, count_calls(f, C_CREATE, 0) == 1);
  /* A launching node's GPUs are up or coming: free, not grow. */
  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.pools[0].grow, 24);
  assert_int_equal(cap.pools[0].total, 32);
  assert_int_equal(cap.pools[0].in_use, 0);
  memset(&e, 0, sizeof(e));
  assert_int_equal(adapter_aws_ops.submit(f->ctx, &j, &e), 0);
  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.pools[0].in_use, 8);
  assert_int_equal(count_calls(f, C_CREATE, 0), 1);
  jobspec_release(&s);
}

static void
test_an_on_demand_job_never_takes_a_spot_node(void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct adapter_job j = {.id = 1, .spec = &s, .on_demand = 1};
  struct err e = {0};

  open_pool(f);
  spec_init_(&s);
  /* Shape a is spot first, b on demand. */
  assert_int_equal(scale(f, 0, 1, NULL, 0, &e), 0);
  assert_int_equal(adapter_aws_ops.submit(f->ctx, &j, &e), ERR_UNAVAILABLE);
  assert_non_null(strstr(e.msg, "no on-demand node"));
  memset(&e, 0, sizeof(e));
  assert_int_equal(scale(f, 1, 1, NULL, 0, &e), 0);
  assert_int_equal(adapter_aws_ops.submit(f->ctx, &j, &e), 0);
  RUN_UNTIL(f, update_of(f, 1, JOB_SUBMITTED) != NULL);
  assert_non_null(strstr(update_of(f, 1, JOB_SUBMITTED)->reason, "node 2"));
  jobspec_release(&s);
}

static void
test_scale_launches_no_more_than_max_nodes(void **state)
{
  struct fx *f = *state;
  struct adapter_fleet fl;
  struct err e = {0};

  set_int(f, "max_nodes", 2);
  open_pool(f);
  assert_int_equal(scale(f, 0, 5, NULL, 0, &e), 0);
  RUN_UNTIL(f, count_calls(f, C_CREATE, 0) == 2);
  adapter_aws_ops.fleet(f->ctx, &fl);
  assert_int_equal(fl.nnodes, 2);
  assert_int_equal(fl.max_nodes, 2);
  assert_int_equal(fl.nodes[0].up, 0);
  assert_string_equal(fl.shapes[0].gpu_type, "h100");
  adapter_fleet_release(&fl);
}

static void
test_released_idle_node_is_terminated_with_the_reason(void **state)
{
  struct fx *f = *state;
  struct adapter_fleet fl;
  struct err e = {0};
  int64_t one = 1;

  open_pool(f);
  ran_and_ended(f);
  adapter_aws_ops.fleet(f->ctx, &fl);
  assert_int_equal(fl.nnodes, 1);
  assert_int_equal(fl.nodes[0].up, 1);
  assert_int_equal(fl.nodes[0].gpus_used, 0);
  adapter_fleet_release(&fl);
  /* Idle nodes are the autoscaler's to release: the pool keeps them. */
  assert_int_equal(count_terminates(f, "i-node1"), 0);
  assert_int_equal(scale(f, 0, 0, &one, 1, &e), 0);
  RUN_UNTIL(f, count_terminates(f, "i-node1") == 1);
  RUN_UNTIL(f, state_is(f, 1, "ended"));
  assert_non_null(strstr(stored(f, 1)->reason, "released by the test"));
}

static void
test_a_busy_node_is_not_released(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  int64_t one = 1;

  open_pool(f);
  running_job(f, 1);
  assert_int_equal(scale(f, 0, 0, &one, 1, &e), 0);
  assert_int_equal(count_terminates(f, "i-node1"), 0);
  assert_string_equal(stored(f, 1)->state, "busy");
}

static void
test_vm_uptime_is_billed_whole_as_job_holds_plus_idle_pieces(void **state)
{
  struct fx *f = *state;
  const struct rec *run, *end;
  const struct stored *s;
  struct err e = {0};
  int64_t one = 1;

  open_pool(f);
  ran_and_ended(f);
  /* Some idle time before the release. */
  RUN_UNTIL(f, time_now_ms() > update_of(f, 1, JOB_SUCCEEDED)->at_ms + 20);
  assert_int_equal(scale(f, 0, 0, &one, 1, &e), 0);
  RUN_UNTIL(f, state_is(f, 1, "ended"));
  run = update_of(f, 1, JOB_RUNNING);
  end = update_of(f, 1, JOB_SUCCEEDED);
  s = stored(f, 1);
  /* The job held the node's 8 GPUs from the time the agent said it ran
   * to the time it said it ended (the broker bills that hold); the idle
   * pieces are the rest of the VM's GPU time, before and after. */
  assert_true(run->at_ms > 0 && end->at_ms >= run->at_ms);
  assert_true(s->launched_ms > 0 && s->ended_ms >= s->launched_ms);
  assert_true(s->idle_gpu_ms > 0);
  assert_int_equal(s->idle_gpu_ms + 8 * (end->at_ms - run->at_ms),
                   8 * (s->ended_ms - s->launched_ms));
  assert_int_equal(s->idle_gpus, 0);
}

static void
test_a_release_never_goes_below_min_nodes(void **state)
{
  struct fx *f = *state;
  struct adapter_capacity cap;
  struct err e = {0};
  json_t *ans;
  int64_t one = 1;
  int lists;

  set_int(f, "min_nodes", 1);
  set_int(f, "reconcile_s", 1);
  open_pool(f);
  assert_int_equal(scale(f, 0, 1, NULL, 0, &e), 0);
  RUN_UNTIL(f, state_is(f, 1, "booting"));
  ans = heartbeat(f, 1, hb_body(NULL, NULL));
  assert_int_equal(json_array_size(json_object_get(ans, "assign")), 0);
  json_decref(ans);
  assert_string_equal(stored(f, 1)->state, "idle");
  /* Released while it is the last one: it is kept. */
  assert_int_equal(scale(f, 0, 0, &one, 1, &e), 0);
  lists = count_calls(f, C_LIST, 0);
  RUN_UNTIL(f, count_calls(f, C_LIST, 0) >= lists + 2);
  assert_int_equal(count_calls(f, C_TERMINATE, 0), 0);
  assert_string_equal(stored(f, 1)->state, "idle");
  assert_int_equal(count_calls(f, C_CREATE, 0), 1);
  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.reachable, 1);
  assert_int_equal(cap.npools, 1);
  assert_int_equal(cap.pools[0].in_use, 0);
}

static void
test_silent_agent_loses_its_jobs_and_node_is_terminated(void **state)
{
  struct fx *f = *state;
  const struct rec *u;
  struct adapter_capacity cap;

  set_int(f, "lost_after_s", 1);
  open_pool(f);
  running_job(f, 1);
  RUN_UNTIL(f, count_terminates(f, "i-node1") == 1);
  RUN_UNTIL(f, update_of(f, 1, JOB_LOST) != NULL);
  u = update_of(f, 1, JOB_LOST);
  assert_non_null(strstr(u->reason, "silent"));
  assert_null(update_of(f, 1, JOB_QUEUED));
  RUN_UNTIL(f, state_is(f, 1, "ended"));
  adapter_aws_ops.capacity(f->ctx, &cap);
  assert_int_equal(cap.jobs_active, 0);
}

static void
test_interruption_requeues_job_as_preempted_and_terminates_node(
    void **state)
{
  struct fx *f = *state;
  json_t *jobs, *ans;
  const struct rec *u;

  open_pool(f);
  running_job(f, 1);
  jobs = json_array();
  json_array_append_new(jobs, job_report(1, "running", -1));
  ans = heartbeat(f, 1, hb_body(jobs, "instance-action terminate"));
  assert_true(has_id(ans, "cancel", 1));
  assert_true(json_is_true(json_object_get(ans, "stop")));
  json_decref(ans);
  assert_int_equal(count_terminates(f, "i-node1"), 1);
  RUN_UNTIL(f, update_of(f, 1, JOB_QUEUED) != NULL);
  u = update_of(f, 1, JOB_QUEUED);
  assert_non_null(strstr(u->reason, "preempted"));
  assert_null(update_of(f, 1, JOB_LOST));
  RUN_UNTIL(f, state_is(f, 1, "ended"));
  /* No job goes to the node any more: a new one is launched. */
  submit_ok(f, 2);
  assert_int_equal(count_calls(f, C_CREATE, 0), 2);
}

/* ---- reconciling with the cloud's listing ---- */

static void
test_orphan_vm_of_ours_is_terminated_after_grace(void **state)
{
  struct fx *f = *state;
  int ix;

  set_int(f, "orphan_grace_s", 1);
  set_int(f, "reconcile_s", 1);
  add_vm(f, "i-orphan", INSTANCE, "999", CLOUD_VM_RUNNING);
  add_vm(f, "i-other", "ffffffffffffffff", "5", CLOUD_VM_RUNNING);
  add_vm(f, "i-gone", INSTANCE, "998", CLOUD_VM_GONE);
  open_pool(f);
  RUN_UNTIL(f, count_terminates(f, "i-orphan") == 1);
  /* Not when first seen: the grace began then. */
  ix = find_call(f, C_TERMINATE, 0, 0);
  assert_true(f->calls[ix].lists_answered >= 2);
  RUN_UNTIL(f, f->lists_answered >= 3);
  assert_int_equal(count_terminates(f, "i-orphan"), 1);
  /* Another broker's VM, and one already gone, are left alone. */
  assert_int_equal(count_terminates(f, "i-other"), 0);
  assert_int_equal(count_terminates(f, "i-gone"), 0);
}

static void
test_failed_reap_of_orphan_is_retried(void **state)
{
  struct fx *f = *state;

  set_int(f, "reconcile_s", 1);
  f->term_plan[f->nterm_plan++] = (struct plan){CLOUD_REFUSED_THROTTLE, -1};
  add_vm(f, "i-orphan", INSTANCE, "999", CLOUD_VM_RUNNING);
  open_pool(f);
  RUN_UNTIL(f, count_terminates(f, "i-orphan") == 2);
}

static void
test_listed_vm_of_unanswered_launch_is_adopted(void **state)
{
  struct fx *f = *state;
  json_t *ans;

  /* tenbind dies with node 1's launch unanswered ... */
  f->hold_launches = 1;
  open_pool(f);
  submit_ok(f, 1);
  close_pool(f);
  assert_string_equal(stored(f, 1)->vm_id, "");
  /* ... and the cloud had made the VM.  The relaunch is throttled, and
   * the listing finds the VM first (no orphan grace: it would be
   * reaped at once were it not adopted). */
  f->hold_launches = 0;
  f->plan[f->nplan++] = (struct plan){CLOUD_REFUSED_THROTTLE, 60000};
  add_vm(f, "i-made", INSTANCE, "1", CLOUD_VM_RUNNING);
  open_pool(f);
  RUN_UNTIL(f, f->lists_answered >= 1);
  assert_string_equal(stored(f, 1)->vm_id, "i-made");
  assert_string_equal(stored(f, 1)->state, "booting");
  assert_int_equal(count_terminates(f, "i-made"), 0);
  assert_int_equal(count_calls(f, C_CREATE, 0), 1);
  /* Its agent registers as any other. */
  ans = heartbeat(f, 1, hb_body(NULL, NULL));
  json_decref(ans);
  assert_string_equal(stored(f, 1)->state, "idle");
}

static void
test_adopt_attaches_job_to_its_node_and_loses_one_of_unknown_node(
    void **state)
{
  struct fx *f = *state;
  struct job_spec s;
  struct adapter_job j = {.id = 1, .spec = &s, .remote_id = "node-1"};
  struct err e = {0};
  json_t *ans;

  open_pool(f);
  submit_ok(f, 1);
  RUN_UNTIL(f, state_is(f, 1, "booting"));
  close_pool(f);

  /* After a restart the broker re-attaches its jobs. */
  open_pool(f);
  spec_init_(&s);
  assert_int_equal(adapter_aws_ops.adopt(f->ctx, &j, &e), 0);
  j.id = 2;
  j.remote_id = "node-77";
  assert_int_equal(adapter_aws_ops.adopt(f->ctx, &j, &e), 0);
  jobspec_release(&s);
  RUN_UNTIL(f, update_of(f, 2, JOB_LOST) != NULL);
  ans = heartbeat(f, 1, hb_body(NULL, NULL));
  assert_true(json_array_size(json_object_get(ans, "assign")) == 1);
  assert_int_equal(json_integer_value(json_object_get(
                       json_array_get(json_object_get(ans, "assign"), 0),
                       "id")),
                   1);
  json_decref(ans);
  assert_null(update_of(f, 1, JOB_LOST));
}

/* ---- the config ---- */

static void
test_config_is_refused_naming_the_field(void **state)
{
  static const struct {
    const char *key;   /* set to value ... */
    const char *value;
    const char *field; /* ... and the error names this */
  } cases[] = {
      {"min_nodes", "5", "min_nodes"},
      {"idle_timeout_s", "-1", "idle_timeout_s"},
      {"boot_timeout_s", "-5", "boot_timeout_s"},
      {"colour", "\"blue\"", "colour"},
      {"shapes",
       "[{\"name\": \"a\", \"type\": \"p5.48xlarge\", \"gpus\": 8}]",
       "shapes[0].gpu_type"},
      {"zones", "[]", "zones"},
      {"shapes",
       "[{\"name\": \"a\", \"type\": \"p5.48xlarge\", \"gpu_type\": "
       "\"h100\", \"gpus\": 8, \"market\": \"cheap\"}]",
       "shapes[0].market"},
  };
  struct fx *f = *state;

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    json_t *c = config_default();
    json_t *v = json_loads(cases[i].value, JSON_DECODE_ANY, NULL);
    struct err e = {0};
    void *ctx = NULL;
    int rc;

    assert_non_null(v);
    json_object_set_new(c, cases[i].key, v);
    rc = try_open(f, c, &ctx, &e);
    json_decref(c);
    if (rc != ERR_CONFIG || e.code != ERR_CONFIG ||
        strstr(e.msg, cases[i].field) == NULL)
      fail_msg("%s = %s: got %d '%s', wanted ERR_CONFIG naming '%s'",
               cases[i].key, cases[i].value, rc, e.msg, cases[i].field);
    assert_null(ctx);
    assert_int_equal(f->providers_open, 0);
  }
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_node_is_committed_before_its_launch_and_resent_with_same_token),
      T(test_capacity_moves_zone_then_on_demand_then_shape_then_backs_off),
      T(test_a_launch_moved_to_a_larger_shape_counts_its_gpus_until_it_ends),
      T(test_quota_skips_the_other_zones_of_the_market),
      T(test_throttled_launch_is_retried_with_same_token_after_retry_after),
      T(test_heartbeat_from_ended_node_is_unauthorized),
      T(test_launch_answer_after_registration_keeps_node_ready),
      T(test_node_never_heartbeating_is_terminated_after_boot_timeout),
      T(test_heartbeat_assigns_job_reports_state_and_acks_it_next_time),
      T(test_node_log_appends_at_offset_and_conflicts_with_size_held),
      T(test_cancelled_running_job_goes_out_in_heartbeat_cancel),
      T(test_vm_uptime_is_billed_whole_as_job_holds_plus_idle_pieces),
      T(test_a_release_never_goes_below_min_nodes),
      T(test_submit_takes_a_node_with_room_and_never_launches_one),
      T(test_scale_launches_no_more_than_max_nodes),
      T(test_an_on_demand_job_never_takes_a_spot_node),
      T(test_released_idle_node_is_terminated_with_the_reason),
      T(test_a_busy_node_is_not_released),
      T(test_silent_agent_loses_its_jobs_and_node_is_terminated),
      T(test_interruption_requeues_job_as_preempted_and_terminates_node),
      T(test_orphan_vm_of_ours_is_terminated_after_grace),
      T(test_failed_reap_of_orphan_is_retried),
      T(test_listed_vm_of_unanswered_launch_is_adopted),
      T(test_adopt_attaches_job_to_its_node_and_loses_one_of_unknown_node),
      T(test_config_is_refused_naming_the_field),
  };
#undef T

  return cmocka_run_group_tests(tests, NULL, NULL);
}
