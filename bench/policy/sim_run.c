/*
 * One policy over one trace, in simulated time (sim.h).
 *
 * The world: an owned site of GPUs (one pool: fragmentation across its
 * nodes is not modelled, as the placement policy does not model it)
 * and elastic clouds whose nodes of 8 GPUs are launched, boot, may fail
 * to launch (no capacity) or to boot in time, may be interrupted when
 * spot, and are billed per second from launch to release.  A job takes
 * GPUs on the owned site, or on one cloud node (up to 8 GPUs) or whole
 * nodes (16-64); it first fetches its dataset where the site lacks it;
 * an interrupted job loses its work since its last checkpoint and goes
 * back to the queue in its old place (age).
 *
 * Events (arrivals, ends, boots, failures, interruptions) run in time
 * order from a heap; the policy runs in passes, at most every
 * pass_gap after something changed and every tick anyway.  Every
 * policy schedules the owned site with the same code: the cost
 * placement policy of policies/ over the owned site alone, which is
 * oldest first with EASY backfilling.  They differ in what goes to the
 * clouds, when, and on what.  tenbin runs placement over every site and
 * burst_decide for the clouds, as tenbind's scheduler and autoscaler
 * do.
 *
 * Money is counted in the measured week only: the owned site's sunk
 * cost over the week, the marginal cost of the GPU-time it ran, cloud
 * node time (compute: the GPU-time jobs held, at their node's rate;
 * idle: the rest of the node time billed), and egress.  Waits and
 * deadlines are those of the jobs submitted in that week.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/burst.h"
#include "policies/placement.h"
#include "sim.h"

#define NSITES_MAX (1 + SIM_MAX_CLOUDS)
/* tenbind's autoscaler timer (SCALE_TICK_MS, broker/autoscaler.c). */
#define SCALE_TICK_MS (15 * SIM_SEC)
#define SHAPE_OD 0
#define SHAPE_SPOT 1

static const char *const policy_names[SIM_NPOLICIES] = {
    "onprem-only",    "burst-when-busy", "spill-5min",
    "failover-10min", "cheapest-rented", "tenbin"};

const char *
sim_policy_name(enum sim_policy p)
{
  return p < SIM_NPOLICIES ? policy_names[p] : "?";
}

enum ev_type { EV_ARRIVE, EV_END, EV_UP, EV_FAIL, EV_INTERRUPT, EV_PASS,
               EV_TICK };

struct ev {
  int64_t t;
  uint64_t seq;   /* ties in time run in the order scheduled */
  int32_t id;
  uint32_t gen;   /* a job's or node's generation when scheduled */
  int type;
};

struct heap {
  struct ev *a;
  size_t n, cap;
  uint64_t seq;
};

enum job_state { J_FUTURE, J_QUEUED, J_ALLOC, J_RUN, J_DONE };

struct rjob {
  int64_t queued_since;
  int64_t waited_ms;
  int64_t seg_start;     /* RUN: when its work (re)started */
  int64_t pred_end;      /* RUN: its key in its site's running list */
  int64_t progress_ms;   /* work kept (at checkpoints) */
  int64_t done_ms;
  int64_t cloud_micro, od_micro;
  uint32_t gen;
  int16_t site;          /* -1 none, 0 owned, 1.. cloud */
  uint8_t state, nnodes;
  uint8_t force_od, used_spot, moved;
  int32_t nodes[SIM_MAX_JOB_NODES];
};

enum node_state { N_BOOT, N_UP, N_GONE };

struct node {
  int64_t launched_ms, up_ms, idle_since_ms;
  int32_t site, owner;   /* owner: a job's own VM, or -1 (pooled) */
  int32_t used, njobs;
  int32_t live_idx;      /* in its site's live list */
  uint8_t spot, state, billed;
  int32_t jobs[8];
};

/* A running job's predicted end: the lists are kept in this order. */
struct rend {
  int64_t end;
  int32_t job, gpus;
};

struct runlist {
  struct rend *a;
  size_t n, cap;
};

struct cloud {
  const struct sim_cloud *c;
  int32_t *live;         /* node ids booting or up */
  size_t nlive, caplive;
  struct runlist run;
  int64_t max_nodes;
  int64_t backoff_until;
  int64_t od_gpu, spot_gpu;  /* per GPU-hour */
  struct burst_boot boot[2];
  struct burst_forecast fc;
  int64_t interruptions, spot_node_ms;
  int64_t last_launch, last_release;
  int64_t boot_est[2];   /* this pass's burst_boot_estimate per shape */
};

struct world {
  const struct sim_params *p;
  const struct sim_trace *t;
  enum sim_policy pol;
  int64_t wv_micro;
  int64_t now;
  struct sim_rng rng;
  struct heap h;
  struct rjob *j;
  int32_t *q;
  size_t nq, capq;
  struct node *nodes;
  size_t nnodes, capnodes;
  int64_t op_total, op_free;
  struct runlist oprun;
  uint64_t has_data[NSITES_MAX][4];
  int nc;
  struct cloud c[SIM_MAX_CLOUDS];
  int order_od[SIM_MAX_CLOUDS];         /* clouds by on-demand price */
  int offers[2 * SIM_MAX_CLOUDS];       /* (cloud, spot) by price */
  int noffers;
  int64_t last_pass, pass_at, backoff_ms;
  int64_t last_scale;                    /* tenbin's last burst_decide */
  int64_t sunk_rate, marginal_rate;
  int64_t queued_gpus;
  int64_t last_t;                        /* integrals are up to here */
  double *demand;                        /* GPU-ms per hour of the week */
  double busy_ms;                        /* owned GPU-ms busy */
  int64_t node_micro;
  int64_t last_cover;
  /* a pass's scratch */
  struct placement_end *ends;
  size_t capends;
  struct burst_job *bjobs[SIM_MAX_CLOUDS];
  size_t nbjobs[SIM_MAX_CLOUDS], capbjobs[SIM_MAX_CLOUDS];
  struct burst_node *bnodes;
  enum burst_reason *bplan;
  size_t capbnodes, capbplan;
  int oom;
  struct sim_result *r;
};

/* ---- memory: grow or note the failure (reported at the end) ---- */

static int
grow(struct world *w, void **a, size_t *cap, size_t need, size_t size)
{
  size_t n = *cap ? *cap : 16;
  void *g;

  if (need <= *cap)
    return 0;
  while (n < need)
    n *= 2;
  g = realloc(*a, n * size);
  if (g == NULL) {
    w->oom = 1;
    return -1;
  }
  *a = g;
  *cap = n;
  return 0;
}

/* ---- the event heap ---- */

static int
ev_before(const struct ev *a, const struct ev *b)
{
  return a->t != b->t ? a->t < b->t : a->seq < b->seq;
}

static void
push(struct world *w, int64_t t, int type, int32_t id, uint32_t gen)
{
  struct heap *h = &w->h;
  size_t i;

  if (grow(w, (void **)&h->a, &h->cap, h->n + 1, sizeof(*h->a)) < 0)
    return;
  i = h->n++;
  h->a[i] = (struct ev){t, h->seq++, id, gen, type};
  while (i > 0) {
    size_t up = (i - 1) / 2;
    struct ev tmp;

    if (!ev_before(&h->a[i], &h->a[up]))
      break;
    tmp = h->a[i];
    h->a[i] = h->a[up];
    h->a[up] = tmp;
    i = up;
  }
}

static struct ev
pop(struct heap *h)
{
  struct ev top = h->a[0];
  size_t i = 0;

  h->a[0] = h->a[--h->n];
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    struct ev tmp;

    if (l < h->n && ev_before(&h->a[l], &h->a[m]))
      m = l;
    if (r < h->n && ev_before(&h->a[r], &h->a[m]))
      m = r;
    if (m == i)
      break;
    tmp = h->a[i];
    h->a[i] = h->a[m];
    h->a[m] = tmp;
    i = m;
  }
  return top;
}

/* ---- running lists, by predicted end ---- */

static int
rend_before(int64_t end, int32_t job, const struct rend *b)
{
  return end != b->end ? end < b->end : job < b->job;
}

static size_t
rend_find(const struct runlist *l, int64_t end, int32_t job)
{
  size_t lo = 0, hi = l->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;

    if (rend_before(l->a[mid].end, l->a[mid].job, &(struct rend){end, job, 0}))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void
rend_add(struct world *w, struct runlist *l, int64_t end, int32_t job,
         int32_t gpus)
{
  size_t at;

  if (grow(w, (void **)&l->a, &l->cap, l->n + 1, sizeof(*l->a)) < 0)
    return;
  at = rend_find(l, end, job);
  memmove(&l->a[at + 1], &l->a[at], (l->n - at) * sizeof(*l->a));
  l->a[at] = (struct rend){end, job, gpus};
  l->n++;
}

static void
rend_del(struct runlist *l, int64_t end, int32_t job)
{
  size_t at = rend_find(l, end, job);

  if (at < l->n && l->a[at].job == job) {
    memmove(&l->a[at], &l->a[at + 1], (l->n - at - 1) * sizeof(*l->a));
    l->n--;
  }
}

/* ---- time, the window, and the integrals ---- */

static int64_t
clip(const struct world *w, int64_t a, int64_t b)
{
  int64_t lo = a > w->t->t1_ms ? a : w->t->t1_ms;
  int64_t hi = b < w->t->t2_ms ? b : w->t->t2_ms;

  return hi > lo ? hi - lo : 0;
}

static int
in_window(const struct world *w, int64_t t)
{
  return t >= w->t->t1_ms && t < w->t->t2_ms;
}

/* Bring the demand and busy integrals up to t. */
static void
advance(struct world *w, int64_t t)
{
  int64_t from = w->last_t;
  double busy = (double)(w->op_total - w->op_free);
  double want = busy + (double)w->queued_gpus;

  if (t <= from)
    return;
  w->last_t = t;
  if (t <= w->t->t1_ms || from >= w->t->t2_ms)
    return;
  if (from < w->t->t1_ms)
    from = w->t->t1_ms;
  if (t > w->t->t2_ms)
    t = w->t->t2_ms;
  w->busy_ms += busy * (double)(t - from);
  while (from < t) {
    int64_t hour = (from - w->t->t1_ms) / SIM_HOUR;
    int64_t next = w->t->t1_ms + (hour + 1) * SIM_HOUR;

    if (next > t)
      next = t;
    w->demand[hour] += want * (double)(next - from);
    from = next;
  }
}

/* ---- the queue: job indices, oldest (smallest) first ---- */

static void
enqueue(struct world *w, int32_t id)
{
  size_t at = w->nq;

  if (grow(w, (void **)&w->q, &w->capq, w->nq + 1, sizeof(*w->q)) < 0)
    return;
  /* Arrivals come in order; a requeued job goes back to its place. */
  if (at > 0 && w->q[at - 1] > id) {
    size_t lo = 0, hi = w->nq;

    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;

      if (w->q[mid] < id)
        lo = mid + 1;
      else
        hi = mid;
    }
    at = lo;
    memmove(&w->q[at + 1], &w->q[at], (w->nq - at) * sizeof(*w->q));
  }
  w->q[at] = id;
  w->nq++;
  w->j[id].state = J_QUEUED;
  w->queued_gpus += w->t->jobs[id].gpus;
}

/* Drop the jobs a pass took off the queue. */
static void
compact(struct world *w)
{
  size_t k = 0;

  for (size_t i = 0; i < w->nq; i++) {
    if (w->j[w->q[i]].state == J_QUEUED)
      w->q[k++] = w->q[i];
  }
  w->nq = k;
}

static void
dequeued(struct world *w, int32_t id)
{
  w->queued_gpus -= w->t->jobs[id].gpus;
}

/* A pass soon: at most one every pass_gap. */
static void
touch(struct world *w)
{
  int64_t at = w->last_pass + w->p->pass_gap_ms;

  if (w->pass_at != 0)
    return;
  if (at < w->now)
    at = w->now;
  w->pass_at = at;
  push(w, at, EV_PASS, 0, 0);
}

/* ---- datasets ---- */

static int
has_data(const struct world *w, int site, int ds)
{
  /* The datasets live in the first cloud's object store. */
  if (ds < 0 || site == 1)
    return 1;
  return (w->has_data[site][ds / 64] >> (ds % 64)) & 1;
}

/* Fetch the job's dataset to site if missing: egress billed, and the
 * time it takes. */
static int64_t
fetch(struct world *w, int32_t id, int site)
{
  int ds = w->t->jobs[id].dataset;
  int64_t bytes;

  if (has_data(w, site, ds))
    return 0;
  bytes = w->t->dataset_bytes[ds];
  w->has_data[site][ds / 64] |= 1ULL << (ds % 64);
  if (in_window(w, w->now))
    w->r->egress_micro += price_egress(w->c[0].c->egress_micro_per_gb, bytes);
  return (int64_t)((double)bytes / w->p->dataset_bytes_per_s * 1000.0);
}

/* ---- jobs start, end, and go back to the queue ---- */

static int64_t
remaining_pred(const struct world *w, int32_t id)
{
  int64_t r = w->t->jobs[id].predicted_ms - w->j[id].progress_ms;

  return r > SIM_MIN ? r : SIM_MIN;
}

static struct runlist *
runlist_of(struct world *w, int site)
{
  return site == 0 ? &w->oprun : &w->c[site - 1].run;
}

/* The job's work (re)starts at site after its dataset arrives. */
static void
begin(struct world *w, int32_t id, int site)
{
  struct rjob *j = &w->j[id];
  const struct sim_job *s = &w->t->jobs[id];

  j->state = J_RUN;
  j->site = (int16_t)site;
  j->seg_start = w->now + fetch(w, id, site);
  j->waited_ms += j->seg_start - j->queued_since;
  j->pred_end = j->seg_start + remaining_pred(w, id);
  rend_add(w, runlist_of(w, site), j->pred_end, id, s->gpus);
  push(w, j->seg_start + (s->run_ms - j->progress_ms), EV_END, id, j->gen);
}

static void
start_onprem(struct world *w, int32_t id)
{
  dequeued(w, id);
  w->op_free -= w->t->jobs[id].gpus;
  w->j[id].nnodes = 0;
  begin(w, id, 0);
}

/* GPUs of the job on each of its nodes. */
static int32_t
per_node(const struct sim_job *s)
{
  return s->gpus > 8 ? 8 : s->gpus;
}

/* The job holds nodes[0..n) of cloud ci: it starts once all are up. */
static void
alloc_nodes(struct world *w, int32_t id, int ci, const int32_t *ids, int n)
{
  struct rjob *j = &w->j[id];
  int32_t g = per_node(&w->t->jobs[id]);
  int up = 1;

  dequeued(w, id);
  j->state = J_ALLOC;
  j->site = (int16_t)(ci + 1);
  j->nnodes = (uint8_t)n;
  for (int i = 0; i < n; i++) {
    struct node *nd = &w->nodes[ids[i]];

    j->nodes[i] = ids[i];
    nd->used += g;
    nd->jobs[nd->njobs++] = id;
    if (nd->spot)
      j->used_spot = 1;
    up = up && nd->state == N_UP;
  }
  if (up)
    begin(w, id, ci + 1);
}

/* The segment that ran since seg_start, billed and counted. */
static void
close_segment(struct world *w, int32_t id)
{
  struct rjob *j = &w->j[id];
  const struct sim_job *s = &w->t->jobs[id];
  int64_t len = w->now - j->seg_start, in;

  if (len <= 0)
    return;
  in = clip(w, j->seg_start, w->now);
  if (j->site == 0) {
    w->r->marginal_micro += price_charge(w->marginal_rate, s->gpus, in);
    w->r->onprem_gpu_ms += in * s->gpus;
    return;
  }
  for (int i = 0; i < j->nnodes; i++) {
    const struct node *nd = &w->nodes[j->nodes[i]];
    struct cloud *c = &w->c[nd->site];
    int64_t rate = nd->spot ? c->spot_gpu : c->od_gpu;
    int32_t g = per_node(s);

    w->r->cloud_compute_micro += price_charge(rate, g, in);
    w->r->cloud_gpu_ms += in * g;
    j->cloud_micro += price_charge(rate, g, len);
    j->od_micro += price_charge(c->od_gpu, g, len);
    if (w->pol == SIM_TENBIN)
      burst_forecast_add(&c->fc, j->seg_start,
                         w->now, g);
  }
}

static void node_release(struct world *w, int32_t nid);

/* Give back what the job holds: owned GPUs, or its part of its nodes
 * (its own VMs are released). */
static void
free_job(struct world *w, int32_t id)
{
  struct rjob *j = &w->j[id];
  const struct sim_job *s = &w->t->jobs[id];

  if (j->state == J_RUN)
    rend_del(runlist_of(w, j->site), j->pred_end, id);
  if (j->site == 0) {
    w->op_free += s->gpus;
  } else {
    for (int i = 0; i < j->nnodes; i++) {
      struct node *nd = &w->nodes[j->nodes[i]];

      for (int k = 0; k < nd->njobs; k++) {
        if (nd->jobs[k] == id) {
          nd->jobs[k] = nd->jobs[--nd->njobs];
          break;
        }
      }
      nd->used -= per_node(s);
      if (nd->used == 0)
        nd->idle_since_ms = w->now;
      if (nd->owner == id && nd->state != N_GONE)
        node_release(w, j->nodes[i]);
    }
  }
  j->nnodes = 0;
  j->site = -1;
}

/* Back to the queue: a running job keeps the work up to its last
 * checkpoint; the rest is lost. */
static void
requeue(struct world *w, int32_t id)
{
  struct rjob *j = &w->j[id];
  const struct sim_job *s = &w->t->jobs[id];

  if (j->state == J_RUN) {
    int64_t worked = w->now - j->seg_start, done, kept;

    close_segment(w, id);
    if (worked < 0)
      worked = 0;
    done = j->progress_ms + worked;
    kept = done / w->p->checkpoint_ms * w->p->checkpoint_ms;
    if (in_window(w, w->now))
      w->r->lost_gpu_ms += (done - kept) * s->gpus;
    j->progress_ms = kept;
    j->queued_since = w->now;
  }
  free_job(w, id);
  j->gen++;
  enqueue(w, id);
  touch(w);
}

static void
job_end(struct world *w, int32_t id)
{
  struct rjob *j = &w->j[id];

  close_segment(w, id);
  free_job(w, id);
  j->state = J_DONE;
  j->done_ms = w->now;
  touch(w);
}

/* ---- cloud nodes ---- */

static void
live_add(struct world *w, struct cloud *c, int32_t nid)
{
  if (grow(w, (void **)&c->live, &c->caplive, c->nlive + 1,
           sizeof(*c->live)) < 0)
    return;
  w->nodes[nid].live_idx = (int32_t)c->nlive;
  c->live[c->nlive++] = nid;
}

static void
live_del(struct world *w, struct cloud *c, int32_t nid)
{
  int32_t at = w->nodes[nid].live_idx, last = c->live[c->nlive - 1];

  c->live[at] = last;
  w->nodes[last].live_idx = at;
  c->nlive--;
}

/* Launch a node: it boots, or fails (no capacity, or a boot past the
 * timeout), and a spot one may be interrupted.  Its id, or -1. */
static int32_t
node_launch(struct world *w, int ci, int spot, int32_t owner)
{
  struct cloud *c = &w->c[ci];
  struct node *nd;
  int32_t nid;
  double boot_ms;

  if (grow(w, (void **)&w->nodes, &w->capnodes, w->nnodes + 1,
           sizeof(*w->nodes)) < 0)
    return -1;
  nid = (int32_t)w->nnodes++;
  nd = &w->nodes[nid];
  memset(nd, 0, sizeof(*nd));
  nd->launched_ms = w->now;
  nd->idle_since_ms = w->now;
  nd->site = ci;
  nd->owner = owner;
  nd->spot = (uint8_t)spot;
  nd->state = N_BOOT;
  nd->billed = 1;
  live_add(w, c, nid);
  c->last_launch = w->now;
  if (in_window(w, w->now))
    w->r->launches++;
  if (sim_rng_uniform(&w->rng) < (spot ? c->c->ice_spot : c->c->ice)) {
    nd->billed = 0; /* a launch refused is not billed */
    push(w, w->now + w->p->ice_ms, EV_FAIL, nid, 0);
    return nid;
  }
  boot_ms = sim_rng_lognormal(&w->rng, c->c->boot_median_s,
                              c->c->boot_sigma) * 1000.0;
  if (boot_ms > (double)w->p->boot_timeout_ms)
    push(w, w->now + w->p->boot_timeout_ms, EV_FAIL, nid, 0);
  else
    push(w, w->now + (int64_t)boot_ms, EV_UP, nid, 0);
  if (spot) {
    double rate = c->c->interrupts_per_hour * w->p->interrupt_x;

    if (rate > 0)
      push(w, w->now + (int64_t)(sim_rng_exp(&w->rng, 1.0 / rate) *
                                 (double)SIM_HOUR),
           EV_INTERRUPT, nid, 0);
  }
  return nid;
}

/* The node is gone (released, interrupted, failed): billed to now. */
static void
node_gone(struct world *w, int32_t nid)
{
  struct node *nd = &w->nodes[nid];
  struct cloud *c = &w->c[nd->site];
  int64_t rate = nd->spot ? c->c->spot_micro : c->c->od_micro;
  int64_t life = w->now - nd->launched_ms;

  nd->state = N_GONE;
  live_del(w, c, nid);
  if (nd->spot && nd->up_ms > 0)
    c->spot_node_ms += w->now - nd->up_ms;
  if (!nd->billed)
    return;
  w->node_micro += price_charge(rate, 1, clip(w, nd->launched_ms, w->now));
  if (life < w->p->billing_min_ms && in_window(w, w->now))
    w->node_micro += price_charge(rate, 1, w->p->billing_min_ms - life);
}

static void
node_release(struct world *w, int32_t nid)
{
  w->c[w->nodes[nid].site].last_release = w->now;
  node_gone(w, nid);
}

/* The node is lost: its jobs go back to the queue. */
static void
node_lost(struct world *w, int32_t nid)
{
  struct node *nd = &w->nodes[nid];

  while (nd->njobs > 0)
    requeue(w, nd->jobs[nd->njobs - 1]);
  if (nd->state != N_GONE)
    node_gone(w, nid);
}

static void
on_up(struct world *w, int32_t nid)
{
  struct node *nd = &w->nodes[nid];
  struct cloud *c = &w->c[nd->site];

  if (nd->state != N_BOOT)
    return;
  nd->state = N_UP;
  nd->up_ms = w->now;
  burst_boot_add(&c->boot[nd->spot ? SHAPE_SPOT : SHAPE_OD],
                 w->now - nd->launched_ms);
  if (nd->used == 0)
    nd->idle_since_ms = w->now;
  for (int k = 0; k < nd->njobs; k++) {
    int32_t id = nd->jobs[k];
    struct rjob *j = &w->j[id];
    int up = 1;

    if (j->state != J_ALLOC)
      continue;
    for (int i = 0; i < j->nnodes; i++)
      up = up && w->nodes[j->nodes[i]].state == N_UP;
    if (up)
      begin(w, id, nd->site + 1);
  }
  touch(w);
}

static void
on_fail(struct world *w, int32_t nid)
{
  struct node *nd = &w->nodes[nid];

  if (nd->state != N_BOOT)
    return;
  if (in_window(w, w->now))
    w->r->launch_failures++;
  w->c[nd->site].backoff_until = w->now + w->backoff_ms;
  node_lost(w, nid);
  touch(w);
}

static void
on_interrupt(struct world *w, int32_t nid)
{
  struct node *nd = &w->nodes[nid];

  if (nd->state == N_GONE)
    return;
  if (in_window(w, w->now))
    w->r->interruptions++;
  w->c[nd->site].interruptions++;
  node_lost(w, nid);
  touch(w);
}

/* ---- what the anchors do with the clouds ---- */

static int
backing_off(const struct world *w, int ci)
{
  return w->now < w->c[ci].backoff_until;
}

/* Pooled nodes (Slurm power saving, a cluster autoscaler): room on a
 * live on-demand node, booting or up, else new nodes, on the clouds in
 * order of on-demand price. */
static int
pool_alloc(struct world *w, int32_t id)
{
  const struct sim_job *s = &w->t->jobs[id];
  int32_t g = per_node(s), need = s->gpus > 8 ? s->gpus / 8 : 1;

  for (int o = 0; o < w->nc; o++) {
    int ci = w->order_od[o];
    struct cloud *c = &w->c[ci];
    int32_t ids[SIM_MAX_JOB_NODES];
    int n = 0;

    if (backing_off(w, ci))
      continue;
    for (size_t k = 0; k < c->nlive && n < need; k++) {
      const struct node *nd = &w->nodes[c->live[k]];

      if (nd->owner < 0 && !nd->spot && 8 - nd->used >= g &&
          (need == 1 || nd->used == 0))
        ids[n++] = c->live[k];
    }
    if ((int64_t)c->nlive + (need - n) > c->max_nodes)
      continue;
    while (n < need) {
      int32_t nid = node_launch(w, ci, 0, -1);

      if (nid < 0)
        return 0;
      ids[n++] = nid;
    }
    alloc_nodes(w, id, ci, ids, n);
    return 1;
  }
  return 0;
}

/* The job's own VMs (SkyPilot): on the first offer, in order of price,
 * whose cloud is not backing off and has room. */
static int
vm_alloc(struct world *w, int32_t id, int spot_too)
{
  const struct sim_job *s = &w->t->jobs[id];
  int need = s->gpus > 8 ? s->gpus / 8 : 1;

  for (int o = 0; o < w->noffers; o++) {
    int ci = w->offers[o] / 2, spot = w->offers[o] % 2;
    struct cloud *c = &w->c[ci];
    int32_t ids[SIM_MAX_JOB_NODES];

    if ((spot && !spot_too) || backing_off(w, ci) ||
        (int64_t)c->nlive + need > c->max_nodes)
      continue;
    for (int n = 0; n < need; n++) {
      ids[n] = node_launch(w, ci, spot, id);
      if (ids[n] < 0)
        return 0;
    }
    alloc_nodes(w, id, ci, ids, need);
    return 1;
  }
  return 0;
}

/* Pooled idle nodes past the timeout are released (SuspendTime, the
 * autoscaler's scale-down). */
static void
release_idle(struct world *w, int64_t idle_ms)
{
  for (int ci = 0; ci < w->nc; ci++) {
    struct cloud *c = &w->c[ci];

    for (size_t k = 0; k < c->nlive;) {
      int32_t nid = c->live[k];
      const struct node *nd = &w->nodes[nid];

      if (nd->state == N_UP && nd->used == 0 && nd->owner < 0 &&
          w->now - nd->idle_since_ms >= idle_ms)
        node_release(w, nid); /* the last live node moved to k */
      else
        k++;
    }
  }
}

/* ---- the placement snapshot ---- */

static const char h100[] = "h100";

/* A job that runs past its prediction is taken to end this soon
 * (tenbind's COST_OVERRUN_MS, broker/costing.c). */
#define OVERRUN_MS (60 * SIM_SEC)

/* --overrun grows: a job past its prediction is predicted to run as
 * long again as it has overrun (at least OVERRUN_MS more): one that has
 * run an hour past its prediction is not about to end.  The list is by
 * predicted end, so its overdue prefix, pushed out so, comes in reverse
 * order: the two runs merge in one pass, no sort. */
static const struct placement_end *
fill_ends_grow(struct world *w, const struct runlist *l, size_t at, size_t *n,
               size_t overdue)
{
  int64_t sum = 0;
  size_t a = overdue, b = overdue, k = 0;

  if (grow(w, (void **)&w->ends, &w->capends, at + l->n + 1,
           sizeof(*w->ends)) < 0) {
    *n = 0;
    return NULL;
  }
  while (k < l->n) {
    int64_t late = INT64_MAX, end;
    const struct rend *r;

    if (a > 0) {
      int64_t over = w->now - l->a[a - 1].end;

      late = w->now + (over > OVERRUN_MS ? over : OVERRUN_MS);
    }
    if (b < l->n && l->a[b].end < late) {
      r = &l->a[b++];
      end = r->end;
    } else {
      r = &l->a[--a];
      end = late;
    }
    sum += r->gpus;
    w->ends[at + k++] = (struct placement_end){end, sum};
  }
  *n = l->n;
  return &w->ends[at];
}

/* A pool's predicted ends with running sums of GPUs, from the list;
 * the list is in order, so the overdue ones, first, stay in order. */
static const struct placement_end *
fill_ends(struct world *w, const struct runlist *l, size_t at, size_t *n)
{
  int64_t sum = 0, soonest = w->now + OVERRUN_MS;

  if (w->p->overrun_grows) {
    size_t lo = 0, hi = l->n;

    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;

      if (l->a[mid].end < w->now)
        lo = mid + 1;
      else
        hi = mid;
    }
    return fill_ends_grow(w, l, at, n, lo);
  }

  if (grow(w, (void **)&w->ends, &w->capends, at + l->n + 1,
           sizeof(*w->ends)) < 0) {
    *n = 0;
    return NULL;
  }
  for (size_t i = 0; i < l->n; i++) {
    sum += l->a[i].gpus;
    w->ends[at + i] = (struct placement_end){
        l->a[i].end > soonest ? l->a[i].end : soonest, sum};
  }
  *n = l->n;
  return &w->ends[at];
}

static void
onprem_site(struct world *w, struct placement_site *s,
            struct placement_cost_site *cs)
{
  memset(s, 0, sizeof(*s));
  memset(cs, 0, sizeof(*cs));
  s->name = "onprem";
  s->reachable = 1;
  s->nodes = w->p->onprem_nodes * w->p->scale;
  s->npools = 1;
  s->pools[0] = (struct placement_pool){h100, w->op_total, w->op_free, 8, 0};
  cs->pools[0].priced = 1;
  cs->pools[0].rate_micro = w->marginal_rate;
  cs->pools[0].ends = fill_ends(w, &w->oprun, 0, &cs->pools[0].nends);
}

/* The oldest waiting job reserves: held-behind younger ones may pass it
 * only by ending first (EASY backfilling, placement.h). */
static void
keep_waiting(struct placement_cost_site *cs, int pick, int64_t gpus,
             const struct placement_request *req,
             const struct placement_decision *d,
             struct placement_reservation *res, size_t *nres)
{
  if (pick < 0)
    return;
  cs[pick].pools[0].ahead_gpus += gpus;
  if (*nres == 0 && placement_cost_reservation(req, d, res))
    *nres = 1;
}

static void
request_of(const struct sim_job *s, struct placement_request *req)
{
  memset(req, 0, sizeof(*req));
  req->gpus = s->gpus;
  req->gpu_type = h100;
  req->nodes = s->gpus > 8 ? s->gpus / 8 : 1;
  req->gpus_per_node = per_node(s);
}

/* The anchors: the owned site first, then each its own rule. */
static void
anchor_pass(struct world *w)
{
  struct placement_site site;
  struct placement_cost_site cs;
  struct placement_reservation res;
  struct placement_decision d;
  struct placement_cost cost;
  size_t nres = 0, limit = w->nq < (size_t)w->p->batch ? w->nq
                                                        : (size_t)w->p->batch;

  if (w->pol == SIM_BURST_WHEN_BUSY)
    release_idle(w, w->p->bwb_suspend_ms);
  else if (w->pol == SIM_SPILL_5MIN)
    release_idle(w, w->p->spill_idle_ms);
  onprem_site(w, &site, &cs);
  memset(&cost, 0, sizeof(cost));
  cost.now_ms = w->now;
  cost.sites = &cs;
  cost.reservations = &res;
  for (size_t k = 0; k < limit; k++) {
    int32_t id = w->q[k];
    const struct sim_job *s = &w->t->jobs[id];
    struct placement_request req;
    int64_t waited = w->now - w->j[id].queued_since;
    int sent = 0;

    request_of(s, &req);
    cost.runtime_ms = remaining_pred(w, id);
    cost.nreservations = nres;
    placement_cost_decide(&req, &site, 1, &cost, &d);
    if (d.verdict == PLACEMENT_NOW) {
      site.pools[0].free -= s->gpus;
      start_onprem(w, id);
      continue;
    }
    switch (w->pol) {
    case SIM_BURST_WHEN_BUSY:
      sent = pool_alloc(w, id);
      break;
    case SIM_SPILL_5MIN:
      sent = waited >= w->p->spill_after_ms && pool_alloc(w, id);
      break;
    case SIM_FAILOVER_10MIN:
      sent = waited >= w->p->failover_after_ms && vm_alloc(w, id, 0);
      break;
    case SIM_CHEAPEST_RENTED:
      sent = vm_alloc(w, id, 1);
      break;
    default:
      break;
    }
    if (!sent)
      keep_waiting(&cs, d.pick, s->gpus, &req, &d, &res, &nres);
  }
}

/* ---- tenbin ---- */

/* Work lost to an interruption and the new node's boot (tenbind's
 * autoscaler: boot + the work since the last checkpoint). */
static int64_t
restart_ms(const struct world *w)
{
  int64_t worst = 0;

  for (int ci = 0; ci < w->nc; ci++) {
    if (w->c[ci].boot_est[SHAPE_SPOT] > worst)
      worst = w->c[ci].boot_est[SHAPE_SPOT];
  }
  return worst + w->p->checkpoint_ms;
}

/* Room on up nodes of cloud ci now (spot ones only if allowed, spot
 * first): the job starts there. */
static int
try_place(struct world *w, int32_t id, int ci, int spot_ok)
{
  const struct sim_job *s = &w->t->jobs[id];
  struct cloud *c = &w->c[ci];
  int32_t g = per_node(s), need = s->gpus > 8 ? s->gpus / 8 : 1;
  int32_t ids[SIM_MAX_JOB_NODES];
  int n = 0;

  for (int pass = spot_ok ? 0 : 1; pass < 2 && n < need; pass++) {
    for (size_t k = 0; k < c->nlive && n < need; k++) {
      const struct node *nd = &w->nodes[c->live[k]];

      if (nd->state == N_UP && nd->spot == (pass == 0) &&
          8 - nd->used >= g && (need == 1 || nd->used == 0))
        ids[n++] = c->live[k];
    }
  }
  if (n < need)
    return 0;
  alloc_nodes(w, id, ci, ids, n);
  return 1;
}

static void
add_demand(struct world *w, int ci, int32_t id, int spot_ok)
{
  const struct sim_job *s = &w->t->jobs[id];
  int need = s->gpus > 8 ? s->gpus / 8 : 1;
  /* A job that must not take spot is told to burst as one whose
   * deadline leaves no room for an interruption. */
  int64_t deadline = spot_ok ? s->deadline_ms : w->now + 1;

  if (grow(w, (void **)&w->bjobs[ci], &w->capbjobs[ci],
           w->nbjobs[ci] + (size_t)need, sizeof(struct burst_job)) < 0)
    return;
  for (int i = 0; i < need; i++)
    w->bjobs[ci][w->nbjobs[ci]++] = (struct burst_job){
        per_node(s), h100, 0, deadline, remaining_pred(w, id)};
}

/* Can't Be Late's safety net: a deadline job on spot whose time left no
 * longer absorbs an interruption and a restart moves to on-demand. */
static void
safety_net(struct world *w, int64_t restart)
{
  for (int ci = 0; ci < w->nc; ci++) {
    struct runlist *l = &w->c[ci].run;

    for (size_t i = 0; i < l->n;) {
      int32_t id = l->a[i].job;
      struct rjob *j = &w->j[id];
      const struct sim_job *s = &w->t->jobs[id];
      int spot = 0;
      int64_t left;

      for (int k = 0; k < j->nnodes; k++)
        spot = spot || w->nodes[j->nodes[k]].spot;
      left = remaining_pred(w, id) - (w->now - j->seg_start);
      if (s->deadline_ms == 0 || !spot || w->now < j->seg_start ||
          burst_spot_safe(w->now, s->deadline_ms, left > 0 ? left : 0,
                          restart)) {
        i++;
        continue;
      }
      j->force_od = 1;
      j->moved = 1;
      requeue(w, id); /* the list shrank at i */
    }
  }
}

static void
cloud_site(struct world *w, int ci, struct placement_site *s,
           struct placement_cost_site *spot, struct placement_cost_site *od,
           size_t at, int64_t restart)
{
  struct cloud *c = &w->c[ci];
  int64_t free = 0, grow_gpus, live = (int64_t)c->nlive;
  int64_t up_spot = 0;
  double lambda;

  for (size_t k = 0; k < c->nlive; k++) {
    const struct node *nd = &w->nodes[c->live[k]];

    if (nd->state == N_UP) {
      free += 8 - nd->used;
      if (nd->spot)
        up_spot += w->now - nd->up_ms;
    }
  }
  grow_gpus = backing_off(w, ci) || live >= c->max_nodes
                  ? 0
                  : (c->max_nodes - live) * 8;
  memset(s, 0, sizeof(*s));
  s->name = c->c->name;
  s->reachable = 1;
  s->nodes = c->max_nodes;
  s->npools = 1;
  s->pools[0] =
      (struct placement_pool){h100, live * 8 + grow_gpus, free, 8, grow_gpus};
  memset(spot, 0, sizeof(*spot));
  spot->grow_ms = c->boot_est[SHAPE_SPOT];
  spot->pools[0].priced = 1;
  /* Spot's price with what interruptions are expected to cost: the
   * learned rate per node-hour x the hours a restart loses. */
  lambda = burst_interruption_rate(c->interruptions, c->spot_node_ms + up_spot,
                                   w->p->tenbin_interrupt_prior);
  spot->pools[0].rate_micro = (int64_t)(
      (double)c->spot_gpu * (1.0 + lambda * (double)restart / SIM_HOUR));
  spot->pools[0].ends = fill_ends(w, &c->run, at, &spot->pools[0].nends);
  *od = *spot;
  od->grow_ms = c->boot_est[SHAPE_OD];
  od->pools[0].rate_micro = c->od_gpu;
}

static void
tenbin_burst(struct world *w, int64_t restart)
{
  struct burst_site sites[SIM_MAX_CLOUDS];
  struct burst_shape shapes[SIM_MAX_CLOUDS][2];
  struct burst_plan plans[SIM_MAX_CLOUDS];
  size_t total = 0, at = 0;

  for (int ci = 0; ci < w->nc; ci++)
    total += w->c[ci].nlive;
  if (grow(w, (void **)&w->bnodes, &w->capbnodes, total + 1,
           sizeof(*w->bnodes)) < 0 ||
      grow(w, (void **)&w->bplan, &w->capbplan, total + 1,
           sizeof(*w->bplan)) < 0)
    return;
  for (int ci = 0; ci < w->nc; ci++) {
    struct cloud *c = &w->c[ci];
    struct burst_site *bs = &sites[ci];

    shapes[ci][SHAPE_OD] = (struct burst_shape){
        "od", h100, 8, c->c->od_micro, 0, c->boot_est[SHAPE_OD]};
    shapes[ci][SHAPE_SPOT] = (struct burst_shape){
        "spot", h100, 8, c->c->spot_micro, 1, c->boot_est[SHAPE_SPOT]};
    for (size_t k = 0; k < c->nlive; k++) {
      const struct node *nd = &w->nodes[c->live[k]];

      w->bnodes[at + k] = (struct burst_node){
          c->live[k],      nd->spot ? SHAPE_SPOT : SHAPE_OD,
          nd->used,        nd->launched_ms,
          nd->idle_since_ms, nd->state == N_UP};
    }
    memset(bs, 0, sizeof(*bs));
    bs->name = c->c->name;
    bs->cfg = (struct burst_config){.min_nodes = 0,
                                    .max_nodes = c->max_nodes,
                                    .idle_timeout_ms = w->p->tenbin_idle_ms,
                                    .billing_ms = w->p->billing_min_ms,
                                    .release_margin_ms =
                                        w->p->tenbin_margin_ms,
                                    .cooldown_ms = w->p->tenbin_cooldown_ms,
                                    .spend_cap_micro = 0,
                                    .forecast = w->p->tenbin_forecast,
                                    .wait_value_micro = w->wv_micro};
    bs->shapes = shapes[ci];
    bs->nshapes = 2;
    bs->nodes = &w->bnodes[at];
    bs->nnodes = c->nlive;
    bs->jobs = w->bjobs[ci];
    bs->njobs = w->nbjobs[ci];
    /* The forecast looks one boot ahead of the base (on-demand) shape,
     * which is what it launches. */
    bs->forecast_gpus =
        w->p->tenbin_forecast
            ? burst_forecast_gpus(&c->fc, w->now + shapes[ci][SHAPE_OD].boot_ms)
            : -1;
    bs->last_launch_ms = c->last_launch;
    bs->last_release_ms = c->last_release;
    bs->restart_ms = restart;
    plans[ci].nodes = &w->bplan[at];
    at += c->nlive;
  }
  burst_decide(w->now, sites, (size_t)w->nc, 0, plans);
  for (int ci = 0; ci < w->nc; ci++) {
    struct cloud *c = &w->c[ci];
    const struct burst_site *bs = &sites[ci];
    int released = 0;

    /* Nodes to release first (the list moves as they go). */
    for (size_t k = 0; k < bs->nnodes; k++) {
      int32_t nid = (int32_t)bs->nodes[k].id;

      if (plans[ci].nodes[k] == BURST_IDLE && w->nodes[nid].used == 0 &&
          w->nodes[nid].state != N_GONE) {
        node_release(w, nid);
        released = 1;
      }
    }
    if (released)
      c->last_release = w->now;
    if (backing_off(w, ci))
      continue;
    for (int k = 0; k < 2; k++) {
      for (int64_t n = 0; n < plans[ci].launch[k]; n++)
        node_launch(w, ci, k == SHAPE_SPOT, -1);
    }
  }
}

static void
tenbin_pass(struct world *w)
{
  struct placement_site sites[NSITES_MAX];
  struct placement_cost_site spot[NSITES_MAX], od[NSITES_MAX];
  struct placement_data data[NSITES_MAX];
  struct placement_reservation res;
  struct placement_decision d;
  struct placement_cost cost;
  size_t nres = 0, at, limit;
  size_t nsites = (size_t)(1 + w->nc);
  int64_t restart;
  int demand = 0;

  for (int ci = 0; ci < w->nc; ci++) {
    for (int k = 0; k < 2; k++)
      w->c[ci].boot_est[k] =
          burst_boot_estimate(&w->c[ci].boot[k], w->p->tenbin_boot_ms);
  }
  restart = restart_ms(w);
  for (int ci = 0; ci < w->nc; ci++) {
    burst_forecast_cover(&w->c[ci].fc, w->last_cover, w->now);
    w->nbjobs[ci] = 0;
  }
  w->last_cover = w->now;
  safety_net(w, restart);
  compact(w);
  limit = w->nq < (size_t)w->p->batch ? w->nq : (size_t)w->p->batch;
  onprem_site(w, &sites[0], &spot[0]);
  od[0] = spot[0];
  at = w->oprun.n;
  for (int ci = 0; ci < w->nc; ci++) {
    cloud_site(w, ci, &sites[ci + 1], &spot[ci + 1], &od[ci + 1], at,
               restart);
    at += w->c[ci].run.n;
  }
  /* fill_ends may have moved the array: point every pool at it again. */
  at = 0;
  for (size_t i = 0; i < nsites; i++) {
    spot[i].pools[0].ends = w->ends != NULL ? &w->ends[at] : NULL;
    od[i].pools[0].ends = spot[i].pools[0].ends;
    at += spot[i].pools[0].nends;
  }
  memset(&cost, 0, sizeof(cost));
  cost.now_ms = w->now;
  cost.wait_value_micro = w->wv_micro;
  cost.reservations = &res;
  for (size_t k = 0; k < limit; k++) {
    int32_t id = w->q[k];
    const struct sim_job *s = &w->t->jobs[id];
    struct placement_request req;
    const struct placement_candidate *c = NULL;
    int64_t left = remaining_pred(w, id);
    int spot_ok = !w->j[id].force_od &&
                  burst_spot_safe(w->now, s->deadline_ms, left, restart);
    int pick;

    request_of(s, &req);
    cost.runtime_ms = left;
    cost.deadline_ms = s->deadline_ms > 0 ? s->deadline_ms - left : 0;
    if (s->deadline_ms > 0 && cost.deadline_ms <= 0)
      cost.deadline_ms = 1;
    cost.sites = spot_ok ? spot : od;
    cost.data = NULL;
    if (s->dataset >= 0) {
      for (size_t i = 0; i < nsites; i++)
        data[i] = (struct placement_data){
            has_data(w, (int)i, s->dataset) ? 0
                                            : w->t->dataset_bytes[s->dataset],
            w->c[0].c->egress_micro_per_gb,
            (int64_t)w->p->dataset_bytes_per_s};
      cost.data = data;
    }
    cost.nreservations = nres;
    placement_cost_decide(&req, sites, nsites, &cost, &d);
    pick = d.pick;
    for (size_t n = 0; n < d.ncandidates && pick >= 0; n++) {
      if (d.candidates[n].index == pick)
        c = &d.candidates[n];
    }
    if (c == NULL)
      continue;
    if (d.verdict == PLACEMENT_NOW && pick == 0) {
      sites[0].pools[0].free -= s->gpus;
      start_onprem(w, id);
    } else if (d.verdict == PLACEMENT_NOW && try_place(w, id, pick - 1,
                                                       spot_ok)) {
      sites[pick].pools[0].free -= s->gpus;
    } else if (pick > 0 && (d.verdict == PLACEMENT_NOW || c->grows)) {
      struct placement_pool *pl = &sites[pick].pools[0];

      add_demand(w, pick - 1, id, spot_ok);
      pl->grow = pl->grow > s->gpus ? pl->grow - s->gpus : 0;
    } else {
      keep_waiting(spot, pick, s->gpus, &req, &d, &res, &nres);
      od[pick].pools[0].ahead_gpus = spot[pick].pools[0].ahead_gpus;
    }
  }
  /* The autoscaler ticks at once when a pass saw demand, and on its
   * own timer for what time alone changes (broker/autoscaler.c). */
  for (int ci = 0; ci < w->nc; ci++)
    demand = demand || w->nbjobs[ci] > 0;
  if (demand || w->now - w->last_scale >= SCALE_TICK_MS) {
    w->last_scale = w->now;
    tenbin_burst(w, restart);
  }
}

/* ---- the run ---- */

static void
pass(struct world *w)
{
  if (w->last_pass == w->now && w->now != 0)
    return;
  w->last_pass = w->now;
  if (w->pol == SIM_TENBIN)
    tenbin_pass(w);
  else
    anchor_pass(w);
  compact(w);
}

static void
handle(struct world *w, const struct ev *e)
{
  switch (e->type) {
  case EV_ARRIVE:
    w->j[e->id].queued_since = w->now;
    enqueue(w, e->id);
    touch(w);
    break;
  case EV_END:
    if (w->j[e->id].state == J_RUN && w->j[e->id].gen == e->gen)
      job_end(w, e->id);
    break;
  case EV_UP:
    on_up(w, e->id);
    break;
  case EV_FAIL:
    on_fail(w, e->id);
    break;
  case EV_INTERRUPT:
    on_interrupt(w, e->id);
    break;
  case EV_PASS:
    w->pass_at = 0;
    pass(w);
    break;
  case EV_TICK:
    pass(w);
    if (w->now + w->p->tick_ms < w->t->end_ms)
      push(w, w->now + w->p->tick_ms, EV_TICK, 0, 0);
    break;
  }
}

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

  return (x > y) - (x < y);
}

static int64_t
pct(const int64_t *v, size_t n, double q)
{
  size_t k;

  if (n == 0)
    return 0;
  /* nearest rank */
  k = (size_t)ceil(q * (double)n);
  if (k < 1)
    k = 1;
  return v[k - 1];
}

static double
dpct(double *v, size_t n, double q)
{
  size_t k;

  if (n == 0)
    return 0;
  for (size_t i = 1; i < n; i++) {
    double x = v[i];
    size_t k2 = i;

    while (k2 > 0 && v[k2 - 1] > x) {
      v[k2] = v[k2 - 1];
      k2--;
    }
    v[k2] = x;
  }
  k = (size_t)ceil(q * (double)n);
  return v[k < 1 ? 0 : k - 1];
}

/* Close the books at the end: what still runs is billed to the end,
 * and the measured week's jobs are counted. */
static int
finish(struct world *w)
{
  struct sim_result *r = w->r;
  const struct sim_trace *t = w->t;
  int64_t *waits = malloc(sizeof(int64_t) * (t->measured + 1)), sum = 0;
  size_t n = 0, hours = (size_t)(SIM_WEEK / SIM_HOUR);

  if (waits == NULL)
    return -1;
  for (size_t i = 0; i < t->njobs; i++) {
    if (w->j[i].state == J_RUN)
      close_segment(w, (int32_t)i);
  }
  for (int ci = 0; ci < w->nc; ci++) {
    while (w->c[ci].nlive > 0)
      node_gone(w, w->c[ci].live[w->c[ci].nlive - 1]);
  }
  for (size_t i = 0; i < t->njobs; i++) {
    const struct sim_job *s = &t->jobs[i];
    struct rjob *j = &w->j[i];
    int64_t waited = j->waited_ms;
    int miss;

    if (s->submit_ms < t->t1_ms || s->submit_ms >= t->t2_ms)
      continue;
    r->jobs++;
    if (j->state == J_QUEUED || j->state == J_ALLOC) {
      waited += t->end_ms - j->queued_since;
      if (j->seg_start == 0)
        r->unstarted++;
    }
    waits[n++] = waited;
    sum += waited;
    r->cloud_jobs += j->cloud_micro > 0;
    if (s->deadline_ms == 0)
      continue;
    miss = j->state != J_DONE || j->done_ms > s->deadline_ms;
    r->deadline_jobs++;
    r->deadline_misses += miss;
    r->dl_moved += j->moved;
    if (j->used_spot) {
      r->dl_spot_jobs++;
      r->dl_spot_misses += miss;
      r->dl_spot_micro += j->cloud_micro;
      r->dl_od_micro += j->od_micro;
    }
  }
  qsort(waits, n, sizeof(*waits), cmp_i64);
  r->wait_p50_ms = pct(waits, n, 0.50);
  r->wait_p95_ms = pct(waits, n, 0.95);
  r->wait_p99_ms = pct(waits, n, 0.99);
  r->wait_mean_ms = n ? sum / (int64_t)n : 0;
  free(waits);
  r->sunk_micro = price_charge(w->sunk_rate, w->op_total, SIM_WEEK);
  r->cloud_idle_micro = w->node_micro - r->cloud_compute_micro;
  if (r->cloud_idle_micro < 0)
    r->cloud_idle_micro = 0;
  r->onprem_busy = w->busy_ms / ((double)w->op_total * (double)SIM_WEEK);
  r->demand_mean = 0;
  r->demand_max = 0;
  r->demand_hours_over = 0;
  for (size_t h = 0; h < hours; h++) {
    double v = w->demand[h] / ((double)SIM_HOUR * (double)w->op_total);

    w->demand[h] = v;
    r->demand_mean += v / (double)hours;
    if (v > r->demand_max)
      r->demand_max = v;
    r->demand_hours_over += v > 1.0;
  }
  r->demand_p95 = dpct(w->demand, hours, 0.95);
  return 0;
}

static void
world_free(struct world *w)
{
  free(w->h.a);
  free(w->j);
  free(w->q);
  free(w->nodes);
  free(w->oprun.a);
  for (int ci = 0; ci < SIM_MAX_CLOUDS; ci++) {
    free(w->c[ci].live);
    free(w->c[ci].run.a);
    free(w->bjobs[ci]);
  }
  free(w->ends);
  free(w->bnodes);
  free(w->bplan);
  free(w->demand);
}

/* Clouds by on-demand price, and every (cloud, spot) offer by price. */
static void
orders(struct world *w)
{
  for (int i = 0; i < w->nc; i++)
    w->order_od[i] = i;
  for (int i = 1; i < w->nc; i++) {
    for (int k = i; k > 0 && w->c[w->order_od[k]].c->od_micro <
                                 w->c[w->order_od[k - 1]].c->od_micro;
         k--) {
      int tmp = w->order_od[k];

      w->order_od[k] = w->order_od[k - 1];
      w->order_od[k - 1] = tmp;
    }
  }
  w->noffers = 2 * w->nc;
  for (int i = 0; i < w->noffers; i++)
    w->offers[i] = i;
  for (int i = 1; i < w->noffers; i++) {
    for (int k = i; k > 0; k--) {
      const struct sim_cloud *a = w->c[w->offers[k] / 2].c;
      const struct sim_cloud *b = w->c[w->offers[k - 1] / 2].c;
      int64_t pa = w->offers[k] % 2 ? a->spot_micro : a->od_micro;
      int64_t pb = w->offers[k - 1] % 2 ? b->spot_micro : b->od_micro;
      int tmp;

      if (pa >= pb)
        break;
      tmp = w->offers[k];
      w->offers[k] = w->offers[k - 1];
      w->offers[k - 1] = tmp;
    }
  }
}

int
sim_run(const struct sim_params *p, const struct sim_trace *t,
        enum sim_policy policy, double wait_value, struct sim_result *out,
        char *err, size_t errlen)
{
  struct world *w = calloc(1, sizeof(*w));
  struct price_owned_rates rates;
  int rc = -1;

  memset(out, 0, sizeof(*out));
  out->policy = policy;
  out->wait_value = policy == SIM_TENBIN ? wait_value : 0;
  if (w == NULL)
    goto oom;
  w->p = p;
  w->t = t;
  w->r = out;
  w->pol = policy;
  w->wv_micro = (int64_t)llround(wait_value * (double)PRICE_MICRO);
  /* The same draws for every policy, from the seed. */
  w->rng.s = p->seed * 0xd1342543de82ef95ULL + 7;
  w->j = calloc(t->njobs + 1, sizeof(*w->j));
  w->demand = calloc((size_t)(SIM_WEEK / SIM_HOUR), sizeof(*w->demand));
  if (w->j == NULL || w->demand == NULL)
    goto oom;
  for (size_t i = 0; i < t->njobs; i++)
    w->j[i].site = -1;
  w->op_total = w->op_free = t->onprem_gpus;
  price_owned_rates(&p->owned, &rates);
  w->sunk_rate = rates.sunk_micro;
  w->marginal_rate = rates.marginal_micro;
  w->backoff_ms =
      policy == SIM_TENBIN ? p->tenbin_backoff_ms : p->anchor_backoff_ms;
  w->nc = policy == SIM_ONPREM_ONLY ? 0 : p->nclouds;
  for (int ci = 0; ci < w->nc; ci++) {
    struct cloud *c = &w->c[ci];

    c->c = &p->clouds[ci];
    c->max_nodes = p->clouds[ci].max_nodes * p->scale;
    c->od_gpu = p->clouds[ci].od_micro / 8;
    c->spot_gpu = p->clouds[ci].spot_micro / 8;
    burst_boot_init(&c->boot[0]);
    burst_boot_init(&c->boot[1]);
    burst_forecast_init(&c->fc);
  }
  /* onprem-only still needs the first cloud's egress rate. */
  if (w->nc == 0)
    w->c[0].c = &p->clouds[0];
  orders(w);
  w->now = t->t0_ms;
  w->last_t = t->t0_ms;
  w->last_cover = t->t0_ms;
  for (size_t i = 0; i < t->njobs; i++)
    push(w, t->jobs[i].submit_ms, EV_ARRIVE, (int32_t)i, 0);
  push(w, t->t0_ms, EV_TICK, 0, 0);
  while (w->h.n > 0 && !w->oom) {
    struct ev e = pop(&w->h);

    if (e.t >= t->end_ms)
      break;
    advance(w, e.t);
    w->now = e.t;
    handle(w, &e);
  }
  advance(w, t->end_ms);
  w->now = t->end_ms;
  if (w->oom || finish(w) < 0)
    goto oom;
  rc = 0;
  goto out;
oom:
  snprintf(err, errlen, "out of memory");
out:
  if (w != NULL)
    world_free(w);
  free(w);
  return rc;
}
