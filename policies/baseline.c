/*
 * The baseline policy (baseline.h): the drift rules that compare a
 * site's probe result with the reference site's, and the two
 * side-by-side views `tenbin baseline diff` prints.  Pure: no I/O, no
 * allocation, no clock; everything it reads is borrowed for one call.
 *
 * Messages quote values a probe reported, so each quoted value is cut
 * (at a UTF-8 character boundary) to QUOTE_LEN bytes: two of them and
 * the words around them fit in BASELINE_MESSAGE_LEN.
 */
#include "baseline.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024LL
#define MIB (1024LL * KIB)
/* Components of a dotted version; "550.54.15" has three. */
#define VERSION_PARTS 8
/* Digits of one component: more is not a version number. */
#define VERSION_DIGITS 9
#define QUOTE_LEN 64
#define MINUTE_MS 60000LL
#define HOUR_MS (60 * MINUTE_MS)
#define DAY_MS (24 * HOUR_MS)

static const char *const rule_names[BASELINE_NRULES] = {
    [BASELINE_PROBED] = "probed",
    [BASELINE_GPU_MODEL] = "gpu_model",
    [BASELINE_NCCL_VERSION] = "nccl_version",
    [BASELINE_CUDA_RUNTIME] = "cuda_runtime",
    [BASELINE_DRIVER] = "driver",
    [BASELINE_NCCL_ENV] = "nccl_env",
    [BASELINE_BUNDLE] = "bundle",
    [BASELINE_INTERCONNECT] = "interconnect",
    [BASELINE_BUSBW] = "busbw",
    [BASELINE_CORRECT] = "correct",
    [BASELINE_UNIFORM] = "uniform",
};

/* Logging, not behaviour: a site may debug without drifting. */
static const char *const default_ignore[] = {"NCCL_DEBUG", "NCCL_DEBUG_FILE",
                                             "NCCL_DEBUG_SUBSYS", NULL};

/* The interconnect kinds, best first (the probe's own order). */
static const char *const kinds_best_first[] = {"ib", "efa", "roce", "tcp",
                                               NULL};

void
baseline_rules_default(struct baseline_rules *r)
{
  size_t i;

  memset(r, 0, sizeof(*r));
  r->enabled = (1u << BASELINE_NRULES) - 1;
  r->nccl = BASELINE_MATCH_MINOR;
  r->cuda = BASELINE_MATCH_MAJOR;
  for (i = 0; default_ignore[i] != NULL; i++)
    r->env_ignore[i] = default_ignore[i];
  r->busbw_tolerance = 0.2;
  r->busbw_min_bytes = MIB;
}

const char *
baseline_rule_name(enum baseline_rule rule)
{
  if ((unsigned)rule >= BASELINE_NRULES)
    return NULL;
  return rule_names[rule];
}

int
baseline_rule_from_name(const char *name)
{
  int i;

  for (i = 0; name != NULL && i < BASELINE_NRULES; i++) {
    if (strcmp(rule_names[i], name) == 0)
      return i;
  }
  return -1;
}

int
baseline_match_from_name(const char *name)
{
  static const char *const names[] = {
      [BASELINE_MATCH_ANY] = "any",
      [BASELINE_MATCH_MAJOR] = "major",
      [BASELINE_MATCH_MINOR] = "major.minor",
      [BASELINE_MATCH_EXACT] = "exact",
  };
  int i;

  for (i = 0; name != NULL && i <= BASELINE_MATCH_EXACT; i++) {
    if (strcmp(names[i], name) == 0)
      return i;
  }
  return -1;
}

/* ---- small helpers ---- */

static int
kv_cmp(const void *key, const void *elem)
{
  const struct baseline_kv *kv = elem;

  return strcmp(key, kv->key);
}

/* The value of key in p's fingerprint, or NULL. */
static const char *
kv_get(const struct baseline_probe *p, const char *key)
{
  const struct baseline_kv *hit;

  if (p == NULL || p->kv == NULL || p->nkv == 0)
    return NULL;
  hit = bsearch(key, p->kv, p->nkv, sizeof(*p->kv), kv_cmp);
  return hit != NULL ? hit->value : NULL;
}

/* s cut to QUOTE_LEN bytes at a character boundary ("..." says so), or
 * "unknown" for NULL: a value fit to quote in a message. */
struct quote {
  char s[QUOTE_LEN + 4];
};

static struct quote
quote(const char *s)
{
  struct quote q;
  size_t n;

  if (s == NULL)
    s = "unknown";
  n = strlen(s);
  if (n <= QUOTE_LEN) {
    memcpy(q.s, s, n + 1);
    return q;
  }
  n = QUOTE_LEN;
  while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
    n--;
  memcpy(q.s, s, n);
  memcpy(q.s + n, "...", 4);
  return q;
}

/* Drop a character the message's size cut in two: messages end up in
 * JSON, which must be valid UTF-8. */
static void
trim_cut_char(char *m)
{
  size_t len = strlen(m);
  size_t j = len;
  unsigned char lead;
  size_t need;

  while (j > 0 && len - j < 4 && ((unsigned char)m[j - 1] & 0xc0) == 0x80)
    j--;
  if (j == 0)
    return;
  lead = (unsigned char)m[j - 1];
  if (lead < 0xc0)
    return;
  need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
  if (len - (j - 1) < need)
    m[j - 1] = '\0';
}

static void add(struct baseline_verdict *out, enum baseline_rule rule,
                const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One finding; past BASELINE_MAX_FINDINGS it is only counted. */
static void
add(struct baseline_verdict *out, enum baseline_rule rule, const char *fmt,
    ...)
{
  struct baseline_finding *f;
  va_list ap;

  out->drifted = 1;
  if (out->nfindings >= BASELINE_MAX_FINDINGS) {
    out->nmore++;
    return;
  }
  f = &out->findings[out->nfindings++];
  f->rule = rule;
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof(f->message), fmt, ap);
  va_end(ap);
  trim_cut_char(f->message);
}

/* "64 MiB", "8 B", "1.5 KiB". */
static void
fmt_bytes(char *buf, size_t cap, int64_t b)
{
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int64_t unit = 1;
  size_t u = 0;

  while (u + 1 < sizeof(units) / sizeof(units[0]) && b >= unit * 1024) {
    unit *= 1024;
    u++;
  }
  if (b % unit == 0)
    snprintf(buf, cap, "%lld %s", (long long)(b / unit), units[u]);
  else
    snprintf(buf, cap, "%.1f %s", (double)b / (double)unit, units[u]);
}

/* "8 d", "5 h", "12 min", "40 s": the largest unit that says enough. */
static void
fmt_age(char *buf, size_t cap, int64_t ms)
{
  if (ms >= 2 * DAY_MS)
    snprintf(buf, cap, "%lld d", (long long)(ms / DAY_MS));
  else if (ms >= 2 * HOUR_MS)
    snprintf(buf, cap, "%lld h", (long long)(ms / HOUR_MS));
  else if (ms >= 2 * MINUTE_MS)
    snprintf(buf, cap, "%lld min", (long long)(ms / MINUTE_MS));
  else
    snprintf(buf, cap, "%lld s", (long long)(ms / 1000));
}

/* ---- dotted versions ---- */

struct version {
  int n;
  long long part[VERSION_PARTS];
};

/* "550.54.15" into its numbers; -1 unless digits separated by dots. */
static int
version_parse(const char *s, struct version *v)
{
  memset(v, 0, sizeof(*v));
  if (s == NULL)
    return -1;
  for (;;) {
    long long x = 0;
    int digits = 0;

    while (*s >= '0' && *s <= '9') {
      if (digits == VERSION_DIGITS)
        return -1;
      x = x * 10 + (*s - '0');
      digits++;
      s++;
    }
    if (digits == 0 || v->n == VERSION_PARTS)
      return -1;
    v->part[v->n++] = x;
    if (*s == '\0')
      return 0;
    if (*s != '.')
      return -1;
    s++;
  }
}

/* a against b over their first parts components (a missing one is 0):
 * <0, 0 or >0. */
static int
version_cmp(const struct version *a, const struct version *b, int parts)
{
  int i;

  for (i = 0; i < parts && i < VERSION_PARTS; i++) {
    long long x = i < a->n ? a->part[i] : 0;
    long long y = i < b->n ? b->part[i] : 0;

    if (x != y)
      return x < y ? -1 : 1;
  }
  return 0;
}

static int
match_parts(enum baseline_match m)
{
  switch (m) {
  case BASELINE_MATCH_MAJOR:
    return 1;
  case BASELINE_MATCH_MINOR:
    return 2;
  default:
    return VERSION_PARTS;
  }
}

static const char *
match_words(enum baseline_match m)
{
  switch (m) {
  case BASELINE_MATCH_MAJOR:
    return "major must match";
  case BASELINE_MATCH_MINOR:
    return "major.minor must match";
  default:
    return "must match exactly";
  }
}

/* have and want equal at level m; text that is no version must be equal
 * as text. */
static int
versions_match(const char *have, const char *want, enum baseline_match m)
{
  struct version a;
  struct version b;

  if (version_parse(have, &a) < 0 || version_parse(want, &b) < 0)
    return strcmp(have, want) == 0;
  return version_cmp(&a, &b, match_parts(m)) == 0;
}

/* ---- the fingerprint walked in key order, both sides at once ---- */

struct merge {
  const struct baseline_probe *a;
  const struct baseline_probe *b;
  size_t i;
  size_t j;
};

static size_t
nkv(const struct baseline_probe *p)
{
  return p != NULL && p->kv != NULL ? p->nkv : 0;
}

/* The next key of either side: 0 at the end, else 1 with *va or *vb
 * NULL where that side lacks the key. */
static int
merge_next(struct merge *m, const char **key, const char **va,
           const char **vb)
{
  size_t na = nkv(m->a);
  size_t nb = nkv(m->b);
  int c;

  if (m->i >= na && m->j >= nb)
    return 0;
  if (m->i >= na)
    c = 1;
  else if (m->j >= nb)
    c = -1;
  else
    c = strcmp(m->a->kv[m->i].key, m->b->kv[m->j].key);
  *va = NULL;
  *vb = NULL;
  if (c <= 0) {
    *key = m->a->kv[m->i].key;
    *va = m->a->kv[m->i++].value;
  }
  if (c >= 0) {
    *key = m->b->kv[m->j].key;
    *vb = m->b->kv[m->j++].value;
  }
  return 1;
}

static int
env_ignored(const char *const *ignore, const char *name)
{
  size_t i;

  for (i = 0; i < BASELINE_MAX_IGNORE && ignore[i] != NULL; i++) {
    if (strcmp(ignore[i], name) == 0)
      return 1;
  }
  return 0;
}

/* ---- the rules ---- */

static void
rule_probed(const struct baseline_rules *r, const struct baseline_probe *site,
            int64_t now_ms, struct baseline_verdict *out)
{
  int64_t age;
  char have[24];
  char limit[24];

  if (r->max_age_ms <= 0)
    return;
  if (__builtin_sub_overflow(now_ms, site->time_ms, &age))
    age = INT64_MAX;
  if (age <= r->max_age_ms)
    return;
  fmt_age(have, sizeof(have), age);
  fmt_age(limit, sizeof(limit), r->max_age_ms);
  add(out, BASELINE_PROBED, "last probed %s ago (stale after %s)", have,
      limit);
}

/* key's value equal to the reference's, when the reference has one. */
static void
rule_equal(enum baseline_rule rule, const char *key,
           const struct baseline_probe *ref,
           const struct baseline_probe *site, struct baseline_verdict *out)
{
  const char *want = kv_get(ref, key);
  const char *have = kv_get(site, key);

  if (want == NULL || (have != NULL && strcmp(have, want) == 0))
    return;
  add(out, rule, "%s %s, reference %s", key, quote(have).s, quote(want).s);
}

static void
rule_version(enum baseline_rule rule, const char *key, enum baseline_match m,
             const struct baseline_probe *ref,
             const struct baseline_probe *site, struct baseline_verdict *out)
{
  const char *want = kv_get(ref, key);
  const char *have = kv_get(site, key);

  if (m == BASELINE_MATCH_ANY || want == NULL)
    return;
  if (have != NULL && versions_match(have, want, m))
    return;
  add(out, rule, "%s %s, reference %s (%s)", key, quote(have).s,
      quote(want).s, match_words(m));
}

/*
 * driver_min and driver_max compare as many components as they name:
 * a maximum of "560" allows every 560.x driver, a minimum of "535.104"
 * allows 535.104.05.
 */
static void
rule_driver(const struct baseline_rules *r, const struct baseline_probe *ref,
            const struct baseline_probe *site, struct baseline_verdict *out)
{
  const char *have = kv_get(site, "gpu.driver");
  const char *want;
  struct version h;
  struct version bound;
  int have_ok = version_parse(have, &h) == 0;

  if (r->driver_min != NULL || r->driver_max != NULL) {
    if (!have_ok) {
      add(out, BASELINE_DRIVER, "gpu.driver %s, allowed %s to %s",
          quote(have).s, r->driver_min != NULL ? r->driver_min : "any",
          r->driver_max != NULL ? r->driver_max : "any");
      return;
    }
    if (r->driver_min != NULL && version_parse(r->driver_min, &bound) == 0 &&
        version_cmp(&h, &bound, bound.n) < 0)
      add(out, BASELINE_DRIVER, "gpu.driver %s, below the minimum %s",
          quote(have).s, quote(r->driver_min).s);
    if (r->driver_max != NULL && version_parse(r->driver_max, &bound) == 0 &&
        version_cmp(&h, &bound, bound.n) > 0)
      add(out, BASELINE_DRIVER, "gpu.driver %s, above the maximum %s",
          quote(have).s, quote(r->driver_max).s);
    return;
  }
  want = kv_get(ref, "gpu.driver");
  if (want == NULL || version_parse(want, &bound) < 0)
    return;
  if (have_ok && h.part[0] >= bound.part[0])
    return;
  add(out, BASELINE_DRIVER,
      "gpu.driver %s, reference %s (major at least the reference's)",
      quote(have).s, quote(want).s);
}

static void
rule_env(const struct baseline_rules *r, const struct baseline_probe *ref,
         const struct baseline_probe *site, struct baseline_verdict *out)
{
  struct merge m = {ref, site, 0, 0};
  const char *key;
  const char *want;
  const char *have;

  while (merge_next(&m, &key, &want, &have)) {
    const char *name = key + 4; /* after "env." */

    if (strncmp(key, "env.NCCL_", 9) != 0 ||
        env_ignored(r->env_ignore, name))
      continue;
    if (want != NULL && have != NULL && strcmp(want, have) == 0)
      continue;
    if (want == NULL)
      add(out, BASELINE_NCCL_ENV, "%s=%s, unset at the reference",
          quote(name).s, quote(have).s);
    else if (have == NULL)
      add(out, BASELINE_NCCL_ENV, "%s unset, reference %s", quote(name).s,
          quote(want).s);
    else
      add(out, BASELINE_NCCL_ENV, "%s=%s, reference %s", quote(name).s,
          quote(have).s, quote(want).s);
  }
}

/* The class whose bandwidth the busbw rule compares: the intra-node
 * link for a one-node probe, the network for more. */
static const char *
probe_class(const struct baseline_probe *p)
{
  return kv_get(p, p->nodes > 1 ? "interconnect" : "topology.class");
}

static const struct baseline_class_scale *
class_scale(const struct baseline_rules *r, const char *name)
{
  size_t i;

  for (i = 0; name != NULL && i < r->nclasses && i < BASELINE_MAX_CLASSES;
       i++) {
    if (r->classes[i].name != NULL && strcmp(r->classes[i].name, name) == 0)
      return &r->classes[i];
  }
  return NULL;
}

/* Whether a net.* value ("ib active 400G") is an active device of kind. */
static int
net_active(const char *value, const char *kind)
{
  size_t k = strlen(kind);

  return strncmp(value, kind, k) == 0 && value[k] == ' ' &&
         strncmp(value + k + 1, "active", 6) == 0 &&
         (value[k + 7] == ' ' || value[k + 7] == '\0');
}

static int
count_active(const struct baseline_probe *p, const char *kind)
{
  size_t i;
  int n = 0;

  for (i = 0; i < nkv(p); i++) {
    if (strncmp(p->kv[i].key, "net.", 4) == 0 &&
        net_active(p->kv[i].value, kind))
      n++;
  }
  return n;
}

/* The kind of device the reference's NCCL goes between nodes on: its
 * interconnect, or the best kind among its active devices. */
static const char *
ref_kind(const struct baseline_probe *ref)
{
  const char *k = kv_get(ref, "interconnect");
  size_t i;

  if (k != NULL && strcmp(k, "none") != 0)
    return k;
  for (i = 0; kinds_best_first[i] != NULL; i++) {
    if (count_active(ref, kinds_best_first[i]) > 0)
      return kinds_best_first[i];
  }
  return NULL;
}

/* Whether two classes may differ: both scaled (busbw judges them). */
static int
both_scaled(const struct baseline_rules *r, const char *a, const char *b)
{
  return class_scale(r, a) != NULL && class_scale(r, b) != NULL;
}

/* The intra-node topology and the inter-node kind are facts of the
 * nodes, whatever number of them a probe ran on. */
static void
rule_interconnect(const struct baseline_rules *r,
                  const struct baseline_probe *ref,
                  const struct baseline_probe *site,
                  struct baseline_verdict *out)
{
  static const char *const keys[] = {"topology.class", "interconnect"};
  const char *kind;
  int nref;
  int nsite;
  int differs = 0;

  for (size_t k = 0; k < 2; k++) {
    const char *want = kv_get(ref, keys[k]);
    const char *have = kv_get(site, keys[k]);

    if (want == NULL || (have != NULL && strcmp(have, want) == 0) ||
        both_scaled(r, have, want))
      continue;
    add(out, BASELINE_INTERCONNECT, "%s %s, reference %s (no class_scale "
        "for both)", keys[k], quote(have).s, quote(want).s);
    differs = 1;
  }
  kind = ref_kind(ref);
  if (differs || kind == NULL)
    return;
  nref = count_active(ref, kind);
  nsite = count_active(site, kind);
  if (nsite < nref)
    add(out, BASELINE_INTERCONNECT, "net: %d active %s devices, reference %d",
        nsite, quote(kind).s, nref);
}

/* site / ref expected of a site's class: 1 unless both have a scale. */
static double
expected_scale(const struct baseline_rules *r,
               const struct baseline_probe *ref,
               const struct baseline_probe *site)
{
  const char *want = probe_class(ref);
  const char *have = probe_class(site);
  const struct baseline_class_scale *a;
  const struct baseline_class_scale *b;

  if (want == NULL || have == NULL || strcmp(want, have) == 0)
    return 1.0;
  a = class_scale(r, have);
  b = class_scale(r, want);
  if (a == NULL || b == NULL || !(b->scale > 0) || !isfinite(a->scale) ||
      !isfinite(b->scale) || a->scale < 0)
    return 1.0;
  return a->scale / b->scale;
}

static int
usable_bw(double v)
{
  return isfinite(v) && v > 0;
}

static void
rule_busbw(const struct baseline_rules *r, const struct baseline_probe *ref,
           const struct baseline_probe *site, struct baseline_verdict *out)
{
  double tol = r->busbw_tolerance;
  double factor;
  double worst_ratio = 0;
  size_t i = 0;
  size_t j = 0;
  size_t nref = 0;
  size_t judged = 0;
  size_t failed = 0;
  size_t worst = 0;
  char size[24];

  if (!ref->measured)
    return;
  if (!site->measured) {
    if (site->skipped != NULL)
      add(out, BASELINE_BUSBW,
          "no all-reduce measurement (%s), the reference has one",
          quote(site->skipped).s);
    else
      add(out, BASELINE_BUSBW,
          "no all-reduce measurement, the reference has one");
    return;
  }
  {
    /* One node's NVLink and two nodes' IB are different measurements:
     * only a class_scale for both relates them. */
    const char *want = probe_class(ref);
    const char *have = probe_class(site);

    if (want != NULL && have != NULL && strcmp(want, have) != 0 &&
        !both_scaled(r, have, want)) {
      add(out, BASELINE_BUSBW, "all-reduce not comparable: class %s on %d "
          "node(s), reference %s on %d (probe as many nodes, or give both "
          "a class_scale)", quote(have).s, site->nodes, quote(want).s,
          ref->nodes);
      return;
    }
  }
  if (!(tol >= 0))
    tol = 0;
  if (tol > 1)
    tol = 1;
  factor = expected_scale(r, ref, site) * (1 - tol);
  for (i = 0; ref->allreduce != NULL && i < ref->npoints; i++) {
    const struct baseline_point *p = &ref->allreduce[i];
    const struct baseline_point *q = NULL;
    double have;
    double ratio;

    if (p->bytes < r->busbw_min_bytes || !usable_bw(p->busbw_gbps))
      continue;
    nref++;
    /* Both sorted by bytes: the site's point, if any, is at j or on. */
    while (site->allreduce != NULL && j < site->npoints &&
           site->allreduce[j].bytes < p->bytes)
      j++;
    if (site->allreduce != NULL && j < site->npoints &&
        site->allreduce[j].bytes == p->bytes)
      q = &site->allreduce[j];
    if (q == NULL)
      continue;
    judged++;
    have = isfinite(q->busbw_gbps) && q->busbw_gbps > 0 ? q->busbw_gbps : 0;
    if (have >= p->busbw_gbps * factor)
      continue;
    ratio = have / p->busbw_gbps;
    if (failed == 0 || ratio < worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
    failed++;
  }
  fmt_bytes(size, sizeof(size), r->busbw_min_bytes);
  if (judged == 0 && nref > 0) {
    add(out, BASELINE_BUSBW,
        "no all-reduce size from %s measured in common with the "
        "reference (it has %zu)",
        size, nref);
    return;
  }
  if (failed == 0)
    return;
  fmt_bytes(size, sizeof(size), ref->allreduce[worst].bytes);
  add(out, BASELINE_BUSBW,
      "all-reduce at %s: %.1f GB/s, %.0f %% of the reference's %.1f GB/s "
      "(at least %.0f %% expected); %zu of %zu sizes below",
      size, worst_ratio * ref->allreduce[worst].busbw_gbps,
      worst_ratio * 100, ref->allreduce[worst].busbw_gbps, factor * 100,
      failed, judged);
}

static int
on(const struct baseline_rules *r, enum baseline_rule rule)
{
  return (r->enabled & (1u << rule)) != 0;
}

void
baseline_check(const struct baseline_rules *r,
               const struct baseline_probe *ref,
               const struct baseline_probe *site, int64_t now_ms,
               struct baseline_verdict *out)
{
  struct baseline_rules dflt;

  memset(out, 0, sizeof(*out));
  if (r == NULL) {
    baseline_rules_default(&dflt);
    r = &dflt;
  }
  if (site == NULL || ref == NULL) {
    if (on(r, BASELINE_PROBED))
      add(out, BASELINE_PROBED, "%s",
          site == NULL ? "never probed"
                       : "reference site has no probe result");
    return;
  }
  if (on(r, BASELINE_PROBED))
    rule_probed(r, site, now_ms, out);
  if (on(r, BASELINE_GPU_MODEL))
    rule_equal(BASELINE_GPU_MODEL, "gpu.model", ref, site, out);
  if (on(r, BASELINE_NCCL_VERSION))
    rule_version(BASELINE_NCCL_VERSION, "nccl.version", r->nccl, ref, site,
                 out);
  if (on(r, BASELINE_CUDA_RUNTIME))
    rule_version(BASELINE_CUDA_RUNTIME, "cuda.runtime", r->cuda, ref, site,
                 out);
  if (on(r, BASELINE_DRIVER))
    rule_driver(r, ref, site, out);
  if (on(r, BASELINE_NCCL_ENV))
    rule_env(r, ref, site, out);
  if (on(r, BASELINE_BUNDLE))
    rule_equal(BASELINE_BUNDLE, "bundle.version", ref, site, out);
  if (on(r, BASELINE_INTERCONNECT))
    rule_interconnect(r, ref, site, out);
  if (on(r, BASELINE_BUSBW))
    rule_busbw(r, ref, site, out);
  if (on(r, BASELINE_CORRECT) && site->measured && !site->all_correct)
    add(out, BASELINE_CORRECT,
        "a measured result failed its check: NCCL returned wrong values");
  if (on(r, BASELINE_UNIFORM) && site->nodes > 1 &&
      site->nodes_differing > 0) {
    if (site->differing_key != NULL)
      add(out, BASELINE_UNIFORM, "%d of %d nodes differ from node 0 (%s)",
          site->nodes_differing, site->nodes,
          quote(site->differing_key).s);
    else
      add(out, BASELINE_UNIFORM, "%d of %d nodes differ from node 0",
          site->nodes_differing, site->nodes);
  }
}

/* ---- the side-by-side views ---- */

/* Which rule would judge key, whatever the rules say (-1: none). */
static int
rule_of_key(const char *key)
{
  if (strcmp(key, "gpu.model") == 0)
    return BASELINE_GPU_MODEL;
  if (strcmp(key, "nccl.version") == 0)
    return BASELINE_NCCL_VERSION;
  if (strcmp(key, "cuda.runtime") == 0)
    return BASELINE_CUDA_RUNTIME;
  if (strcmp(key, "gpu.driver") == 0)
    return BASELINE_DRIVER;
  if (strncmp(key, "env.NCCL_", 9) == 0)
    return BASELINE_NCCL_ENV;
  if (strcmp(key, "bundle.version") == 0)
    return BASELINE_BUNDLE;
  if (strncmp(key, "net.", 4) == 0 || strcmp(key, "interconnect") == 0 ||
      strcmp(key, "topology.class") == 0)
    return BASELINE_INTERCONNECT;
  return -1;
}

/* Which rule of r judges key (-1: none, or one switched off). */
static int
rule_of(const struct baseline_rules *r, const char *key)
{
  int rule = rule_of_key(key);

  if (rule < 0 || (r->enabled & (1u << rule)) == 0)
    return -1;
  if (rule == BASELINE_NCCL_ENV && env_ignored(r->env_ignore, key + 4))
    return -1;
  return rule;
}

size_t
baseline_diff(const struct baseline_rules *r,
              const struct baseline_probe *ref,
              const struct baseline_probe *site, struct baseline_row *rows,
              size_t cap)
{
  struct baseline_rules dflt;
  struct merge m = {ref, site, 0, 0};
  const char *key;
  const char *a;
  const char *b;
  size_t n = 0;

  if (r == NULL) {
    baseline_rules_default(&dflt);
    r = &dflt;
  }
  while (merge_next(&m, &key, &a, &b)) {
    if (n < cap) {
      struct baseline_row *row = &rows[n];

      row->key = key;
      row->ref = a;
      row->site = b;
      row->differs = a == NULL || b == NULL || strcmp(a, b) != 0;
      row->rule = rule_of(r, key);
    }
    n++;
  }
  return n;
}

static size_t
npoints(const struct baseline_probe *p)
{
  return p != NULL && p->allreduce != NULL ? p->npoints : 0;
}

size_t
baseline_bw_diff(const struct baseline_rules *r,
                 const struct baseline_probe *ref,
                 const struct baseline_probe *site,
                 struct baseline_bw_row *rows, size_t cap)
{
  int64_t min_bytes = r != NULL ? r->busbw_min_bytes : MIB;
  size_t na = npoints(ref);
  size_t nb = npoints(site);
  size_t i = 0;
  size_t j = 0;
  size_t n = 0;

  while (i < na || j < nb) {
    struct baseline_bw_row row = {0, -1, -1, -1, 0};
    int64_t a = i < na ? ref->allreduce[i].bytes : INT64_MAX;
    int64_t b = j < nb ? site->allreduce[j].bytes : INT64_MAX;

    row.bytes = a <= b ? a : b;
    if (i < na && a == row.bytes)
      row.ref_gbps = ref->allreduce[i++].busbw_gbps;
    if (j < nb && b == row.bytes)
      row.site_gbps = site->allreduce[j++].busbw_gbps;
    if (row.ref_gbps > 0 && row.site_gbps >= 0)
      row.pct = row.site_gbps / row.ref_gbps * 100;
    row.judged = row.bytes >= min_bytes;
    if (n < cap)
      rows[n] = row;
    n++;
  }
  return n;
}
