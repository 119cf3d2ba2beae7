/*
 * Tests for policies/cost.c: the cost placement policy's predicted
 * starts, its compute, data and waiting terms (worked out by hand in
 * each test, in micro-dollars), the site it picks, the reservation that
 * keeps the oldest job from starving, and the reasons it gives.
 *
 * Prices are the research file's: an owned H100's marginal rate $0.08
 * per GPU-hour, AWS $6.88, GCP $11.06; the project values an hour of a
 * GPU's waiting at $4.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "policies/placement.h"
#include "policies/price.h"

#define NOW 1800000000000LL /* any instant: all times are relative */
#define SEC 1000LL
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define OWNED_H100 80000LL     /* $0.08 per GPU-hour, marginal */
#define AWS_H100 6880000LL     /* $6.88 */
#define GCP_H100 11060000LL    /* $11.06 */
#define WAIT_VALUE 4000000LL   /* $4 per GPU-hour of waiting */
#define UNPRICED (-1)

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* A snapshot of up to 6 sites with their cost blocks, and one job. */
struct world {
  size_t n;
  struct placement_site sites[6];
  struct placement_cost_site costs[6];
  struct placement_data data[6];
  struct placement_end ends[6][4];
  struct placement_cost cost;
  struct placement_request req;
  struct placement_decision d;
};

static void
world_init(struct world *w, int64_t gpus, int64_t runtime_ms)
{
  memset(w, 0, sizeof(*w));
  w->req.gpus = gpus;
  w->req.gpu_type = "h100";
  w->req.nodes = 1;
  w->cost.now_ms = NOW;
  w->cost.runtime_ms = runtime_ms;
  w->cost.wait_value_micro = WAIT_VALUE;
  w->cost.sites = w->costs;
}

/* A reachable one-node site with one pool of h100; its index. */
static int
add_site(struct world *w, const char *name, int64_t total, int64_t free,
         int64_t rate_micro)
{
  int i = (int)w->n++;
  struct placement_site *s = &w->sites[i];
  struct placement_cost_pool *p = &w->costs[i].pools[0];

  s->name = name;
  s->reachable = 1;
  s->nodes = 1;
  s->npools = 1;
  s->pools[0].type = "h100";
  s->pools[0].total = total;
  s->pools[0].free = free;
  s->pools[0].per_node = total;
  p->priced = rate_micro != UNPRICED;
  p->rate_micro = rate_micro != UNPRICED ? rate_micro : 0;
  return i;
}

/* A running job of gpus at site i predicted to end at NOW + in_ms; ends
 * are added in order. */
static void
add_end(struct world *w, int i, int64_t in_ms, int64_t gpus)
{
  struct placement_cost_pool *p = &w->costs[i].pools[0];
  size_t k = p->nends++;

  w->ends[i][k].end_ms = NOW + in_ms;
  w->ends[i][k].freed = (k > 0 ? w->ends[i][k - 1].freed : 0) + gpus;
  p->ends = w->ends[i];
}

static void
decide(struct world *w)
{
  const struct placement_policy *p = placement_policy_find("cost");

  assert_non_null(p);
  assert_non_null(p->decide_cost);
  p->decide_cost(&w->req, w->sites, w->n, &w->cost, &w->d);
}

/* Site i's candidate (candidates are in snapshot order). */
static const struct placement_candidate *
cand(const struct world *w, int i)
{
  size_t k = 0;

  while (k < w->d.ncandidates && w->d.candidates[k].index != i)
    k++;
  if (k == w->d.ncandidates)
    fail_msg("site %d is not a candidate", i);
  return &w->d.candidates[k < PLACEMENT_MAX_SITES ? k : 0];
}

static void
test_cost_policy_is_found_and_first_fit_reads_no_costs(void **state)
{
  const struct placement_policy *cost = placement_policy_find("cost");
  const struct placement_policy *ff = placement_policy_find("first-fit");

  (void)state;
  assert_non_null(cost);
  assert_string_equal(cost->name, "cost");
  assert_non_null(cost->decide);
  assert_non_null(cost->decide_cost);
  assert_non_null(ff);
  assert_null(ff->decide_cost);
}

static void
test_an_idle_owned_site_wins_on_its_marginal_rate(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 8, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(w.d.site, 0);
  assert_int_equal(w.d.pick, 0);
  /* 4 GPUs x 2 h x $0.08 = $0.64; x $6.88 = $55.04. */
  assert_int_equal(cand(&w, 0)->compute_micro, 640000);
  assert_int_equal(cand(&w, 0)->total_micro, 640000);
  assert_int_equal(cand(&w, 1)->compute_micro, 55040000);
  assert_int_equal(cand(&w, 1)->total_micro, 55040000);
  assert_int_equal(cand(&w, 0)->start_ms, NOW);
  assert_int_equal(cand(&w, 0)->waiting_micro, 0);
  assert_int_equal(cand(&w, 0)->runtime_ms, 2 * HOUR);
  assert_true(cand(&w, 0)->score > cand(&w, 1)->score);
}

static void
test_waiting_for_an_owned_site_wins_when_cheaper_than_renting(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_end(&w, 0, 30 * MIN, 4);
  add_end(&w, 0, 3 * HOUR, 4);
  decide(&w);
  /* onprem: 4 GPUs free in 30 min; waiting 4 x 0.5 h x $4 = $8, plus
   * compute $0.64 = $8.64, against $55.04 at aws now. */
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(w.d.site, -1);
  assert_int_equal(w.d.pick, 0);
  assert_int_equal(cand(&w, 0)->verdict, PLACEMENT_WAIT);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 30 * MIN);
  assert_int_equal(cand(&w, 0)->waiting_micro, 8000000);
  assert_int_equal(cand(&w, 0)->total_micro, 8640000);
  assert_int_equal(cand(&w, 1)->verdict, PLACEMENT_NOW);
  assert_string_equal(w.d.reason,
                      "waits for 'onprem', least total, $8.640000: compute "
                      "$0.640000 + data $0.000000 + waiting $8.000000; "
                      "starts in 30m");
}

static void
test_a_job_whose_predicted_wait_grows_moves_to_a_rented_site(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_end(&w, 0, 30 * MIN, 4);
  add_end(&w, 0, 3 * HOUR, 4);

  /* Each pass decides again.  4 GPUs queued ahead: 8 needed, free at
   * 3 h; waiting 4 x 3 h x $4 = $48, total $48.64 < $55.04. */
  w.costs[0].pools[0].ahead_gpus = 4;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 3 * HOUR);
  assert_int_equal(cand(&w, 0)->total_micro, 48640000);
  assert_int_equal(w.d.pick, 0);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);

  /* 8 ahead: 12 needed, more than the ends free (8), so one turn-over
   * of the type after the last end: 3 h + 2 h = 5 h; waiting $80. */
  w.costs[0].pools[0].ahead_gpus = 8;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 5 * HOUR);
  assert_int_equal(cand(&w, 0)->total_micro, 80640000);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(w.d.site, 1);
  assert_string_equal(cand(&w, 0)->reason,
                      "$25.600000 more than 'aws': compute $0.640000 + data "
                      "$0.000000 + waiting $80.000000; starts in 5h00m");
}

static void
test_predicted_start_walks_the_ends_after_the_gpus_queued_ahead(
    void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "onprem", 16, 2, OWNED_H100);
  add_end(&w, 0, 10 * MIN, 2);  /* 4 free by then */
  add_end(&w, 0, 40 * MIN, 4);  /* 8 */
  add_end(&w, 0, 90 * MIN, 8);  /* 16 */
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 10 * MIN);
  /* 3 queued ahead: 7 needed, 8 free at 40 min. */
  w.costs[0].pools[0].ahead_gpus = 3;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 40 * MIN);
  /* 10 ahead: 14 needed, 16 free at 90 min. */
  w.costs[0].pools[0].ahead_gpus = 10;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 90 * MIN);
  /* A job that fits in what is free starts now, queue or not (only the
   * oldest job's reservation holds GPUs back). */
  w.req.gpus = 2;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
}

static void
test_beyond_the_known_ends_the_type_turns_over_once_per_runtime(
    void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_end(&w, 0, HOUR, 8);
  /* 14 ahead + 4 = 18 needed, 8 free after the last end (1 h): 10 more,
   * two turn-overs of the 8 GPUs at 2 h each: 1 h + 4 h. */
  w.costs[0].pools[0].ahead_gpus = 14;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 5 * HOUR);
  /* No running job known at all: one turn-over from now. */
  w.costs[0].pools[0].nends = 0;
  w.costs[0].pools[0].ahead_gpus = 0;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 2 * HOUR);
}

static void
test_missing_data_costs_egress_and_delays_the_start(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_site(&w, "gcp", 8, 8, AWS_H100);
  w.cost.data = w.data;
  /* 500 GB missing at gcp, at $0.12 a GB from the source, 1 GB/s. */
  w.data[1].missing_bytes = 500000000000LL;
  w.data[1].egress_micro_per_gb = 120000;
  w.data[1].bytes_per_s = 1000000000LL;
  decide(&w);
  /* 500 GB x $0.12 = $60; 500 s to move, so the job waits 500 s:
   * 4 GPUs x 500 s x $4/h = $2.222222 (rounded down). */
  assert_int_equal(cand(&w, 1)->data_micro, 60000000);
  assert_int_equal(cand(&w, 1)->start_ms, NOW + 500 * SEC);
  assert_int_equal(cand(&w, 1)->waiting_micro, 2222222);
  /* compute 4 x 1 h x $6.88 = $27.52 at both. */
  assert_int_equal(cand(&w, 1)->total_micro, 27520000 + 60000000 + 2222222);
  assert_int_equal(cand(&w, 0)->total_micro, 27520000);
  assert_int_equal(cand(&w, 0)->data_micro, 0);
  assert_int_equal(w.d.pick, 0);
  /* Capacity is there now: the transfer is in start_ms, not the verdict. */
  assert_int_equal(cand(&w, 1)->verdict, PLACEMENT_NOW);
}

static void
test_the_transfer_overlaps_the_wait_for_capacity(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_end(&w, 0, 30 * MIN, 8);
  w.cost.data = w.data;
  w.data[0].missing_bytes = 100000000000LL; /* 100 s at 1 GB/s */
  w.data[0].bytes_per_s = 1000000000LL;
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 30 * MIN);
  w.data[0].bytes_per_s = 10000000LL; /* 10 MB/s: 10,000 s */
  decide(&w);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 10000 * SEC);
}

static void
test_a_site_that_cannot_receive_the_data_is_excluded(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "onprem", 8, 8, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  w.cost.data = w.data;
  w.data[0].missing_bytes = 1000;
  w.data[0].bytes_per_s = 0;
  decide(&w);
  assert_int_equal(w.d.pick, 1);
  assert_int_equal(cand(&w, 0)->excluded, PLACEMENT_EXCLUDED_DATA);
  assert_int_equal(cand(&w, 0)->total_micro, -1);
  assert_string_equal(cand(&w, 0)->reason,
                      "dataset missing here (1000 bytes) and the site "
                      "cannot receive it");
  /* Nowhere to send it: the job waits (the data may yet get there). */
  w.n = 1;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(w.d.pick, -1);
  assert_contains(w.d.reason, "no site can run 4 x h100 GPUs now: "
                              "'onprem': dataset missing here");
}

static void
test_a_boot_delay_is_waited_for_but_the_site_takes_the_job_now(
    void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "aws", 8, 8, AWS_H100);
  w.costs[0].boot_ms = 5 * MIN;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 5 * MIN);
  /* 4 GPUs x 5 min x $4/h = $1.333333. */
  assert_int_equal(cand(&w, 0)->waiting_micro, 1333333);
}

static void
test_an_unpriced_site_is_charged_the_dearest_known_rate(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 1, HOUR);
  add_site(&w, "local", 8, 8, UNPRICED);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_site(&w, "gcp", 8, 8, GCP_H100);
  decide(&w);
  /* Never $0: local is charged gcp's $11.06, so aws wins at $6.88. */
  assert_int_equal(cand(&w, 0)->priced, 0);
  assert_int_equal(cand(&w, 0)->compute_micro, 11060000);
  assert_int_equal(cand(&w, 1)->priced, 1);
  assert_int_equal(w.d.pick, 1);
  assert_string_equal(cand(&w, 0)->reason,
                      "$4.180000 more than 'aws': compute $11.060000 + data "
                      "$0.000000 + waiting $0.000000; starts now; unpriced, "
                      "charged the dearest rate");
  /* A type without a cost block at all is unpriced too. */
  w.cost.sites = NULL;
  decide(&w);
  assert_int_equal(cand(&w, 1)->priced, 0);
}

static void
test_with_no_price_anywhere_compute_is_unknown_and_the_wait_decides(
    void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 2, HOUR);
  add_site(&w, "local", 8, 0, UNPRICED);
  add_site(&w, "lab", 8, 8, UNPRICED);
  add_end(&w, 0, 10 * MIN, 8);
  decide(&w);
  assert_int_equal(cand(&w, 0)->compute_micro, -1);
  assert_int_equal(cand(&w, 1)->compute_micro, -1);
  /* local: 2 GPUs x 10 min x $4/h = $1.333333 of waiting. */
  assert_int_equal(cand(&w, 0)->total_micro, 1333333);
  assert_int_equal(cand(&w, 1)->total_micro, 0);
  assert_int_equal(w.d.pick, 1);
  assert_contains(cand(&w, 1)->reason, "compute unknown");
}

static void
test_without_cost_inputs_the_pick_is_first_fits(void **state)
{
  struct world w;
  const struct placement_policy *p = placement_policy_find("cost");

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "busy", 8, 0, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_site(&w, "gcp", 8, 8, GCP_H100);
  p->decide(&w.req, w.sites, w.n, &w.d);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(w.d.site, 1);
  /* No runtime, no guess at when the busy site frees up. */
  assert_int_equal(cand(&w, 0)->start_ms, INT64_MAX);
  assert_contains(cand(&w, 0)->reason, "starts at a time unknown");
}

static void
test_a_deadline_excludes_sites_that_start_too_late(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_end(&w, 0, 30 * MIN, 8);
  w.cost.deadline_ms = NOW + 10 * MIN;
  decide(&w);
  /* onprem is cheaper ($8.64) but starts in 30 min. */
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(w.d.site, 1);
  assert_int_equal(cand(&w, 0)->excluded, PLACEMENT_EXCLUDED_DEADLINE);
  assert_int_equal(cand(&w, 0)->total_micro, 8640000);
  assert_string_equal(cand(&w, 0)->reason,
                      "starts in 30m, after the deadline (in 10m)");
  /* A deadline both meet changes nothing. */
  w.cost.deadline_ms = NOW + HOUR;
  decide(&w);
  assert_int_equal(w.d.pick, 0);
}

static void
test_when_no_site_meets_the_deadline_the_cheapest_still_wins(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_end(&w, 0, 30 * MIN, 8);
  w.costs[1].boot_ms = 5 * MIN;
  w.cost.deadline_ms = NOW + MIN;
  decide(&w);
  assert_int_equal(w.d.pick, 0);
  assert_int_equal(cand(&w, 0)->excluded, PLACEMENT_RANKED);
  assert_int_equal(cand(&w, 1)->excluded, PLACEMENT_RANKED);
  assert_contains(cand(&w, 0)->reason, "no site starts it by the deadline");
}

/* onprem: 16 h100, 4 free, the other 12 free in 1 h.  The oldest job
 * waits there for all 16: its reservation starts in 1 h. */
static void
reserved_world(struct world *w, struct placement_reservation *res)
{
  world_init(w, 16, 2 * HOUR);
  add_site(w, "onprem", 16, 4, OWNED_H100);
  add_end(w, 0, HOUR, 12);
  decide(w);
  assert_int_equal(w->d.verdict, PLACEMENT_WAIT);
  assert_int_equal(placement_cost_reservation(&w->req, &w->d, res), 1);
  w->cost.reservations = res;
  w->cost.nreservations = 1;
  /* The oldest job is queued ahead of every younger one there. */
  w->costs[0].pools[0].ahead_gpus = 16;
}

static void
test_the_reservation_is_the_oldest_jobs_site_type_and_start(void **state)
{
  struct world w;
  struct placement_reservation res;

  (void)state;
  reserved_world(&w, &res);
  assert_int_equal(res.site, 0);
  assert_int_equal(res.start_ms, NOW + HOUR);
  /* The snapshot's own type name, which outlives the job's spec. */
  assert_ptr_equal(res.type, w.sites[0].pools[0].type);
  /* A job placed now, or one without GPUs, reserves nothing. */
  w.req.gpus = 2;
  w.cost.nreservations = 0;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(placement_cost_reservation(&w.req, &w.d, &res), 0);
  w.req.gpus = 0;
  w.req.gpu_type = NULL;
  w.sites[0].max_jobs = 1;
  w.sites[0].jobs_active = 1;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(placement_cost_reservation(&w.req, &w.d, &res), 0);
}

static void
test_a_younger_job_passes_the_oldest_only_by_ending_before_its_start(
    void **state)
{
  struct world w;
  struct placement_reservation res;

  (void)state;
  reserved_world(&w, &res);
  /* 2 GPUs for 30 min: done before the reserved start, so it runs now. */
  w.req.gpus = 2;
  w.cost.runtime_ms = 30 * MIN;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(cand(&w, 0)->held, 0);
  assert_int_equal(cand(&w, 0)->start_ms, NOW);
  /* Ending exactly at the reserved start is still in time. */
  w.cost.runtime_ms = HOUR;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  /* For 2 h it would still run when the oldest should start: held.  It
   * queues behind the 16: 18 needed, 16 free after 1 h, one turn-over of
   * 2 h: it starts in 3 h. */
  w.cost.runtime_ms = 2 * HOUR;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(cand(&w, 0)->verdict, PLACEMENT_WAIT);
  assert_int_equal(cand(&w, 0)->held, 1);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 3 * HOUR);
  assert_contains(cand(&w, 0)->reason,
                  "held behind the oldest waiting h100 job");
}

static void
test_a_reservation_due_now_holds_a_younger_job_that_would_outlast_it(
    void **state)
{
  struct world w;
  struct placement_reservation res;

  (void)state;
  reserved_world(&w, &res);
  /* The running jobs are overdue: the oldest job's start is now, and
   * only the GPUs it waits for stand between it and its start. */
  res.start_ms = NOW;
  w.req.gpus = 2;
  w.cost.runtime_ms = 30 * MIN;
  decide(&w);
  assert_int_equal(cand(&w, 0)->held, 1);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
}

static void
test_a_reservation_holds_only_its_own_site_and_type(void **state)
{
  struct world w;
  struct placement_reservation res;

  (void)state;
  reserved_world(&w, &res);
  w.req.gpus = 2;
  w.costs[0].pools[0].ahead_gpus = 0;
  res.site = 1;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  res.site = 0;
  res.type = "a100";
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  /* Types match in any case, as the fit judgement does. */
  res.type = "H100";
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
}

static void
test_every_candidate_reports_its_terms_and_a_reason(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 8, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_site(&w, "gcp", 8, 8, GCP_H100);
  w.sites[2].pools[0].type = "l4";
  decide(&w);
  assert_int_equal(w.d.ncandidates, 3);
  assert_string_equal(cand(&w, 0)->reason,
                      "least total, $0.640000: compute $0.640000 + data "
                      "$0.000000 + waiting $0.000000; starts now");
  assert_string_equal(cand(&w, 1)->reason,
                      "$54.400000 more than 'onprem': compute $55.040000 + "
                      "data $0.000000 + waiting $0.000000; starts now");
  assert_string_equal(cand(&w, 2)->reason,
                      "needs 4 x h100 GPUs, site has 0 h100");
  assert_int_equal(cand(&w, 2)->verdict, PLACEMENT_NEVER);
  assert_int_equal(cand(&w, 2)->excluded, PLACEMENT_EXCLUDED_SITE);
  assert_int_equal(cand(&w, 2)->start_ms, -1);
  assert_int_equal(cand(&w, 2)->compute_micro, -1);
  assert_int_equal(cand(&w, 2)->total_micro, -1);
  assert_true(cand(&w, 1)->score > cand(&w, 2)->score);
  assert_string_equal(w.d.reason,
                      "runs at 'onprem', least total, $0.640000: compute "
                      "$0.640000 + data $0.000000 + waiting $0.000000; "
                      "starts now");
}

static void
test_decide_alone_gives_the_numbers_and_no_words(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, 2 * HOUR);
  add_site(&w, "onprem", 8, 8, OWNED_H100);
  add_site(&w, "gcp", 8, 8, GCP_H100);
  w.sites[1].pools[0].type = "l4";
  placement_cost_decide(&w.req, w.sites, w.n, &w.cost, &w.d);
  assert_int_equal(w.d.pick, 0);
  assert_int_equal(cand(&w, 0)->total_micro, 640000);
  assert_string_equal(w.d.reason, "");
  assert_string_equal(cand(&w, 0)->reason, "");
  assert_string_equal(cand(&w, 1)->reason, "");
  placement_cost_explain(&w.req, w.sites, w.n, &w.cost, &w.d);
  assert_contains(w.d.reason, "runs at 'onprem'");
  assert_string_equal(cand(&w, 1)->reason,
                      "needs 4 x h100 GPUs, site has 0 h100");
}

static void
test_unreachable_and_unknown_sites_are_left_out(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "onprem", 8, 8, OWNED_H100);
  add_site(&w, "new", 8, 8, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  w.sites[0].reachable = 0;
  w.sites[1].unknown = 1;
  decide(&w);
  assert_int_equal(w.d.site, 2);
  /* a site closed to the job (its budget) is left out the same way */
  w.sites[2].closed = "budget spent";
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(cand(&w, 2)->excluded, PLACEMENT_EXCLUDED_SITE);
  assert_string_equal(cand(&w, 2)->reason, "budget spent");
  w.sites[2].closed = NULL;
  decide(&w);
  assert_int_equal(w.d.site, 2);
  assert_int_equal(cand(&w, 0)->excluded, PLACEMENT_EXCLUDED_SITE);
  assert_int_equal(cand(&w, 0)->verdict, PLACEMENT_WAIT);
  assert_string_equal(cand(&w, 0)->reason, "site unreachable");
  assert_string_equal(cand(&w, 1)->reason,
                      "site not reached yet, its capacity is unknown");
  w.n = 2;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(w.d.pick, -1);
  assert_string_equal(w.d.reason,
                      "no site can run 4 x h100 GPUs now: 'onprem': site "
                      "unreachable; 'new': site not reached yet, its "
                      "capacity is unknown");
}

static void
test_a_job_no_site_can_ever_run_is_never(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 12, HOUR);
  add_site(&w, "onprem", 8, 8, OWNED_H100);
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NEVER);
  assert_int_equal(w.d.pick, -1);
  assert_string_equal(w.d.reason,
                      "no site can run 12 x h100 GPUs: 'onprem': needs 12 x "
                      "h100 GPUs, site has 8 h100 in total");
}

static void
test_a_pinned_job_is_costed_at_its_site_only(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 4, HOUR);
  add_site(&w, "onprem", 8, 8, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  w.req.site = "aws";
  decide(&w);
  assert_int_equal(w.d.ncandidates, 1);
  assert_int_equal(w.d.candidates[0].index, 1);
  assert_int_equal(w.d.site, 1);
  w.req.site = "azure";
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NEVER);
  assert_string_equal(w.d.reason, "no site named 'azure'");
}

static void
test_a_site_at_its_job_cap_starts_after_its_first_end(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 1, HOUR);
  add_site(&w, "lab", 8, 4, OWNED_H100);
  add_end(&w, 0, 20 * MIN, 4);
  w.sites[0].max_jobs = 1;
  w.sites[0].jobs_active = 1;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 20 * MIN);
}

static void
test_equal_totals_go_to_the_earlier_start(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 1, HOUR);
  add_site(&w, "later", 8, 0, AWS_H100);
  add_site(&w, "sooner", 8, 0, AWS_H100);
  add_end(&w, 0, 20 * MIN, 8);
  add_end(&w, 1, 10 * MIN, 8);
  w.cost.wait_value_micro = 0;
  decide(&w);
  assert_int_equal(cand(&w, 0)->total_micro, cand(&w, 1)->total_micro);
  assert_int_equal(w.d.pick, 1);
}

static void
test_every_site_is_charged_its_own_rate_however_many_rates(void **state)
{
  struct world w;
  static const int64_t rates[6] = {80000,   6880000,  11060000,
                                   2745000, 12290000, 60000};

  (void)state;
  world_init(&w, 2, 3 * HOUR);
  /* Six sites, six rates: more than a decision keeps at hand. */
  for (int i = 0; i < 6; i++)
    add_site(&w, "site", 8, 8, rates[i]);
  decide(&w);
  /* 2 GPUs x 3 h = 6 GPU-hours at each site's rate. */
  assert_int_equal(cand(&w, 0)->compute_micro, 480000);
  assert_int_equal(cand(&w, 1)->compute_micro, 41280000);
  assert_int_equal(cand(&w, 2)->compute_micro, 66360000);
  assert_int_equal(cand(&w, 3)->compute_micro, 16470000);
  assert_int_equal(cand(&w, 4)->compute_micro, 73740000);
  assert_int_equal(cand(&w, 5)->compute_micro, 360000);
  assert_int_equal(w.d.pick, 5);
}

static void
test_an_any_type_job_is_costed_on_the_type_the_site_would_give(
    void **state)
{
  struct world w;
  struct placement_reservation res;

  (void)state;
  world_init(&w, 8, HOUR);
  w.req.gpu_type = NULL;
  add_site(&w, "cloud", 16, 0, AWS_H100);
  add_end(&w, 0, HOUR, 8);
  w.sites[0].npools = 2;
  w.sites[0].pools[1].type = "a100";
  w.sites[0].pools[1].total = 8;
  w.sites[0].pools[1].free = 4;
  w.sites[0].pools[1].per_node = 8;
  w.costs[0].pools[1].priced = 1;
  w.costs[0].pools[1].rate_micro = 2745000;
  decide(&w);
  /* The a100 pool has the most free: 8 x 1 h x $2.745 = $21.96, and its
   * own ends (none known): one turn-over, 1 h. */
  assert_string_equal(cand(&w, 0)->type, "a100");
  assert_int_equal(cand(&w, 0)->compute_micro, 21960000);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + HOUR);
  assert_int_equal(placement_cost_reservation(&w.req, &w.d, &res), 1);
  assert_ptr_equal(res.type, w.sites[0].pools[1].type);
}

static void
test_a_deadline_and_an_unpriced_site_rank_together(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 1, HOUR);
  add_site(&w, "local", 8, 8, UNPRICED);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_site(&w, "aws", 8, 8, AWS_H100);
  add_end(&w, 1, 30 * MIN, 8);
  w.cost.deadline_ms = NOW + 10 * MIN;
  decide(&w);
  /* onprem starts too late; local is charged aws's $6.88 (the dearest
   * rate known), as much as aws, and goes first in order. */
  assert_int_equal(cand(&w, 1)->excluded, PLACEMENT_EXCLUDED_DEADLINE);
  assert_int_equal(cand(&w, 0)->compute_micro, 6880000);
  assert_int_equal(cand(&w, 2)->compute_micro, 6880000);
  assert_int_equal(w.d.pick, 0);
  assert_true(cand(&w, 1)->score < cand(&w, 2)->score);
}

static void
test_a_job_without_gpus_costs_no_compute(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 0, HOUR);
  w.req.gpu_type = NULL;
  add_site(&w, "aws", 8, 0, AWS_H100);
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(cand(&w, 0)->compute_micro, 0);
  assert_int_equal(cand(&w, 0)->priced, 1);
  assert_null(cand(&w, 0)->type);
}

/* An elastic site with no node up: 16 GPUs it may grow to. */
static int
add_elastic(struct world *w, const char *name, int64_t rate_micro,
            int64_t grow_ms)
{
  int i = add_site(w, name, 16, 0, rate_micro);

  w->sites[i].pools[0].grow = 16;
  w->sites[i].pools[0].per_node = 8;
  w->costs[i].grow_ms = grow_ms;
  return i;
}

static void
test_a_job_waits_for_an_elastic_site_to_grow_when_on_prem_waits_longer(
    void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 8, 30 * MIN);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_end(&w, 0, 10 * HOUR, 8);
  add_elastic(&w, "aws", AWS_H100, 5 * MIN);
  decide(&w);
  /* On-prem: 8 x 10 h x $4 waiting = $320; aws: 8 x 0.5 h x $6.88 =
   * $27.52 + 8 x 5 min x $4 = $2.67.  aws wins, once it has a node. */
  assert_int_equal(w.d.verdict, PLACEMENT_WAIT);
  assert_int_equal(w.d.pick, 1);
  assert_int_equal(cand(&w, 1)->grows, 1);
  assert_int_equal(cand(&w, 1)->start_ms, NOW + 5 * MIN);
  assert_int_equal(cand(&w, 0)->grows, 0);
  assert_contains(cand(&w, 1)->reason,
                  "starts in 5m; once the site grows a node for it");
}

static void
test_growth_is_charged_whole_nodes(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 1, HOUR);
  add_elastic(&w, "aws", AWS_H100, 5 * MIN);
  decide(&w);
  /* One GPU for an hour, on a node of 8 rented for it: 8 x $6.88. */
  assert_int_equal(cand(&w, 0)->grows, 1);
  assert_int_equal(cand(&w, 0)->compute_micro, 8 * AWS_H100);
  /* 4 GPUs with 3 free on a node up: those 3, and a new node of 8. */
  w.req.gpus = 4;
  w.sites[0].pools[0].free = 3;
  w.sites[0].pools[0].grow = 8;
  decide(&w);
  assert_int_equal(cand(&w, 0)->compute_micro, 11 * AWS_H100);
  /* Room on a node up: only its own GPUs. */
  w.sites[0].pools[0].free = 4;
  decide(&w);
  assert_int_equal(cand(&w, 0)->grows, 0);
  assert_int_equal(cand(&w, 0)->compute_micro, 4 * AWS_H100);
}

static void
test_a_job_that_may_take_spot_is_charged_the_spot_rate(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 8, HOUR);
  add_site(&w, "aws", 8, 8, AWS_H100);
  w.costs[0].pools[0].spot_priced = 1;
  w.costs[0].pools[0].spot_rate_micro = 3100000; /* $3.10 */
  decide(&w);
  /* Not told it may: on demand, 8 x $6.88. */
  assert_int_equal(cand(&w, 0)->compute_micro, 8 * AWS_H100);
  w.cost.spot_ok = 1;
  decide(&w);
  assert_int_equal(cand(&w, 0)->compute_micro, 8 * 3100000);
  /* A pool without spot keeps its price. */
  w.costs[0].pools[0].spot_priced = 0;
  decide(&w);
  assert_int_equal(cand(&w, 0)->compute_micro, 8 * AWS_H100);
}

static void
test_a_short_on_prem_wait_beats_growing_the_cloud(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 8, 30 * MIN);
  add_site(&w, "onprem", 8, 0, OWNED_H100);
  add_end(&w, 0, 3 * MIN, 8);
  add_elastic(&w, "aws", AWS_H100, 5 * MIN);
  decide(&w);
  /* A 3-minute wait is shorter than the 5-minute boot: no growth. */
  assert_int_equal(w.d.pick, 0);
  assert_int_equal(cand(&w, 1)->grows, 1);
}

static void
test_a_site_that_grows_on_submit_takes_the_job_now(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 8, 30 * MIN);
  add_elastic(&w, "slurm-cloud", AWS_H100, 5 * MIN);
  w.sites[0].grows_on_submit = 1;
  decide(&w);
  assert_int_equal(w.d.verdict, PLACEMENT_NOW);
  assert_int_equal(w.d.site, 0);
  assert_int_equal(cand(&w, 0)->grows, 1);
  assert_int_equal(cand(&w, 0)->start_ms, NOW + 5 * MIN);
}

static void
test_growth_beyond_what_a_site_may_grow_is_a_plain_wait(void **state)
{
  struct world w;

  (void)state;
  world_init(&w, 8, 30 * MIN);
  add_elastic(&w, "aws", AWS_H100, 5 * MIN);
  w.sites[0].pools[0].grow = 0;  /* at its maximum: both nodes up */
  w.sites[0].pools[0].free = 4;
  decide(&w);
  assert_int_equal(cand(&w, 0)->grows, 0);
  assert_int_equal(cand(&w, 0)->verdict, PLACEMENT_WAIT);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cost_policy_is_found_and_first_fit_reads_no_costs),
    cmocka_unit_test(test_an_idle_owned_site_wins_on_its_marginal_rate),
    cmocka_unit_test(
        test_waiting_for_an_owned_site_wins_when_cheaper_than_renting),
    cmocka_unit_test(
        test_a_job_whose_predicted_wait_grows_moves_to_a_rented_site),
    cmocka_unit_test(
        test_predicted_start_walks_the_ends_after_the_gpus_queued_ahead),
    cmocka_unit_test(
        test_beyond_the_known_ends_the_type_turns_over_once_per_runtime),
    cmocka_unit_test(test_missing_data_costs_egress_and_delays_the_start),
    cmocka_unit_test(test_the_transfer_overlaps_the_wait_for_capacity),
    cmocka_unit_test(test_a_site_that_cannot_receive_the_data_is_excluded),
    cmocka_unit_test(
        test_a_boot_delay_is_waited_for_but_the_site_takes_the_job_now),
    cmocka_unit_test(test_an_unpriced_site_is_charged_the_dearest_known_rate),
    cmocka_unit_test(
        test_with_no_price_anywhere_compute_is_unknown_and_the_wait_decides),
    cmocka_unit_test(test_without_cost_inputs_the_pick_is_first_fits),
    cmocka_unit_test(test_a_deadline_excludes_sites_that_start_too_late),
    cmocka_unit_test(
        test_when_no_site_meets_the_deadline_the_cheapest_still_wins),
    cmocka_unit_test(
        test_the_reservation_is_the_oldest_jobs_site_type_and_start),
    cmocka_unit_test(
        test_a_younger_job_passes_the_oldest_only_by_ending_before_its_start),
    cmocka_unit_test(
        test_a_reservation_due_now_holds_a_younger_job_that_would_outlast_it),
    cmocka_unit_test(test_a_reservation_holds_only_its_own_site_and_type),
    cmocka_unit_test(test_every_candidate_reports_its_terms_and_a_reason),
    cmocka_unit_test(test_decide_alone_gives_the_numbers_and_no_words),
    cmocka_unit_test(test_unreachable_and_unknown_sites_are_left_out),
    cmocka_unit_test(test_a_job_no_site_can_ever_run_is_never),
    cmocka_unit_test(test_a_pinned_job_is_costed_at_its_site_only),
    cmocka_unit_test(test_a_site_at_its_job_cap_starts_after_its_first_end),
    cmocka_unit_test(test_equal_totals_go_to_the_earlier_start),
    cmocka_unit_test(
        test_every_site_is_charged_its_own_rate_however_many_rates),
    cmocka_unit_test(
        test_an_any_type_job_is_costed_on_the_type_the_site_would_give),
    cmocka_unit_test(test_a_deadline_and_an_unpriced_site_rank_together),
    cmocka_unit_test(test_a_job_without_gpus_costs_no_compute),
    cmocka_unit_test(
        test_a_job_waits_for_an_elastic_site_to_grow_when_on_prem_waits_longer),
    cmocka_unit_test(test_a_short_on_prem_wait_beats_growing_the_cloud),
    cmocka_unit_test(test_a_job_that_may_take_spot_is_charged_the_spot_rate),
    cmocka_unit_test(test_growth_is_charged_whole_nodes),
    cmocka_unit_test(test_a_site_that_grows_on_submit_takes_the_job_now),
    cmocka_unit_test(test_growth_beyond_what_a_site_may_grow_is_a_plain_wait),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
