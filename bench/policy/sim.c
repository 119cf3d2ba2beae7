/*
 * tenbin-sim: the week-long burst simulation of issue 25 (sim.h).
 *
 * Draws one trace from the data files and a seed, runs every policy over
 * it (the five anchors, tenbin at its default wait value, and tenbin at
 * each wait value of the curve), and prints the comparison: a table by
 * default, or with --json one document (the trace block, the policies,
 * the curve, and whether the curve is below each anchor).  The output
 * depends on the data, the seed and the flags only.
 *
 * Usage: tenbin-sim [--json] [--seed N] [--scale K] [--data DIR]
 *                   [--mix helios|seren] [--diurnal earth|venus|saturn]
 *                   [--interrupt-x F] [--only NAME] [--no-curve]
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#ifndef TENBIN_SIM_DATA_DIR
#define TENBIN_SIM_DATA_DIR "bench/policy/data"
#endif

struct opts {
  int json;
  int curve;
  const char *data;
  int only;           /* a policy, or -1: all */
  int forecast;       /* -1: the data's; 0 off, 1 on */
  int overrun;        /* -1: the data's; 0 fixed, 1 grows */
  const char *json_out; /* also write the JSON document here */
  int nvalues;        /* --curve: 0, the data's curve */
  double values[SIM_MAX_CURVE];
};

static void
usage(FILE *f, const char *argv0)
{
  fprintf(f,
          "usage: %s [--json] [--seed N] [--scale K] [--data DIR]\n"
          "          [--mix helios|seren] [--diurnal earth|venus|saturn]\n"
          "          [--interrupt-x F] [--only NAME] [--no-curve]\n"
          "          [--forecast on|off] [--overrun fixed|grows]\n"
          "          [--curve LIST] [--json-out FILE]\n"
          "  --scale K      arrivals, on-prem nodes and cloud max nodes x K "
          "(1-%d)\n"
          "  --interrupt-x  spot interruption rates x F (0-10000)\n"
          "  --forecast     tenbin's forecast launches (data: policies.tsv)\n"
          "  --overrun      an overdue job's end: in 60 s (tenbind), or as\n"
          "                 long again as it has overrun (data: policies.tsv)\n"
          "  --json-out F   also write the JSON document to F\n"
          "  --curve LIST   tenbin's wait values, ascending: 0,4,64\n"
          "  --only NAME    one policy (onprem-only, burst-when-busy, "
          "spill-5min,\n"
          "                 failover-10min, cheapest-rented, tenbin)\n",
          argv0, SIM_MAX_SCALE);
}

static int
parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
  char *end;
  long long v;

  errno = 0;
  v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

static int
parse_name(const char *s, char *out, size_t len)
{
  size_t n = strlen(s);

  if (n == 0 || n >= len || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
    return -1;
  memcpy(out, s, n + 1);
  return 0;
}

/* "0,4,64": ascending wait values, $0-10000 per GPU-hour. */
static int
parse_curve(const char *v, struct opts *o)
{
  const char *s = v;

  o->nvalues = 0;
  while (*s != '\0') {
    char *end;
    double d;

    if (o->nvalues >= SIM_MAX_CURVE)
      return -1;
    errno = 0;
    d = strtod(s, &end);
    if (end == s || errno != 0 || !(d >= 0 && d <= 10000) ||
        (o->nvalues > 0 && d <= o->values[o->nvalues - 1]) ||
        (*end != ',' && *end != '\0'))
      return -1;
    o->values[o->nvalues++] = d;
    s = *end == ',' ? end + 1 : end;
  }
  return o->nvalues > 0 ? 0 : -1;
}

static int
parse_args(int argc, char **argv, struct sim_params *p, struct opts *o)
{
  memset(o, 0, sizeof(*o));
  o->curve = 1;
  o->only = -1;
  o->forecast = -1;
  o->overrun = -1;
  o->data = TENBIN_SIM_DATA_DIR;
  p->seed = 1;
  p->scale = 1;
  p->interrupt_x = 1.0;
  snprintf(p->mix, sizeof(p->mix), "helios");
  snprintf(p->diurnal, sizeof(p->diurnal), "earth");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int64_t n;

    if (strcmp(a, "--json") == 0) {
      o->json = 1;
      continue;
    }
    if (strcmp(a, "--no-curve") == 0) {
      o->curve = 0;
      continue;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout, argv[0]);
      exit(0);
    }
    if (v == NULL) {
      fprintf(stderr, "tenbin-sim: '%s': unknown, or a value is missing\n", a);
      return -1;
    }
    i++;
    if (strcmp(a, "--seed") == 0) {
      if (parse_i64(v, 0, INT64_MAX, &n) < 0)
        goto bad;
      p->seed = (uint64_t)n;
    } else if (strcmp(a, "--scale") == 0) {
      if (parse_i64(v, 1, SIM_MAX_SCALE, &n) < 0)
        goto bad;
      p->scale = n;
    } else if (strcmp(a, "--data") == 0) {
      if (strlen(v) == 0 || strlen(v) > 400)
        goto bad;
      o->data = v;
    } else if (strcmp(a, "--forecast") == 0) {
      if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
        goto bad;
      o->forecast = strcmp(v, "on") == 0 ? 1 : 0;
    } else if (strcmp(a, "--overrun") == 0) {
      if (strcmp(v, "fixed") != 0 && strcmp(v, "grows") != 0)
        goto bad;
      o->overrun = strcmp(v, "grows") == 0 ? 1 : 0;
    } else if (strcmp(a, "--curve") == 0) {
      if (parse_curve(v, o) < 0)
        goto bad;
    } else if (strcmp(a, "--json-out") == 0) {
      if (strlen(v) == 0 || strlen(v) > 4000)
        goto bad;
      o->json_out = v;
    } else if (strcmp(a, "--mix") == 0) {
      if (parse_name(v, p->mix, sizeof(p->mix)) < 0)
        goto bad;
    } else if (strcmp(a, "--diurnal") == 0) {
      if (parse_name(v, p->diurnal, sizeof(p->diurnal)) < 0)
        goto bad;
    } else if (strcmp(a, "--interrupt-x") == 0) {
      char *end;

      errno = 0;
      p->interrupt_x = strtod(v, &end);
      if (end == v || *end != '\0' || errno != 0 ||
          !(p->interrupt_x >= 0 && p->interrupt_x <= 10000))
        goto bad;
    } else if (strcmp(a, "--only") == 0) {
      o->only = -1;
      for (int k = 0; k < SIM_NPOLICIES; k++) {
        if (strcmp(v, sim_policy_name((enum sim_policy)k)) == 0)
          o->only = k;
      }
      if (o->only < 0)
        goto bad;
    } else {
      fprintf(stderr, "tenbin-sim: '%s': unknown option\n", a);
      return -1;
    }
    continue;
  bad:
    fprintf(stderr, "tenbin-sim: %s '%.64s': not a valid value\n", a, v);
    return -1;
  }
  return 0;
}

static double
dollars(int64_t micro)
{
  return (double)micro / (double)PRICE_MICRO;
}

static double
secs(int64_t ms)
{
  return (double)ms / 1000.0;
}

static int64_t
owned(const struct sim_result *r)
{
  return r->sunk_micro + r->marginal_micro;
}

static int64_t
cloud(const struct sim_result *r)
{
  return r->cloud_compute_micro + r->cloud_idle_micro;
}

/* Deadline jobs on spot: their cloud $ over the same GPU-time on demand
 * (-1: none ran on spot). */
static double
dl_ratio(const struct sim_result *r)
{
  return r->dl_od_micro > 0 ? (double)r->dl_spot_micro / (double)r->dl_od_micro
                            : -1;
}

/* The cheapest curve point at or below a's p95 wait that costs less in
 * the cloud (or nothing, where a costs nothing): its index, or -1. */
static int
below(const struct sim_result *curve, int n, const struct sim_result *a)
{
  int best = -1;

  for (int i = 0; i < n; i++) {
    const struct sim_result *c = &curve[i];
    int cheaper = cloud(a) == 0 ? cloud(c) == 0 : cloud(c) < cloud(a);

    if (c->wait_p95_ms <= a->wait_p95_ms && cheaper &&
        (best < 0 || cloud(c) < cloud(&curve[best])))
      best = i;
  }
  return best;
}

static void
print_trace_json(FILE *f, const struct sim_params *p, const struct sim_trace *t,
                 const struct sim_result *onprem)
{
  fprintf(f, "{\"trace\": {\"seed\": %llu, \"scale\": %lld, \"mix\": \"%s\", "
         "\"diurnal\": \"%s\", \"weekend\": %.2f, \"jobs\": %zu, "
         "\"jobs_simulated\": %zu, \"onprem_gpus\": %lld, "
         "\"duration_factor\": %.4f, \"offered_load\": %.3f, "
         "\"run_p50_s\": %.0f, \"run_p90_s\": %.0f, \"run_p99_s\": %.0f, "
         "\"share_1gpu\": %.3f, \"share_multinode\": %.3f, "
         "\"deadline_jobs\": %zu, \"dataset_jobs\": %zu, "
         "\"interrupt_x\": %.2f",
         (unsigned long long)p->seed, (long long)p->scale, p->mix, p->diurnal,
         p->weekend, t->measured, t->njobs, (long long)t->onprem_gpus,
         t->duration_factor, t->offered_load, secs(t->run_p50_ms),
         secs(t->run_p90_ms), secs(t->run_p99_ms), t->share_1gpu,
         t->share_multinode, t->deadlines, t->with_dataset, p->interrupt_x);
  if (onprem != NULL)
    fprintf(f, ", \"onprem_only_busy\": %.3f, \"demand_mean\": %.3f, "
           "\"demand_p95\": %.3f, \"demand_max\": %.3f, "
           "\"demand_hours_over_100\": %lld",
           onprem->onprem_busy, onprem->demand_mean, onprem->demand_p95,
           onprem->demand_max, (long long)onprem->demand_hours_over);
  fprintf(f, ", \"clouds\": [");
  for (int i = 0; i < p->nclouds; i++)
    fprintf(f, "%s{\"name\": \"%s\", \"od_node_hour\": %.2f, "
           "\"spot_node_hour\": %.2f, \"max_nodes\": %lld}",
           i ? ", " : "", p->clouds[i].name, dollars(p->clouds[i].od_micro),
           dollars(p->clouds[i].spot_micro),
           (long long)(p->clouds[i].max_nodes * p->scale));
  fprintf(f, "]}");
}

static void
print_result_json(FILE *f, const struct sim_result *r)
{
  double ratio = dl_ratio(r);

  fprintf(f, "{\"name\": \"%s\", \"cloud_dollars\": %.2f, "
         "\"owned_dollars\": %.2f, \"wait_p50_s\": %.1f, "
         "\"wait_p95_s\": %.1f, \"wait_p99_s\": %.1f, "
         "\"deadline_misses\": %lld, \"launches\": %lld, "
         "\"owned_sunk_dollars\": %.2f, \"owned_marginal_dollars\": %.2f, "
         "\"cloud_compute_dollars\": %.2f, \"cloud_idle_dollars\": %.2f, "
         "\"egress_dollars\": %.2f, \"total_dollars\": %.2f, "
         "\"wait_mean_s\": %.1f, \"jobs\": %lld, \"unstarted\": %lld, "
         "\"cloud_jobs\": %lld, \"deadline_jobs\": %lld, "
         "\"launch_failures\": %lld, \"interruptions\": %lld, "
         "\"preempted_gpu_hours\": %.2f, \"onprem_busy\": %.3f, "
         "\"deadline_spot_jobs\": %lld, \"deadline_spot_misses\": %lld, "
         "\"deadline_moved_to_on_demand\": %lld, ",
         sim_policy_name(r->policy), dollars(cloud(r)), dollars(owned(r)),
         secs(r->wait_p50_ms), secs(r->wait_p95_ms), secs(r->wait_p99_ms),
         (long long)r->deadline_misses, (long long)r->launches,
         dollars(r->sunk_micro), dollars(r->marginal_micro),
         dollars(r->cloud_compute_micro), dollars(r->cloud_idle_micro),
         dollars(r->egress_micro),
         dollars(owned(r) + cloud(r) + r->egress_micro),
         secs(r->wait_mean_ms), (long long)r->jobs, (long long)r->unstarted,
         (long long)r->cloud_jobs, (long long)r->deadline_jobs,
         (long long)r->launch_failures, (long long)r->interruptions,
         (double)r->lost_gpu_ms / (double)SIM_HOUR, r->onprem_busy,
         (long long)r->dl_spot_jobs, (long long)r->dl_spot_misses,
         (long long)r->dl_moved);
  if (ratio >= 0)
    fprintf(f, "\"deadline_spot_cost_vs_on_demand\": %.3f", ratio);
  else
    fprintf(f, "\"deadline_spot_cost_vs_on_demand\": null");
  if (r->policy == SIM_TENBIN)
    fprintf(f, ", \"wait_value\": %.2f", r->wait_value);
  fprintf(f, "}");
}

/* The curve's cloud $ at a p95 wait: the cheapest point at or below it
 * (no interpolation: a point the sweep did not reach is not claimed). */
static int64_t
curve_at(const struct sim_result *curve, int n, int64_t p95)
{
  int64_t best = -1;

  for (int i = 0; i < n; i++) {
    if (curve[i].wait_p95_ms <= p95 && (best < 0 || cloud(&curve[i]) < best))
      best = cloud(&curve[i]);
  }
  return best;
}

static void
print_json(FILE *f, const struct sim_params *p, const struct sim_trace *t,
           const struct sim_result *res, int nres,
           const struct sim_result *curve, int ncurve)
{
  const struct sim_result *onprem = NULL, *bwb = NULL;

  for (int i = 0; i < nres; i++) {
    if (res[i].policy == SIM_ONPREM_ONLY)
      onprem = &res[i];
    if (res[i].policy == SIM_BURST_WHEN_BUSY)
      bwb = &res[i];
  }
  print_trace_json(f, p, t, onprem);
  fprintf(f, ",\n \"policies\": [");
  for (int i = 0; i < nres; i++) {
    fprintf(f, "%s\n  ", i ? "," : "");
    print_result_json(f, &res[i]);
  }
  fprintf(f, "],\n \"tenbin_curve\": [");
  for (int i = 0; i < ncurve; i++)
    fprintf(f, "%s\n  {\"wait_value\": %.2f, \"cloud_dollars\": %.2f, "
           "\"wait_p95_s\": %.1f, \"wait_p50_s\": %.1f, "
           "\"wait_p99_s\": %.1f, \"owned_dollars\": %.2f, "
           "\"egress_dollars\": %.2f, \"deadline_misses\": %lld, "
           "\"launches\": %lld}",
           i ? "," : "", curve[i].wait_value, dollars(cloud(&curve[i])),
           secs(curve[i].wait_p95_ms), secs(curve[i].wait_p50_ms),
           secs(curve[i].wait_p99_ms), dollars(owned(&curve[i])),
           dollars(curve[i].egress_micro),
           (long long)curve[i].deadline_misses,
           (long long)curve[i].launches);
  fprintf(f, "],\n \"below_anchors\": [");
  for (int i = 0, k = 0; i < nres && ncurve > 0; i++) {
    int b;

    if (res[i].policy == SIM_TENBIN)
      continue;
    b = below(curve, ncurve, &res[i]);
    fprintf(f, "%s\n  {\"anchor\": \"%s\", \"below\": %s", k++ ? "," : "",
           sim_policy_name(res[i].policy), b >= 0 ? "true" : "false");
    if (b >= 0)
      fprintf(f, ", \"wait_value\": %.2f, \"cloud_dollars\": %.2f, "
             "\"wait_p95_s\": %.1f",
             curve[b].wait_value, dollars(cloud(&curve[b])),
             secs(curve[b].wait_p95_ms));
    fprintf(f, "}");
  }
  fprintf(f, "]");
  if (bwb != NULL && ncurve > 0) {
    int64_t at = curve_at(curve, ncurve, bwb->wait_p95_ms);

    fprintf(f, ",\n \"at_burst_when_busy_p95\": {\"wait_p95_s\": %.1f, "
           "\"anchor_cloud_dollars\": %.2f, ",
           secs(bwb->wait_p95_ms), dollars(cloud(bwb)));
    if (at >= 0 && cloud(bwb) > 0)
      fprintf(f, "\"tenbin_cloud_dollars\": %.2f, \"saving\": %.3f}",
             dollars(at), 1.0 - (double)at / (double)cloud(bwb));
    else
      fprintf(f, "\"tenbin_cloud_dollars\": null, \"saving\": null}");
  }
  fprintf(f, "}\n");
}

static void
fmt_wait(char *out, size_t len, int64_t ms)
{
  double s = secs(ms);

  if (s < 120)
    snprintf(out, len, "%.0fs", s);
  else if (s < 7200)
    snprintf(out, len, "%.1fm", s / 60);
  else
    snprintf(out, len, "%.1fh", s / 3600);
}

static void
print_row(const struct sim_result *r, const char *name)
{
  char w50[16], w95[16], w99[16], ratio[16];
  double dr = dl_ratio(r);

  fmt_wait(w50, sizeof(w50), r->wait_p50_ms);
  fmt_wait(w95, sizeof(w95), r->wait_p95_ms);
  fmt_wait(w99, sizeof(w99), r->wait_p99_ms);
  if (dr >= 0)
    snprintf(ratio, sizeof(ratio), "%.2fx", dr);
  else
    snprintf(ratio, sizeof(ratio), "-");
  printf("%-16s %9.0f %8.0f %9.0f %8.0f %7.0f %7s %7s %7s %4lld/%-3lld %6lld "
         "%7.1f %6s\n",
         name, dollars(cloud(r)), dollars(r->marginal_micro),
         dollars(r->cloud_compute_micro), dollars(r->cloud_idle_micro),
         dollars(r->egress_micro), w50, w95, w99,
         (long long)r->deadline_misses, (long long)r->deadline_jobs,
         (long long)r->launches, (double)r->lost_gpu_ms / (double)SIM_HOUR,
         ratio);
}

static void
print_table(const struct sim_params *p, const struct sim_trace *t,
            const struct sim_result *res, int nres,
            const struct sim_result *curve, int ncurve)
{
  const struct sim_result *onprem = NULL, *bwb = NULL;

  for (int i = 0; i < nres; i++) {
    if (res[i].policy == SIM_ONPREM_ONLY)
      onprem = &res[i];
    if (res[i].policy == SIM_BURST_WHEN_BUSY)
      bwb = &res[i];
  }
  printf("trace: seed %llu, scale %lld, %s mix, %s diurnal, weekend x%.2f\n"
         "  %zu jobs in the measured week (%zu simulated over 16 days), "
         "%lld on-prem GPUs\n"
         "  durations x%.3f: run p50 %.0f s, p90 %.0f s, p99 %.0f s; "
         "1 GPU %.1f %%, multi-node %.1f %%\n"
         "  offered load %.1f %% of the on-prem GPUs; %zu deadline jobs, "
         "%zu with a dataset\n",
         (unsigned long long)p->seed, (long long)p->scale, p->mix, p->diurnal,
         p->weekend, t->measured, t->njobs, (long long)t->onprem_gpus,
         t->duration_factor, secs(t->run_p50_ms), secs(t->run_p90_ms),
         secs(t->run_p99_ms), 100 * t->share_1gpu, 100 * t->share_multinode,
         100 * t->offered_load, t->deadlines, t->with_dataset);
  if (onprem != NULL)
    printf("  on-prem only: %.1f %% busy; demand (running + queued GPUs) "
           "hourly mean %.0f %%, p95 %.0f %%, max %.0f %%, %lld h above "
           "100 %%\n",
           100 * onprem->onprem_busy, 100 * onprem->demand_mean,
           100 * onprem->demand_p95, 100 * onprem->demand_max,
           (long long)onprem->demand_hours_over);
  if (nres > 0)
    printf("  owned sunk cost of the week: $%.0f (every policy)\n\n",
           dollars(res[0].sunk_micro));
  printf("%-16s %9s %8s %9s %8s %7s %7s %7s %7s %8s %6s %7s %6s\n", "policy",
         "cloud $", "marg. $", "compute $", "idle $", "egress", "p50",
         "p95", "p99", "dl miss", "launch", "lost h", "dl/od");
  for (int i = 0; i < nres; i++)
    print_row(&res[i], sim_policy_name(res[i].policy));
  if (ncurve > 0)
    printf("\ntenbin's curve (wait value $/GPU-h):\n");
  for (int i = 0; i < ncurve; i++) {
    char name[32];

    snprintf(name, sizeof(name), "  wait $%g", curve[i].wait_value);
    print_row(&curve[i], name);
  }
  if (ncurve == 0)
    return;
  printf("\n");
  for (int i = 0; i < nres; i++) {
    int b;

    if (res[i].policy == SIM_TENBIN)
      continue;
    b = below(curve, ncurve, &res[i]);
    if (b < 0)
      printf("%-16s no curve point is cheaper at its p95 wait\n",
             sim_policy_name(res[i].policy));
    else
      printf("%-16s below: wait $%g costs $%.0f (vs $%.0f) at p95 %.0f s "
             "(vs %.0f s)\n",
             sim_policy_name(res[i].policy), curve[b].wait_value,
             dollars(cloud(&curve[b])), dollars(cloud(&res[i])),
             secs(curve[b].wait_p95_ms), secs(res[i].wait_p95_ms));
  }
  if (bwb != NULL && cloud(bwb) > 0) {
    int64_t at = curve_at(curve, ncurve, bwb->wait_p95_ms);

    if (at >= 0)
      printf("at burst-when-busy's p95 (%.0f s): tenbin $%.0f vs $%.0f, "
             "%.0f %% less\n",
             secs(bwb->wait_p95_ms), dollars(at), dollars(cloud(bwb)),
             100 * (1.0 - (double)at / (double)cloud(bwb)));
  }
}

int
main(int argc, char **argv)
{
  struct sim_params p;
  struct sim_trace t;
  struct opts o;
  struct sim_result res[SIM_NPOLICIES], curve[SIM_MAX_CURVE];
  char err[SIM_ERR_LEN];
  int nres = 0, ncurve = 0, rc = 1, have_default = 0;

  memset(&p, 0, sizeof(p));
  memset(&t, 0, sizeof(t));
  if (parse_args(argc, argv, &p, &o) < 0) {
    usage(stderr, argv[0]);
    return 2;
  }
  if (sim_params_load(o.data, &p, err, sizeof(err)) < 0 ||
      sim_trace_make(&p, &t, err, sizeof(err)) < 0) {
    fprintf(stderr, "tenbin-sim: %s\n", err);
    return 1;
  }
  if (o.forecast >= 0)
    p.tenbin_forecast = o.forecast;
  if (o.overrun >= 0)
    p.overrun_grows = o.overrun;
  if (o.nvalues > 0) {
    p.ncurve = o.nvalues;
    memcpy(p.curve, o.values, sizeof(p.curve));
  }
  if (o.curve && (o.only < 0 || o.only == SIM_TENBIN)) {
    for (int i = 0; i < p.ncurve; i++) {
      if (sim_run(&p, &t, SIM_TENBIN, p.curve[i], &curve[ncurve], err,
                  sizeof(err)) < 0)
        goto fail;
      have_default = have_default || p.curve[i] == p.wait_value;
      ncurve++;
    }
  }
  for (int k = 0; k < SIM_NPOLICIES; k++) {
    if (o.only >= 0 && k != o.only)
      continue;
    if (k == SIM_TENBIN && have_default) {
      for (int i = 0; i < ncurve; i++) {
        if (curve[i].wait_value == p.wait_value)
          res[nres] = curve[i];
      }
      nres++;
      continue;
    }
    if (sim_run(&p, &t, (enum sim_policy)k, p.wait_value, &res[nres], err,
                sizeof(err)) < 0)
      goto fail;
    nres++;
  }
  if (o.json_out != NULL) {
    FILE *f = fopen(o.json_out, "w");

    if (f == NULL) {
      fprintf(stderr, "tenbin-sim: cannot write '%s': %s\n", o.json_out,
              strerror(errno));
      goto out;
    }
    print_json(f, &p, &t, res, nres, curve, ncurve);
    if (fclose(f) != 0) {
      fprintf(stderr, "tenbin-sim: cannot write '%s'\n", o.json_out);
      goto out;
    }
  }
  if (o.json)
    print_json(stdout, &p, &t, res, nres, curve, ncurve);
  else
    print_table(&p, &t, res, nres, curve, ncurve);
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "tenbin-sim: %s\n", err);
out:
  sim_trace_free(&t);
  return rc;
}
