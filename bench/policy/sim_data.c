/*
 * The simulator's parameters: the .tsv files of bench/policy/data/, every figure with
 * its source in the file's comments.  A line is a key and numbers,
 * separated by tabs or spaces; '#' starts a comment.  The files are
 * checked in, but read as outside input all the same: every line, key,
 * count and number is bounded, and anything else is an error naming the
 * file, the line and what was wrong.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* A data file is a page or two: these bound a hostile one. */
#define DATA_MAX_BYTES (64 * 1024)
#define DATA_MAX_LINE 1024
#define DATA_MAX_ROWS 256
#define DATA_MAX_VALUES 32
#define DATA_KEY_LEN 40

struct row {
  char key[DATA_KEY_LEN];
  double v[DATA_MAX_VALUES];
  int n;
  int line;
};

struct table {
  char path[512];
  struct row rows[DATA_MAX_ROWS];
  int n;
};

static int
fail(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *err, size_t len, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

/* One line (NUL-terminated, no newline) into t; a blank or comment line
 * adds nothing. */
static int
parse_line(struct table *t, char *s, int lineno, char *err, size_t len)
{
  struct row *r;
  char *tok, *cut = strchr(s, '#');
  size_t klen;

  if (cut != NULL)
    *cut = '\0';
  s += strspn(s, " \t\r");
  if (*s == '\0')
    return 0;
  if (t->n >= DATA_MAX_ROWS)
    return fail(err, len, "%s:%d: more than %d rows", t->path, lineno,
                DATA_MAX_ROWS);
  r = &t->rows[t->n];
  memset(r, 0, sizeof(*r));
  r->line = lineno;
  klen = strcspn(s, " \t\r");
  if (klen >= DATA_KEY_LEN)
    return fail(err, len, "%s:%d: key longer than %d bytes", t->path, lineno,
                DATA_KEY_LEN - 1);
  memcpy(r->key, s, klen);
  s += klen;
  for (;;) {
    char *end;
    double v;

    s += strspn(s, " \t\r");
    if (*s == '\0')
      break;
    tok = s;
    s += strcspn(s, " \t\r");
    if (*s != '\0')
      *s++ = '\0';
    if (r->n >= DATA_MAX_VALUES)
      return fail(err, len, "%s:%d: '%s': more than %d values", t->path,
                  lineno, r->key, DATA_MAX_VALUES);
    errno = 0;
    v = strtod(tok, &end);
    if (end == tok || *end != '\0' || errno != 0 || !isfinite(v))
      return fail(err, len, "%s:%d: '%s': value %d '%.32s' is not a number",
                  t->path, lineno, r->key, r->n + 1, tok);
    r->v[r->n++] = v;
  }
  t->n++;
  return 0;
}

static int
table_read(struct table *t, const char *dir, const char *name, char *err,
           size_t len)
{
  char line[DATA_MAX_LINE + 2];
  FILE *f = NULL;
  long total = 0;
  int lineno = 0, rc = -1;

  memset(t, 0, sizeof(*t));
  if ((size_t)snprintf(t->path, sizeof(t->path), "%s/%s", dir, name) >=
      sizeof(t->path))
    return fail(err, len, "data directory path too long");
  f = fopen(t->path, "r");
  if (f == NULL)
    return fail(err, len, "cannot open '%s': %s", t->path, strerror(errno));
  while (fgets(line, sizeof(line), f) != NULL) {
    size_t n = strlen(line);

    lineno++;
    total += (long)n;
    if (total > DATA_MAX_BYTES) {
      fail(err, len, "%s: larger than %d bytes", t->path, DATA_MAX_BYTES);
      goto out;
    }
    if (n > 0 && line[n - 1] == '\n')
      line[--n] = '\0';
    else if (!feof(f)) {
      fail(err, len, "%s:%d: line longer than %d bytes", t->path, lineno,
           DATA_MAX_LINE);
      goto out;
    }
    if (memchr(line, '\0', n) != NULL) {
      fail(err, len, "%s:%d: NUL byte", t->path, lineno);
      goto out;
    }
    if (parse_line(t, line, lineno, err, len) < 0)
      goto out;
  }
  if (ferror(f)) {
    fail(err, len, "cannot read '%s'", t->path);
    goto out;
  }
  rc = 0;
out:
  fclose(f);
  return rc;
}

static const struct row *
find(const struct table *t, const char *key)
{
  for (int i = 0; i < t->n; i++) {
    if (strcmp(t->rows[i].key, key) == 0)
      return &t->rows[i];
  }
  return NULL;
}

/* The n values of key, each in [lo, hi], into out. */
static int
get(const struct table *t, const char *key, int n, double lo, double hi,
    double *out, char *err, size_t len)
{
  const struct row *r = find(t, key);

  if (r == NULL)
    return fail(err, len, "%s: '%s' missing", t->path, key);
  if (r->n != n)
    return fail(err, len, "%s:%d: '%s' wants %d values, has %d", t->path,
                r->line, key, n, r->n);
  for (int i = 0; i < n; i++) {
    if (r->v[i] < lo || r->v[i] > hi)
      return fail(err, len, "%s:%d: '%s' value %d: %g is outside [%g, %g]",
                  t->path, r->line, key, i + 1, r->v[i], lo, hi);
    out[i] = r->v[i];
  }
  return 0;
}

static int
get_ms(const struct table *t, const char *key, double lo_s, double hi_s,
       int64_t *out, char *err, size_t len)
{
  double v;

  if (get(t, key, 1, lo_s, hi_s, &v, err, len) < 0)
    return -1;
  *out = (int64_t)llround(v * 1000.0);
  return 0;
}

static int
get_micro(double dollars, int64_t *out)
{
  return price_dollars_to_micro(dollars, PRICE_MAX_MICRO, out);
}

/* The mix's sizes, and per size its class's duration and outcome: the
 * class of the largest min_gpus at or below the size. */
static int
load_workload(const struct table *t, struct sim_params *p, char *err,
              size_t len)
{
  char key[DATA_KEY_LEN];
  double sum = 0, v[24], mean = 0;

  snprintf(key, sizeof(key), "mix.%s", p->mix);
  p->nsizes = 0;
  for (int i = 0; i < t->n; i++) {
    const struct row *r = &t->rows[i];
    const struct row *d = NULL, *o = NULL;
    int64_t g;

    if (strcmp(r->key, key) != 0)
      continue;
    if (r->n != 2 || r->v[0] < 1 || r->v[0] > 64 || r->v[1] < 0 ||
        r->v[1] > 100 || r->v[0] != floor(r->v[0]))
      return fail(err, len, "%s:%d: '%s' wants GPUs (1-64) and a percent",
                  t->path, r->line, key);
    if (p->nsizes >= SIM_MAX_SIZES)
      return fail(err, len, "%s:%d: more than %d sizes in '%s'", t->path,
                  r->line, SIM_MAX_SIZES, key);
    g = (int64_t)r->v[0];
    if (g > 8 && g % 8 != 0)
      return fail(err, len, "%s:%d: %lld GPUs: a job above 8 GPUs takes "
                  "whole 8-GPU nodes", t->path, r->line, (long long)g);
    for (int k = 0; k < t->n; k++) {
      const struct row *c = &t->rows[k];

      if (strcmp(c->key, "duration") == 0 && c->n == 3 && c->v[0] <= (double)g &&
          (d == NULL || c->v[0] > d->v[0]))
        d = c;
      if (strcmp(c->key, "outcome") == 0 && c->n == 4 && c->v[0] <= (double)g &&
          (o == NULL || c->v[0] > o->v[0]))
        o = c;
    }
    if (d == NULL || o == NULL)
      return fail(err, len, "%s: no 'duration' (min_gpus median_s sigma) or "
                  "'outcome' (min_gpus 3 percents) row covers %lld GPUs",
                  t->path, (long long)g);
    if (!(d->v[1] >= 1 && d->v[1] <= 1e6 && d->v[2] >= 0 && d->v[2] <= 5))
      return fail(err, len, "%s:%d: 'duration' wants a median of 1-1e6 s and "
                  "a sigma of 0-5", t->path, d->line);
    if (!(o->v[1] >= 0 && o->v[2] >= 0 && o->v[3] >= 0 &&
          fabs(o->v[1] + o->v[2] + o->v[3] - 100) < 1.0))
      return fail(err, len, "%s:%d: 'outcome' percents must add up to 100",
                  t->path, o->line);
    p->size_gpus[p->nsizes] = g;
    p->size_share[p->nsizes] = r->v[1];
    p->dur_median_s[p->nsizes] = d->v[1];
    p->dur_sigma[p->nsizes] = d->v[2];
    p->completed[p->nsizes] = o->v[1] / 100.0;
    p->cancelled[p->nsizes] = o->v[2] / 100.0;
    sum += r->v[1];
    p->nsizes++;
  }
  if (p->nsizes == 0)
    return fail(err, len, "%s: no rows '%s' (unknown --mix?)", t->path, key);
  if (fabs(sum - 100) > 1.0)
    return fail(err, len, "%s: the shares of '%s' add up to %g, not 100",
                t->path, key, sum);
  for (int i = 0; i < p->nsizes; i++)
    p->size_share[i] /= sum;
  snprintf(key, sizeof(key), "hourly.%s", p->diurnal);
  if (find(t, key) == NULL)
    return fail(err, len, "%s: no row '%s' (unknown --diurnal?)", t->path,
                key);
  if (get(t, key, 24, 0.001, 1e6, v, err, len) < 0)
    return -1;
  for (int h = 0; h < 24; h++)
    mean += v[h] / 24;
  for (int h = 0; h < 24; h++)
    p->hourly[h] = v[h] / mean;
  if (get_ms(t, "duration_cap_s", 60, 30 * 86400, &p->duration_cap_ms, err,
             len) < 0 ||
      get(t, "jobs_per_gpu_day", 1, 0.01, 1000, &p->jobs_per_gpu_day, err,
          len) < 0 ||
      get(t, "weekend", 1, 0, 2, &p->weekend, err, len) < 0 ||
      get(t, "target_load", 1, 0.05, 3, &p->target_load, err, len) < 0 ||
      get(t, "deadline_share", 1, 0, 100, &p->deadline_share, err, len) < 0 ||
      get(t, "dataset_share", 1, 0, 100, &p->dataset_share, err, len) < 0 ||
      get(t, "predict_sigma", 1, 0, 3, &p->predict_sigma, err, len) < 0 ||
      get_ms(t, "checkpoint_s", 1, 86400, &p->checkpoint_ms, err, len) < 0)
    return -1;
  p->deadline_share /= 100;
  p->dataset_share /= 100;
  if (get(t, "deadline_factor", 2, 1, 100, v, err, len) < 0)
    return -1;
  if (v[1] < v[0])
    return fail(err, len, "%s: 'deadline_factor': hi below lo", t->path);
  p->deadline_lo = v[0];
  p->deadline_hi = v[1];
  if (get(t, "datasets", 1, 1, 256, v, err, len) < 0)
    return -1;
  p->ndatasets = (int)v[0];
  if (get(t, "dataset_gb", 2, 0.001, 1e6, v, err, len) < 0)
    return -1;
  if (v[1] < v[0])
    return fail(err, len, "%s: 'dataset_gb': hi below lo", t->path);
  p->dataset_gb_lo = v[0];
  p->dataset_gb_hi = v[1];
  if (get(t, "dataset_gbps", 1, 0.001, 1e4, v, err, len) < 0)
    return -1;
  p->dataset_bytes_per_s = v[0] * 1e9 / 8;
  return 0;
}

static int
load_sites(const struct table *t, struct sim_params *p, char *err, size_t len)
{
  static const struct {
    const char *key;
    double lo, hi;
  } owned[] = {
      {"onprem.nodes", 1, 100000},        {"onprem.gpus_per_node", 8, 8},
      {"onprem.capex_per_node", 1, 1e9},  {"onprem.years", 0.1, 50},
      {"onprem.support_per_year", 0, 1},  {"onprem.power_kw_busy", 0.01, 1000},
      {"onprem.power_kw_idle", 0, 1000},  {"onprem.pue", 1, 5},
      {"onprem.dollars_per_kwh", 0, 10},  {"onprem.staff_per_year", 0, 1e9}};
  double v[10];
  const char *problem;

  for (int i = 0; i < 10; i++) {
    if (get(t, owned[i].key, 1, owned[i].lo, owned[i].hi, &v[i], err, len) <
        0)
      return -1;
  }
  p->onprem_nodes = (int64_t)v[0];
  /* The clouds' shapes are 8 x H100 too: one node size everywhere. */
  p->gpus_per_node = 8;
  p->owned = (struct price_owned){.capex_per_node = v[2],
                                  .nodes = (int64_t)v[0] * p->scale,
                                  .years = v[3],
                                  .support_per_year = v[4],
                                  .power_kw_busy = v[5],
                                  .power_kw_idle = v[6],
                                  .pue = v[7],
                                  .dollars_per_kwh = v[8],
                                  .staff_per_year = v[9] * (double)p->scale,
                                  .gpus_per_node = 8};
  problem = price_owned_problem(&p->owned);
  if (problem != NULL)
    return fail(err, len, "%s: onprem.%s", t->path, problem);
  p->nclouds = 0;
  for (int i = 0; i < t->n; i++) {
    const struct row *r = &t->rows[i];
    struct sim_cloud *c;
    double p95;

    if (strncmp(r->key, "cloud.", 6) != 0)
      continue;
    if (p->nclouds >= SIM_MAX_CLOUDS)
      return fail(err, len, "%s:%d: more than %d clouds", t->path, r->line,
                  SIM_MAX_CLOUDS);
    if (r->n != 9)
      return fail(err, len, "%s:%d: '%s' wants 9 values (od_node_h "
                  "spot_node_h interrupt_month ice ice_spot boot_p50_s "
                  "boot_p95_s max_nodes egress_gb)", t->path, r->line,
                  r->key);
    if (strlen(r->key + 6) == 0 || strlen(r->key + 6) >= SIM_NAME_LEN)
      return fail(err, len, "%s:%d: cloud name empty or longer than %d "
                  "bytes", t->path, r->line, SIM_NAME_LEN - 1);
    c = &p->clouds[p->nclouds];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", r->key + 6);
    if (get_micro(r->v[0], &c->od_micro) < 0 || c->od_micro <= 0 ||
        get_micro(r->v[1], &c->spot_micro) < 0 || c->spot_micro <= 0 ||
        get_micro(r->v[8], &c->egress_micro_per_gb) < 0)
      return fail(err, len, "%s:%d: '%s': prices must be dollars, more than "
                  "0 and at most $10,000", t->path, r->line, r->key);
    if (!(r->v[2] >= 0 && r->v[2] <= 100 && r->v[3] >= 0 && r->v[3] < 1 &&
          r->v[4] >= 0 && r->v[4] < 1))
      return fail(err, len, "%s:%d: '%s': interruptions 0-100 a month, ICE "
                  "chances in [0, 1)", t->path, r->line, r->key);
    p95 = r->v[6];
    if (!(r->v[5] >= 1 && r->v[5] <= 86400 && p95 >= r->v[5] &&
          p95 <= 86400))
      return fail(err, len, "%s:%d: '%s': boot median 1-86400 s and a p95 "
                  "at least the median", t->path, r->line, r->key);
    if (!(r->v[7] >= 1 && r->v[7] <= 100000 && r->v[7] == floor(r->v[7])))
      return fail(err, len, "%s:%d: '%s': max_nodes must be 1-100000",
                  t->path, r->line, r->key);
    c->interrupts_per_hour = r->v[2] / 730.0;
    c->ice = r->v[3];
    c->ice_spot = r->v[4];
    c->boot_median_s = r->v[5];
    c->boot_sigma = log(p95 / r->v[5]) / 1.6449;
    c->max_nodes = (int64_t)r->v[7];
    p->nclouds++;
  }
  if (p->nclouds == 0)
    return fail(err, len, "%s: no 'cloud.NAME' rows", t->path);
  if (get_ms(t, "ice_s", 1, 3600, &p->ice_ms, err, len) < 0 ||
      get_ms(t, "boot_timeout_s", 60, 86400, &p->boot_timeout_ms, err, len) <
          0 ||
      get_ms(t, "billing_min_s", 0, 3600, &p->billing_min_ms, err, len) < 0)
    return -1;
  return 0;
}

static int
load_policies(const struct table *t, struct sim_params *p, char *err,
              size_t len)
{
  const struct row *r;
  double v;

  if (get_ms(t, "pass_gap_s", 1, 3600, &p->pass_gap_ms, err, len) < 0 ||
      get_ms(t, "tick_s", 1, 3600, &p->tick_ms, err, len) < 0 ||
      get(t, "batch", 1, 1, 100000, &v, err, len) < 0)
    return -1;
  p->batch = (int)v;
  if (get_ms(t, "bwb.suspend_s", 0, 86400, &p->bwb_suspend_ms, err, len) < 0 ||
      get_ms(t, "anchor.backoff_s", 0, 86400, &p->anchor_backoff_ms, err,
             len) < 0 ||
      get_ms(t, "spill.after_s", 0, 86400, &p->spill_after_ms, err, len) < 0 ||
      get_ms(t, "spill.idle_s", 0, 86400, &p->spill_idle_ms, err, len) < 0 ||
      get_ms(t, "failover.after_s", 0, 86400, &p->failover_after_ms, err,
             len) < 0 ||
      get_ms(t, "tenbin.idle_s", 0, 86400, &p->tenbin_idle_ms, err, len) < 0 ||
      get_ms(t, "tenbin.margin_s", 0, 3600, &p->tenbin_margin_ms, err, len) <
          0 ||
      get_ms(t, "tenbin.cooldown_s", 0, 86400, &p->tenbin_cooldown_ms, err,
             len) < 0 ||
      get_ms(t, "tenbin.boot_s", 1, 86400, &p->tenbin_boot_ms, err, len) < 0 ||
      get_ms(t, "tenbin.backoff_s", 0, 86400, &p->tenbin_backoff_ms, err,
             len) < 0 ||
      get(t, "tenbin.forecast", 1, 0, 1, &v, err, len) < 0)
    return -1;
  p->tenbin_forecast = v != 0;
  if (get(t, "overrun_grows", 1, 0, 1, &v, err, len) < 0)
    return -1;
  p->overrun_grows = v != 0;
  if (get(t, "tenbin.interrupt_prior", 1, 0, 1, &p->tenbin_interrupt_prior,
          err, len) < 0 ||
      get(t, "tenbin.wait_value", 1, 0, 10000, &p->wait_value, err, len) < 0)
    return -1;
  r = find(t, "tenbin.curve");
  if (r == NULL || r->n < 1 || r->n > SIM_MAX_CURVE)
    return fail(err, len, "%s: 'tenbin.curve' wants 1-%d wait values",
                t->path, SIM_MAX_CURVE);
  p->ncurve = r->n;
  for (int i = 0; i < r->n; i++) {
    if (r->v[i] < 0 || r->v[i] > 10000 || (i > 0 && r->v[i] <= r->v[i - 1]))
      return fail(err, len, "%s:%d: 'tenbin.curve': wait values ascending, "
                  "0-10000 $/GPU-h", t->path, r->line);
    p->curve[i] = r->v[i];
  }
  return 0;
}

int
sim_params_load(const char *dir, struct sim_params *p, char *err,
                size_t errlen)
{
  struct table *t = malloc(sizeof(*t));
  int rc = -1;

  if (t == NULL)
    return fail(err, errlen, "out of memory");
  if (table_read(t, dir, "workload.tsv", err, errlen) < 0 ||
      load_workload(t, p, err, errlen) < 0)
    goto out;
  if (table_read(t, dir, "sites.tsv", err, errlen) < 0 ||
      load_sites(t, p, err, errlen) < 0)
    goto out;
  if (table_read(t, dir, "policies.tsv", err, errlen) < 0 ||
      load_policies(t, p, err, errlen) < 0)
    goto out;
  rc = 0;
out:
  free(t);
  return rc;
}
