/*
 * The VM-pool site: kinds aws (and later gcp, azure) as one state
 * machine over a provider (cloud_int.h).
 *
 * A node goes launching -> booting -> ready -> terminating -> ended.  It
 * is committed through the broker's node store before its launch request
 * leaves, and the request's idempotency token is made of the node id and
 * the attempt, so a launch resent after a crash finds the first VM.  The
 * node's VM starts `tenbin-agent node`, which heartbeats to tenbind
 * (docs/NODES.md); its first heartbeat makes the node ready, and jobs
 * placed on the node go to it in the heartbeat answers.
 *
 * How many nodes run is the autoscaler's decision (broker/autoscaler.c,
 * policies/burst.h): it launches and releases them through scale(), and
 * reads the pool through fleet().  A job submitted here goes to a node
 * with room, booting or up; with none, submit says so and the job stays
 * queued for the autoscaler to grow the site.
 *
 * What the pool decides, every tick: a launch refused for capacity moves
 * to the next zone, then (spot with fallback) to on demand, then to the
 * next shape of the same GPU type; when none is left the site backs off
 * and its jobs are placed again.  A node that never registers is
 * terminated after the boot timeout, one whose agent falls silent loses
 * its jobs and is terminated.  Every reconcile lists the VMs tagged with
 * this broker: a VM of a known node is adopted, one of no known node is
 * terminated after a grace period and reported.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/cloud_int.h"
#include "adapters/config_fields.h"
#include "adapters/update_queue.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fault.h"
#include "util/fileio.h"
#include "util/jsonx.h"
#include "util/list.h"
#include "util/log.h"
#include "util/timeutil.h"

#define TICK_MS 1000
#define MAX_LAUNCH_RETRIES 8
#define MAX_ORPHANS 1024
#define MAX_REPORTED_JOBS 4096
#define MAX_LOG_BYTES (1LL << 30)
#define TOKEN_LEN 96
#define LIST_LAG_MS 30000

enum phase { PH_LAUNCHING, PH_BOOTING, PH_READY, PH_TERMINATING, PH_ENDED };

static const char *const phase_names[] = {"launching", "booting", "ready",
                                          "terminating", "ended"};

struct pool;

struct pnode {
  struct list link;
  struct pool *pool;
  struct list jobs;         /* its struct pjob, by nlink: a heartbeat
                               looks at the node's jobs, not the pool's */
  int64_t id;
  int shape;                /* index in pool->shapes */
  int zone_ix;              /* index in pool->zones */
  int spot;
  int attempt;
  enum phase phase;
  int calling;              /* a launch or terminate is in flight */
  int retries;              /* of the current call, after throttling */
  int64_t next_try_ms;      /* a call waits for this */
  char vm_id[CLOUD_ID_LEN];
  int64_t created_ms, launched_ms, registered_ms, seen_ms, ended_ms;
  int64_t boot_from_ms;     /* the boot timeout counts from here */
  int64_t idle_since_ms;
  int64_t gpus_used;
  uint64_t heartbeats;
  int interrupted;
  int listed;               /* in the last listing */
  int64_t idle_gpus;        /* billed idle since idle_from_ms */
  int64_t idle_from_ms;
  char reason[CLOUD_MSG_LEN];
};

struct pjob {
  struct list link;         /* in the pool's jobs */
  struct list nlink;        /* in its node's jobs while it has one */
  int64_t id;
  struct pnode *node;       /* NULL once it left the node */
  json_t *spec;             /* jobspec JSON, handed to the agent */
  int64_t gpus;
  int seen;                 /* the agent has reported it */
  int cancel;               /* tell the agent to cancel it */
  int running;              /* RUNNING pushed */
  int final;                /* a final state pushed ... */
  uint64_t final_hb;        /* ... in this heartbeat of its node */
  char *log_path;
  json_t *dataset;          /* where the node pulls the job's dataset
                               from (docs/NODES.md), or NULL */
  int pulling;              /* the agent's "pulling" reason pushed */
};

struct orphan {
  char id[CLOUD_ID_LEN];
  int64_t first_seen_ms;
  int terminating;          /* a reap is in flight */
  int reaped;               /* and it was done */
  int listed;               /* in the last listing */
};

struct pool {
  uv_loop_t *loop;
  const struct cloud_provider *prov;
  void *pctx;
  char *site;
  char *kind;
  char *instance;
  char *logs_dir;           /* state_dir/nodes/SITE */
  struct adapter_queue q;
  const struct adapter_node_store *store;
  void *store_arg;
  json_t *config;           /* owned reference: shapes borrow from it */
  struct cloud_shape shapes[CLOUD_MAX_SHAPES];
  size_t nshapes;
  char zones[CLOUD_MAX_ZONES][CLOUD_NAME_LEN];
  size_t nzones;
  int64_t min_nodes, max_nodes;
  int64_t idle_timeout_ms, boot_timeout_ms, lost_after_ms;
  int64_t orphan_grace_ms, backoff_ms, reconcile_ms, heartbeat_ms;
  /* the autoscaler's settings for the site (its "burst" block) */
  struct adapter_burst burst;
  char *agent_path;
  char *server;
  struct list nodes;        /* of struct pnode, by id */
  struct list jobs;         /* of struct pjob */
  /* Kept as jobs come and go, so that capacity(), which every
   * submission's placement asks, walks neither list: GPUs jobs hold
   * per shape, and the jobs. */
  int64_t used[CLOUD_MAX_SHAPES];
  int64_t njobs;
  /* GPUs of live nodes (launching, booting, ready) per shape, and the
   * live nodes: kept where a node is made, adopted or leaves. */
  int64_t live_gpus[CLOUD_MAX_SHAPES];
  int64_t nlive;
  uv_timer_t tick;
  int listing;
  int64_t list_started_ms;
  int64_t next_reconcile_ms;
  int64_t backoff_until_ms;
  char backoff_reason[CLOUD_MSG_LEN];
  struct orphan *orphans;
  size_t norphans;
  int closing;
  int handles;              /* uv handles still open */
  void (*close_cb)(void *arg);
  void *close_arg;
};

void
cloud_refuse(struct cloud_result *r, enum cloud_refusal why,
             int64_t retry_after_ms, const char *fmt, ...)
{
  va_list ap;

  r->rc = why == CLOUD_REFUSED_NOT_FOUND ? ERR_NOT_FOUND : ERR_SITE;
  r->why = why;
  r->retry_after_ms = retry_after_ms;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
  va_end(ap);
}

/* GPUs of n that jobs running there hold. */
static int64_t running_gpus(const struct pnode *n);

/* ---- the node store ---- */

static void
node_view(const struct pnode *n, struct adapter_node *v)
{
  const struct cloud_shape *s = &n->pool->shapes[n->shape];

  memset(v, 0, sizeof(*v));
  v->id = n->id;
  v->shape = s->name;
  v->zone = n->pool->zones[n->zone_ix];
  v->spot = n->spot;
  v->attempt = n->attempt;
  /* Ready is idle or busy to whoever reads the record. */
  v->state = n->phase != PH_READY ? phase_names[n->phase]
             : running_gpus(n) > 0 ? "busy"
                                   : "idle";
  v->vm_id = n->vm_id[0] != '\0' ? n->vm_id : NULL;
  v->gpus = s->gpus;
  v->gpu_type = s->gpu_type;
  v->created_ms = n->created_ms;
  v->launched_ms = n->launched_ms;
  v->registered_ms = n->registered_ms;
  v->seen_ms = n->seen_ms;
  v->ended_ms = n->ended_ms;
  v->reason = n->reason[0] != '\0' ? n->reason : NULL;
  v->idle_gpus = n->idle_gpus;
  v->idle_from_ms = n->idle_from_ms;
}

/* Record n; a failure is logged (the next change writes it again). */
static void
save(struct pnode *n)
{
  struct adapter_node v;
  struct err e = {0};

  node_view(n, &v);
  if (n->pool->store->update(n->pool->store_arg, &v, &e) < 0)
    log_error("site %s: recording node %" PRId64 ": %s", n->pool->site, n->id,
              e.msg);
}

static void
set_reason(struct pnode *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_reason(struct pnode *n, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(n->reason, sizeof(n->reason), fmt, ap);
  va_end(ap);
}

/*
 * Bill n's idle GPUs up to at, and start the next idle piece: whenever
 * what runs on n changes, when its VM appears, and when it ends.  The
 * jobs' own holds bill the GPUs they run on, these pieces the rest, so
 * the ledger has the VM's whole uptime.  n is recorded in the same
 * transaction.
 */
static void
account(struct pnode *n, int64_t at)
{
  const struct cloud_shape *s = &n->pool->shapes[n->shape];
  int64_t idle = 0, from = n->idle_from_ms, gpus = n->idle_gpus;
  struct adapter_node v;
  struct err e = {0};

  if (n->launched_ms > 0 && n->phase != PH_ENDED) {
    idle = s->gpus - running_gpus(n);
    if (idle < 0)
      idle = 0;
  }
  if (idle == gpus && n->phase != PH_ENDED)
    return;
  if (at < from)
    at = from;
  n->idle_gpus = idle;
  n->idle_from_ms = at;
  node_view(n, &v);
  if (n->pool->store->bill_idle(n->pool->store_arg, &v, from, at,
                                from > 0 ? gpus : 0, &e) < 0)
    log_error("site %s: billing node %" PRId64 "'s idle time: %s",
              n->pool->site, n->id, e.msg);
}

/* Count n among the live nodes (by +1) or no longer (-1). */
static void
count_live(struct pnode *n, int by)
{
  n->pool->nlive += by;
  n->pool->live_gpus[n->shape] += by * n->pool->shapes[n->shape].gpus;
}

/* Move n to phase ph, out of the live nodes when it leaves them. */
static void
set_phase(struct pnode *n, enum phase ph)
{
  if (n->phase < PH_TERMINATING && ph >= PH_TERMINATING)
    count_live(n, -1);
  n->phase = ph;
}

/* Move a live n to shape s: its GPUs count under the new shape, or
 * live_gpus would drift by the difference when it leaves. */
static void
set_shape(struct pnode *n, int s)
{
  int live = n->phase < PH_TERMINATING;

  if (live)
    count_live(n, -1);
  n->shape = s;
  if (live)
    count_live(n, 1);
}

/* n's VM is gone (or never was): recorded, its last idle piece billed. */
static void
end_node(struct pnode *n, int64_t at)
{
  set_phase(n, PH_ENDED);
  n->ended_ms = at;
  account(n, at);
}

/* ---- jobs ---- */

static void
push(struct pool *p, int64_t job_id, enum job_state state,
     const char *reason, const struct pjob *j)
{
  struct adapter_update u = {.job_id = job_id,
                             .state = state,
                             .reason = reason,
                             .exit_code = -1};
  char remote[32];

  if (j != NULL && j->node != NULL) {
    snprintf(remote, sizeof(remote), "node-%" PRId64, j->node->id);
    u.remote_id = remote;
    u.log_path = j->log_path;
  }
  adapter_queue_push(&p->q, &u);
}

static struct pjob *
find_job(struct pool *p, int64_t id)
{
  struct list *q;

  LIST_FOREACH(q, &p->jobs) {
    struct pjob *j = LIST_ENTRY(q, struct pjob, link);

    if (j->id == id)
      return j;
  }
  return NULL;
}

/* Job id if it is on n. */
static struct pjob *
node_job(struct pnode *n, int64_t id)
{
  struct list *q;

  LIST_FOREACH(q, &n->jobs) {
    struct pjob *j = LIST_ENTRY(q, struct pjob, nlink);

    if (j->id == id)
      return j;
  }
  return NULL;
}

static int64_t
running_gpus(const struct pnode *n)
{
  const struct list *q;
  int64_t sum = 0;

  LIST_FOREACH(q, &n->jobs) {
    const struct pjob *j = LIST_ENTRY(q, struct pjob, nlink);

    if (j->running && !j->final)
      sum += j->gpus;
  }
  return sum;
}

static void
job_free(struct pool *p, struct pjob *j)
{
  if (!list_empty(&j->link))
    p->njobs--;
  list_remove(&j->link);
  list_remove(&j->nlink);
  json_decref(j->spec);
  json_decref(j->dataset);
  free(j->log_path);
  free(j);
}

/* j no longer holds GPUs of its node. */
static void
detach(struct pjob *j)
{
  struct pnode *n = j->node;

  if (n == NULL)
    return;
  n->gpus_used -= j->gpus;
  n->pool->used[n->shape] -= j->gpus;
  if (n->gpus_used <= 0) {
    n->gpus_used = 0;
    n->idle_since_ms = time_now_ms();
  }
  /* Off the node, it no longer counts as running there. */
  j->node = NULL;
  list_remove(&j->nlink);
  account(n, time_now_ms());
}

/* Every job of n that has not ended leaves it: placed again (QUEUED)
 * when it may not have run, or as state with reason. */
static void
evict_jobs(struct pnode *n, enum job_state state, const char *reason)
{
  struct pool *p = n->pool;
  struct list *q, *tmp;

  LIST_FOREACH_SAFE(q, tmp, &n->jobs) {
    struct pjob *j = LIST_ENTRY(q, struct pjob, nlink);

    if (!j->final)
      push(p, j->id, state, reason, j);
    detach(j);
    job_free(p, j);
  }
}

/* ---- launching and terminating ---- */

/* The startup script of node n (its agent's token in it), into b. */
static int
startup_script(const struct pnode *n, const char *token, struct buf *b)
{
  const struct pool *p = n->pool;
  const struct cloud_shape *s = &p->shapes[n->shape];

  return buf_addf(b,
                    "#!/bin/sh\n"
                    "# tenbin node %" PRId64 " of site %s\n"
                    "TENBIN_NODE_TOKEN='%s'\n"
                    "export TENBIN_NODE_TOKEN\n"
                    "exec '%s' node --server '%s' --provider %s "
                    "--root \"${TENBIN_VM_ROOT:-/var/lib/tenbin-node}\" "
                    "--gpus '%s:%" PRId64 "' --site '%s'\n",
                    n->id, p->site, token, p->agent_path, p->server, p->kind,
                    s->gpu_type, s->gpus, p->site);
}

static void on_launched(void *arg, const struct cloud_result *r,
                        const struct cloud_vm *vm);

static void
launch(struct pnode *n)
{
  struct pool *p = n->pool;
  char token[TOKEN_LEN], name[CLOUD_NAME_LEN], ctoken[65], tag[32];
  struct buf script;
  struct err e = {0};
  struct cloud_launch l;

  buf_init(&script, 64 << 10);
  if (p->store->token(p->store_arg, n->id, token, sizeof(token), &e) < 0 ||
      startup_script(n, token, &script) < 0) {
    log_error("site %s: node %" PRId64 ": no startup script: %s", p->site,
              n->id, e.msg);
    n->next_try_ms = time_now_ms() + p->backoff_ms;
    buf_release(&script);
    return;
  }
  /* Names and tokens are short and [a-z0-9-]: every cloud takes them. */
  snprintf(name, sizeof(name), "tenbin-%.12s-%" PRId64, p->instance, n->id);
  snprintf(ctoken, sizeof(ctoken), "tenbin-%.16s-%" PRId64 "-%d",
           p->instance, n->id, n->attempt);
  snprintf(tag, sizeof(tag), "%" PRId64, n->id);
  l = (struct cloud_launch){.node_id = n->id,
                            .name = name,
                            .token = ctoken,
                            .shape = &p->shapes[n->shape],
                            .zone = p->zones[n->zone_ix],
                            .spot = n->spot,
                            .script = buf_str(&script),
                            .instance = p->instance,
                            .node = tag};
  n->calling = 1;
  log_info("site %s: launching node %" PRId64 " (%s in %s%s, attempt %d)",
           p->site, n->id, p->shapes[n->shape].type, l.zone,
           n->spot ? ", spot" : "", n->attempt);
  p->prov->launch(p->pctx, &l, on_launched, n);
  buf_release(&script);
}

/* The next place to try after a refusal of class why: the next zone,
 * on demand after spot, the next shape of the same GPU type that holds
 * what the node carries.  0 when there is none. */
static int
advance(struct pnode *n, enum cloud_refusal why)
{
  struct pool *p = n->pool;
  const struct cloud_shape *cur = &p->shapes[n->shape];
  int64_t need = n->gpus_used > 0 ? n->gpus_used : 1;

  if (why == CLOUD_REFUSED_CAPACITY && (size_t)n->zone_ix + 1 < p->nzones) {
    n->zone_ix++;
    return 1;
  }
  if (n->spot && cur->market == CLOUD_SPOT_FALLBACK) {
    n->spot = 0;
    n->zone_ix = 0;
    return 1;
  }
  for (size_t i = (size_t)n->shape + 1; i < p->nshapes; i++) {
    const struct cloud_shape *s = &p->shapes[i];

    if (strcmp(s->gpu_type, cur->gpu_type) != 0 || s->gpus < need)
      continue;
    set_shape(n, (int)i);
    n->zone_ix = 0;
    n->spot = s->market != CLOUD_ON_DEMAND;
    return 1;
  }
  return 0;
}

static void terminate(struct pnode *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Give up launching n: the site backs off, its jobs go elsewhere. */
static void
give_up(struct pnode *n, const struct cloud_result *r)
{
  struct pool *p = n->pool;
  char reason[CLOUD_MSG_LEN + 64];

  p->backoff_until_ms = time_now_ms() + p->backoff_ms;
  snprintf(p->backoff_reason, sizeof(p->backoff_reason), "%s", r->msg);
  snprintf(reason, sizeof(reason), "no VM for node %" PRId64 ": %s", n->id,
           r->msg);
  log_warn("site %s: %s; backing off for %" PRId64 " s", p->site, reason,
           p->backoff_ms / 1000);
  evict_jobs(n, JOB_QUEUED, reason);
  set_reason(n, "launch failed: %s", r->msg);
  end_node(n, time_now_ms());
}

static int64_t
backoff_ms(int retries, int64_t retry_after_ms)
{
  int64_t cap = 1000LL << (retries < 5 ? retries : 5);
  int64_t wait = cap / 2 + (int64_t)(random() % (cap / 2 + 1));

  return retry_after_ms > wait ? retry_after_ms : wait;
}

static void
on_launched(void *arg, const struct cloud_result *r, const struct cloud_vm *vm)
{
  struct pnode *n = arg;
  struct pool *p = n->pool;

  n->calling = 0;
  if (p->closing)
    return;
  /* kill -9 here: the VM exists, its id is recorded nowhere. */
  if (r->rc == 0)
    fault_point("cloud-launch-answered");
  if (r->rc == 0) {
    snprintf(n->vm_id, sizeof(n->vm_id), "%s", vm->id);
    n->launched_ms = vm->launched_ms > 0 ? vm->launched_ms : time_now_ms();
    n->boot_from_ms = time_now_ms();
    n->retries = 0;
    /* The VM bills from its launch. */
    n->idle_from_ms = n->launched_ms;
    account(n, n->launched_ms);
    if (n->phase == PH_TERMINATING) {
      /* Its jobs went away while it was launching. */
      save(n);
      n->next_try_ms = 0;
      return;
    }
    /* The agent may have registered before the answer came (a launch
     * resent after a restart finds a VM that booted long ago): such a
     * node stays ready, or the boot timeout would kill it. */
    if (n->phase == PH_LAUNCHING)
      n->phase = PH_BOOTING;
    n->reason[0] = '\0';
    log_info("site %s: node %" PRId64 " is VM %s", p->site, n->id, n->vm_id);
    save(n);
    return;
  }
  if (n->phase == PH_TERMINATING && r->why != CLOUD_REFUSED_THROTTLE &&
      r->why != CLOUD_REFUSED_TRANSIENT) {
    end_node(n, time_now_ms());
    return;
  }
  switch (r->why) {
  case CLOUD_REFUSED_THROTTLE:
  case CLOUD_REFUSED_TRANSIENT:
    if (++n->retries <= MAX_LAUNCH_RETRIES) {
      n->next_try_ms = time_now_ms() + backoff_ms(n->retries,
                                                  r->retry_after_ms);
      set_reason(n, "retrying: %s", r->msg);
      log_info("site %s: node %" PRId64 ": %s; retry %d", p->site, n->id,
               r->msg, n->retries);
      return;
    }
    give_up(n, r);
    return;
  case CLOUD_REFUSED_CAPACITY:
  case CLOUD_REFUSED_QUOTA:
    log_info("site %s: node %" PRId64 ": %s in %s", p->site, n->id, r->msg,
             p->zones[n->zone_ix]);
    if (advance(n, r->why)) {
      n->attempt++;
      n->retries = 0;
      set_reason(n, "moved on after: %s", r->msg);
      save(n);
      launch(n);
      return;
    }
    give_up(n, r);
    return;
  default:
    give_up(n, r);
    return;
  }
}

static void
on_terminated(void *arg, const struct cloud_result *r)
{
  struct pnode *n = arg;
  struct pool *p = n->pool;

  n->calling = 0;
  if (p->closing)
    return;
  if (r->rc == 0 || r->why == CLOUD_REFUSED_NOT_FOUND) {
    log_info("site %s: node %" PRId64 " (VM %s) ended: %s", p->site, n->id,
             n->vm_id, n->reason);
    end_node(n, time_now_ms());
    return;
  }
  n->retries++;
  n->next_try_ms = time_now_ms() + backoff_ms(n->retries, r->retry_after_ms);
  log_warn("site %s: terminating VM %s: %s", p->site, n->vm_id, r->msg);
}

static void
terminate_call(struct pnode *n)
{
  struct cloud_vm vm;

  memset(&vm, 0, sizeof(vm));
  snprintf(vm.id, sizeof(vm.id), "%s", n->vm_id);
  snprintf(vm.zone, sizeof(vm.zone), "%s", n->pool->zones[n->zone_ix]);
  n->calling = 1;
  n->pool->prov->terminate(n->pool->pctx, &vm, on_terminated, n);
}

/* Retire n (its jobs must have left it).  A node with no VM yet and no
 * call in flight ends at once. */
static void
terminate(struct pnode *n, const char *fmt, ...)
{
  va_list ap;

  if (n->phase >= PH_TERMINATING)
    return;
  va_start(ap, fmt);
  vsnprintf(n->reason, sizeof(n->reason), fmt, ap);
  va_end(ap);
  set_phase(n, PH_TERMINATING);
  n->retries = 0;
  if (n->vm_id[0] == '\0' && !n->calling) {
    end_node(n, time_now_ms());
    return;
  }
  save(n);
  if (n->phase == PH_TERMINATING && !n->calling && n->vm_id[0] != '\0')
    terminate_call(n);
}

/* A new node of shape s, committed, its launch sent.  NULL when the
 * store refused it (e says why). */
static struct pnode *
new_node(struct pool *p, int s, struct err *e)
{
  struct pnode *n = xcalloc(1, sizeof(*n));
  struct adapter_node v;
  char token[TOKEN_LEN];

  list_init(&n->jobs);
  n->pool = p;
  n->shape = s;
  n->spot = p->shapes[s].market != CLOUD_ON_DEMAND;
  n->attempt = 1;
  n->phase = PH_LAUNCHING;
  n->created_ms = time_now_ms();
  n->idle_since_ms = n->created_ms;
  node_view(n, &v);
  if (p->store->create(p->store_arg, &v, token, sizeof(token), e) < 0) {
    free(n);
    return NULL;
  }
  n->id = v.id;
  list_insert_tail(&p->nodes, &n->link);
  count_live(n, 1);
  /* kill -9 here: the node is committed, no request has left. */
  fault_point("cloud-node-committed");
  launch(n);
  return n;
}

/* ---- the tick ---- */

static void on_listed(void *arg, const struct cloud_result *r,
                      const struct cloud_vm *vms, size_t n);

static void
tick(uv_timer_t *t)
{
  struct pool *p = t->data;
  int64_t now = time_now_ms();
  struct list *q, *tmp;

  LIST_FOREACH_SAFE(q, tmp, &p->nodes) {
    struct pnode *n = LIST_ENTRY(q, struct pnode, link);

    if (n->calling)
      continue;
    switch (n->phase) {
    case PH_LAUNCHING:
      if (now >= n->next_try_ms)
        launch(n);
      break;
    case PH_BOOTING:
      if (now - n->boot_from_ms > p->boot_timeout_ms) {
        char why[96];

        snprintf(why, sizeof(why),
                 "node %" PRId64 " never registered within %" PRId64 " s",
                 n->id, p->boot_timeout_ms / 1000);
        log_warn("site %s: %s: launch failed", p->site, why);
        evict_jobs(n, JOB_QUEUED, why);
        terminate(n, "%s", why);
      }
      break;
    case PH_READY:
      if (now - n->seen_ms > p->lost_after_ms) {
        char why[96];

        snprintf(why, sizeof(why),
                 "node %" PRId64 "'s agent silent for %" PRId64 " s", n->id,
                 (now - n->seen_ms) / 1000);
        log_warn("site %s: %s", p->site, why);
        evict_jobs(n, JOB_LOST, why);
        terminate(n, "%s", why);
      }
      break;
    case PH_TERMINATING:
      if (now >= n->next_try_ms && n->vm_id[0] != '\0')
        terminate_call(n);
      break;
    case PH_ENDED:
      /* Kept until a listing that began after its end, which shows
       * whether its VM is really gone. */
      if (!p->listing && n->ended_ms < p->list_started_ms) {
        list_remove(&n->link);
        free(n);
      }
      break;
    }
  }
  if (!p->listing && now >= p->next_reconcile_ms) {
    p->listing = 1;
    p->list_started_ms = now;
    p->prov->list(p->pctx, p->instance, on_listed, p);
  }
}

static struct pnode *
find_node(struct pool *p, int64_t id)
{
  struct list *q;

  LIST_FOREACH(q, &p->nodes) {
    struct pnode *n = LIST_ENTRY(q, struct pnode, link);

    if (n->id == id)
      return n;
  }
  return NULL;
}

static int
parse_node_tag(const char *s, int64_t *id)
{
  char *end;
  long long v;

  if (s[0] < '1' || s[0] > '9')
    return -1;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0')
    return -1;
  *id = v;
  return 0;
}

/* A reap in flight: the orphan table may move before it answers. */
struct reap {
  struct pool *pool;
  char id[CLOUD_ID_LEN];
};

static void
on_reaped(void *arg, const struct cloud_result *r)
{
  struct reap *rp = arg;
  struct pool *p = rp->pool;

  for (size_t i = 0; !p->closing && i < p->norphans; i++) {
    if (strcmp(p->orphans[i].id, rp->id) != 0)
      continue;
    /* Done, or tried again at the next listing that shows the VM (else
     * it would bill until tenbind restarts). */
    p->orphans[i].terminating = 0;
    p->orphans[i].reaped = r->rc == 0 || r->why == CLOUD_REFUSED_NOT_FOUND;
    if (!p->orphans[i].reaped)
      log_warn("site %s: terminating unknown VM %s: %s", p->site, rp->id,
               r->msg);
  }
  free(rp);
}

/* A tagged VM of no node tenbind knows: terminated once it has been seen
 * for the grace period (a launch may be committed in another broker's
 * transaction that is not ours to know: the grace covers none of that,
 * only a VM whose node row was lost). */
static void
orphan_seen(struct pool *p, const struct cloud_vm *vm, int64_t now)
{
  struct orphan *o = NULL;

  for (size_t i = 0; i < p->norphans; i++)
    if (strcmp(p->orphans[i].id, vm->id) == 0)
      o = &p->orphans[i];
  if (o != NULL) {
    o->listed = 1;
  }
  if (o == NULL) {
    if (p->norphans == MAX_ORPHANS)
      return;
    if (p->orphans == NULL)
      p->orphans = xcalloc(MAX_ORPHANS, sizeof(*p->orphans));
    o = &p->orphans[p->norphans++];
    memset(o, 0, sizeof(*o));
    snprintf(o->id, sizeof(o->id), "%s", vm->id);
    o->first_seen_ms = now;
    o->listed = 1;
    log_warn("site %s: VM %s (node tag '%s') belongs to no node tenbind "
             "knows; terminating it in %" PRId64 " s",
             p->site, vm->id, vm->node, p->orphan_grace_ms / 1000);
  }
  if (!o->terminating && !o->reaped &&
      now - o->first_seen_ms >= p->orphan_grace_ms) {
    struct reap *rp = xcalloc(1, sizeof(*rp));

    rp->pool = p;
    snprintf(rp->id, sizeof(rp->id), "%s", vm->id);
    o->terminating = 1;
    log_warn("site %s: reaping VM %s: no node of this tenbind", p->site,
             vm->id);
    p->prov->terminate(p->pctx, vm, on_reaped, rp);
  }
}

/* n's VM ended without tenbind asking; one that lingers is deleted
 * still. */
static void
vm_gone(struct pnode *n, const char *detail, int lingers, int64_t now)
{
  struct pool *p = n->pool;
  char why[CLOUD_MSG_LEN];

  snprintf(why, sizeof(why), "node %" PRId64 "'s VM %s is gone%s%s", n->id,
           n->vm_id, detail[0] ? ": " : "", detail);
  log_warn("site %s: %s", p->site, why);
  /* A spot VM that went away took its jobs before they ended: they run
   * again elsewhere.  On demand, that is a loss to report. */
  evict_jobs(n, n->spot ? JOB_QUEUED : JOB_LOST, why);
  if (lingers) {
    terminate(n, "%s", why);
    return;
  }
  snprintf(n->reason, sizeof(n->reason), "%s", why);
  end_node(n, now);
}

/* An orphan no longer listed is gone: forgotten, so that the table
 * holds only VMs that still exist.  One whose reap is in flight stays:
 * its callback holds it. */
static void
forget_orphans(struct pool *p)
{
  size_t kept = 0;

  for (size_t i = 0; i < p->norphans; i++) {
    if (!p->orphans[i].listed && !p->orphans[i].terminating)
      continue;
    if (kept != i)
      p->orphans[kept] = p->orphans[i];
    kept++;
  }
  p->norphans = kept;
}

static void
on_listed(void *arg, const struct cloud_result *r, const struct cloud_vm *vms,
          size_t count)
{
  struct pool *p = arg;
  int64_t now = time_now_ms();
  struct list *q, *tmp;

  p->listing = 0;
  if (p->closing)
    return;
  p->next_reconcile_ms = now + p->reconcile_ms;
  if (r->rc < 0) {
    log_warn("site %s: listing VMs: %s", p->site, r->msg);
    return;
  }
  LIST_FOREACH(q, &p->nodes) {
    LIST_ENTRY(q, struct pnode, link)->listed = 0;
  }
  for (size_t i = 0; i < p->norphans; i++)
    p->orphans[i].listed = 0;
  for (size_t i = 0; i < count; i++) {
    const struct cloud_vm *vm = &vms[i];
    struct pnode *n = NULL;
    int64_t id;

    if (strcmp(vm->instance, p->instance) != 0)
      continue;
    if (parse_node_tag(vm->node, &id) == 0)
      n = find_node(p, id);
    /* A node that ended after this listing began may still show its
     * VM; one that ended before and still has a VM running leaks it. */
    if (n != NULL && n->phase == PH_ENDED && n->ended_ms >= p->list_started_ms)
      continue;
    if (n == NULL || n->phase == PH_ENDED) {
      if ((vm->state != CLOUD_VM_GONE && vm->state != CLOUD_VM_STOPPING) ||
          vm->lingers)
        orphan_seen(p, vm, now);
      continue;
    }
    n->listed = 1;
    if (vm->state == CLOUD_VM_GONE) {
      if (n->phase == PH_TERMINATING || strcmp(n->vm_id, vm->id) != 0)
        continue;
      if (n->phase == PH_BOOTING || n->phase == PH_READY)
        vm_gone(n, vm->end_reason, vm->lingers, now);
      continue;
    }
    if (n->vm_id[0] == '\0' && !n->calling) {
      /* Launched before a crash that came before the answer. */
      snprintf(n->vm_id, sizeof(n->vm_id), "%s", vm->id);
      n->launched_ms = vm->launched_ms > 0 ? vm->launched_ms : now;
      n->boot_from_ms = now;
      n->idle_from_ms = n->launched_ms;
      account(n, n->launched_ms);
      if (n->phase == PH_LAUNCHING)
        n->phase = PH_BOOTING;
      log_info("site %s: adopted VM %s as node %" PRId64, p->site, vm->id,
               n->id);
      save(n);
      if (n->phase == PH_TERMINATING)
        terminate_call(n);
    }
  }
  forget_orphans(p);
  /* EC2 stops listing a VM about an hour after it ended, and lists a
   * new one only after a few seconds: a VM missing from a listing that
   * began well after its launch is gone. */
  LIST_FOREACH_SAFE(q, tmp, &p->nodes) {
    struct pnode *n = LIST_ENTRY(q, struct pnode, link);

    if (!n->listed && n->vm_id[0] != '\0' && !n->calling &&
        (n->phase == PH_BOOTING || n->phase == PH_READY) &&
        n->launched_ms < p->list_started_ms - LIST_LAG_MS)
      vm_gone(n, "not listed any more", 0, now);
  }
}

/* ---- the adapter ---- */

static int
pick_node(struct pool *p, const struct job_spec *spec, int on_demand,
          struct pnode **out)
{
  struct list *q;
  struct pnode *best = NULL;

  LIST_FOREACH(q, &p->nodes) {
    struct pnode *n = LIST_ENTRY(q, struct pnode, link);
    const struct cloud_shape *s = &p->shapes[n->shape];

    if (n->phase >= PH_TERMINATING || n->interrupted ||
        (on_demand && n->spot))
      continue;
    if (spec->gpu_type != NULL && strcmp(spec->gpu_type, s->gpu_type) != 0)
      continue;
    if (s->gpus - n->gpus_used < spec->gpus)
      continue;
    if (best == NULL || (n->phase == PH_READY && best->phase != PH_READY))
      best = n;
  }
  *out = best;
  return best != NULL;
}

static int
pick_shape(const struct pool *p, const struct job_spec *spec)
{
  for (size_t i = 0; i < p->nshapes; i++) {
    const struct cloud_shape *s = &p->shapes[i];

    if (spec->gpu_type != NULL && strcmp(spec->gpu_type, s->gpu_type) != 0)
      continue;
    if (s->gpus >= spec->gpus)
      return (int)i;
  }
  return -1;
}

/* j runs on n.  Its log is n's: a job that runs again on another node
 * (after a spot interruption) starts a log of its own there. */
static void
attach(struct pool *p, struct pjob *j, struct pnode *n)
{
  j->node = n;
  n->gpus_used += j->gpus;
  p->used[n->shape] += j->gpus;
  p->njobs++;
  list_insert_tail(&p->jobs, &j->link);
  list_insert_tail(&n->jobs, &j->nlink);
  if (j->log_path == NULL) {
    struct buf b;

    buf_init(&b, 8192);
    if (buf_addf(&b, "%s/%" PRId64 "/node-%" PRId64 ".log", p->logs_dir,
                 j->id, n->id) == 0)
      j->log_path = buf_take(&b, NULL);
    buf_release(&b);
  }
}

/* A job of this site; a restarted tenbind keeps the log path the
 * broker had recorded. */
static struct pjob *
new_job(const struct adapter_job *job)
{
  struct pjob *j = xcalloc(1, sizeof(*j));

  list_init(&j->link);
  list_init(&j->nlink);
  j->id = job->id;
  j->spec = jobspec_to_json(job->spec);
  j->gpus = job->spec->gpus;
  if (job->log_path != NULL)
    j->log_path = xstrdup(job->log_path);
  if (job->dataset != NULL)
    j->dataset = json_pack("{s:s, s:s, s:s, s:s}", "name",
                           job->dataset->name, "version",
                           job->dataset->version, "url", job->dataset->url,
                           "token", job->dataset->token);
  return j;
}

int
cloud_submit(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct pool *p = ctx;
  struct pnode *n = NULL;
  struct pjob *j;
  char why[128];

  if (find_job(p, job->id) != NULL)
    return 0;
  if (!pick_node(p, job->spec, job->on_demand, &n)) {
    if (time_now_ms() < p->backoff_until_ms)
      return err_set(e, ERR_UNAVAILABLE, "site backing off after: %s",
                     p->backoff_reason);
    if (pick_shape(p, job->spec) < 0)
      return err_set(e, ERR_UNAVAILABLE,
                     "no node shape of this site holds %" PRId64 " GPUs%s%s",
                     job->spec->gpus, job->spec->gpu_type ? " of type " : "",
                     job->spec->gpu_type ? job->spec->gpu_type : "");
    return err_set(e, ERR_UNAVAILABLE,
                   "no %snode has %" PRId64 " GPUs free: waiting for the "
                   "autoscaler to launch one",
                   job->on_demand ? "on-demand " : "", job->spec->gpus);
  }
  j = new_job(job);
  attach(p, j, n);
  snprintf(why, sizeof(why), "on node %" PRId64 " (%s)", n->id,
           phase_names[n->phase]);
  push(p, j->id, JOB_SUBMITTED, why, j);
  return 0;
}

int
cloud_cancel(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct pool *p = ctx;
  struct pjob *j = find_job(p, job->id);

  (void)e;
  if (j == NULL || j->node == NULL || j->node->phase >= PH_TERMINATING) {
    push(p, job->id, JOB_CANCELLED, "cancelled", NULL);
    if (j != NULL) {
      detach(j);
      job_free(p, j);
    }
    return 0;
  }
  if (!j->seen && j->node->phase != PH_READY) {
    push(p, job->id, JOB_CANCELLED, "cancelled before it started", j);
    detach(j);
    job_free(p, j);
    return 0;
  }
  j->cancel = 1;
  return 0;
}

int
cloud_adopt(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct pool *p = ctx;
  struct pnode *n = NULL;
  struct pjob *j;
  int64_t id;

  if (find_job(p, job->id) != NULL)
    return 0;
  if (job->remote_id == NULL)
    return cloud_submit(ctx, job, e);
  if (strncmp(job->remote_id, "node-", 5) == 0 &&
      parse_node_tag(job->remote_id + 5, &id) == 0)
    n = find_node(p, id);
  if (n == NULL || n->phase >= PH_TERMINATING) {
    push(p, job->id, JOB_LOST, "its node is gone", NULL);
    return 0;
  }
  j = new_job(job);
  attach(p, j, n);
  return 0;
}

/* out's pool of type, added when new; NULL when out is full. */
static struct adapter_gpu_pool *
pool_for(struct adapter_capacity *out, const char *type)
{
  struct adapter_gpu_pool *g;

  for (int k = 0; k < out->npools; k++)
    if (strcmp(out->pools[k].type, type) == 0)
      return &out->pools[k];
  if (out->npools == ADAPTER_MAX_POOLS)
    return NULL;
  g = &out->pools[out->npools++];
  snprintf(g->type, sizeof(g->type), "%s", type);
  return g;
}

void
cloud_capacity(void *ctx, struct adapter_capacity *out)
{
  struct pool *p = ctx;
  int64_t now = time_now_ms();

  memset(out, 0, sizeof(*out));
  out->reachable = now >= p->backoff_until_ms;
  if (!out->reachable)
    snprintf(out->detail, sizeof(out->detail), "backing off %" PRId64
             " s more after: %.120s", (p->backoff_until_ms - now + 999) / 1000,
             p->backoff_reason);
  /* What is up or coming (live nodes' GPUs), and what the site may
   * still grow by: the autoscaler launches it, placement weighs it. */
  out->nodes = p->max_nodes;
  out->grow_ms = p->burst.boot_ms;
  for (size_t i = 0; i < p->nshapes; i++) {
    const struct cloud_shape *s = &p->shapes[i];
    struct adapter_gpu_pool *g = pool_for(out, s->gpu_type);

    if (g == NULL)
      continue;
    if (s->gpus > g->per_node)
      g->per_node = s->gpus;
    g->total += p->live_gpus[i];
    g->in_use += p->used[i];
  }
  for (int k = 0; k < out->npools; k++) {
    struct adapter_gpu_pool *g = &out->pools[k];

    g->grow = (p->max_nodes - p->nlive) * g->per_node;
    if (g->grow < 0)
      g->grow = 0;
    g->total += g->grow;
  }
  out->jobs_active = p->njobs;
}

void
cloud_fleet(void *ctx, struct adapter_fleet *out)
{
  struct pool *p = ctx;
  struct list *q;
  size_t k = 0;

  memset(out, 0, sizeof(*out));
  for (size_t i = 0; i < p->nshapes && i < ADAPTER_MAX_SHAPES; i++) {
    const struct cloud_shape *s = &p->shapes[i];
    struct adapter_shape *a = &out->shapes[out->nshapes++];

    snprintf(a->name, sizeof(a->name), "%s", s->name);
    snprintf(a->gpu_type, sizeof(a->gpu_type), "%s", s->gpu_type);
    a->gpus = s->gpus;
    a->spot = s->market != CLOUD_ON_DEMAND;
  }
  out->nodes = xcalloc((size_t)p->nlive + 1, sizeof(*out->nodes));
  LIST_FOREACH(q, &p->nodes) {
    const struct pnode *n = LIST_ENTRY(q, struct pnode, link);
    struct adapter_fleet_node *f;

    if (n->phase >= PH_TERMINATING) {
      out->terminating += n->phase == PH_TERMINATING;
      continue;
    }
    if (k == (size_t)p->nlive)
      break;
    f = &out->nodes[k++];
    f->id = n->id;
    f->shape = n->shape;
    f->up = n->phase == PH_READY;
    f->gpus_used = n->gpus_used;
    f->launched_ms = n->created_ms;
    f->registered_ms = n->registered_ms;
    f->idle_since_ms = n->idle_since_ms;
  }
  out->nnodes = k;
  out->backing_off = time_now_ms() < p->backoff_until_ms;
  out->min_nodes = p->min_nodes;
  out->max_nodes = p->max_nodes;
  out->idle_timeout_ms = p->idle_timeout_ms;
  out->burst = p->burst;
}

/* Launch count nodes of shape s; fewer when max_nodes is reached. */
static int
scale_up(struct pool *p, int s, int64_t count, struct err *e)
{
  for (int64_t i = 0; i < count && p->nlive < p->max_nodes; i++) {
    if (new_node(p, s, e) == NULL)
      return e->code;
  }
  return 0;
}

int
cloud_scale(void *ctx, const int64_t *launch, size_t nshapes,
            const int64_t *release, size_t nrelease, const char *why,
            struct err *e)
{
  struct pool *p = ctx;
  int rc = 0;

  for (size_t i = 0; i < nrelease && p->nlive > p->min_nodes; i++) {
    struct pnode *n = find_node(p, release[i]);

    if (n != NULL && n->phase == PH_READY && n->gpus_used == 0)
      terminate(n, "%s", why != NULL ? why : "released");
  }
  for (size_t s = 0; s < nshapes && s < p->nshapes && rc == 0; s++) {
    if (launch[s] <= 0)
      continue;
    if (time_now_ms() < p->backoff_until_ms)
      return err_set(e, ERR_UNAVAILABLE, "site backing off after: %s",
                     p->backoff_reason);
    rc = scale_up(p, (int)s, launch[s], e);
  }
  return rc;
}

char *
cloud_log_dir(void *ctx, int64_t job_id)
{
  struct pool *p = ctx;
  struct buf b;

  buf_init(&b, 8192);
  if (buf_addf(&b, "%s/%" PRId64, p->logs_dir, job_id) < 0) {
    buf_release(&b);
    return NULL;
  }
  return buf_take(&b, NULL);
}

/* ---- the node agents' calls ---- */

static struct pnode *
live_node(struct pool *p, int64_t node_id, struct err *e)
{
  struct pnode *n = find_node(p, node_id);

  if (n == NULL || n->phase == PH_ENDED) {
    err_set(e, ERR_UNAUTHORIZED, "node %" PRId64 " has ended", node_id);
    return NULL;
  }
  return n;
}

static void
report(struct pool *p, struct pnode *n, struct pjob *j, const json_t *r)
{
  const char *name = jsonx_str(r, "state");
  enum job_state st;
  struct adapter_update u = {.job_id = j->id, .exit_code = -1};
  char remote[32];
  json_t *v;

  if (name == NULL || job_state_parse(name, &st) < 0)
    return;
  snprintf(remote, sizeof(remote), "node-%" PRId64, n->id);
  u.remote_id = remote;
  u.log_path = j->log_path;
  u.alloc = jsonx_str(r, "alloc");
  u.reason = jsonx_str(r, "reason");
  v = json_object_get(r, "at_ms");
  if (json_is_integer(v) && json_integer_value(v) > 0)
    u.at_ms = json_integer_value(v);
  if (st == JOB_SUBMITTED && u.reason != NULL && !j->pulling) {
    /* The node pulls the job's dataset first: say so, once. */
    j->pulling = 1;
    u.state = JOB_SUBMITTED;
    adapter_queue_push(&p->q, &u);
  } else if (st == JOB_RUNNING && !j->running) {
    j->running = 1;
    u.state = JOB_RUNNING;
    adapter_queue_push(&p->q, &u);
    account(n, u.at_ms > 0 ? u.at_ms : time_now_ms());
  } else if (job_state_is_final(st) && !j->final) {
    v = json_object_get(r, "exit_code");
    if (json_is_integer(v) && json_integer_value(v) >= -1 &&
        json_integer_value(v) <= 255)
      u.exit_code = (int)json_integer_value(v);
    v = json_object_get(r, "signal");
    if (json_is_integer(v) && json_integer_value(v) >= 0 &&
        json_integer_value(v) < 128)
      u.signal = (int)json_integer_value(v);
    /* Billed: a count past any dataset (2^50 bytes, a PiB) is not one. */
    v = json_object_get(r, "pulled_bytes");
    if (json_is_integer(v) && json_integer_value(v) > 0 &&
        json_integer_value(v) <= ((json_int_t)1 << 50))
      u.pulled_bytes = json_integer_value(v);
    u.pull_failed = json_is_true(json_object_get(r, "pull_failed"));
    u.state = st;
    j->final = 1;
    j->final_hb = n->heartbeats;
    adapter_queue_push(&p->q, &u);
    account(n, u.at_ms > 0 ? u.at_ms : time_now_ms());
  }
}

int
cloud_node_heartbeat(void *ctx, int64_t node_id, const json_t *req,
                     json_t **answer, struct err *e)
{
  struct pool *p = ctx;
  struct pnode *n = live_node(p, node_id, e);
  json_t *jobs, *ans, *assign, *cancel, *ack, *v;
  int64_t now = time_now_ms();
  struct list *q, *tmp;
  size_t i;

  if (n == NULL)
    return e->code;
  jobs = json_object_get(req, "jobs");
  if (jobs != NULL && !json_is_array(jobs))
    return err_set(e, ERR_INVALID, "field 'jobs' must be an array");
  if (json_array_size(jobs) > MAX_REPORTED_JOBS)
    return err_set(e, ERR_TOO_LARGE, "field 'jobs': at most %d",
                   MAX_REPORTED_JOBS);
  n->heartbeats++;
  n->seen_ms = now;
  if (n->registered_ms == 0) {
    n->registered_ms = now;
    n->idle_since_ms = now;
    if (n->phase < PH_READY)
      n->phase = PH_READY;
    log_info("site %s: node %" PRId64 " registered", p->site, n->id);
    save(n);
  } else if (n->phase < PH_READY) {
    n->phase = PH_READY;
    save(n);
  }
  ans = json_object();
  assign = json_array();
  cancel = json_array();
  ack = json_array();
  json_array_foreach(jobs, i, v) {
    json_t *id = json_object_get(v, "id");
    struct pjob *j;

    if (!json_is_object(v) || !json_is_integer(id) ||
        json_integer_value(id) <= 0)
      continue;
    j = node_job(n, json_integer_value(id));
    if (j == NULL) {
      /* Not ours (any more): stop it and forget it. */
      json_array_append_new(cancel, json_integer(json_integer_value(id)));
      json_array_append_new(ack, json_integer(json_integer_value(id)));
      continue;
    }
    j->seen = 1;
    report(p, n, j, v);
  }
  v = json_object_get(req, "interruption");
  if (json_is_object(v) && !n->interrupted) {
    const char *notice = jsonx_str(v, "notice");
    char why[CLOUD_MSG_LEN];

    n->interrupted = 1;
    snprintf(why, sizeof(why), "preempted: spot interruption of node %" PRId64
             " (%.200s)", n->id, notice != NULL ? notice : "no detail");
    log_warn("site %s: %s", p->site, why);
    LIST_FOREACH(q, &n->jobs) {
      struct pjob *j = LIST_ENTRY(q, struct pjob, nlink);

      if (!j->final)
        json_array_append_new(cancel, json_integer(j->id));
    }
    evict_jobs(n, JOB_QUEUED, why);
    terminate(n, "%s", why);
  }
  LIST_FOREACH_SAFE(q, tmp, &n->jobs) {
    struct pjob *j = LIST_ENTRY(q, struct pjob, nlink);

    if (j->final) {
      /* Acknowledged in a later heartbeat, once the queue has handed
       * every update to the broker, which records them as it gets them:
       * an agent forgets only what is on disk. */
      if (n->heartbeats > j->final_hb && p->q.n == 0) {
        json_array_append_new(ack, json_integer(j->id));
        detach(j);
        job_free(p, j);
      }
      continue;
    }
    if (j->cancel)
      json_array_append_new(cancel, json_integer(j->id));
    else if (!j->seen) {
      json_t *a = json_object();

      json_object_set_new(a, "id", json_integer(j->id));
      json_object_set(a, "spec", j->spec);
      if (j->dataset != NULL)
        json_object_set(a, "dataset", j->dataset);
      json_array_append_new(assign, a);
    }
  }
  json_object_set_new(ans, "heartbeat_ms", json_integer(p->heartbeat_ms));
  json_object_set_new(ans, "assign", assign);
  json_object_set_new(ans, "cancel", cancel);
  json_object_set_new(ans, "ack", ack);
  json_object_set_new(ans, "stop", json_boolean(n->phase >= PH_TERMINATING));
  *answer = ans;
  return 0;
}

int
cloud_node_log(void *ctx, int64_t node_id, int64_t job_id, int64_t offset,
               const char *data, size_t len, int64_t *size, struct err *e)
{
  struct pool *p = ctx;
  struct pnode *n = live_node(p, node_id, e);
  struct pjob *j;
  struct stat st;
  char *dir = NULL;
  int fd = -1, rc;

  if (n == NULL)
    return e->code;
  j = node_job(n, job_id);
  if (j == NULL)
    return err_set(e, ERR_NOT_FOUND, "job %" PRId64 " is not on node %" PRId64,
                   job_id, node_id);
  dir = cloud_log_dir(p, job_id);
  rc = file_mkdirs(dir, 0750, e);
  if (rc < 0)
    goto out;
  if (j->log_path == NULL) {
    rc = err_set(e, ERR_INTERNAL, "job %" PRId64 " has no log path", job_id);
    goto out;
  }
  fd = open(j->log_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0 || fstat(fd, &st) < 0) {
    rc = err_set(e, ERR_IO, "%s: %s", j->log_path, strerror(errno));
    goto out;
  }
  *size = st.st_size;
  if (offset != st.st_size) {
    rc = err_set(e, ERR_CONFLICT, "the log holds %" PRId64 " bytes, not %"
                 PRId64, (int64_t)st.st_size, offset);
    goto out;
  }
  if (offset + (int64_t)len > MAX_LOG_BYTES) {
    rc = err_set(e, ERR_TOO_LARGE, "a job's log is capped at %lld bytes",
                 MAX_LOG_BYTES);
    goto out;
  }
  for (size_t done = 0; done < len;) {
    ssize_t w = pwrite(fd, data + done, len - done, offset + (off_t)done);

    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      rc = err_set(e, ERR_IO, "%s: %s", j->log_path, strerror(errno));
      goto out;
    }
    done += (size_t)w;
  }
  *size = offset + (int64_t)len;
  rc = 0;
out:
  if (fd >= 0)
    close(fd);
  free(dir);
  return rc;
}

/* ---- open and close ---- */

/* Each field's type is its reader's to check (they name the field
 * the way its meaning says); check_fields() looks at names only. */
const struct jsonx_field adapter_cloud_pool_fields[] = {
    {"name", JX_STRING},          {"kind", JX_STRING},
    {"zones", JX_ARRAY},          {"shapes", JX_ARRAY},
    {"min_nodes", JX_INT},        {"max_nodes", JX_INT},
    {"idle_timeout_s", JX_INT},   {"boot_timeout_s", JX_INT},
    {"lost_after_s", JX_INT},     {"orphan_grace_s", JX_INT},
    {"backoff_s", JX_INT},        {"reconcile_s", JX_INT},
    {"heartbeat_ms", JX_INT},     {"node_agent", JX_OBJECT},
    {"burst", JX_OBJECT},         {NULL, 0}};

/* Every key of config is the pool's or the provider's. */
static int
check_fields(const struct cloud_provider *prov, const json_t *config,
             struct err *e)
{
  const char *key;
  json_t *v;

  json_object_foreach((json_t *)config, key, v) {
    int known = 0;

    for (size_t i = 0; adapter_cloud_pool_fields[i].name != NULL && !known;
         i++)
      known = strcmp(adapter_cloud_pool_fields[i].name, key) == 0;
    for (size_t i = 0; prov->fields[i].name != NULL && !known; i++)
      known = strcmp(prov->fields[i].name, key) == 0;
    if (!known)
      return err_set(e, ERR_CONFIG,
                     "field '%.64s': not a field of %s sites", key,
                     prov->kind);
  }
  return 0;
}

/* A name the startup script can quote and a cloud can tag: no quote,
 * no control character. */
static int
script_safe(const char *s)
{
  for (; *s != '\0'; s++)
    if (*s == '\'' || (unsigned char)*s < 0x20 || *s == 0x7f)
      return 0;
  return 1;
}

const struct jsonx_field adapter_cloud_shape_fields[] = {
    {"name", JX_STRING}, {"type", JX_STRING},   {"gpu_type", JX_STRING},
    {"gpus", JX_INT},    {"market", JX_STRING}, {"accelerator", JX_ANY},
    {NULL, 0}};

static int
read_shapes(struct pool *p, const json_t *config, struct err *e)
{
  const json_t *shapes = json_object_get(config, "shapes");
  size_t i;
  json_t *v;

  if (!json_is_array(shapes) || json_array_size(shapes) == 0 ||
      json_array_size(shapes) > CLOUD_MAX_SHAPES)
    return err_set(e, ERR_CONFIG, "field 'shapes': 1 to %d node shapes are "
                   "needed", CLOUD_MAX_SHAPES);
  json_array_foreach(shapes, i, v) {
    struct cloud_shape *s = &p->shapes[i];
    const char *name, *type, *gpu_type, *market;
    char where[32];
    int rc;

    snprintf(where, sizeof(where), "shapes[%zu].", i);
    if (!json_is_object(v))
      return err_set(e, ERR_CONFIG, "field 'shapes[%zu]' must be an object",
                     i);
    rc = jsonx_check(v, adapter_cloud_shape_fields, where, e);
    if (rc < 0)
      return ERR_CONFIG;
    type = jsonx_str(v, "type");
    name = jsonx_str(v, "name");
    gpu_type = jsonx_str(v, "gpu_type");
    market = jsonx_str(v, "market");
    if (type == NULL || type[0] == '\0' || strlen(type) >= sizeof(s->type) ||
        !script_safe(type))
      return err_set(e, ERR_CONFIG, "field '%stype': the provider's instance "
                     "type, machine type or VM size is needed", where);
    if (name == NULL)
      name = type;
    if (strlen(name) >= sizeof(s->name) || !script_safe(name))
      return err_set(e, ERR_CONFIG, "field '%sname': at most %zu printable "
                     "characters", where, sizeof(s->name) - 1);
    if (gpu_type == NULL || jobspec_gpu_type_problem(gpu_type) != NULL)
      return err_set(e, ERR_CONFIG, "field '%sgpu_type': %s", where,
                     gpu_type == NULL ? "the GPU type is needed"
                                      : jobspec_gpu_type_problem(gpu_type));
    rc = jsonx_int(v, "gpus", 1, 64, -1, &s->gpus, where, e);
    if (rc < 0 || s->gpus < 1)
      return err_set(e, ERR_CONFIG, "field '%sgpus': 1 to 64 GPUs per node",
                     where);
    if (market == NULL || strcmp(market, "on-demand") == 0)
      s->market = CLOUD_ON_DEMAND;
    else if (strcmp(market, "spot") == 0)
      s->market = CLOUD_SPOT;
    else if (strcmp(market, "spot-fallback") == 0)
      s->market = CLOUD_SPOT_FALLBACK;
    else
      return err_set(e, ERR_CONFIG, "field '%smarket': \"on-demand\", "
                     "\"spot\" or \"spot-fallback\"", where);
    for (size_t k = 0; k < i; k++)
      if (strcmp(p->shapes[k].name, name) == 0)
        return err_set(e, ERR_CONFIG, "field '%sname': '%s' is named twice",
                       where, name);
    snprintf(s->name, sizeof(s->name), "%s", name);
    snprintf(s->type, sizeof(s->type), "%s", type);
    snprintf(s->gpu_type, sizeof(s->gpu_type), "%s", gpu_type);
    s->config = v;
  }
  p->nshapes = i;
  return 0;
}

static int
read_zones(struct pool *p, const json_t *config, struct err *e)
{
  const json_t *zones = json_object_get(config, "zones");
  size_t i;
  json_t *v;

  if (!json_is_array(zones) || json_array_size(zones) == 0 ||
      json_array_size(zones) > CLOUD_MAX_ZONES)
    return err_set(e, ERR_CONFIG, "field 'zones': an ordered list of 1 to %d "
                   "zones is needed", CLOUD_MAX_ZONES);
  json_array_foreach(zones, i, v) {
    const char *z = json_string_value(v);

    if (z == NULL || z[0] == '\0' || strlen(z) >= CLOUD_NAME_LEN ||
        !script_safe(z))
      return err_set(e, ERR_CONFIG, "field 'zones[%zu]': a zone name is 1 to "
                     "%d printable characters", i, CLOUD_NAME_LEN - 1);
    for (size_t k = 0; k < i; k++)
      if (strcmp(p->zones[k], z) == 0)
        return err_set(e, ERR_CONFIG, "field 'zones[%zu]': '%s' is named "
                       "twice", i, z);
    snprintf(p->zones[i], CLOUD_NAME_LEN, "%s", z);
  }
  p->nzones = i;
  return 0;
}

const struct jsonx_field adapter_cloud_node_agent_fields[] = {
    {"path", JX_STRING}, {"server", JX_STRING}, {NULL, 0}};

static int
read_agent(struct pool *p, const json_t *config, struct err *e)
{
  const json_t *a = json_object_get(config, "node_agent");
  const char *path, *server;

  if (!json_is_object(a))
    return err_set(e, ERR_CONFIG, "field 'node_agent': an object with the "
                   "'server' URL the nodes dial is needed");
  if (jsonx_check(a, adapter_cloud_node_agent_fields, "node_agent.", e) < 0)
    return ERR_CONFIG;
  path = jsonx_str(a, "path");
  server = jsonx_str(a, "server");
  if (path == NULL)
    path = "/usr/local/bin/tenbin-agent";
  if (path[0] != '/' || !script_safe(path) || strlen(path) > 1024)
    return err_set(e, ERR_CONFIG, "field 'node_agent.path': an absolute path "
                   "without quotes");
  if (server == NULL || !script_safe(server) || strlen(server) > 1024 ||
      (strncmp(server, "https://", 8) != 0 &&
       strncmp(server, "http://", 7) != 0))
    return err_set(e, ERR_CONFIG, "field 'node_agent.server': the http(s) URL "
                   "of tenbind that nodes dial");
  p->agent_path = xstrdup(path);
  p->server = xstrdup(server);
  return 0;
}

static int
read_limits(struct pool *p, const json_t *c, struct err *e)
{
  int64_t idle_s, boot_s, lost_s, orphan_s, backoff_s, reconcile_s;
  int rc;

  /* The autoscaler plans at most 1024 live nodes a site
   * (policies/burst.h's BURST_MAX_LIVE). */
  rc = jsonx_int(c, "max_nodes", 1, 1024, 4, &p->max_nodes, "", e);
  if (rc == 0)
    rc = jsonx_int(c, "min_nodes", 0, 100000, 0, &p->min_nodes, "", e);
  if (rc == 0)
    rc = jsonx_int(c, "idle_timeout_s", 0, 7 * 86400, 600, &idle_s, "", e);
  if (rc == 0)
    /* GPU VMs routinely take over 10 minutes; Azure's own CI waits 30
     * (research/placement-burst.md 2.2). */
    rc = jsonx_int(c, "boot_timeout_s", 1, 86400, 1800, &boot_s, "", e);
  if (rc == 0)
    rc = jsonx_int(c, "lost_after_s", 1, 86400, 120, &lost_s, "", e);
  if (rc == 0)
    rc = jsonx_int(c, "orphan_grace_s", 0, 86400, 300, &orphan_s, "", e);
  if (rc == 0)
    rc = jsonx_int(c, "backoff_s", 0, 86400, 300, &backoff_s, "", e);
  if (rc == 0)
    rc = jsonx_int(c, "reconcile_s", 1, 86400, 60, &reconcile_s, "", e);
  if (rc == 0)
    rc = jsonx_int(c, "heartbeat_ms", 100, 60000, 1000, &p->heartbeat_ms, "",
                   e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  if (p->min_nodes > p->max_nodes)
    return err_set(e, ERR_CONFIG, "field 'min_nodes': %" PRId64 " is more "
                   "than max_nodes (%" PRId64 ")", p->min_nodes, p->max_nodes);
  rc = adapter_burst_read(json_object_get(c, "burst"), &p->burst, e);
  if (rc < 0)
    return rc;
  p->idle_timeout_ms = idle_s * 1000;
  p->boot_timeout_ms = boot_s * 1000;
  p->lost_after_ms = lost_s * 1000;
  p->orphan_grace_ms = orphan_s * 1000;
  p->backoff_ms = backoff_s * 1000;
  p->reconcile_ms = reconcile_s * 1000;
  return 0;
}

static int
load_node(const struct adapter_node *v, void *arg)
{
  struct pool *p = arg;
  struct pnode *n = xcalloc(1, sizeof(*n));
  int64_t now = time_now_ms();

  list_init(&n->jobs);
  n->pool = p;
  n->id = v->id;
  n->shape = 0;
  for (size_t i = 0; i < p->nshapes; i++)
    if (v->shape != NULL && strcmp(p->shapes[i].name, v->shape) == 0)
      n->shape = (int)i;
  for (size_t i = 0; i < p->nzones; i++)
    if (v->zone != NULL && strcmp(p->zones[i], v->zone) == 0)
      n->zone_ix = (int)i;
  n->spot = v->spot;
  n->attempt = v->attempt;
  n->phase = PH_LAUNCHING;
  for (int i = 0; i <= PH_ENDED; i++)
    if (v->state != NULL && strcmp(phase_names[i], v->state) == 0)
      n->phase = (enum phase)i;
  if (v->state != NULL &&
      (strcmp(v->state, "idle") == 0 || strcmp(v->state, "busy") == 0))
    n->phase = PH_READY;
  if (v->vm_id != NULL)
    snprintf(n->vm_id, sizeof(n->vm_id), "%s", v->vm_id);
  n->created_ms = v->created_ms;
  n->launched_ms = v->launched_ms;
  n->registered_ms = v->registered_ms;
  /* The agent had no one to talk to while tenbind was down: its silence
   * counts from now. */
  n->seen_ms = now;
  n->idle_since_ms = now;
  if (v->reason != NULL)
    snprintf(n->reason, sizeof(n->reason), "%s", v->reason);
  n->idle_gpus = v->idle_gpus;
  n->idle_from_ms = v->idle_from_ms;
  /* Nor could a booting VM reach it: its boot timeout starts again. */
  n->boot_from_ms = now;
  if (n->phase == PH_BOOTING && n->launched_ms == 0)
    n->launched_ms = now;
  list_insert_tail(&p->nodes, &n->link);
  if (n->phase < PH_TERMINATING)
    count_live(n, 1);
  return 0;
}

static void
pool_free(struct pool *p)
{
  struct list *q, *tmp;

  LIST_FOREACH_SAFE(q, tmp, &p->jobs) {
    job_free(p, LIST_ENTRY(q, struct pjob, link));
  }
  LIST_FOREACH_SAFE(q, tmp, &p->nodes) {
    struct pnode *n = LIST_ENTRY(q, struct pnode, link);

    list_remove(&n->link);
    free(n);
  }
  json_decref(p->config);
  free(p->orphans);
  free(p->site);
  free(p->kind);
  free(p->instance);
  free(p->logs_dir);
  free(p->agent_path);
  free(p->server);
  free(p);
}

int
cloud_open(const struct cloud_provider *prov,
           const struct adapter_env *env, const json_t *config, void **ctx,
           struct err *e)
{
  struct pool *p;
  struct cloud_env cenv;
  struct buf b;
  int rc;

  if (!json_is_object(config))
    return err_set(e, ERR_CONFIG, "site config must be an object");
  if (env->nodes == NULL || env->state_dir == NULL || env->instance == NULL)
    return err_set(e, ERR_INTERNAL, "a %s site needs a node store",
                   prov->kind);
  rc = check_fields(prov, config, e);
  if (rc < 0)
    return rc;
  p = xcalloc(1, sizeof(*p));
  list_init(&p->nodes);
  list_init(&p->jobs);
  p->loop = env->loop;
  p->prov = prov;
  p->site = xstrdup(env->site_name != NULL ? env->site_name : prov->kind);
  p->kind = xstrdup(prov->kind);
  p->instance = xstrdup(env->instance);
  p->store = env->nodes;
  p->store_arg = env->nodes_arg;
  p->config = json_incref((json_t *)config);
  buf_init(&b, 8192);
  rc = buf_addf(&b, "%s/nodes/%s", env->state_dir, p->site);
  p->logs_dir = buf_take(&b, NULL);
  if (rc == 0)
    rc = read_shapes(p, config, e);
  if (rc == 0)
    rc = read_zones(p, config, e);
  if (rc == 0)
    rc = read_limits(p, config, e);
  if (rc == 0)
    rc = read_agent(p, config, e);
  if (rc < 0)
    goto out;
  cenv = (struct cloud_env){.loop = env->loop,
                            .site_name = p->site,
                            .shapes = p->shapes,
                            .nshapes = p->nshapes};
  rc = prov->open(&cenv, config, &p->pctx, e);
  if (rc < 0)
    goto out;
  rc = p->store->list(p->store_arg, load_node, p, e);
  if (rc < 0) {
    prov->close(p->pctx, NULL, NULL);
    goto out;
  }
  adapter_queue_init(&p->q, env->loop, env->update, env->update_arg);
  uv_timer_init(env->loop, &p->tick);
  p->tick.data = p;
  p->handles = 2;
  uv_timer_start(&p->tick, tick, 0, TICK_MS);
  *ctx = p;
  p = NULL;
out:
  if (p != NULL)
    pool_free(p);
  return rc;
}

static void
handle_closed(uv_handle_t *h)
{
  struct pool *p = h->data;

  if (--p->handles > 0)
    return;
  if (p->close_cb != NULL)
    p->close_cb(p->close_arg);
  pool_free(p);
}

static void
provider_closed(void *arg)
{
  struct pool *p = arg;

  p->q.timer.data = p;
  adapter_queue_close(&p->q, handle_closed);
  uv_close((uv_handle_t *)&p->tick, handle_closed);
}

void
cloud_close(void *ctx, void (*cb)(void *arg), void *arg)
{
  struct pool *p = ctx;

  p->closing = 1;
  p->close_cb = cb;
  p->close_arg = arg;
  uv_timer_stop(&p->tick);
  p->prov->close(p->pctx, provider_closed, p);
}

void
cloud_prices(void *ctx, adapter_prices_cb cb, void *arg)
{
  struct pool *p = ctx;

  cloud_prices_ask(p->loop, p->prov, p->pctx, p->shapes, p->nshapes, cb,
                   arg);
}
