/*
 * Tests for policies/placement.c: the first-fit policy's verdicts and the
 * reasons it gives for every site (the fit judgement they rest on is the
 * cost policy's too; test_cost_placement.c tests that policy).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "policies/placement.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

static struct placement_site
site(const char *name, int64_t nodes)
{
  struct placement_site s;

  memset(&s, 0, sizeof(s));
  s.name = name;
  s.reachable = 1;
  s.nodes = nodes;
  return s;
}

static void
add_pool(struct placement_site *s, const char *type, int64_t total,
         int64_t free, int64_t per_node)
{
  struct placement_pool *p = &s->pools[s->npools++];

  p->type = type;
  p->total = total;
  p->free = free;
  p->per_node = per_node;
}

static struct placement_request
request(int64_t gpus, const char *type)
{
  struct placement_request r;

  memset(&r, 0, sizeof(r));
  r.gpus = gpus;
  r.gpu_type = type;
  r.nodes = 1;
  return r;
}

static void
decide(const struct placement_request *r, const struct placement_site *s,
       size_t n, struct placement_decision *d)
{
  const struct placement_policy *p = placement_policy_find("first-fit");

  assert_non_null(p);
  p->decide(r, s, n, d);
}

static void
test_policy_is_found_by_name(void **state)
{
  const struct placement_policy *p;

  (void)state;
  p = placement_policy_find("first-fit");
  assert_non_null(p);
  assert_string_equal(p->name, "first-fit");
  assert_null(placement_policy_find("best-fit"));
  assert_null(placement_policy_find(""));
  assert_null(placement_policy_find(NULL));
}

static void
test_first_fit_takes_the_first_site_that_fits_in_order(void **state)
{
  struct placement_site s[3];
  struct placement_request r = request(4, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 8, 8);
  s[1] = site("aws", 4);
  add_pool(&s[1], "h100", 32, 32, 8);
  s[2] = site("gcp", 4);
  add_pool(&s[2], "h100", 32, 32, 8);
  decide(&r, s, 3, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
  assert_int_equal(d.site, 0);
  assert_int_equal(d.ncandidates, 3);
  assert_int_equal(d.candidates[1].verdict, PLACEMENT_NOW);
  assert_contains(d.reason, "'onprem'");
  /* First fit ranks by position: earlier is better. */
  assert_true(d.candidates[0].score > d.candidates[1].score);
  assert_true(d.candidates[1].score > d.candidates[2].score);
}

static void
test_first_fit_names_each_candidates_site_index_and_its_pick(void **state)
{
  struct placement_site s[3];
  struct placement_request r = request(4, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 1);
  add_pool(&s[0], "h100", 8, 0, 8);
  s[1] = site("aws", 1);
  add_pool(&s[1], "h100", 8, 8, 8);
  s[2] = site("gcp", 1);
  add_pool(&s[2], "h100", 8, 8, 8);
  decide(&r, s, 3, &d);
  assert_int_equal(d.pick, 1);
  assert_int_equal(d.site, 1);
  r.site = "gcp";
  decide(&r, s, 3, &d);
  assert_int_equal(d.ncandidates, 1);
  assert_int_equal(d.candidates[0].index, 2);
  assert_int_equal(d.pick, 2);
  r.site = NULL;
  r.gpus = 12;
  decide(&r, s, 3, &d);
  assert_int_equal(d.pick, -1);
}

static void
test_fifty_sites_are_all_candidates(void **state)
{
  struct placement_site s[50];
  struct placement_request r = request(1, "h100");
  struct placement_decision d;

  (void)state;
  for (int i = 0; i < 50; i++) {
    s[i] = site("busy", 1);
    add_pool(&s[i], "h100", 8, 0, 8);
  }
  s[49].name = "last";
  s[49].pools[0].free = 1;
  decide(&r, s, 50, &d);
  assert_int_equal(d.ncandidates, 50);
  assert_int_equal(d.site, 49);
}

static void
test_busy_first_site_falls_through_to_the_next(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(6, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 8, 4, 8);
  s[1] = site("aws", 4);
  add_pool(&s[1], "h100", 32, 32, 8);
  decide(&r, s, 2, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
  assert_int_equal(d.site, 1);
  assert_int_equal(d.candidates[0].verdict, PLACEMENT_WAIT);
  assert_string_equal(d.candidates[0].reason, "4 of 8 h100 free, needs 6");
  assert_string_equal(d.candidates[0].site, "onprem");
  assert_string_equal(d.candidates[1].site, "aws");
}

static void
test_pinned_site_is_the_only_one_considered(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(2, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  s[1] = site("aws", 4);
  add_pool(&s[1], "h100", 8, 1, 8);
  r.site = "aws";
  decide(&r, s, 2, &d);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_int_equal(d.site, -1);
  assert_int_equal(d.ncandidates, 1);
  assert_string_equal(d.candidates[0].site, "aws");
  assert_contains(d.reason, "1 of 8 h100 free, needs 2");
}

static void
test_unknown_pinned_site_is_never(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(2, NULL);
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  r.site = "azure";
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_int_equal(d.site, -1);
  assert_int_equal(d.ncandidates, 0);
  assert_string_equal(d.reason, "no site named 'azure'");
}

static void
test_pinned_site_that_cannot_fit_is_never_with_its_reason(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(2, "a10g");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  r.site = "onprem";
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_contains(d.reason, "site 'onprem' can never run 2 x a10g GPUs");
  assert_contains(d.reason, "site has 0 a10g");
}

static void
test_requested_type_must_match(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(2, "a10g");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  s[1] = site("aws", 4);
  add_pool(&s[1], "h100", 8, 8, 8);
  add_pool(&s[1], "a10g", 4, 4, 1);
  r.nodes = 2;
  decide(&r, s, 2, &d);
  assert_int_equal(d.candidates[0].verdict, PLACEMENT_NEVER);
  assert_string_equal(d.candidates[0].reason,
                      "needs 2 x a10g GPUs, site has 0 a10g");
  assert_int_equal(d.verdict, PLACEMENT_NOW);
  assert_int_equal(d.site, 1);
  assert_contains(d.candidates[1].reason, "4 of 4 a10g free, needs 2");
}

static void
test_type_matching_ignores_case(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(1, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 1);
  add_pool(&s[0], "H100", 8, 8, 8);
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
}

static void
test_no_site_with_the_type_is_never_with_a_summary(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(2, "a10g");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  s[1] = site("aws", 4);
  add_pool(&s[1], "l4", 8, 8, 8);
  decide(&r, s, 2, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_int_equal(d.site, -1);
  /* Sites that say the same thing are named together. */
  assert_string_equal(d.reason, "no site can run 2 x a10g GPUs: 'onprem', "
                                "'aws': needs 2 x a10g GPUs, site has 0 "
                                "a10g");
  assert_int_equal(d.candidates[1].verdict, PLACEMENT_NEVER);
}

static void
test_more_gpus_than_the_type_has_is_never(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(12, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 2);
  add_pool(&s[0], "h100", 8, 8, 4);
  r.nodes = 2;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_string_equal(d.candidates[0].reason,
                      "needs 12 x h100 GPUs, site has 8 h100 in total");
  assert_string_equal(d.reason, "no site can run 12 x h100 GPUs on 2 nodes: "
                                "'onprem': needs 12 x h100 GPUs, site has 8 "
                                "h100 in total");
}

static void
test_any_type_request_needs_one_type_to_hold_it(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(12, NULL);
  struct placement_decision d;

  (void)state;
  /* 16 GPUs in all, but no single type has 12. */
  s[0] = site("onprem", 4);
  add_pool(&s[0], "h100", 8, 8, 8);
  add_pool(&s[0], "a100", 8, 8, 8);
  r.nodes = 2;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_contains(d.candidates[0].reason,
                  "needs 12 GPUs of one type, site has at most 8");
}

static void
test_any_type_request_takes_a_type_that_fits(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(8, NULL);
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 4);
  add_pool(&s[0], "l4", 4, 4, 4);
  add_pool(&s[0], "h100", 16, 8, 8);
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
  assert_contains(d.candidates[0].reason, "8 of 16 h100 free, needs 8");
}

static void
test_gpus_per_node_above_the_node_size_is_never(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(16, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 4);
  r.nodes = 2;
  r.gpus_per_node = 8;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_string_equal(d.candidates[0].reason,
                      "needs 8 h100 GPUs per node, site has at most 4 per "
                      "node");
}

static void
test_total_spread_over_too_few_nodes_is_never(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(16, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_contains(d.candidates[0].reason, "needs 16 h100 GPUs per node");
  r.nodes = 2;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
  /* 17 over 2 nodes puts 9 on one of them: rounded up, not down. */
  r.gpus = 17;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_contains(d.candidates[0].reason, "needs 9 h100 GPUs per node");
}

static void
test_more_nodes_than_the_site_has_is_never(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(0, NULL);
  struct placement_decision d;

  (void)state;
  s[0] = site("small", 2);
  r.nodes = 3;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_string_equal(d.candidates[0].reason, "needs 3 nodes, site has 2");
  assert_string_equal(d.reason, "no site can run 3 nodes without GPUs: "
                                "'small': needs 3 nodes, site has 2");
}

static void
test_never_names_every_site_with_its_own_reason(void **state)
{
  struct placement_site s[3];
  struct placement_request r = request(16, NULL);
  struct placement_decision d;

  (void)state;
  /* The testbed: onprem is 1 node x 8 h100, cloud 8 h100 + 4 a10g on
   * 2 nodes, and a local site without GPUs. */
  s[0] = site("onprem", 1);
  add_pool(&s[0], "h100", 8, 8, 8);
  s[1] = site("cloud", 2);
  add_pool(&s[1], "h100", 8, 8, 4);
  add_pool(&s[1], "a10g", 4, 4, 2);
  s[2] = site("local", 1);
  s[2].detail = "nvidia-smi is not on PATH";
  r.nodes = 2;
  decide(&r, s, 3, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_string_equal(d.reason,
                      "no site can run 16 GPUs on 2 nodes: 'onprem', "
                      "'local': needs 2 nodes, site has 1; 'cloud': needs 16 "
                      "GPUs of one type, site has at most 8 of one type");
  r.gpus = 1;
  r.nodes = 1;
  decide(&r, &s[2], 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  /* Why the site has none is the site's to say. */
  assert_string_equal(d.reason, "no site can run 1 GPUs: 'local': needs 1 "
                                "GPUs, site has none (nvidia-smi is not on "
                                "PATH)");
}

static void
test_wait_names_every_site_not_only_the_first(void **state)
{
  struct placement_site s[3];
  struct placement_request r = request(6, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 1);
  add_pool(&s[0], "h100", 8, 2, 8);
  s[1] = site("cloud", 2);
  s[1].reachable = 0;
  add_pool(&s[1], "h100", 8, 8, 8);
  s[2] = site("local", 1);
  decide(&r, s, 3, &d);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_string_equal(d.reason,
                      "no site can run 6 x h100 GPUs now: 'onprem': 2 of 8 "
                      "h100 free, needs 6; 'cloud': site unreachable; "
                      "'local': needs 6 x h100 GPUs, site has 0 h100");
}

static void
test_a_summary_too_long_is_cut_not_overrun(void **state)
{
  char names[PLACEMENT_MAX_SITES][8];
  struct placement_site s[PLACEMENT_MAX_SITES];
  struct placement_request r = request(2, "h100");
  struct placement_decision d;

  (void)state;
  /* Every site busy with a reason of its own. */
  for (int i = 0; i < PLACEMENT_MAX_SITES; i++) {
    snprintf(names[i], sizeof(names[i]), "s%02d", i);
    s[i] = site(names[i], 4);
    add_pool(&s[i], "h100", 8 + i, 1, 8);
  }
  decide(&r, s, PLACEMENT_MAX_SITES, &d);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_int_equal(strlen(d.reason), PLACEMENT_SUMMARY_LEN - 1);
  assert_contains(d.reason, "'s00': 1 of 8 h100 free, needs 2; 's01': 1 of "
                            "9 h100 free");
}

static void
test_not_enough_free_is_wait_not_never(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(6, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 2);
  add_pool(&s[0], "h100", 8, 4, 8);
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_int_equal(d.site, -1);
  assert_string_equal(d.candidates[0].reason, "4 of 8 h100 free, needs 6");
  assert_contains(d.reason, "no site can run 6 x h100 GPUs now");
  assert_contains(d.reason, "4 of 8 h100 free, needs 6");
}

static void
test_wait_wins_over_never_when_sites_differ(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(6, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("tiny", 1);
  add_pool(&s[0], "h100", 4, 4, 4);
  s[1] = site("big", 2);
  add_pool(&s[1], "h100", 16, 0, 8);
  decide(&r, s, 2, &d);
  assert_int_equal(d.candidates[0].verdict, PLACEMENT_NEVER);
  assert_int_equal(d.candidates[1].verdict, PLACEMENT_WAIT);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_contains(d.reason, "'big': 0 of 16 h100 free, needs 6");
}

static void
test_unreachable_site_is_wait(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(2, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  s[0].reachable = 0;
  s[1] = site("aws", 2);
  add_pool(&s[1], "h100", 16, 16, 8);
  decide(&r, s, 2, &d);
  assert_string_equal(d.candidates[0].reason, "site unreachable");
  assert_int_equal(d.candidates[0].verdict, PLACEMENT_WAIT);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
  assert_int_equal(d.site, 1);

  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_contains(d.reason, "site unreachable");
}

static void
test_a_site_closed_to_the_job_is_wait_saying_why(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(2, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("aws", 2);
  add_pool(&s[0], "h100", 16, 16, 8);
  s[0].closed = "budget spent";
  s[1] = site("onprem", 12);
  add_pool(&s[1], "h100", 96, 0, 8);
  decide(&r, s, 2, &d);
  assert_int_equal(d.candidates[0].verdict, PLACEMENT_WAIT);
  assert_string_equal(d.candidates[0].reason, "budget spent");
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  /* closed is not never: what the site could run still counts */
  r = request(32, "h100");
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
}

static void
test_unreachable_site_that_could_never_fit_is_never(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(2, "a10g");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  s[0].reachable = 0;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
}

static void
test_max_jobs_reached_is_wait(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(1, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  s[0].max_jobs = 10;
  s[0].jobs_active = 10;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_string_equal(d.candidates[0].reason,
                      "site runs 10 jobs, its limit is 10");
  s[0].jobs_active = 9;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
}

static void
test_zero_max_jobs_means_no_cap(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(1, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 12);
  add_pool(&s[0], "h100", 96, 96, 8);
  s[0].jobs_active = 100000;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
}

static void
test_zero_gpu_job_fits_any_reachable_site_with_room(void **state)
{
  struct placement_site s[2];
  struct placement_request r = request(0, NULL);
  struct placement_decision d;

  (void)state;
  s[0] = site("cpu-only", 4);
  s[0].reachable = 0;
  s[1] = site("local", 1);
  decide(&r, s, 2, &d);
  assert_int_equal(d.verdict, PLACEMENT_NOW);
  assert_int_equal(d.site, 1);
  assert_string_equal(d.candidates[1].reason, "fits: needs no GPUs");
}

static void
test_gpus_per_node_alone_counts_as_a_total(void **state)
{
  struct placement_site s[1];
  struct placement_request r = request(0, "h100");
  struct placement_decision d;

  (void)state;
  s[0] = site("onprem", 4);
  add_pool(&s[0], "h100", 32, 10, 8);
  r.nodes = 2;
  r.gpus_per_node = 8;
  decide(&r, s, 1, &d);
  assert_int_equal(d.verdict, PLACEMENT_WAIT);
  assert_string_equal(d.candidates[0].reason, "10 of 32 h100 free, needs 16");
}

static void
test_no_sites_is_never(void **state)
{
  struct placement_request r = request(1, NULL);
  struct placement_decision d;

  (void)state;
  decide(&r, NULL, 0, &d);
  assert_int_equal(d.verdict, PLACEMENT_NEVER);
  assert_int_equal(d.ncandidates, 0);
  assert_int_equal(d.site, -1);
  assert_contains(d.reason, "no sites");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_policy_is_found_by_name),
    cmocka_unit_test(test_first_fit_takes_the_first_site_that_fits_in_order),
    cmocka_unit_test(
        test_first_fit_names_each_candidates_site_index_and_its_pick),
    cmocka_unit_test(test_fifty_sites_are_all_candidates),
    cmocka_unit_test(test_busy_first_site_falls_through_to_the_next),
    cmocka_unit_test(test_pinned_site_is_the_only_one_considered),
    cmocka_unit_test(test_unknown_pinned_site_is_never),
    cmocka_unit_test(test_pinned_site_that_cannot_fit_is_never_with_its_reason),
    cmocka_unit_test(test_requested_type_must_match),
    cmocka_unit_test(test_type_matching_ignores_case),
    cmocka_unit_test(test_no_site_with_the_type_is_never_with_a_summary),
    cmocka_unit_test(test_more_gpus_than_the_type_has_is_never),
    cmocka_unit_test(test_any_type_request_needs_one_type_to_hold_it),
    cmocka_unit_test(test_any_type_request_takes_a_type_that_fits),
    cmocka_unit_test(test_gpus_per_node_above_the_node_size_is_never),
    cmocka_unit_test(test_total_spread_over_too_few_nodes_is_never),
    cmocka_unit_test(test_more_nodes_than_the_site_has_is_never),
    cmocka_unit_test(test_never_names_every_site_with_its_own_reason),
    cmocka_unit_test(test_wait_names_every_site_not_only_the_first),
    cmocka_unit_test(test_a_summary_too_long_is_cut_not_overrun),
    cmocka_unit_test(test_not_enough_free_is_wait_not_never),
    cmocka_unit_test(test_wait_wins_over_never_when_sites_differ),
    cmocka_unit_test(test_unreachable_site_is_wait),
    cmocka_unit_test(test_a_site_closed_to_the_job_is_wait_saying_why),
    cmocka_unit_test(test_unreachable_site_that_could_never_fit_is_never),
    cmocka_unit_test(test_max_jobs_reached_is_wait),
    cmocka_unit_test(test_zero_max_jobs_means_no_cap),
    cmocka_unit_test(test_zero_gpu_job_fits_any_reachable_site_with_room),
    cmocka_unit_test(test_gpus_per_node_alone_counts_as_a_total),
    cmocka_unit_test(test_no_sites_is_never),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
