/*
 * Tests for policies/burst.c: each rule of the burst policy with numbers
 * worked out by hand (micro-dollars per hour, GPUs, milliseconds), the
 * spot safety rule, the forecast by hour of the week, the boot estimate
 * and the learned interruption rate.
 *
 * Prices are the research file's: AWS p5 (8 x H100) $55.04 an hour on
 * demand and 0.45 x that on spot, GCP a3-highgpu-8g $88.49, AWS g5 (1 x
 * A10G) $1.006.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "policies/burst.h"

/* Friday 2027-01-15 08:00 UTC; test_forecast_buckets_by_hour_of_week
 * checks the weekday and the hour. */
#define NOW 1800000000000LL
#define SEC 1000LL
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)
#define WEEK (7 * DAY)
#define P5 55040000LL       /* $55.04 */
#define P5_SPOT 24768000LL  /* $24.768 */
#define A3 88490000LL       /* $88.49 */
#define G5 1006000LL        /* $1.006 */

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* One site (or two) with room for a few shapes, nodes and jobs. */
struct world {
  struct burst_shape shapes[4];
  struct burst_node nodes[6];
  struct burst_job jobs[8];
  enum burst_reason why[6];
  struct burst_site site;
  struct burst_plan plan;
};

static const struct burst_shape shape_p5 = {"p5", "h100", 8, P5, 0, 5 * MIN};
static const struct burst_shape shape_p5_spot = {"p5-spot", "h100", 8,
                                                 P5_SPOT, 1, 5 * MIN};
static const struct burst_shape shape_g5 = {"g5", "a10g", 1, G5, 0, 3 * MIN};

/* An AWS site that launches p5 on demand: no minimum, at most 10 nodes,
 * idle 10 minutes, billed by the hour with a 2-minute margin, a
 * 5-minute cool-down, no cap, no forecast. */
static void
world_init(struct world *w)
{
  memset(w, 0, sizeof(*w));
  w->shapes[0] = shape_p5;
  w->site.name = "aws";
  w->site.shapes = w->shapes;
  w->site.nshapes = 1;
  w->site.nodes = w->nodes;
  w->site.jobs = w->jobs;
  w->site.forecast_gpus = -1;
  w->site.restart_ms = 15 * MIN;
  w->site.cfg.max_nodes = 10;
  w->site.cfg.idle_timeout_ms = 10 * MIN;
  w->site.cfg.billing_ms = HOUR;
  w->site.cfg.release_margin_ms = 2 * MIN;
  w->site.cfg.cooldown_ms = 5 * MIN;
  w->plan.nodes = w->why;
}

static void
add_shape(struct world *w, const struct burst_shape *sh)
{
  w->shapes[w->site.nshapes++] = *sh;
}

/* An up node of shape 0 launched at launched, with used GPUs busy; an
 * idle one has been since idle_since. */
static struct burst_node *
add_node(struct world *w, int64_t id, int64_t used, int64_t launched,
         int64_t idle_since)
{
  struct burst_node *n = &w->nodes[w->site.nnodes++];

  n->id = id;
  n->shape = 0;
  n->gpus_used = used;
  n->launched_ms = launched;
  n->idle_since_ms = idle_since;
  n->up = 1;
  return n;
}

static struct burst_job *
add_job(struct world *w, int64_t gpus, const char *type)
{
  struct burst_job *j = &w->jobs[w->site.njobs++];

  j->gpus = gpus;
  j->gpu_type = type;
  j->runtime_ms = HOUR;
  return j;
}

static void
decide(struct world *w)
{
  burst_decide(NOW, &w->site, 1, 0, &w->plan);
}

/* A node idle for 15 minutes whose paid hour ends in 40 s: released
 * unless something holds it. */
static struct burst_node *
add_idle_node(struct world *w, int64_t id)
{
  return add_node(w, id, 0, NOW - 2 * HOUR + 40 * SEC, NOW - 15 * MIN);
}

static void
test_min_nodes_are_launched_even_without_demand(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  w.site.cfg.min_nodes = 2;
  decide(&w);
  assert_int_equal(w.plan.launch[0], 2);
  assert_int_equal(w.plan.nlaunch, 2);
  assert_int_equal(w.plan.launch_reason, BURST_MIN_NODES);
  assert_int_equal(w.plan.held, BURST_NONE);
  assert_int_equal(w.plan.wanted_nodes, 2);
  assert_int_equal(w.plan.spend_micro, 2 * P5); /* $110.08 */
  assert_string_equal(w.plan.reason, "launch 2 x p5 (min-nodes: 2)");
}

static void
test_never_launches_above_max_nodes(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  w.site.cfg.max_nodes = 3;
  add_node(&w, 1, 8, NOW - HOUR, NOW - HOUR);
  add_node(&w, 2, 8, NOW - HOUR, NOW - HOUR);
  for (int i = 0; i < 3; i++)
    add_job(&w, 8, "h100");
  decide(&w);
  /* Three nodes asked, one more fits under the maximum of 3. */
  assert_int_equal(w.plan.nlaunch, 1);
  assert_int_equal(w.plan.launch[0], 1);
  assert_int_equal(w.plan.launch_reason, BURST_DEMAND);
  assert_int_equal(w.plan.held, BURST_MAX_NODES);
  assert_int_equal(w.plan.demand_gpus, 24);
  assert_int_equal(w.plan.wanted_nodes, 3);
  assert_int_equal(w.plan.spend_micro, 3 * P5);
  assert_string_equal(w.plan.reason,
                      "launch 1 x p5 (demand: 3 jobs, 24 GPUs waiting); "
                      "hold 2: max nodes 3 reached");

  /* At the maximum already: nothing. */
  add_node(&w, 3, 8, NOW - HOUR, NOW - HOUR);
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);
  assert_int_equal(w.plan.held, BURST_MAX_NODES);
  assert_int_equal(w.plan.wanted_nodes, 3);
  assert_string_equal(w.plan.reason, "hold: max nodes 3 reached");
}

static void
test_demand_packs_jobs_first_fit_decreasing_onto_the_cheapest_shape(
    void **state)
{
  struct world w;
  static const struct burst_shape a3 = {"a3", "h100", 8, A3, 0, 5 * MIN};
  /* $30 for 4: $7.50 a GPU, dearer per GPU than p5's $6.88. */
  static const struct burst_shape h4 = {"h100x4", "h100", 4, 30000000, 0,
                                        5 * MIN};

  (void)state;
  world_init(&w);
  w.shapes[0] = a3;
  add_shape(&w, &shape_p5);
  add_shape(&w, &h4);
  /* First fit in this order takes 3 nodes (3+3 | 5 | 5); largest first
   * takes 2 (5+3 | 5+3). */
  add_job(&w, 3, "h100");
  add_job(&w, 3, "h100");
  add_job(&w, 5, "h100");
  add_job(&w, 5, NULL);
  /* No shape holds these: they are no demand of this site. */
  add_job(&w, 1, "a10g");
  add_job(&w, 16, "h100");
  decide(&w);
  assert_int_equal(w.plan.launch[0], 0);
  assert_int_equal(w.plan.launch[1], 2);
  assert_int_equal(w.plan.launch[2], 0);
  assert_int_equal(w.plan.nlaunch, 2);
  assert_int_equal(w.plan.demand_gpus, 16);
  assert_int_equal(w.plan.wanted_nodes, 2);
  assert_int_equal(w.plan.spend_micro, 2 * P5);
  assert_string_equal(w.plan.reason,
                      "launch 2 x p5 (demand: 4 jobs, 16 GPUs waiting)");
}

static void
test_free_gpus_of_live_nodes_take_demand_before_a_launch(void **state)
{
  struct world w;
  struct burst_node *booting;

  (void)state;
  world_init(&w);
  add_node(&w, 1, 4, NOW - HOUR, NOW - HOUR);
  /* Launched a minute ago for the same demand, not up yet. */
  booting = add_node(&w, 2, 0, NOW - MIN, NOW - MIN);
  booting->up = 0;
  add_job(&w, 8, "h100");
  add_job(&w, 4, "h100");
  decide(&w);
  /* 8 onto the booting node, 4 onto node 1's free 4. */
  assert_int_equal(w.plan.nlaunch, 0);
  assert_int_equal(w.plan.demand_gpus, 12);
  assert_int_equal(w.plan.wanted_nodes, 2);
  assert_string_equal(w.plan.reason, "nothing to do");

  add_job(&w, 8, "h100");
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 1);
  assert_int_equal(w.plan.demand_gpus, 20);
  assert_int_equal(w.plan.wanted_nodes, 3);
}

static void
test_jobs_over_budget_create_no_demand(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  add_job(&w, 8, "h100")->over_budget = 1;
  add_job(&w, 8, "h100")->over_budget = 1;
  /* No shape holds it: no demand, so none left out either. */
  add_job(&w, 16, "h100")->over_budget = 1;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);
  assert_int_equal(w.plan.demand_gpus, 0);
  assert_int_equal(w.plan.budget_gpus, 16);
  assert_int_equal(w.plan.held, BURST_BUDGET);
  assert_int_equal(w.plan.launch_reason, BURST_NONE);
  assert_string_equal(w.plan.reason, "hold: 2 jobs (16 GPUs) over budget");

  add_job(&w, 4, "h100");
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 1);
  assert_int_equal(w.plan.demand_gpus, 4);
  assert_int_equal(w.plan.budget_gpus, 16);
  assert_int_equal(w.plan.held, BURST_BUDGET);
  assert_string_equal(w.plan.reason,
                      "launch 1 x p5 (demand: 1 job, 4 GPUs waiting); "
                      "hold: 2 jobs (16 GPUs) over budget");
}

static void
test_site_spend_cap_cuts_launches(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  add_node(&w, 1, 8, NOW - HOUR, NOW - HOUR);
  for (int i = 0; i < 3; i++)
    add_job(&w, 8, "h100");
  /* $55.04 live + $55.04 = $110.08 > $110. */
  w.site.cfg.spend_cap_micro = 110000000;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);
  assert_int_equal(w.plan.held, BURST_SITE_CAP);
  assert_int_equal(w.plan.launch_reason, BURST_DEMAND);
  assert_int_equal(w.plan.spend_micro, P5);
  assert_string_equal(w.plan.reason, "hold: spend cap $110/h reached at site");

  /* $170: $110.08 and $165.12 fit, $220.16 does not. */
  w.site.cfg.spend_cap_micro = 170000000;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 2);
  assert_int_equal(w.plan.held, BURST_SITE_CAP);
  assert_int_equal(w.plan.spend_micro, 3 * P5);
  assert_int_equal(w.plan.wanted_nodes, 3);
  assert_contains(w.plan.reason, "hold 1: spend cap $170/h reached at site");

  /* A cap exactly at the rate lets the launch through. */
  w.site.cfg.spend_cap_micro = 2 * P5;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 1);
  assert_contains(w.plan.reason, "spend cap $110.08/h");
}

static void
test_total_cap_is_shared_in_site_order(void **state)
{
  struct world w[2];
  struct burst_site sites[2];
  struct burst_plan plans[2];

  (void)state;
  for (int i = 0; i < 2; i++) {
    world_init(&w[i]);
    add_job(&w[i], 8, "h100");
    add_job(&w[i], 8, "h100");
  }
  /* The second site's live node spends too: $55.04 before anything. */
  add_node(&w[1], 1, 8, NOW - HOUR, NOW - HOUR);
  sites[0] = w[0].site;
  sites[1] = w[1].site;
  plans[0].nodes = w[0].why;
  plans[1].nodes = w[1].why;
  burst_decide(NOW, sites, 2, 170000000, plans);
  /* Site 0: $110.08, $165.12; site 1: $220.16 > $170. */
  assert_int_equal(plans[0].nlaunch, 2);
  assert_int_equal(plans[0].held, BURST_NONE);
  assert_int_equal(plans[1].nlaunch, 0);
  assert_int_equal(plans[1].held, BURST_TOTAL_CAP);
  assert_int_equal(plans[1].wanted_nodes, 1);
  assert_string_equal(plans[1].reason,
                      "hold: total spend cap $170/h reached");

  /* $120: site 0 gets one node, site 1 none. */
  burst_decide(NOW, sites, 2, 120000000, plans);
  assert_int_equal(plans[0].nlaunch, 1);
  assert_int_equal(plans[0].held, BURST_TOTAL_CAP);
  assert_int_equal(plans[1].nlaunch, 0);
}

static void
test_idle_node_is_released_only_near_the_end_of_its_paid_hour(void **state)
{
  struct world w;
  struct burst_node *n;

  (void)state;
  world_init(&w);
  /* Up 1 h 20 min: its second paid hour ends in 40 minutes. */
  n = add_node(&w, 17, 0, NOW - HOUR - 20 * MIN, NOW - 15 * MIN);
  decide(&w);
  assert_int_equal(w.why[0], BURST_PAID);
  assert_int_equal(w.plan.nrelease, 0);
  assert_int_equal(w.plan.wanted_nodes, 1);
  assert_string_equal(w.plan.reason, "nothing to do");

  /* 40 s before the end of its second hour: within the 2-minute margin. */
  n->launched_ms = NOW - 2 * HOUR + 40 * SEC;
  decide(&w);
  assert_int_equal(w.why[0], BURST_IDLE);
  assert_int_equal(w.plan.nrelease, 1);
  assert_int_equal(w.plan.wanted_nodes, 0);
  assert_int_equal(w.plan.spend_micro, 0);
  assert_string_equal(w.plan.reason,
                      "release node 17 (idle 900 s, paid hour ends in 40 s)");

  /* At the hour's very end the next hour is paid: kept. */
  n->launched_ms = NOW - 2 * HOUR;
  decide(&w);
  assert_int_equal(w.why[0], BURST_PAID);

  /* Idle 9 minutes: not idle long enough to be looked at. */
  n->launched_ms = NOW - 2 * HOUR + 40 * SEC;
  n->idle_since_ms = NOW - 9 * MIN;
  decide(&w);
  assert_int_equal(w.why[0], BURST_NONE);
  assert_int_equal(w.plan.nrelease, 0);
}

static void
test_per_second_billing_releases_at_the_idle_timeout(void **state)
{
  struct world w;
  struct burst_node *n;

  (void)state;
  world_init(&w);
  w.site.cfg.billing_ms = SEC;
  n = add_node(&w, 5, 0, NOW - HOUR - 20 * MIN, NOW - 10 * MIN);
  decide(&w);
  assert_int_equal(w.why[0], BURST_IDLE);
  assert_int_equal(w.plan.nrelease, 1);
  assert_string_equal(w.plan.reason, "release node 5 (idle 600 s)");

  n->idle_since_ms = NOW - 10 * MIN + 1;
  decide(&w);
  assert_int_equal(w.why[0], BURST_NONE);
  assert_int_equal(w.plan.nrelease, 0);
}

static void
test_a_low_wait_value_releases_an_idle_node_before_the_timeout(void **state)
{
  struct world w;
  struct burst_node *n;

  (void)state;
  world_init(&w);
  w.site.cfg.billing_ms = SEC;
  /* $4 a GPU-hour of waiting: a 5-minute boot of 8 GPUs is worth $2.67,
   * what a $55.04/h p5 costs idle in 4e6 x 8 x 300000 / 55040000 ms =
   * 174.418 s. */
  w.site.cfg.wait_value_micro = 4000000;
  n = add_node(&w, 5, 0, NOW - HOUR, NOW - 174418);
  decide(&w);
  assert_int_equal(w.why[0], BURST_IDLE);
  n->idle_since_ms = NOW - 174417 + 1;
  decide(&w);
  assert_int_equal(w.why[0], BURST_NONE);
  /* At $64 the boot is worth more than 10 minutes idle: the timeout
   * rules. */
  w.site.cfg.wait_value_micro = 64000000;
  n->idle_since_ms = NOW - 10 * MIN + 1;
  decide(&w);
  assert_int_equal(w.why[0], BURST_NONE);
  n->idle_since_ms = NOW - 10 * MIN;
  decide(&w);
  assert_int_equal(w.why[0], BURST_IDLE);
}

static void
test_no_release_below_min_nodes(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  w.site.cfg.min_nodes = 1;
  add_idle_node(&w, 1);
  add_idle_node(&w, 2);
  decide(&w);
  assert_int_equal(w.why[0], BURST_IDLE);
  assert_int_equal(w.why[1], BURST_MIN_NODES);
  assert_int_equal(w.plan.nrelease, 1);
  assert_int_equal(w.plan.wanted_nodes, 1);
  assert_int_equal(w.plan.spend_micro, P5);
}

static void
test_no_release_within_cooldown_after_a_launch(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  add_idle_node(&w, 1);
  w.site.last_launch_ms = NOW - 2 * MIN;
  decide(&w);
  assert_int_equal(w.why[0], BURST_COOLDOWN);
  assert_int_equal(w.plan.nrelease, 0);

  w.site.last_launch_ms = NOW - 5 * MIN;
  decide(&w);
  assert_int_equal(w.why[0], BURST_IDLE);
  assert_int_equal(w.plan.nrelease, 1);
}

static void
test_forecast_prescales_ahead_of_the_daily_peak(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  /* Spot is cheaper, but the base shape is on demand. */
  add_shape(&w, &shape_p5_spot);
  add_node(&w, 1, 8, NOW - HOUR, NOW - HOUR);
  w.site.forecast_gpus = 20;
  decide(&w);
  /* Off: the forecast is not read. */
  assert_int_equal(w.plan.nlaunch, 0);

  w.site.cfg.forecast = 1;
  decide(&w);
  /* 20 expected, 8 there: 12 / 8 to the nearest node, half up: 2 p5. */
  assert_int_equal(w.plan.launch[0], 2);
  assert_int_equal(w.plan.launch[1], 0);
  assert_int_equal(w.plan.launch_reason, BURST_FORECAST);
  assert_int_equal(w.plan.wanted_nodes, 3);
  assert_string_equal(
      w.plan.reason,
      "launch 2 x p5 (forecast: 20 GPUs busy expected, 8 there)");

  /* A job without deadline takes a spot node; its 8 GPUs count: 16
   * there, one p5 covers the last 4. */
  add_job(&w, 8, "h100");
  decide(&w);
  assert_int_equal(w.plan.launch[0], 1);
  assert_int_equal(w.plan.launch[1], 1);
  assert_int_equal(w.plan.launch_reason, BURST_DEMAND);
  assert_int_equal(w.plan.spend_micro, 2 * P5 + P5_SPOT);

  /* Enough already: nothing. */
  w.site.njobs = 0;
  w.site.forecast_gpus = 8;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);

  /* Two GPUs short of the forecast: no node of eight for them. */
  w.site.forecast_gpus = 10;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);
}

static void
test_forecast_launch_waits_out_the_cooldown_after_a_release(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  w.site.cfg.forecast = 1;
  w.site.forecast_gpus = 8;
  w.site.last_release_ms = NOW - MIN;
  w.site.last_launch_ms = NOW - MIN;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);
  assert_int_equal(w.plan.held, BURST_COOLDOWN);
  assert_string_equal(
      w.plan.reason,
      "hold: forecast launch in the cool-down after a release (240 s left)");

  /* Demand and the minimum never wait. */
  w.site.cfg.min_nodes = 1;
  add_job(&w, 8, "h100");
  add_job(&w, 8, "h100");
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 2);
  assert_int_equal(w.plan.launch_reason, BURST_MIN_NODES);

  w.site.last_release_ms = NOW - 5 * MIN;
  w.site.njobs = 0;
  w.site.cfg.min_nodes = 0;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 1);
  assert_int_equal(w.plan.launch_reason, BURST_FORECAST);
}

static void
test_hysteresis_keeps_an_idle_node_the_forecast_needs(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  w.site.cfg.forecast = 1;
  add_node(&w, 1, 8, NOW - HOUR, NOW - HOUR);
  add_idle_node(&w, 2);
  /* 12 expected, 8 busy: 4 more expected, 0 idle once node 2 is gone. */
  w.site.forecast_gpus = 12;
  decide(&w);
  assert_int_equal(w.why[1], BURST_HELD);
  assert_int_equal(w.plan.nrelease, 0);
  assert_int_equal(w.plan.nlaunch, 0);

  w.site.forecast_gpus = 8;
  decide(&w);
  assert_int_equal(w.why[1], BURST_IDLE);
  assert_int_equal(w.plan.nrelease, 1);

  /* Two idle nodes, 4 more expected: one goes, one stays. */
  add_idle_node(&w, 3);
  w.site.forecast_gpus = 12;
  decide(&w);
  assert_int_equal(w.why[1], BURST_IDLE);
  assert_int_equal(w.why[2], BURST_HELD);
  assert_int_equal(w.plan.nrelease, 1);
  assert_int_equal(w.plan.wanted_nodes, 2);
}

static void
test_no_release_while_jobs_wait_for_growth(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  add_shape(&w, &shape_g5);
  add_idle_node(&w, 1);
  add_job(&w, 1, "a10g");
  decide(&w);
  assert_int_equal(w.plan.launch[1], 1);
  assert_int_equal(w.why[0], BURST_HELD);
  assert_int_equal(w.plan.nrelease, 0);
  assert_int_equal(w.plan.wanted_nodes, 2);
  assert_int_equal(w.plan.spend_micro, P5 + G5);

  /* Nor while a launch the caps cut is asked for. */
  w.site.cfg.spend_cap_micro = P5;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);
  assert_int_equal(w.plan.held, BURST_SITE_CAP);
  assert_int_equal(w.why[0], BURST_HELD);
}

static void
test_deadline_job_with_no_slack_takes_on_demand(void **state)
{
  struct world w;

  (void)state;
  world_init(&w);
  add_shape(&w, &shape_p5_spot);
  /* An hour of work, 10 minutes of slack: a 15-minute restart would miss. */
  add_job(&w, 8, "h100")->deadline_ms = NOW + HOUR + 10 * MIN;
  /* An hour of slack, and no deadline: spot. */
  add_job(&w, 8, "h100")->deadline_ms = NOW + 2 * HOUR;
  add_job(&w, 8, "h100");
  decide(&w);
  assert_int_equal(w.plan.launch[0], 1);
  assert_int_equal(w.plan.launch[1], 2);
  assert_int_equal(w.plan.spend_micro, P5 + 2 * P5_SPOT);
  assert_string_equal(
      w.plan.reason,
      "launch 1 x p5, 2 x p5-spot (demand: 3 jobs, 24 GPUs waiting)");

  /* A spot-only site holds no such job: it is no demand there. */
  w.shapes[0] = shape_p5_spot;
  w.site.nshapes = 1;
  decide(&w);
  assert_int_equal(w.plan.launch[0], 2);
  assert_int_equal(w.plan.demand_gpus, 16);
}

static void
test_restart_allowance_counts_the_interruptions_a_run_expects(void **state)
{
  (void)state;
  /* Rare interruptions: one restart is what a job must absorb. */
  assert_int_equal(burst_restart_allowance(15 * MIN, 0.0002, 10 * HOUR),
                   15 * MIN);
  /* 0.5 an hour over 5 hours: 2.5 expected, 3 restarts. */
  assert_int_equal(burst_restart_allowance(15 * MIN, 0.5, 5 * HOUR),
                   45 * MIN);
  /* Nonsense rates stay bounded. */
  assert_int_equal(burst_restart_allowance(MIN, -1.0, HOUR), MIN);
  assert_int_equal(burst_restart_allowance(MIN, 1e9, HOUR), 1000 * MIN);
}

static void
test_spot_safe_rule(void **state)
{
  (void)state;
  assert_int_equal(burst_spot_safe(NOW, 0, 100 * HOUR, HOUR), 1);
  /* 75 minutes left: an hour of work and a 15-minute restart just fit. */
  assert_int_equal(burst_spot_safe(NOW, NOW + 75 * MIN, HOUR, 15 * MIN), 1);
  assert_int_equal(burst_spot_safe(NOW, NOW + 75 * MIN, HOUR + 1, 15 * MIN),
                   0);
  assert_int_equal(burst_spot_safe(NOW, NOW - 1, 0, 0), 0);
  /* Hostile numbers neither overflow nor pass. */
  assert_int_equal(burst_spot_safe(NOW, INT64_MIN, INT64_MAX, INT64_MAX), 0);
  assert_int_equal(burst_spot_safe(INT64_MIN, INT64_MAX, HOUR, HOUR), 1);
  assert_int_equal(burst_spot_safe(NOW, NOW + HOUR, -5 * HOUR, -HOUR), 1);
}

static void
test_forecast_buckets_by_hour_of_week(void **state)
{
  struct burst_forecast f;
  int64_t days = NOW / DAY;
  int64_t monday = NOW - (4 * 24 + 8) * HOUR;

  (void)state;
  /* NOW is a Friday (Monday 0: the epoch's Thursday is 3), 08:00 UTC. */
  assert_int_equal((days + 3) % 7, 4);
  assert_int_equal(NOW % DAY, 8 * HOUR);

  burst_forecast_init(&f);
  burst_forecast_cover(&f, monday, monday + WEEK);
  burst_forecast_add(&f, NOW, NOW + HOUR, 16);
  burst_forecast_add(&f, NOW + HOUR, NOW + HOUR + 30 * MIN, 4);
  burst_forecast_add(&f, monday, monday + HOUR, 3);
  assert_int_equal(f.gpu_ms[4 * 24 + 8], 16 * HOUR);
  assert_int_equal(f.gpu_ms[0], 3 * HOUR);
  /* The same hour of later weeks. */
  assert_int_equal(burst_forecast_gpus(&f, NOW + WEEK + 10 * MIN), 16);
  assert_int_equal(burst_forecast_gpus(&f, NOW + 2 * HOUR - 1), 2);
  assert_int_equal(burst_forecast_gpus(&f, NOW - HOUR), 0);
  assert_int_equal(burst_forecast_gpus(&f, monday + 59 * MIN), 3);
  assert_int_equal(burst_forecast_gpus(&f, monday - 1), 0); /* Sunday */

  /* Three weeks of 2 GPUs: every hour three hours seen, mean 2. */
  burst_forecast_init(&f);
  burst_forecast_cover(&f, NOW + 17 * MIN, NOW + 17 * MIN + 3 * WEEK);
  burst_forecast_add(&f, NOW + 17 * MIN, NOW + 17 * MIN + 3 * WEEK, 2);
  for (int h = 0; h < BURST_WEEK_HOURS; h++) {
    assert_int_equal(f.seen_ms[h], 3 * HOUR);
    assert_int_equal(f.gpu_ms[h], 6 * HOUR);
  }
  assert_int_equal(burst_forecast_gpus(&f, 12345), 2);

  /* Before the epoch: Wednesday 1969-12-31 23:00 is hour 71. */
  burst_forecast_init(&f);
  burst_forecast_cover(&f, -HOUR, 0);
  burst_forecast_add(&f, -HOUR, 0, 5);
  assert_int_equal(f.seen_ms[71], HOUR);
  assert_int_equal(burst_forecast_gpus(&f, WEEK - 30 * MIN), 5);
}

static void
test_forecast_unknown_hour_is_minus_one(void **state)
{
  struct burst_forecast f;

  (void)state;
  burst_forecast_init(&f);
  assert_int_equal(burst_forecast_gpus(&f, NOW), -1);
  assert_int_equal(burst_forecast_gpus(NULL, NOW), -1);
  burst_forecast_cover(&f, NOW, NOW + 59 * MIN);
  assert_int_equal(burst_forecast_gpus(&f, NOW), -1);
  burst_forecast_cover(&f, NOW + WEEK, NOW + WEEK + MIN);
  assert_int_equal(burst_forecast_gpus(&f, NOW), 0);
  /* Empty or backward spans and negative GPUs change nothing. */
  burst_forecast_add(&f, NOW, NOW, 8);
  burst_forecast_add(&f, NOW + MIN, NOW, 8);
  burst_forecast_add(&f, NOW, NOW + MIN, -8);
  assert_int_equal(burst_forecast_gpus(&f, NOW), 0);
  /* The widest span saturates and does not loop forever. */
  burst_forecast_cover(&f, INT64_MIN, INT64_MAX);
  burst_forecast_add(&f, INT64_MIN, INT64_MAX, INT64_MAX);
  assert_true(burst_forecast_gpus(&f, NOW) > 0);
}

static void
test_boot_estimate_is_the_median_of_the_latest_samples(void **state)
{
  struct burst_boot b;

  (void)state;
  burst_boot_init(&b);
  assert_int_equal(burst_boot_estimate(&b, 5 * MIN), 5 * MIN);
  burst_boot_add(&b, 300 * SEC);
  burst_boot_add(&b, 100 * SEC);
  burst_boot_add(&b, 0);
  burst_boot_add(&b, -7);
  burst_boot_add(&b, 200 * SEC);
  assert_int_equal(b.n, 3);
  assert_int_equal(burst_boot_estimate(&b, 5 * MIN), 200 * SEC);
  /* An even count: the mean of the middle two, rounded up. */
  burst_boot_add(&b, 250 * SEC + 1);
  assert_int_equal(burst_boot_estimate(&b, 5 * MIN), 225001);
  /* Sixteen newer boots push the old out. */
  for (int i = 0; i < BURST_BOOT_SAMPLES; i++)
    burst_boot_add(&b, 30 * MIN);
  assert_int_equal(b.n, BURST_BOOT_SAMPLES);
  assert_int_equal(burst_boot_estimate(&b, 5 * MIN), 30 * MIN);
  for (int i = 0; i < 7; i++)
    burst_boot_add(&b, 4 * MIN);
  assert_int_equal(burst_boot_estimate(&b, 5 * MIN), 30 * MIN);
  burst_boot_add(&b, 4 * MIN);
  assert_int_equal(burst_boot_estimate(&b, 5 * MIN), 17 * MIN);
  assert_int_equal(burst_boot_estimate(NULL, 5 * MIN), 5 * MIN);
}

static void
test_interruption_rate_is_pulled_toward_the_prior_when_little_seen(
    void **state)
{
  (void)state;
  /* No uptime: the prior. */
  assert_float_equal(burst_interruption_rate(0, 0, 0.01), 0.01, 1e-12);
  /* 2 h without one: 0.24 / 26. */
  assert_float_equal(burst_interruption_rate(0, 2 * HOUR, 0.01),
                     0.24 / 26.0, 1e-12);
  /* 1,000 h without one: near 0, not 0. */
  assert_float_equal(burst_interruption_rate(0, 1000 * HOUR, 0.01),
                     0.24 / 1024.0, 1e-12);
  /* 10 in 100 h: (10 + 0.24) / 124. */
  assert_float_equal(burst_interruption_rate(10, 100 * HOUR, 0.01),
                     10.24 / 124.0, 1e-12);
  /* Negative counts and a negative or NaN prior count as 0. */
  assert_float_equal(burst_interruption_rate(-3, -HOUR, -1.0), 0.0, 1e-12);
  assert_float_equal(burst_interruption_rate(1, 0, __builtin_nan("")),
                     1.0 / 24.0, 1e-12);
}

static void
test_reason_names(void **state)
{
  static const char *const names[BURST_REASON_COUNT] = {
      "none",     "demand",   "forecast", "min-nodes",
      "idle",     "max-nodes", "site-cap", "total-cap",
      "cooldown", "paid",     "held",     "budget",
  };

  (void)state;
  for (int r = 0; r < BURST_REASON_COUNT; r++)
    assert_string_equal(burst_reason_name((enum burst_reason)r), names[r]);
  assert_string_equal(burst_reason_name(BURST_REASON_COUNT), "unknown");
  assert_string_equal(burst_reason_name((enum burst_reason)-1), "unknown");
}

static void
test_unpriced_shape_costs_the_dearest_priced_shape(void **state)
{
  struct world w;
  static const struct burst_shape free_a3 = {"a3", "h100", 8, 0, 0, 0};

  (void)state;
  world_init(&w);
  add_shape(&w, &free_a3);
  add_job(&w, 8, "h100");
  add_job(&w, 8, "h100");
  add_node(&w, 1, 8, NOW - HOUR, NOW - HOUR)->shape = 1;
  decide(&w);
  /* a3 is taken at p5's $55.04; the tie goes to the earlier shape. */
  assert_int_equal(w.plan.launch[0], 2);
  assert_int_equal(w.plan.spend_micro, 3 * P5);
}

static void
test_malformed_input_is_bounded_not_a_crash(void **state)
{
  struct world w;
  struct burst_node *n;

  (void)state;
  world_init(&w);
  w.site.cfg.min_nodes = INT64_MAX;
  w.site.cfg.max_nodes = INT64_MAX;
  w.site.cfg.billing_ms = HOUR;
  w.site.cfg.spend_cap_micro = 0;
  /* A shape index out of range, a node with more used than it holds. */
  n = add_node(&w, 1, 0, INT64_MIN, INT64_MIN);
  n->shape = 99;
  add_node(&w, 2, 999, INT64_MAX, INT64_MAX);
  add_job(&w, INT64_MAX, NULL);
  add_job(&w, -4, "h100");
  add_job(&w, 0, NULL);
  w.site.forecast_gpus = INT64_MAX;
  w.site.cfg.forecast = 1;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, BURST_MAX_LAUNCH);
  assert_int_equal(w.plan.launch_reason, BURST_MIN_NODES);
  assert_int_equal(w.plan.wanted_nodes, 2 + BURST_MAX_LAUNCH);

  /* No shapes, no arrays. */
  world_init(&w);
  w.site.shapes = NULL;
  w.site.nshapes = 3;
  w.site.jobs = NULL;
  w.site.njobs = 5;
  w.site.cfg.min_nodes = 3;
  decide(&w);
  assert_int_equal(w.plan.nlaunch, 0);
  assert_string_equal(w.plan.reason, "nothing to do");
  burst_decide(NOW, NULL, 1, 0, &w.plan);
  burst_decide(NOW, &w.site, 1, 0, NULL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_min_nodes_are_launched_even_without_demand),
      cmocka_unit_test(test_never_launches_above_max_nodes),
      cmocka_unit_test(
          test_demand_packs_jobs_first_fit_decreasing_onto_the_cheapest_shape),
      cmocka_unit_test(
          test_free_gpus_of_live_nodes_take_demand_before_a_launch),
      cmocka_unit_test(test_jobs_over_budget_create_no_demand),
      cmocka_unit_test(test_site_spend_cap_cuts_launches),
      cmocka_unit_test(test_total_cap_is_shared_in_site_order),
      cmocka_unit_test(
          test_idle_node_is_released_only_near_the_end_of_its_paid_hour),
      cmocka_unit_test(test_per_second_billing_releases_at_the_idle_timeout),
      cmocka_unit_test(
          test_a_low_wait_value_releases_an_idle_node_before_the_timeout),
      cmocka_unit_test(test_no_release_below_min_nodes),
      cmocka_unit_test(test_no_release_within_cooldown_after_a_launch),
      cmocka_unit_test(test_forecast_prescales_ahead_of_the_daily_peak),
      cmocka_unit_test(
          test_forecast_launch_waits_out_the_cooldown_after_a_release),
      cmocka_unit_test(test_hysteresis_keeps_an_idle_node_the_forecast_needs),
      cmocka_unit_test(test_no_release_while_jobs_wait_for_growth),
      cmocka_unit_test(test_deadline_job_with_no_slack_takes_on_demand),
      cmocka_unit_test(test_spot_safe_rule),
    cmocka_unit_test(
        test_restart_allowance_counts_the_interruptions_a_run_expects),
      cmocka_unit_test(test_forecast_buckets_by_hour_of_week),
      cmocka_unit_test(test_forecast_unknown_hour_is_minus_one),
      cmocka_unit_test(test_boot_estimate_is_the_median_of_the_latest_samples),
      cmocka_unit_test(
          test_interruption_rate_is_pulled_toward_the_prior_when_little_seen),
      cmocka_unit_test(test_reason_names),
      cmocka_unit_test(test_unpriced_shape_costs_the_dearest_priced_shape),
      cmocka_unit_test(test_malformed_input_is_bounded_not_a_crash),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
