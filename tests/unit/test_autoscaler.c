/*
 * Tests of tenbind's autoscaler driver (broker/autoscaler.c): demand
 * from the scheduler's pass, plans applied through ops->scale, boots
 * learned and stored, caps and budgets, and every decision in the log.
 *
 * Each test runs a real broker on its own uv loop with a real SQLite
 * file, an owned local site (its shim is this binary) and a fake
 * elastic kind, "fakecloud", defined here and put in front of the
 * broker through broker_config.adapters.  The fake is cloud.c in
 * miniature: nodes in memory, committed through the broker's node
 * store; scale() records what it was told and launches nodes that stay
 * launching until the test brings them up; submit() puts a job on a
 * node with room or says that it waits for the autoscaler.
 *
 * The autoscaler ticks when the test says so.  policy.burst.tick_s is
 * an hour, so its timer fires once, at start; fire_tick() starts that
 * same timer for one shot, with a callback that counts it.  A pass
 * with demand ticks by itself unless a tick came within a second:
 * passes_tick() allows that, quiet() rules it out, so a test never
 * waits to see that nothing happens.  The time guard only turns a hang
 * into a failure.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/local.h"
#include "adapters/update_queue.h"
#include "broker/broker.h"
#include "broker/broker_internal.h"
#include "policies/burst.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

/* A guard against a hang, never a timing assertion. */
#define GUARD_NS (60ull * 1000 * 1000 * 1000)
#define FAKE_MAX_NODES 16
#define FAKE_MAX_JOBS 16
#define FAKE_MAX_SHAPES 4
/* scale_last_ms far ahead: no pass ticks on its own. */
#define NO_PASS_TICK (INT64_MAX / 4)

/* ---- the fake elastic kind ---- */

struct fake_node {
  int64_t id;
  int shape;
  int up, ended;
  int64_t created_ms, registered_ms, idle_since_ms, ended_ms;
  int64_t gpus_used;
  char reason[BURST_REASON_LEN + 64];
};

struct fake_job {
  int64_t id;
  size_t node;              /* index in nodes */
  int64_t gpus;
  int on_demand;            /* as the broker asked at submit */
};

struct fake {
  struct adapter_queue q;
  const struct adapter_node_store *store;
  void *store_arg;
  struct adapter_shape shapes[FAKE_MAX_SHAPES];
  size_t nshapes;
  int64_t min_nodes, max_nodes, idle_timeout_ms;
  struct adapter_burst burst;
  int backing_off;          /* fleet() says launches are refused */
  struct fake_node nodes[FAKE_MAX_NODES];
  size_t nnodes;
  struct fake_job jobs[FAKE_MAX_JOBS];
  size_t njobs;
  /* what scale() was told */
  int scales;
  int64_t launched[FAKE_MAX_SHAPES];    /* over every call */
  int64_t last_launch[FAKE_MAX_SHAPES]; /* of the last call */
  int64_t released[FAKE_MAX_NODES];
  size_t nreleased;
  char why[BURST_REASON_LEN + 64];
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* The open fake site: the broker opens it, the test drives it. */
static struct fake *fake;
/* Nodes the next fake_open starts with (carry_nodes()). */
static struct fake_node carried[FAKE_MAX_NODES];
static size_t ncarried;

static int64_t
fake_live(const struct fake *k)
{
  int64_t n = 0;

  for (size_t i = 0; i < k->nnodes; i++)
    n += !k->nodes[i].ended;
  return n;
}

static void
fake_record(struct fake *k, struct fake_node *n, struct adapter_node *v)
{
  const struct adapter_shape *s = &k->shapes[n->shape];

  memset(v, 0, sizeof(*v));
  v->id = n->id;
  v->shape = s->name;
  v->zone = "fake-1";
  v->spot = s->spot;
  v->attempt = 1;
  v->state = n->ended ? "ended"
             : !n->up ? "launching"
             : n->gpus_used > 0 ? "busy"
                                : "idle";
  v->gpus = s->gpus;
  v->gpu_type = s->gpu_type;
  v->created_ms = n->created_ms;
  v->launched_ms = n->created_ms;
  v->registered_ms = n->registered_ms;
  v->ended_ms = n->ended_ms;
  v->reason = n->reason[0] != '\0' ? n->reason : NULL;
}

static void
fake_save(struct fake *k, struct fake_node *n)
{
  struct adapter_node v;
  struct err e = {0};

  fake_record(k, n, &v);
  if (k->store->update(k->store_arg, &v, &e) < 0)
    fail_msg("recording node %" PRId64 ": %s", n->id, e.msg);
}

static void
fake_push(struct fake *k, int64_t job_id, enum job_state st,
          const struct fake_node *n, const char *reason)
{
  struct adapter_update u = {.job_id = job_id,
                             .state = st,
                             .reason = reason,
                             .exit_code = job_state_is_final(st) ? 0 : -1};
  char remote[32];

  if (n != NULL) {
    snprintf(remote, sizeof(remote), "node-%" PRId64, n->id);
    u.remote_id = remote;
  }
  adapter_queue_push(&k->q, &u);
}

static int
fake_read_shapes(struct fake *k, const json_t *shapes, struct err *e)
{
  static const struct jsonx_field fields[] = {{"name", JX_STRING},
                                              {"gpu_type", JX_STRING},
                                              {"gpus", JX_INT},
                                              {"spot", JX_BOOL},
                                              {NULL, 0}};
  size_t i;
  json_t *v;

  if (!json_is_array(shapes) || json_array_size(shapes) == 0 ||
      json_array_size(shapes) > FAKE_MAX_SHAPES)
    return err_set(e, ERR_CONFIG, "field 'shapes': 1 to %d shapes",
                   FAKE_MAX_SHAPES);
  json_array_foreach(shapes, i, v) {
    struct adapter_shape *s = &k->shapes[i];
    const char *name = jsonx_str(v, "name");
    const char *type = jsonx_str(v, "gpu_type");
    char where[32];

    snprintf(where, sizeof(where), "shapes[%zu].", i);
    if (!json_is_object(v))
      return err_set(e, ERR_CONFIG, "field 'shapes[%zu]' must be an object",
                     i);
    if (jsonx_check(v, fields, where, e) < 0)
      return ERR_CONFIG;
    if (name == NULL || strlen(name) >= sizeof(s->name) || type == NULL ||
        strlen(type) >= sizeof(s->gpu_type))
      return err_set(e, ERR_CONFIG, "field '%sname' and 'gpu_type': "
                     "required, short", where);
    if (jsonx_int(v, "gpus", 1, 64, 8, &s->gpus, where, e) < 0)
      return ERR_CONFIG;
    snprintf(s->name, sizeof(s->name), "%s", name);
    snprintf(s->gpu_type, sizeof(s->gpu_type), "%s", type);
    s->spot = jsonx_bool(v, "spot", 0);
  }
  k->nshapes = i;
  return 0;
}

/* A reopened fake starts with no nodes, unless the test carried some
 * over: what a restarted broker knows of past boots then comes from its
 * nodes table alone. */
static int
fake_open(const struct adapter_env *env, const json_t *config, void **ctx,
          struct err *e)
{
  static const struct jsonx_field fields[] = {
      {"name", JX_STRING},     {"kind", JX_STRING},
      {"shapes", JX_ARRAY},    {"min_nodes", JX_INT},
      {"max_nodes", JX_INT},   {"idle_timeout_s", JX_INT},
      {"burst", JX_OBJECT},    {NULL, 0}};
  struct fake *k = xcalloc(1, sizeof(*k));
  int64_t idle_s = 0;
  int rc = jsonx_check(config, fields, "", e);

  if (rc == 0)
    rc = fake_read_shapes(k, json_object_get(config, "shapes"), e);
  if (rc == 0)
    rc = jsonx_int(config, "max_nodes", 1, FAKE_MAX_NODES, 4, &k->max_nodes,
                   "", e);
  if (rc == 0)
    rc = jsonx_int(config, "min_nodes", 0, k->max_nodes, 0, &k->min_nodes,
                   "", e);
  if (rc == 0)
    rc = jsonx_int(config, "idle_timeout_s", 0, 7 * 86400, 600, &idle_s, "",
                   e);
  if (rc == 0)
    rc = adapter_burst_read(json_object_get(config, "burst"), &k->burst, e);
  if (rc < 0) {
    free(k);
    e->code = ERR_CONFIG;
    return ERR_CONFIG;
  }
  k->idle_timeout_ms = idle_s * 1000;
  memcpy(k->nodes, carried, sizeof(carried));
  k->nnodes = ncarried;
  ncarried = 0;
  k->store = env->nodes;
  k->store_arg = env->nodes_arg;
  adapter_queue_init(&k->q, env->loop, env->update, env->update_arg);
  fake = k;
  *ctx = k;
  return 0;
}

static int
fake_submit(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct fake *k = ctx;
  const struct job_spec *spec = job->spec;
  struct fake_node *best = NULL;
  struct fake_job *j;
  char why[64];

  if (k->njobs == FAKE_MAX_JOBS)
    return err_set(e, ERR_UNAVAILABLE, "the fake holds %d jobs",
                   FAKE_MAX_JOBS);
  for (size_t i = 0; i < k->nnodes; i++) {
    struct fake_node *n = &k->nodes[i];
    const struct adapter_shape *s = &k->shapes[n->shape];

    if (n->ended || (job->on_demand && s->spot) ||
        (spec->gpu_type != NULL && strcmp(spec->gpu_type, s->gpu_type) != 0) ||
        s->gpus - n->gpus_used < spec->gpus)
      continue;
    if (best == NULL || (n->up && !best->up))
      best = n;
  }
  if (best == NULL)
    return err_set(e, ERR_UNAVAILABLE,
                   "no %snode has %" PRId64 " GPUs free: waiting for the "
                   "autoscaler to launch one",
                   job->on_demand ? "on-demand " : "", spec->gpus);
  j = &k->jobs[k->njobs++];
  *j = (struct fake_job){.id = job->id,
                         .node = (size_t)(best - k->nodes),
                         .gpus = spec->gpus,
                         .on_demand = job->on_demand};
  best->gpus_used += spec->gpus;
  snprintf(why, sizeof(why), "on node %" PRId64 " (%s)", best->id,
           best->up ? "ready" : "launching");
  fake_push(k, job->id, JOB_SUBMITTED, best, why);
  return 0;
}

static struct fake_job *
fake_job(struct fake *k, int64_t id)
{
  for (size_t i = 0; i < k->njobs; i++)
    if (k->jobs[i].id == id)
      return &k->jobs[i];
  return NULL;
}

/* Job j leaves its node, which is idle from now when it was the last. */
static void
fake_detach(struct fake *k, struct fake_job *j)
{
  struct fake_node *n = &k->nodes[j->node];

  n->gpus_used -= j->gpus;
  if (n->gpus_used == 0)
    n->idle_since_ms = time_now_ms();
  *j = k->jobs[--k->njobs];
}

static int
fake_cancel(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct fake *k = ctx;
  struct fake_job *j = fake_job(k, job->id);

  (void)e;
  fake_push(k, job->id, JOB_CANCELLED, NULL, "cancelled");
  if (j != NULL)
    fake_detach(k, j);
  return 0;
}

/* The fake forgets its nodes when it closes, and their jobs with them. */
static int
fake_adopt(void *ctx, const struct adapter_job *job, struct err *e)
{
  (void)e;
  fake_push(ctx, job->id, JOB_LOST, NULL, "its node is gone");
  return 0;
}

/* As cloud_capacity: live nodes' GPUs, and what the site may grow by. */
static void
fake_capacity(void *ctx, struct adapter_capacity *out)
{
  struct fake *k = ctx;
  int64_t live = fake_live(k);

  memset(out, 0, sizeof(*out));
  out->reachable = 1;
  out->nodes = k->max_nodes;
  out->grow_ms = k->burst.boot_ms;
  out->jobs_active = (int64_t)k->njobs;
  for (size_t i = 0; i < k->nshapes; i++) {
    const struct adapter_shape *s = &k->shapes[i];
    struct adapter_gpu_pool *g = NULL;

    for (int p = 0; p < out->npools; p++)
      if (strcmp(out->pools[p].type, s->gpu_type) == 0)
        g = &out->pools[p];
    if (g == NULL) {
      g = &out->pools[out->npools++];
      snprintf(g->type, sizeof(g->type), "%s", s->gpu_type);
    }
    if (s->gpus > g->per_node)
      g->per_node = s->gpus;
  }
  for (size_t i = 0; i < k->nnodes; i++) {
    const struct fake_node *n = &k->nodes[i];
    const struct adapter_shape *s = &k->shapes[n->shape];

    for (int p = 0; p < out->npools && !n->ended; p++)
      if (strcmp(out->pools[p].type, s->gpu_type) == 0) {
        out->pools[p].total += s->gpus;
        out->pools[p].in_use += n->gpus_used;
      }
  }
  for (int p = 0; p < out->npools; p++) {
    struct adapter_gpu_pool *g = &out->pools[p];

    g->grow = (k->max_nodes - live) * g->per_node;
    if (g->grow < 0)
      g->grow = 0;
    g->total += g->grow;
  }
}

static void
fake_queue_closed(uv_handle_t *h)
{
  struct fake *k = (struct fake *)((char *)h - offsetof(struct fake, q) -
                                   offsetof(struct adapter_queue, timer));

  if (k->close_cb != NULL)
    k->close_cb(k->close_arg);
  if (fake == k)
    fake = NULL;
  free(k);
}

static void
fake_close(void *ctx, void (*cb)(void *arg), void *arg)
{
  struct fake *k = ctx;

  k->close_cb = cb;
  k->close_arg = arg;
  adapter_queue_close(&k->q, fake_queue_closed);
}

/* Never called: the test makes nodes come up itself.  Its presence
 * makes the kind elastic (adapter_is_elastic). */
static int
fake_heartbeat(void *ctx, int64_t node_id, const json_t *req,
               json_t **answer, struct err *e)
{
  (void)ctx;
  (void)node_id;
  (void)req;
  (void)answer;
  return err_set(e, ERR_UNAUTHORIZED, "the fake's nodes have no agent");
}

static void
fake_fleet(void *ctx, struct adapter_fleet *out)
{
  struct fake *k = ctx;

  memset(out, 0, sizeof(*out));
  memcpy(out->shapes, k->shapes, sizeof(k->shapes));
  out->nshapes = k->nshapes;
  out->nodes = xcalloc(k->nnodes + 1, sizeof(*out->nodes));
  for (size_t i = 0; i < k->nnodes; i++) {
    const struct fake_node *n = &k->nodes[i];

    if (n->ended)
      continue;
    out->nodes[out->nnodes++] = (struct adapter_fleet_node){
        .id = n->id,
        .shape = n->shape,
        .up = n->up,
        .gpus_used = n->gpus_used,
        .launched_ms = n->created_ms,
        .registered_ms = n->registered_ms,
        .idle_since_ms = n->idle_since_ms};
  }
  out->min_nodes = k->min_nodes;
  out->max_nodes = k->max_nodes;
  out->idle_timeout_ms = k->idle_timeout_ms;
  out->burst = k->burst;
  out->backing_off = k->backing_off;
}

static int
fake_scale(void *ctx, const int64_t *launch, size_t nshapes,
           const int64_t *release, size_t nrelease, const char *why,
           struct err *e)
{
  struct fake *k = ctx;

  k->scales++;
  snprintf(k->why, sizeof(k->why), "%s", why != NULL ? why : "");
  memset(k->last_launch, 0, sizeof(k->last_launch));
  for (size_t r = 0; r < nrelease && fake_live(k) > k->min_nodes; r++) {
    for (size_t i = 0; i < k->nnodes; i++) {
      struct fake_node *n = &k->nodes[i];

      if (n->id != release[r] || n->ended || !n->up || n->gpus_used > 0)
        continue;
      n->ended = 1;
      n->ended_ms = time_now_ms();
      snprintf(n->reason, sizeof(n->reason), "%s", k->why);
      fake_save(k, n);
      if (k->nreleased < FAKE_MAX_NODES)
        k->released[k->nreleased++] = n->id;
    }
  }
  for (size_t s = 0; s < nshapes && s < k->nshapes; s++) {
    for (int64_t i = 0; i < launch[s] && fake_live(k) < k->max_nodes; i++) {
      struct fake_node *n;
      struct adapter_node v;
      char token[96];

      if (k->nnodes == FAKE_MAX_NODES)
        return err_set(e, ERR_UNAVAILABLE, "the fake holds %d nodes",
                       FAKE_MAX_NODES);
      n = &k->nodes[k->nnodes];
      memset(n, 0, sizeof(*n));
      n->shape = (int)s;
      n->created_ms = time_now_ms();
      n->idle_since_ms = n->created_ms;
      fake_record(k, n, &v);
      if (k->store->create(k->store_arg, &v, token, sizeof(token), e) < 0)
        return e->code;
      n->id = v.id;
      k->nnodes++;
      k->launched[s]++;
      k->last_launch[s]++;
    }
  }
  return 0;
}

static const struct adapter_ops fake_ops = {
    .kind = "fakecloud",
    .api_version = ADAPTER_API_VERSION,
    .open = fake_open,
    .submit = fake_submit,
    .cancel = fake_cancel,
    .adopt = fake_adopt,
    .capacity = fake_capacity,
    .close = fake_close,
    .node_heartbeat = fake_heartbeat,
    .fleet = fake_fleet,
    .scale = fake_scale,
};

static const struct adapter_ops *const kinds[] = {&adapter_local_ops,
                                                  &fake_ops, NULL};

/* Node i comes up boot_ms after its launch: its agent registered. */
static void
fake_node_up(size_t i, int64_t boot_ms)
{
  struct fake_node *n = &fake->nodes[i];

  assert_true(i < fake->nnodes);
  n->up = 1;
  n->registered_ms = n->created_ms + boot_ms;
  n->idle_since_ms = n->registered_ms;
  fake_save(fake, n);
}

/* Job id, on a node, starts running there. */
static void
fake_job_runs(int64_t id)
{
  struct fake_job *j = fake_job(fake, id);

  assert_non_null(j);
  fake_push(fake, id, JOB_RUNNING, &fake->nodes[j->node], NULL);
}

/* Job id ends with exit 0 and leaves its node. */
static void
fake_job_ends(int64_t id)
{
  struct fake_job *j = fake_job(fake, id);

  assert_non_null(j);
  fake_push(fake, id, JOB_SUCCEEDED, &fake->nodes[j->node], "exit code 0");
  fake_detach(fake, j);
}

/* ---- fixture ---- */

#define ONPREM                                                               \
  "{\"name\": \"onprem\", \"kind\": \"local\", \"gpus\": {\"h100\": 2},"    \
  " \"cost\": {\"owned\": {\"capex_per_node\": 350000, \"nodes\": 12,"      \
  " \"years\": 4, \"support_per_year\": 0.10, \"power_kw_busy\": 7.0,"      \
  " \"power_kw_idle\": 2.0, \"pue\": 1.4, \"dollars_per_kwh\": 0.09,"       \
  " \"staff_per_year\": 40000}}}"
#define P5 "[{\"name\": \"p5\", \"gpu_type\": \"h100\", \"gpus\": 8}]"
#define RENTED "{\"rented\": {\"per_gpu_hour\": {\"h100\": 6.88}}}"
/* The cloud site: 8-GPU nodes at $55.04/h, a 5-minute boot assumed, no
 * cool-down and no forecast (nothing here has an hour of history). */
#define CLOUD_WITH(shapes, burst, cost)                                      \
  "[" ONPREM ", {\"name\": \"cloud\", \"kind\": \"fakecloud\", \"shapes\": " \
  shapes ", \"max_nodes\": 4, \"idle_timeout_s\": 600, \"burst\": {"        \
  "\"boot_s\": 300, \"cooldown_s\": 0, \"forecast\": false" burst "},"      \
  " \"cost\": " cost "}]"
#define SITES CLOUD_WITH(P5, "", RENTED)
#define BURST "{\"tick_s\": 3600}"
#define CLOUD 1 /* the cloud site's index */

struct fx {
  uv_loop_t loop;
  uv_timer_t wake;  /* wakes the loop to re-check */
  char dir[64];
  char db_path[128];
  char self[PATH_MAX];
  struct broker *b;
  int closed;
  int turn;         /* uv_run() calls so far (broker_fx.h) */
  int ticks;        /* fired by fire_tick() */
  int quiet;        /* no pass ticks by itself */
  int64_t owned;    /* the job keeping the owned site busy, or 0 */
  char go[128];     /* its end */
};

/* The fixture both broker tests share, over struct fx. */
#include "broker_fx.h"

static struct fx *cur;
static uv_timer_cb scale_cb;


static int
open_broker(struct fx *f, const char *sites_text, const char *burst_text,
            struct err *e)
{
  json_t *sites = parse(sites_text);
  json_t *burst = parse(burst_text);
  json_t *wait = parse("{\"default\": 100}");
  struct broker_config cfg = {
      .state_dir = f->dir,
      .db_path = f->db_path,
      .self_exe = f->self,
      .wait_value = wait,
      .sites = sites,
      .tick_ms = 50,
      .stage_poll_ms = 20,
      .burst = burst,
      .adapters = kinds,
  };
  int rc;

  assert_null(f->b);
  rc = broker_new(&f->loop, &cfg, &f->b, e);
  json_decref(sites);
  json_decref(burst);
  json_decref(wait);
  return rc;
}

static struct scale_view
view(struct fx *f)
{
  struct scale_view v;

  assert_int_equal(broker_scale_view(f->b, "cloud", &v), 1);
  return v;
}

static int
ticked_once(struct fx *f, const void *arg)
{
  (void)arg;
  return view(f).at_ms > 0;
}

/* Open the broker and let its autoscaler's first tick (at start) run. */
static void
start(struct fx *f, const char *sites_text, const char *burst_text)
{
  struct err e = {0};

  if (open_broker(f, sites_text, burst_text, &e) < 0)
    fail_msg("broker_new: %s", e.msg);
  assert_non_null(fake);
  assert_true(run_until(f, ticked_once, NULL));
  f->quiet = 0;
}

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));

  fx_open(f, "/tmp/tenbin-ascale-XXXXXX");
  snprintf(f->go, sizeof(f->go), "%s/go", f->dir);
  cur = f;
  *state = f;
  return 0;
}

/* Close the broker (to open another on its state): its fake site is
 * gone with it. */
static void
restart_close(struct fx *f)
{
  close_broker(f);
  assert_null(fake);
}

static int
owned_done(struct fx *f, const void *arg)
{
  (void)arg;
  return job_state_is_final(state_of(f, f->owned));
}

static int
teardown(void **state)
{
  struct fx *f = *state;

  /* The owned site's job ends before the broker goes: no process of
   * this test outlives it. */
  if (f->owned > 0 && f->b != NULL) {
    close(open(f->go, O_WRONLY | O_CREAT, 0600));
    assert_true(run_until(f, owned_done, NULL));
  }
  restart_close(f);
  /* Every handle the broker and its sites opened is closed. */
  fx_close(f);
  cur = NULL;
  free(f);
  return 0;
}

/* ---- driving the autoscaler ---- */

static void
on_tick(uv_timer_t *t)
{
  cur->ticks++;
  scale_cb(t);
  if (cur->quiet)
    cur->b->scale_last_ms = NO_PASS_TICK;
}

static int
ticks_reach(struct fx *f, const void *arg)
{
  return f->ticks >= *(const int *)arg;
}

/* One tick of the autoscaler now: its own timer, for one shot. */
static void
fire_tick(struct fx *f)
{
  int want = f->ticks + 1;

  if (f->b->scale_timer.timer_cb != on_tick)
    scale_cb = f->b->scale_timer.timer_cb;
  uv_timer_start(&f->b->scale_timer, on_tick, 0, 0);
  assert_true(run_until(f, ticks_reach, &want));
}

/* A pass that sees demand ticks at once (no tick came within 1 s). */
static void
passes_tick(struct fx *f)
{
  f->quiet = 0;
  f->b->scale_last_ms = 0;
}

/* No pass ticks by itself: only fire_tick() does. */
static void
quiet(struct fx *f)
{
  f->quiet = 1;
  f->b->scale_last_ms = NO_PASS_TICK;
}

static int
scales_reach(struct fx *f, const void *arg)
{
  (void)f;
  return fake->scales >= *(const int *)arg;
}

static void
wait_scales(struct fx *f, int n)
{
  if (!run_until(f, scales_reach, &n))
    fail_msg("scale() was called %d times, never %d", fake->scales, n);
}

/* ---- jobs ---- */

/* The job's remote id ("node-N"), into out. */
static void
remote_of(struct fx *f, int64_t id, char *out, size_t len)
{
  struct job_view j;
  struct err e = {0};

  job_view_init(&j);
  assert_int_equal(broker_job_get(f->b, &admin, id, &j, &e), 0);
  snprintf(out, len, "%s", j.remote_id != NULL ? j.remote_id : "");
  job_view_release(&j);
}

/* The owned site busy with a 2-GPU job whose time limit is minutes,
 * until the test ends. */
static void
occupy_owned(struct fx *f, int minutes)
{
  char body[512];

  snprintf(body, sizeof(body),
           "{\"name\": \"owned-%d\", \"site\": \"onprem\", \"gpus\": 2,"
           " \"time_limit\": %d, \"command\": [\"/bin/sh\", \"-c\","
           " \"while [ ! -e %s ]; do sleep 0.02; done\"]}",
           minutes, minutes, f->go);
  f->owned = fx_submit_ok(f, body);
  wait_state(f, f->owned, JOB_RUNNING);
}

/* ---- what the broker shows ---- */

static int
placed_once(struct fx *f, const void *arg)
{
  struct placement_view p = {0};
  struct err e = {0};
  int found = broker_job_placement(f->b, &admin, *(const int64_t *)arg, &p,
                                   &e) == 0;

  placement_view_release(&p);
  return found;
}

/* Job id's last decision: *p (release it) and, in *start_ms, the start
 * the cloud candidate predicted (0 when none). */
static void
placement_of(struct fx *f, int64_t id, struct placement_view *p,
             int64_t *start_ms)
{
  struct err e = {0};
  json_t *cands, *c;
  size_t i;

  assert_true(run_until(f, placed_once, &id));
  memset(p, 0, sizeof(*p));
  assert_int_equal(broker_job_placement(f->b, &admin, id, p, &e), 0);
  cands = parse(p->candidates);
  *start_ms = 0;
  json_array_foreach(cands, i, c) {
    const char *start = jsonx_str(c, "start");

    if (strcmp(jsonx_str(c, "site"), "cloud") == 0 && start != NULL)
      assert_int_equal(time_parse_iso(start, start_ms), 0);
  }
  json_decref(cands);
}

#define MAX_ROWS 16

struct rows {
  int n;
  struct {
    char action[16], reason[16], detail[BURST_REASON_LEN];
    int64_t launched, released, live, wanted, demand, spend;
  } r[MAX_ROWS];
};

static int
row_cb(const struct scale_decision *d, void *arg)
{
  struct rows *rs = arg;

  if (rs->n < MAX_ROWS) {
    snprintf(rs->r[rs->n].action, sizeof(rs->r[0].action), "%s", d->action);
    snprintf(rs->r[rs->n].reason, sizeof(rs->r[0].reason), "%s", d->reason);
    snprintf(rs->r[rs->n].detail, sizeof(rs->r[0].detail), "%s", d->detail);
    rs->r[rs->n].launched = d->launched;
    rs->r[rs->n].released = d->released;
    rs->r[rs->n].live = d->live_nodes;
    rs->r[rs->n].wanted = d->wanted_nodes;
    rs->r[rs->n].demand = d->demand_gpus;
    rs->r[rs->n].spend = d->spend_micro;
  }
  rs->n++;
  return 0;
}

/* The cloud site's log, newest first. */
static void
scale_log(struct fx *f, struct rows *rs)
{
  struct err e = {0};

  memset(rs, 0, sizeof(*rs));
  assert_int_equal(broker_scale_log(f->b, "cloud", 0, MAX_ROWS, row_cb, rs,
                                    &e),
                   0);
}

static int
launches_logged(const struct rows *rs)
{
  int n = 0;

  for (int i = 0; i < rs->n && i < MAX_ROWS; i++)
    n += strcmp(rs->r[i].action, "launch") == 0;
  return n;
}

/* ---- tests ---- */

#define JOB8 \
  "{\"gpus\": 8, \"gpu_type\": \"h100\", \"time_limit\": 10," \
  " \"command\": [\"true\"]}"

static void
test_waiting_jobs_beyond_the_owned_site_launch_nodes_in_the_same_pass(
    void **state)
{
  struct fx *f = *state;
  struct fx_answer a[3];
  struct rows rs;

  start(f, SITES, BURST);
  occupy_owned(f, 60);
  passes_tick(f);
  /* One loop turn: one commit, so the next pass sees all three. */
  for (int i = 0; i < 3; i++)
    fx_submit(f, JOB8, &a[i]);
  for (int i = 0; i < 3; i++)
    fx_answer_id(f, &a[i]);
  wait_scales(f, 1);
  /* The timer ticks once an hour: the pass that saw them did it. */
  assert_int_equal(fake->scales, 1);
  assert_int_equal(fake->last_launch[0], 3);
  assert_int_equal(fake->nnodes, 3);
  assert_int_equal(fake->nreleased, 0);
  scale_log(f, &rs);
  assert_int_equal(rs.n, 2);
  assert_string_equal(rs.r[0].action, "launch");
  assert_string_equal(rs.r[0].reason, "demand");
  assert_int_equal(rs.r[0].launched, 3);
  assert_int_equal(rs.r[0].live, 0);
  assert_int_equal(rs.r[0].wanted, 3);
  assert_int_equal(rs.r[0].demand, 24);
  /* three nodes of 8 GPUs at $6.88 */
  assert_int_equal(rs.r[0].spend, 165120000);
  assert_string_equal(rs.r[0].detail,
                      "launch 3 x p5 (demand: 3 jobs, 24 GPUs waiting)");
  /* the start tick's, before any job */
  assert_string_equal(rs.r[1].action, "none");
  assert_int_equal(view(f).launching, 3);
  assert_int_equal(view(f).wanted, 3);
}

static void
test_no_launch_while_the_owned_wait_is_shorter_than_the_boot(void **state)
{
  struct fx *f = *state;
  struct placement_view p;
  struct scale_view v;
  struct rows rs;
  int64_t id, start_ms;

  start(f, SITES, BURST);
  /* Busy for a minute; a node boots in five. */
  occupy_owned(f, 1);
  passes_tick(f);
  id = fx_submit_ok(f, "{\"gpus\": 2, \"gpu_type\": \"h100\", \"time_limit\": "
                    "1, \"command\": [\"true\"]}");
  placement_of(f, id, &p, &start_ms);
  assert_string_equal(p.verdict, "wait");
  assert_string_equal(p.site, "onprem");
  assert_true(start_ms > 0);
  placement_view_release(&p);
  fire_tick(f);
  assert_int_equal(fake->scales, 0);
  assert_int_equal(fake->nnodes, 0);
  v = view(f);
  assert_string_equal(v.action, "none");
  assert_int_equal(v.demand_gpus, 0);
  assert_int_equal(v.launching, 0);
  scale_log(f, &rs);
  assert_int_equal(launches_logged(&rs), 0);
  assert_int_equal(state_of(f, id), JOB_QUEUED);
}

static void
test_a_launched_node_takes_the_waiting_job_on_the_next_pass(void **state)
{
  struct fx *f = *state;
  struct placement_view p;
  char remote[32], want[32];
  int64_t id, start_ms;

  start(f, SITES, BURST);
  passes_tick(f);
  id = fx_submit_ok(f, JOB8);
  wait_scales(f, 1);
  assert_int_equal(fake->last_launch[0], 1);
  /* The launch kicks a pass: the job goes to the launching node. */
  wait_state(f, id, JOB_SUBMITTED);
  assert_int_equal(fake->njobs, 1);
  assert_int_equal(fake->jobs[0].node, 0);
  snprintf(want, sizeof(want), "node-%" PRId64, fake->nodes[0].id);
  remote_of(f, id, remote, sizeof(remote));
  assert_string_equal(remote, want);
  placement_of(f, id, &p, &start_ms);
  assert_string_equal(p.verdict, "now");
  assert_string_equal(p.site, "cloud");
  placement_view_release(&p);
  fake_node_up(0, 60000);
  fake_job_runs(id);
  wait_state(f, id, JOB_RUNNING);
  fake_job_ends(id);
  wait_state(f, id, JOB_SUCCEEDED);
  /* one node was enough */
  assert_int_equal(fake->scales, 1);
}

/* Launch a node for an 8-GPU job, bring it up boot_ms after its launch,
 * run the job there to its end; no pass ticks by itself after. */
static void
one_job_on_one_node(struct fx *f, int64_t boot_ms)
{
  int64_t id;

  passes_tick(f);
  id = fx_submit_ok(f, JOB8);
  wait_scales(f, 1);
  quiet(f);
  wait_state(f, id, JOB_SUBMITTED);
  fake_node_up(0, boot_ms);
  fake_job_runs(id);
  wait_state(f, id, JOB_RUNNING);
  fake_job_ends(id);
  wait_state(f, id, JOB_SUCCEEDED);
}

struct node_seen {
  int n;
  char state[16];
  char reason[BURST_REASON_LEN + 64];
};

static int
node_cb(const struct node_view *n, void *arg)
{
  struct node_seen *s = arg;

  s->n++;
  snprintf(s->state, sizeof(s->state), "%s", n->state);
  snprintf(s->reason, sizeof(s->reason), "%s", n->reason ? n->reason : "");
  return 0;
}

static void
test_an_idle_node_is_released_after_its_timeout_and_logged(void **state)
{
  struct fx *f = *state;
  struct node_seen seen = {0};
  struct scale_view v;
  struct rows rs;
  struct err e = {0};
  char want[BURST_REASON_LEN];
  int64_t node;

  start(f, SITES, BURST);
  one_job_on_one_node(f, 60000);
  node = fake->nodes[0].id;
  /* Idle, but not for its 600 s: kept. */
  fire_tick(f);
  assert_int_equal(fake->scales, 1);
  assert_int_equal(view(f).idle, 1);
  /* Idle for 601 s: released, per-second billing has nothing paid. */
  fake->nodes[0].idle_since_ms = time_now_ms() - 601000;
  fire_tick(f);
  assert_int_equal(fake->scales, 2);
  assert_int_equal(fake->nreleased, 1);
  assert_int_equal(fake->released[0], node);
  snprintf(want, sizeof(want),
           "released by the autoscaler: release node %" PRId64
           " (idle 601 s)", node);
  assert_string_equal(fake->why, want);
  scale_log(f, &rs);
  assert_string_equal(rs.r[0].action, "release");
  assert_string_equal(rs.r[0].reason, "idle");
  assert_int_equal(rs.r[0].released, 1);
  assert_int_equal(rs.r[0].launched, 0);
  assert_int_equal(rs.r[0].live, 1);
  assert_int_equal(rs.r[0].wanted, 0);
  assert_string_equal(rs.r[0].detail, want + strlen("released by the "
                                                    "autoscaler: "));
  v = view(f);
  assert_string_equal(v.action, "release");
  assert_string_equal(v.reason, "idle");
  assert_int_equal(v.live, 0);
  assert_int_equal(v.terminating, 1);
  assert_int_equal(v.decisions[BURST_IDLE], 1);
  /* The broker's record of the node says why it ended. */
  assert_int_equal(broker_node_list(f->b, "cloud", 0, node_cb, &seen, &e),
                   0);
  assert_int_equal(seen.n, 1);
  assert_string_equal(seen.state, "ended");
  assert_string_equal(seen.reason, want);
}

static void
test_a_learned_boot_delay_moves_the_cloud_start(void **state)
{
  struct fx *f = *state;
  struct placement_view p;
  int64_t id, start_ms;

  start(f, SITES, BURST);
  passes_tick(f);
  id = fx_submit_ok(f, JOB8);
  wait_scales(f, 1);
  quiet(f);
  wait_state(f, id, JOB_SUBMITTED);
  /* Up a second after its launch, and busy. */
  fake_node_up(0, 1000);
  fake_job_runs(id);
  wait_state(f, id, JOB_RUNNING);
  fire_tick(f);
  assert_int_equal(view(f).boot_ms, 1000);
  /* The next job needs a node too: it starts a second from the pass,
   * not boot_s (300 s) from it.  The pass began before its decision
   * was stored, and within the guard of it. */
  id = fx_submit_ok(f, JOB8);
  placement_of(f, id, &p, &start_ms);
  assert_string_equal(p.verdict, "wait");
  assert_string_equal(p.site, "cloud");
  assert_true(start_ms <= p.at_ms + 1000);
  assert_true(start_ms > p.at_ms + 1000 - 60000);
  assert_non_null(strstr(p.candidates, "once the site grows"));
  placement_view_release(&p);
}

static void
test_a_decision_is_logged_once_until_it_changes(void **state)
{
  struct fx *f = *state;
  struct scale_view v;
  struct rows rs;
  int64_t id;

  start(f, CLOUD_WITH(P5, ", \"spend_cap_per_hour\": 50", RENTED), BURST);
  quiet(f);
  for (int i = 0; i < 5; i++)
    fire_tick(f);
  scale_log(f, &rs);
  assert_int_equal(rs.n, 1);
  assert_string_equal(rs.r[0].action, "none");
  assert_string_equal(rs.r[0].detail, "nothing to do");
  /* A job the cap keeps waiting: held, every tick the same. */
  id = fx_submit_ok(f, JOB8);
  assert_true(run_until(f, placed_once, &id));
  for (int i = 0; i < 5; i++)
    fire_tick(f);
  scale_log(f, &rs);
  assert_int_equal(rs.n, 2);
  assert_string_equal(rs.r[0].action, "hold");
  assert_string_equal(rs.r[0].reason, "site-cap");
  v = view(f);
  assert_int_equal(v.decisions[BURST_SITE_CAP], 5);
  assert_int_equal(v.decisions[BURST_NONE], 0);
  assert_int_equal(fake->scales, 0);
}

static void
test_a_restarted_broker_learns_boots_from_stored_nodes(void **state)
{
  struct fx *f = *state;

  start(f, SITES, BURST);
  one_job_on_one_node(f, 7000);
  fire_tick(f);
  assert_int_equal(view(f).boot_ms, 7000);
  /* Released, so the fake forgets it on close. */
  fake->nodes[0].idle_since_ms = time_now_ms() - 601000;
  fire_tick(f);
  assert_int_equal(fake->nreleased, 1);
  restart_close(f);

  start(f, SITES, BURST);
  assert_int_equal(fake->nnodes, 0);
  assert_int_equal(view(f).boot_ms, 7000);
  assert_int_equal(broker__autoscaler_grow_ms(f->b, CLOUD, -1), 7000);
}

static void
test_the_forecast_launches_ahead_of_the_usual_demand_when_asked(void **state)
{
  struct fx *f = *state;
  struct rows rs;
  struct err e = {0};
  int i;
  int64_t now = time_now_ms(), days = 8 * 86400000LL;
  /* For the last eight days until now a job held 16 GPUs of the cloud
   * site: every hour of the week has seen 16 busy, whatever the time
   * this test runs at. */
  struct db_usage piece = {.job_id = 1,
                           .hold_ms = now - days,
                           .from_ms = now - days,
                           .to_ms = now,
                           .billed_ms = days,
                           .day = "2026-01-01",
                           .project = "p",
                           .site = "cloud",
                           .gpu_type = "h100",
                           .gpus = 16,
                           .kind = "on_demand",
                           .billed_rate = DB_NO_RATE,
                           .sunk_rate = DB_NO_RATE,
                           .marginal_rate = DB_NO_RATE};

  start(f, SITES, BURST);
  if (db_begin(broker_db(f->b), &e) < 0 ||
      db_usage_replace(broker_db(f->b), 1, piece.hold_ms, &piece, 1, &e) < 0 ||
      db_commit(broker_db(f->b), &e) < 0)
    fail_msg("usage: %s", e.msg);
  restart_close(f);
  /* Off by default: nothing ahead of demand. */
  start(f, SITES, BURST);
  quiet(f);
  fire_tick(f);
  assert_int_equal(fake->scales, 0);
  restart_close(f);
  /* On: 16 GPUs expected one boot from now, none up: two p5. */
  start(f, CLOUD_WITH(P5, ", \"forecast\": true", RENTED), BURST);
  quiet(f);
  fire_tick(f);
  assert_int_equal(fake->scales, 1);
  assert_int_equal(fake->last_launch[0], 2);
  scale_log(f, &rs);
  assert_true(rs.n >= 1);
  for (i = 0; i < rs.n && strcmp(rs.r[i].action, "launch") != 0; i++)
    ;
  assert_true(i < rs.n);
  assert_string_equal(rs.r[i].reason, "forecast");
  assert_int_equal(rs.r[i].launched, 2);
  assert_non_null(strstr(rs.r[i].detail, "forecast: 16 GPUs busy expected"));
}

/* The next fake starts with this one's nodes, as cloud.c reads its
 * live nodes back from the store after a restart. */
static void
carry_nodes(void)
{
  memcpy(carried, fake->nodes, sizeof(carried));
  ncarried = fake->nnodes;
}

static void
test_a_node_up_across_a_restart_teaches_its_boot_once(void **state)
{
  struct fx *f = *state;

  start(f, SITES, BURST);
  one_job_on_one_node(f, 7000);
  carry_nodes();
  /* The pool's copy says 1 s: learned again at the first tick, it
   * would move the median off the stored 7 s. */
  carried[0].registered_ms = carried[0].created_ms + 1000;
  restart_close(f);

  start(f, SITES, BURST);
  assert_int_equal(fake->nnodes, 1);
  assert_int_equal(view(f).boot_ms, 7000);
  fire_tick(f);
  assert_int_equal(view(f).boot_ms, 7000);
}

static void
test_a_site_backing_off_is_sent_no_launch_and_wants_none(void **state)
{
  struct fx *f = *state;
  struct scale_view v;
  int64_t id;

  start(f, SITES, BURST);
  quiet(f);
  fake->backing_off = 1;
  id = fx_submit_ok(f, JOB8);
  assert_true(run_until(f, placed_once, &id));
  fire_tick(f);
  assert_int_equal(fake->scales, 0);
  v = view(f);
  assert_string_equal(v.action, "none");
  assert_int_equal(v.demand_gpus, 8);
  assert_int_equal(v.launching, 0);
  assert_int_equal(v.wanted, 0);
  assert_string_equal(v.detail, "launch 1 x p5 (demand: 1 job, 8 GPUs "
                                "waiting); not sent: the site backs off");
}

static void
test_the_site_spend_cap_holds_launches_and_says_so(void **state)
{
  struct fx *f = *state;
  struct scale_view v;
  struct rows rs;
  int64_t id;

  /* A node costs $55.04/h, over the site's $50/h. */
  start(f, CLOUD_WITH(P5, ", \"spend_cap_per_hour\": 50", RENTED), BURST);
  quiet(f);
  id = fx_submit_ok(f, JOB8);
  assert_true(run_until(f, placed_once, &id));
  fire_tick(f);
  assert_int_equal(fake->scales, 0);
  v = view(f);
  assert_string_equal(v.action, "hold");
  assert_string_equal(v.reason, "site-cap");
  assert_string_equal(v.detail, "hold: spend cap $50/h reached at site");
  assert_int_equal(v.spend_cap_micro, 50000000);
  assert_int_equal(v.demand_gpus, 8);
  assert_int_equal(v.wanted, 0);
  scale_log(f, &rs);
  assert_string_equal(rs.r[0].action, "hold");
  assert_string_equal(rs.r[0].reason, "site-cap");
  assert_int_equal(rs.r[0].launched, 0);
  assert_int_equal(rs.r[0].demand, 8);
  assert_string_equal(rs.r[0].detail, "hold: spend cap $50/h reached at site");
}

static void
test_the_overall_cap_of_policy_burst_holds_launches(void **state)
{
  struct fx *f = *state;
  struct scale_view v;
  struct rows rs;
  int64_t id;

  start(f, SITES, "{\"tick_s\": 3600, \"spend_cap_per_hour\": 50}");
  quiet(f);
  id = fx_submit_ok(f, JOB8);
  assert_true(run_until(f, placed_once, &id));
  fire_tick(f);
  assert_int_equal(fake->scales, 0);
  v = view(f);
  assert_string_equal(v.action, "hold");
  assert_string_equal(v.reason, "total-cap");
  assert_string_equal(v.detail, "hold: total spend cap $50/h reached");
  /* the site has no cap of its own */
  assert_int_equal(v.spend_cap_micro, 0);
  scale_log(f, &rs);
  assert_string_equal(rs.r[0].action, "hold");
  assert_string_equal(rs.r[0].reason, "total-cap");
  assert_int_equal(rs.r[0].demand, 8);
}

static void
test_a_project_over_its_hard_budget_creates_no_demand(void **state)
{
  struct fx *f = *state;
  struct placement_view p;
  struct job_view j;
  struct rows rs;
  struct err e = {0};
  int64_t alpha, start_ms;

  start(f, SITES, BURST);
  /* Busy for an hour: a 2-GPU job would rather rent. */
  occupy_owned(f, 60);
  quiet(f);
  /* Held until its project has a budget of $0, hard: spent. */
  alpha = fx_submit_ok(f, "{\"project\": \"alpha\", \"gpus\": 2, \"gpu_type\":"
                       " \"h100\", \"time_limit\": 10, \"hold\": true,"
                       " \"command\": [\"true\"]}");
  assert_int_equal(broker_budget_set(f->b, &admin, "alpha", 0, 1, NULL, &e),
                   0);
  job_view_init(&j);
  assert_int_equal(broker_job_release(f->b, &admin, alpha, &j, &e), 0);
  job_view_release(&j);
  placement_of(f, alpha, &p, &start_ms);
  assert_string_equal(p.verdict, "wait");
  assert_string_equal(p.site, "onprem");
  assert_non_null(strstr(p.reason, "hard budget"));
  placement_view_release(&p);
  fire_tick(f);
  assert_int_equal(fake->scales, 0);
  assert_int_equal(view(f).demand_gpus, 0);
  /* The same job of a project with no budget is demand; alpha's still
   * is not. */
  passes_tick(f);
  fx_submit_ok(f, "{\"project\": \"beta\", \"gpus\": 2, \"gpu_type\":"
               " \"h100\", \"time_limit\": 10, \"command\": [\"true\"]}");
  wait_scales(f, 1);
  scale_log(f, &rs);
  assert_string_equal(rs.r[0].action, "launch");
  assert_int_equal(rs.r[0].demand, 2);
  assert_int_equal(rs.r[0].launched, 1);
  assert_int_equal(state_of(f, alpha), JOB_QUEUED);
}

static void
test_a_bad_policy_burst_is_refused_naming_the_field(void **state)
{
  struct fx *f = *state;
  static const struct {
    const char *burst;
    const char *names;
  } bad[] = {
      {"{\"tick_s\": 0}", "policy.burst.tick_s"},
      {"{\"tick_s\": 3601}", "policy.burst.tick_s"},
      {"{\"spend_cap_per_hour\": \"x\"}", "policy.burst.spend_cap_per_hour"},
      {"{\"spend_cap_per_hour\": -1}", "policy.burst.spend_cap_per_hour"},
      {"{\"boost\": 1}", "policy.burst.boost"},
      {"[]", "policy.burst"},
  };

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct err e = {0};

    assert_int_equal(open_broker(f, SITES, bad[i].burst, &e), ERR_CONFIG);
    assert_null(f->b);
    if (strstr(e.msg, bad[i].names) == NULL)
      fail_msg("'%s' refused with '%s', not naming '%s'", bad[i].burst,
               e.msg, bad[i].names);
    /* The sites that had opened close from the loop. */
    uv_run(&f->loop, UV_RUN_DEFAULT);
  }
}

/* A site of spot nodes at $2.50 a GPU-hour and on-demand ones at
 * $6.88. */
#define SPOT_AND_ON_DEMAND                                                 \
  CLOUD_WITH("[{\"name\": \"p5-spot\", \"gpu_type\": \"h100\","        \
             " \"gpus\": 8, \"spot\": true}, {\"name\": \"p5\","         \
             " \"gpu_type\": \"h100\", \"gpus\": 8}]",                  \
             "",                                                           \
             "{\"rented\": {\"per_gpu_hour\": {\"h100\": 6.88},"          \
             " \"spot_per_gpu_hour\": {\"h100\": 2.50}}}")

/* Submit, after a pass that may tick, a job of gpus h100 for 10 minutes
 * that must start within 10 minutes; its id. */
static int64_t
submit_deadline(struct fx *f, int gpus)
{
  struct fx_answer a;
  char body[256], deadline[40];

  time_format_iso(time_now_ms() + 10 * 60000, deadline, sizeof(deadline));
  snprintf(body, sizeof(body),
           "{\"gpus\": %d, \"gpu_type\": \"h100\", \"time_limit\": 10,"
           " \"deadline\": \"%s\", \"command\": [\"true\"]}",
           gpus, deadline);
  passes_tick(f);
  fx_submit(f, body, &a);
  return fx_answer_id(f, &a);
}

/* The cloud candidate's compute $ in job id's stored decision. */
static int64_t
cloud_compute(struct fx *f, int64_t id)
{
  struct placement_view p;
  json_t *cands, *c;
  int64_t start_ms, micro = -1;
  size_t i;

  placement_of(f, id, &p, &start_ms);
  cands = parse(p.candidates);
  json_array_foreach(cands, i, c) {
    if (strcmp(jsonx_str(c, "site"), "cloud") == 0)
      micro = json_integer_value(json_object_get(c, "compute_micro"));
  }
  json_decref(cands);
  placement_view_release(&p);
  return micro;
}

static void
test_a_job_that_may_take_spot_is_priced_at_the_spot_nodes_it_would_get(
    void **state)
{
  struct fx *f = *state;
  int64_t id, micro;

  start(f, SPOT_AND_ON_DEMAND, BURST);
  quiet(f);
  /* 10 minutes of a whole 8-GPU node at $2.50 a GPU-hour and the
   * interruptions expected (the prior, 15 % of nodes a month, over a
   * restart of 15 minutes: x 1.00005): $3.33, not $9.17 on demand. */
  id = fx_submit_ok(f, JOB8);
  micro = cloud_compute(f, id);
  assert_true(micro >= 8 * 2500000 / 6 && micro < 8 * 2510000 / 6);
  /* A deadline job is priced on demand. */
  id = submit_deadline(f, 8);
  assert_int_equal(cloud_compute(f, id), 8 * 6880000 / 6);
}

static void
test_a_deadline_job_that_cannot_absorb_an_interruption_goes_to_an_on_demand_node(
    void **state)
{
  struct fx *f = *state;
  struct fake_job *j;
  char remote[32], want[32];
  int64_t first, late;

  start(f,
        SPOT_AND_ON_DEMAND,
        BURST);
  /* A job with no deadline: a spot node, the cheapest. */
  passes_tick(f);
  first = fx_submit_ok(f, JOB8);
  wait_scales(f, 1);
  assert_int_equal(fake->last_launch[0], 1);
  assert_int_equal(fake->last_launch[1], 0);
  wait_state(f, first, JOB_SUBMITTED);
  /* To start within 10 minutes, on a node that boots in 5: an
   * interruption and a restart (boot + 10 minutes of lost work) would
   * not fit, so the node is on demand, and so is the job's place. */
  late = submit_deadline(f, 8);
  wait_scales(f, 2);
  assert_int_equal(fake->last_launch[0], 0);
  assert_int_equal(fake->last_launch[1], 1);
  wait_state(f, late, JOB_SUBMITTED);
  j = fake_job(fake, late);
  assert_non_null(j);
  assert_int_equal(j->on_demand, 1);
  assert_int_equal(fake->nodes[j->node].shape, 1);
  snprintf(want, sizeof(want), "node-%" PRId64, fake->nodes[j->node].id);
  remote_of(f, late, remote, sizeof(remote));
  assert_string_equal(remote, want);
  assert_int_equal(fake_job(fake, first)->on_demand, 0);
}

static void
test_a_deadline_job_refused_by_a_spot_node_with_room_grows_an_on_demand_one(
    void **state)
{
  struct fx *f = *state;
  int64_t first, late;

  start(f,
        SPOT_AND_ON_DEMAND,
        BURST);
  /* Four GPUs (more than the owned site has) on a spot node: four are
   * left free there. */
  passes_tick(f);
  first = fx_submit_ok(f, "{\"gpus\": 4, \"gpu_type\": \"h100\", "
                       "\"time_limit\": 10, \"command\": [\"true\"]}");
  wait_scales(f, 1);
  wait_state(f, first, JOB_SUBMITTED);
  /* Placement sees those four free and places the deadline job there; the
   * site refuses it a spot node, and that refusal is demand. */
  late = submit_deadline(f, 4);
  wait_scales(f, 2);
  assert_int_equal(fake->last_launch[0], 0);
  assert_int_equal(fake->last_launch[1], 1);
  wait_state(f, late, JOB_SUBMITTED);
  assert_int_equal(fake->nodes[fake_job(fake, late)->node].shape, 1);
}

int
main(int argc, char **argv)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_waiting_jobs_beyond_the_owned_site_launch_nodes_in_the_same_pass),
      T(test_no_launch_while_the_owned_wait_is_shorter_than_the_boot),
      T(test_a_launched_node_takes_the_waiting_job_on_the_next_pass),
      T(test_an_idle_node_is_released_after_its_timeout_and_logged),
      T(test_a_learned_boot_delay_moves_the_cloud_start),
      T(test_a_decision_is_logged_once_until_it_changes),
      T(test_a_restarted_broker_learns_boots_from_stored_nodes),
      T(test_the_forecast_launches_ahead_of_the_usual_demand_when_asked),
      T(test_a_node_up_across_a_restart_teaches_its_boot_once),
      T(test_a_site_backing_off_is_sent_no_launch_and_wants_none),
      T(test_the_site_spend_cap_holds_launches_and_says_so),
      T(test_the_overall_cap_of_policy_burst_holds_launches),
      T(test_a_project_over_its_hard_budget_creates_no_demand),
      T(test_a_bad_policy_burst_is_refused_naming_the_field),
      T(test_a_job_that_may_take_spot_is_priced_at_the_spot_nodes_it_would_get),
      T(test_a_deadline_job_that_cannot_absorb_an_interruption_goes_to_an_on_demand_node),
      T(test_a_deadline_job_refused_by_a_spot_node_with_room_grows_an_on_demand_one),
  };
#undef T

  /* The shim is this binary, as it is tenbind in production. */
  if (argc >= 2 && strcmp(argv[1], "--shim") == 0)
    return adapter_local_shim_main(argc - 2, argv + 2);
  log_set_level(LOG_WARN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
