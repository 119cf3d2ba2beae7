/*
 * Tests for policies/baseline.c: each drift rule with cases worked out by
 * hand, on the shapes of the fixtures in tests/data/probe (ref-h100,
 * older-nccl, half-bw, no-ib, no-gpu) written here as C arrays: the
 * policies link no JSON parser.
 *
 * The reference is one DGX H100 node; its all-reduce bus bandwidth by
 * size is ref-h100.json's (GB/s, 8 B to 8 GiB).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "policies/baseline.h"

#define MIB (1024LL * 1024)
#define HOUR_MS 3600000LL
#define DAY_MS (24 * HOUR_MS)
#define T0 1795000000000LL
#define NPOINTS 31
#define MAXKV 80

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* ref-h100.json's all_reduce busbw_gbps, 8 B x 2^i. */
static const double ref_busbw[NPOINTS] = {
    0.0,    0.0,    0.0,    0.01,   0.02,   0.03,   0.06,   0.13,
    0.25,   0.5,    0.97,   1.86,   3.47,   6.29,   11.21,  19.99,
    35.99,  64.5,   111.65, 179.99, 261.68, 339.54, 399.21, 437.8,
    460.07, 472.08, 478.33, 481.52, 483.13, 483.94, 484.34,
};

static const struct baseline_kv ref_kv[] = {
    {"bundle.version", "nccl-2.21.5-cuda12.4-r1"},
    {"cuda.driver", "12.4"},
    {"cuda.runtime", "12.4"},
    {"env.NCCL_DEBUG", "WARN"},
    {"env.NCCL_IB_HCA", "mlx5"},
    {"env.NCCL_SOCKET_IFNAME", "eth0"},
    {"gpu.count", "8"},
    {"gpu.driver", "550.54.15"},
    {"gpu.memory_mib", "81559"},
    {"gpu.model", "NVIDIA H100 80GB HBM3"},
    {"interconnect", "ib"},
    {"kernel", "5.15.0-105-generic"},
    {"nccl.version", "2.21.5"},
    {"net.eth0", "tcp active 100G"},
    {"net.mlx5_0", "ib active 400G"},
    {"net.mlx5_1", "ib active 400G"},
    {"net.mlx5_2", "ib active 400G"},
    {"net.mlx5_3", "ib active 400G"},
    {"net.mlx5_4", "ib active 400G"},
    {"net.mlx5_5", "ib active 400G"},
    {"net.mlx5_6", "ib active 400G"},
    {"net.mlx5_7", "ib active 400G"},
    {"os", "Ubuntu 22.04.4 LTS"},
    {"topology.class", "nvlink"},
    {"topology.matrix", "X NV18 NV18 NV18 NV18 NV18 NV18 NV18 / ..."},
    {"topology.numa", "0,0,0,0,1,1,1,1"},
};
#define NREF_KV (sizeof(ref_kv) / sizeof(ref_kv[0]))

static const struct baseline_kv no_gpu_kv[] = {
    {"interconnect", "tcp"},
    {"kernel", "5.15.0-105-generic"},
    {"net.eth0", "tcp active 25G"},
    {"os", "Ubuntu 22.04.4 LTS"},
    {"topology.class", "unknown"},
};

/* A probe result the test may change: its own copies of the arrays. */
struct fx {
  struct baseline_kv kv[MAXKV];
  struct baseline_point pts[NPOINTS];
  struct baseline_probe p;
};

static void
fx_sync(struct fx *f, size_t nkv)
{
  f->p.kv = f->kv;
  f->p.nkv = nkv;
}

/* ref-h100: one node, measured, every check passed. */
static void
fx_ref(struct fx *f)
{
  size_t i;

  memset(f, 0, sizeof(*f));
  memcpy(f->kv, ref_kv, sizeof(ref_kv));
  for (i = 0; i < NPOINTS; i++) {
    f->pts[i].bytes = 8LL << i;
    f->pts[i].busbw_gbps = ref_busbw[i];
  }
  fx_sync(f, NREF_KV);
  f->p.measured = 1;
  f->p.allreduce = f->pts;
  f->p.npoints = NPOINTS;
  f->p.all_correct = 1;
  f->p.nodes = 1;
  f->p.time_ms = T0;
}

/* Set key to value (NULL removes it), keeping the keys sorted. */
static void
fx_set(struct fx *f, const char *key, const char *value)
{
  size_t n = f->p.nkv;
  size_t i = 0;

  while (i < n && strcmp(f->kv[i].key, key) < 0)
    i++;
  if (i < n && strcmp(f->kv[i].key, key) == 0) {
    if (value != NULL) {
      f->kv[i].value = value;
      return;
    }
    memmove(&f->kv[i], &f->kv[i + 1], (n - i - 1) * sizeof(f->kv[0]));
    fx_sync(f, n - 1);
    return;
  }
  if (value == NULL)
    return;
  assert_true(n < MAXKV);
  memmove(&f->kv[i + 1], &f->kv[i], (n - i) * sizeof(f->kv[0]));
  f->kv[i].key = key;
  f->kv[i].value = value;
  fx_sync(f, n + 1);
}

static void
fx_older_nccl(struct fx *f)
{
  fx_ref(f);
  fx_set(f, "nccl.version", "2.18.3");
  f->p.time_ms = T0 + HOUR_MS;
}

/* All-reduce busbw halved from 1 MiB. */
static void
fx_half_bw(struct fx *f)
{
  size_t i;

  fx_ref(f);
  for (i = 0; i < NPOINTS; i++) {
    if (f->pts[i].bytes >= MIB)
      f->pts[i].busbw_gbps /= 2;
  }
  f->p.time_ms = T0 + 2 * HOUR_MS;
}

static void
fx_no_ib(struct fx *f)
{
  fx_ref(f);
  fx_set(f, "net.mlx5_7", NULL);
  f->p.time_ms = T0 + 3 * HOUR_MS;
}

static void
fx_no_gpu(struct fx *f)
{
  memset(f, 0, sizeof(*f));
  memcpy(f->kv, no_gpu_kv, sizeof(no_gpu_kv));
  fx_sync(f, sizeof(no_gpu_kv) / sizeof(no_gpu_kv[0]));
  f->p.skipped =
      "no GPU visible: cudaGetDeviceCount: no CUDA-capable device is "
      "detected";
  f->p.nodes = 1;
  f->p.time_ms = T0 + 600000;
}

static void
check(const struct baseline_rules *r, const struct fx *ref,
      const struct fx *site, struct baseline_verdict *v)
{
  baseline_check(r, ref != NULL ? &ref->p : NULL,
                 site != NULL ? &site->p : NULL, T0 + 4 * HOUR_MS, v);
}

/* The verdict has exactly one finding, of rule, saying message. */
static void
assert_one(const struct baseline_verdict *v, enum baseline_rule rule,
           const char *message)
{
  if (v->nfindings != 1 || v->findings[0].rule != rule ||
      strcmp(v->findings[0].message, message) != 0)
    fail_msg("want one %s finding '%s', got %zu, the first %s '%s'",
             baseline_rule_name(rule), message, v->nfindings,
             v->nfindings > 0 ? baseline_rule_name(v->findings[0].rule)
                              : "-",
             v->nfindings > 0 ? v->findings[0].message : "");
  assert_true(v->drifted);
  assert_int_equal(v->nmore, 0);
}

static void
assert_pass(const struct baseline_verdict *v)
{
  if (v->nfindings != 0)
    fail_msg("want no finding, got %zu: %s '%s'", v->nfindings,
             baseline_rule_name(v->findings[0].rule),
             v->findings[0].message);
  assert_false(v->drifted);
  assert_int_equal(v->nmore, 0);
}

/* The finding of rule, or NULL. */
static const struct baseline_finding *
finding(const struct baseline_verdict *v, enum baseline_rule rule)
{
  size_t i;

  for (i = 0; i < v->nfindings; i++) {
    if (v->findings[i].rule == rule)
      return &v->findings[i];
  }
  return NULL;
}

/* ---- rules ---- */

static void
test_reference_against_itself_passes_every_rule(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref;

  (void)state;
  baseline_rules_default(&r);
  r.max_age_ms = 7 * DAY_MS;
  r.driver_min = "535.104";
  fx_ref(&ref);
  check(&r, &ref, &ref, &v);
  assert_pass(&v);
  /* And as two copies of one multi-node result. */
  ref.p.nodes = 2;
  check(&r, &ref, &ref, &v);
  assert_pass(&v);
}

static void
test_defaults_turn_every_rule_on(void **state)
{
  struct baseline_rules r;

  (void)state;
  baseline_rules_default(&r);
  assert_int_equal(r.enabled, (1u << BASELINE_NRULES) - 1);
  assert_int_equal(r.nccl, BASELINE_MATCH_MINOR);
  assert_int_equal(r.cuda, BASELINE_MATCH_MAJOR);
  assert_null(r.driver_min);
  assert_null(r.driver_max);
  assert_string_equal(r.env_ignore[0], "NCCL_DEBUG");
  assert_string_equal(r.env_ignore[1], "NCCL_DEBUG_FILE");
  assert_string_equal(r.env_ignore[2], "NCCL_DEBUG_SUBSYS");
  assert_null(r.env_ignore[3]);
  assert_true(r.busbw_tolerance == 0.2);
  assert_int_equal(r.busbw_min_bytes, MIB);
  assert_int_equal(r.max_age_ms, 0);
  assert_int_equal(r.nclasses, 0);
}

static void
test_older_nccl_fails_at_major_minor_and_passes_at_major(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_older_nccl(&site);
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_NCCL_VERSION,
             "nccl.version 2.18.3, reference 2.21.5 (major.minor must "
             "match)");
  r.nccl = BASELINE_MATCH_MAJOR;
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  r.nccl = BASELINE_MATCH_ANY;
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

static void
test_versions_compare_by_number_not_text(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  /* 2.21.10 is 2.21 (text would put it before 2.21.5). */
  fx_set(&site, "nccl.version", "2.21.10");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  r.nccl = BASELINE_MATCH_EXACT;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_NCCL_VERSION,
             "nccl.version 2.21.10, reference 2.21.5 (must match exactly)");
  /* 2.9 and 2.21 differ in minor, whatever their text. */
  r.nccl = BASELINE_MATCH_MINOR;
  fx_set(&site, "nccl.version", "2.9.9");
  check(&r, &ref, &site, &v);
  assert_int_equal(v.findings[0].rule, BASELINE_NCCL_VERSION);
  /* Text that is no version must be equal as text. */
  fx_set(&site, "nccl.version", "2.21.5-custom");
  check(&r, &ref, &site, &v);
  assert_int_equal(v.findings[0].rule, BASELINE_NCCL_VERSION);
  fx_set(&site, "nccl.version", NULL);
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_NCCL_VERSION,
             "nccl.version unknown, reference 2.21.5 (major.minor must "
             "match)");
}

static void
test_cuda_runtime_matches_at_major_by_default(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  fx_set(&site, "cuda.runtime", "12.2");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  fx_set(&site, "cuda.runtime", "11.8");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_CUDA_RUNTIME,
             "cuda.runtime 11.8, reference 12.4 (major must match)");
  r.cuda = BASELINE_MATCH_MINOR;
  fx_set(&site, "cuda.runtime", "12.2");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_CUDA_RUNTIME,
             "cuda.runtime 12.2, reference 12.4 (major.minor must match)");
}

static void
test_gpu_model_and_bundle_must_equal_the_reference(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  fx_set(&site, "gpu.model", "NVIDIA H100 PCIe");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_GPU_MODEL,
             "gpu.model NVIDIA H100 PCIe, reference NVIDIA H100 80GB HBM3");
  fx_ref(&site);
  fx_set(&site, "bundle.version", "nccl-2.21.5-cuda12.4-r2");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUNDLE,
             "bundle.version nccl-2.21.5-cuda12.4-r2, reference "
             "nccl-2.21.5-cuda12.4-r1");
  fx_set(&site, "bundle.version", NULL);
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUNDLE,
             "bundle.version unknown, reference nccl-2.21.5-cuda12.4-r1");
  /* A reference without a bundle asks for none. */
  fx_set(&ref, "bundle.version", NULL);
  fx_set(&site, "bundle.version", "v9");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

static void
test_half_bandwidth_fails_busbw_naming_the_worst_size(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_half_bw(&site);
  check(&r, &ref, &site, &v);
  /* Every size from 1 MiB is at 50 %: the first such is the worst. */
  assert_one(&v, BASELINE_BUSBW,
             "all-reduce at 1 MiB: 32.2 GB/s, 50 % of the reference's "
             "64.5 GB/s (at least 80 % expected); 14 of 14 sizes below");
  /* 64 MiB at 35 % is worse: it is the one named. */
  site.pts[23].busbw_gbps = 437.8 * 0.35;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUSBW,
             "all-reduce at 64 MiB: 153.2 GB/s, 35 % of the reference's "
             "437.8 GB/s (at least 80 % expected); 14 of 14 sizes below");
  /* A 60 % tolerance lets 50 % pass, not 35 %. */
  r.busbw_tolerance = 0.6;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUSBW,
             "all-reduce at 64 MiB: 153.2 GB/s, 35 % of the reference's "
             "437.8 GB/s (at least 40 % expected); 1 of 14 sizes below");
  fx_half_bw(&site);
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

static void
test_busbw_judges_only_sizes_both_measured_from_the_minimum(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  /* 512 KiB at a tenth: under the minimum size, not judged. */
  site.pts[16].busbw_gbps /= 10;
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  r.busbw_min_bytes = 512 * 1024;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUSBW,
             "all-reduce at 512 KiB: 3.6 GB/s, 10 % of the reference's "
             "36.0 GB/s (at least 80 % expected); 1 of 15 sizes below");
  /* The site measured up to 512 KiB only: nothing in common from 1 MiB. */
  baseline_rules_default(&r);
  site.p.npoints = 17;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUSBW,
             "no all-reduce size from 1 MiB measured in common with the "
             "reference (it has 14)");
  /* Sizes the site lacks are skipped; those it has still count. */
  fx_half_bw(&site);
  site.p.allreduce = &site.pts[20]; /* 8 MiB and up */
  site.p.npoints = NPOINTS - 20;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUSBW,
             "all-reduce at 8 MiB: 130.8 GB/s, 50 % of the reference's "
             "261.7 GB/s (at least 80 % expected); 11 of 11 sizes below");
}

static void
test_half_bandwidth_passes_when_class_scale_halves_the_site_class(
    void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_half_bw(&site);
  fx_set(&site, "topology.class", "pcie");
  /* Without a scale, the class and the bandwidth both drift. */
  check(&r, &ref, &site, &v);
  assert_int_equal(v.nfindings, 2);
  assert_string_equal(v.findings[0].message,
                      "topology.class pcie, reference nvlink (no "
                      "class_scale for both)");
  assert_int_equal(v.findings[1].rule, BASELINE_BUSBW);
  r.nclasses = 2;
  r.classes[0].name = "nvlink";
  r.classes[0].scale = 1.0;
  r.classes[1].name = "pcie";
  r.classes[1].scale = 0.5;
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  /* 20 % misses the 0.5 x 0.8 = 40 % expected of the class. */
  site.pts[17].busbw_gbps = 64.5 * 0.2;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUSBW,
             "all-reduce at 1 MiB: 12.9 GB/s, 20 % of the reference's "
             "64.5 GB/s (at least 40 % expected); 1 of 14 sizes below");
}

static void
test_missing_ib_device_fails_interconnect(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_no_ib(&site);
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_INTERCONNECT,
             "net: 7 active ib devices, reference 8");
  /* A device that is down counts as missing; a tcp one does not help. */
  fx_ref(&site);
  fx_set(&site, "net.mlx5_3", "ib down 400G");
  fx_set(&site, "net.eth1", "tcp active 100G");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_INTERCONNECT,
             "net: 7 active ib devices, reference 8");
  /* More than the reference is fine. */
  fx_ref(&site);
  fx_set(&site, "net.mlx5_8", "ib active 400G");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

static void
test_interconnect_is_judged_whatever_the_node_count(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  ref.p.nodes = 2;
  site.p.nodes = 2;
  fx_set(&site, "interconnect", "roce");
  /* (busbw finds the two kinds' bandwidths not comparable too) */
  r.enabled &= ~(1u << BASELINE_BUSBW);
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_INTERCONNECT,
             "interconnect roce, reference ib (no class_scale for both)");
  r.enabled |= 1u << BASELINE_BUSBW;
  /* One node against two: the same nodes pass the interconnect rule,
   * but the bandwidth of nvlink is not that of ib. */
  fx_ref(&site);
  check(&r, &ref, &site, &v);
  assert_int_equal(v.nfindings, 1);
  assert_int_equal(v.findings[0].rule, BASELINE_BUSBW);
  assert_string_equal(v.findings[0].message,
                      "all-reduce not comparable: class nvlink on 1 "
                      "node(s), reference ib on 2 (probe as many nodes, "
                      "or give both a class_scale)");
}

static void
test_nccl_env_differences_one_finding_each(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  fx_set(&site, "env.NCCL_IB_HCA", "mlx5_0");
  fx_set(&site, "env.NCCL_ALGO", "Ring");
  fx_set(&site, "env.NCCL_SOCKET_IFNAME", NULL);
  /* Logging and CUDA_* variables are not judged. */
  fx_set(&site, "env.NCCL_DEBUG", "INFO");
  fx_set(&site, "env.NCCL_DEBUG_SUBSYS", "INIT");
  fx_set(&site, "env.CUDA_VISIBLE_DEVICES", "0,1");
  check(&r, &ref, &site, &v);
  assert_int_equal(v.nfindings, 3);
  assert_int_equal(v.findings[0].rule, BASELINE_NCCL_ENV);
  assert_string_equal(v.findings[0].message,
                      "NCCL_ALGO=Ring, unset at the reference");
  assert_string_equal(v.findings[1].message,
                      "NCCL_IB_HCA=mlx5_0, reference mlx5");
  assert_string_equal(v.findings[2].message,
                      "NCCL_SOCKET_IFNAME unset, reference eth0");
  /* The caller's ignore list replaces the default one. */
  r.env_ignore[0] = "NCCL_ALGO";
  r.env_ignore[1] = "NCCL_IB_HCA";
  r.env_ignore[2] = "NCCL_SOCKET_IFNAME";
  check(&r, &ref, &site, &v);
  assert_int_equal(v.nfindings, 2);
  assert_string_equal(v.findings[0].message,
                      "NCCL_DEBUG=INFO, reference WARN");
  assert_string_equal(v.findings[1].message,
                      "NCCL_DEBUG_SUBSYS=INIT, unset at the reference");
}

static void
test_findings_past_the_cap_are_counted(void **state)
{
  static char names[40][32];
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;
  size_t i;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  for (i = 0; i < 40; i++) {
    snprintf(names[i], sizeof(names[i]), "env.NCCL_X%02zu", i);
    fx_set(&site, names[i], "1");
  }
  check(&r, &ref, &site, &v);
  assert_true(v.drifted);
  assert_int_equal(v.nfindings, BASELINE_MAX_FINDINGS);
  assert_int_equal(v.nmore, 40 - BASELINE_MAX_FINDINGS);
  assert_string_equal(v.findings[0].message,
                      "NCCL_X00=1, unset at the reference");
  assert_string_equal(v.findings[31].message,
                      "NCCL_X31=1, unset at the reference");
}

static void
test_driver_range_or_reference_major(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  /* Default: the site's major at least the reference's. */
  fx_set(&site, "gpu.driver", "535.104.05");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_DRIVER,
             "gpu.driver 535.104.05, reference 550.54.15 (major at least "
             "the reference's)");
  fx_set(&site, "gpu.driver", "550.40.07");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  fx_set(&site, "gpu.driver", "560.35.03");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  /* A range replaces the reference: bounds compare as far as written. */
  r.driver_min = "535.104";
  r.driver_max = "560";
  fx_set(&site, "gpu.driver", "535.104.05");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  fx_set(&site, "gpu.driver", "560.35.03");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  fx_set(&site, "gpu.driver", "535.86.10");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_DRIVER,
             "gpu.driver 535.86.10, below the minimum 535.104");
  fx_set(&site, "gpu.driver", "565.57.01");
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_DRIVER,
             "gpu.driver 565.57.01, above the maximum 560");
  fx_set(&site, "gpu.driver", NULL);
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_DRIVER,
             "gpu.driver unknown, allowed 535.104 to 560");
  r.driver_max = NULL;
  fx_set(&site, "gpu.driver", "999.1");
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

static void
test_never_probed_and_unprobed_reference(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  check(&r, &ref, NULL, &v);
  assert_one(&v, BASELINE_PROBED, "never probed");
  check(&r, NULL, &ref, &v);
  assert_one(&v, BASELINE_PROBED, "reference site has no probe result");
  check(&r, NULL, NULL, &v);
  assert_one(&v, BASELINE_PROBED, "never probed");
  /* With the rule off nothing is judged at all. */
  r.enabled &= ~(1u << BASELINE_PROBED);
  check(&r, &ref, NULL, &v);
  assert_pass(&v);
}

static void
test_stale_result_fails_probed(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  r.max_age_ms = 7 * DAY_MS;
  fx_ref(&ref);
  fx_ref(&site);
  baseline_check(&r, &ref.p, &site.p, T0 + 9 * DAY_MS + HOUR_MS, &v);
  assert_one(&v, BASELINE_PROBED, "last probed 9 d ago (stale after 7 d)");
  baseline_check(&r, &ref.p, &site.p, T0 + 7 * DAY_MS, &v);
  assert_pass(&v);
  r.max_age_ms = 6 * HOUR_MS;
  baseline_check(&r, &ref.p, &site.p, T0 + 30 * HOUR_MS, &v);
  assert_one(&v, BASELINE_PROBED, "last probed 30 h ago (stale after 6 h)");
  /* No maximum: a result never goes stale. */
  r.max_age_ms = 0;
  baseline_check(&r, &ref.p, &site.p, INT64_MAX, &v);
  assert_pass(&v);
}

static void
test_site_that_skipped_measurement_fails_busbw(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;
  const struct baseline_finding *f;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_no_gpu(&site);
  check(&r, &ref, &site, &v);
  f = finding(&v, BASELINE_BUSBW);
  assert_non_null(f);
  assert_string_equal(f->message,
                      "no all-reduce measurement (no GPU visible: "
                      "cudaGetDeviceCount: no CUDA-capable device is "
                      "de...), the reference has one");
  assert_string_equal(finding(&v, BASELINE_GPU_MODEL)->message,
                      "gpu.model unknown, reference NVIDIA H100 80GB HBM3");
  assert_non_null(finding(&v, BASELINE_NCCL_VERSION));
  assert_non_null(finding(&v, BASELINE_DRIVER));
  assert_non_null(finding(&v, BASELINE_INTERCONNECT));
  assert_null(finding(&v, BASELINE_CORRECT));
  /* Only busbw, with the others off; no reason given. */
  r.enabled = 1u << BASELINE_BUSBW;
  site.p.skipped = NULL;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_BUSBW,
             "no all-reduce measurement, the reference has one");
  /* A reference that did not measure has nothing to compare. */
  ref.p.measured = 0;
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

static void
test_failed_check_fails_correct(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  site.p.all_correct = 0;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_CORRECT,
             "a measured result failed its check: NCCL returned wrong "
             "values");
  r.enabled &= ~(1u << BASELINE_CORRECT);
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

static void
test_nodes_unlike_node_0_fail_uniform(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  ref.p.nodes = 4;
  site.p.nodes = 4;
  site.p.nodes_differing = 1;
  site.p.differing_key = "gpu.driver";
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_UNIFORM,
             "1 of 4 nodes differ from node 0 (gpu.driver)");
  site.p.differing_key = NULL;
  site.p.nodes_differing = 3;
  check(&r, &ref, &site, &v);
  assert_one(&v, BASELINE_UNIFORM, "3 of 4 nodes differ from node 0");
}

static void
test_rules_switched_off_are_not_judged(void **state)
{
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_no_gpu(&site);
  site.p.nodes = 2;
  site.p.nodes_differing = 1;
  r.enabled = 0;
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  /* Everything but nccl_version: older NCCL passes. */
  baseline_rules_default(&r);
  r.enabled &= ~(1u << BASELINE_NCCL_VERSION);
  fx_older_nccl(&site);
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  r.enabled &= ~(1u << BASELINE_BUSBW);
  fx_half_bw(&site);
  check(&r, &ref, &site, &v);
  assert_pass(&v);
  r.enabled &= ~(1u << BASELINE_INTERCONNECT);
  fx_no_ib(&site);
  check(&r, &ref, &site, &v);
  assert_pass(&v);
}

/* Messages quote at most 64 bytes of a value, cut between characters. */
static void
test_long_values_are_cut_to_whole_characters(void **state)
{
  static char model[302]; /* 'x', 150 x "é", NUL */
  struct baseline_rules r;
  struct baseline_verdict v;
  struct fx ref, site;
  const unsigned char *m;
  size_t i;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_ref(&site);
  /* "é" is two bytes; with an 'x' first every 64-byte cut splits one. */
  model[0] = 'x';
  for (i = 1; i + 2 < sizeof(model); i += 2)
    memcpy(model + i, "\xc3\xa9", 2);
  fx_set(&site, "gpu.model", model);
  check(&r, &ref, &site, &v);
  assert_int_equal(v.nfindings, 1);
  m = (const unsigned char *)v.findings[0].message;
  assert_true(strlen((const char *)m) < BASELINE_MESSAGE_LEN);
  assert_contains((const char *)m, "...");
  for (i = 0; m[i] != '\0'; i++) {
    if (m[i] == 0xc3) {
      assert_int_equal(m[i + 1], 0xa9);
      i++;
    } else {
      assert_true(m[i] < 0x80);
    }
  }
}

/* ---- the views ---- */

static void
test_diff_rows_are_sorted_with_differs_and_rule(void **state)
{
  struct baseline_row rows[64];
  struct fx ref, site;
  size_t n;
  size_t i;
  size_t seen = 0;

  (void)state;
  fx_ref(&ref);
  fx_no_ib(&site);
  fx_set(&site, "nccl.version", "2.18.3");
  fx_set(&site, "env.NCCL_ALGO", "Ring");
  fx_set(&site, "env.NCCL_DEBUG", "INFO");
  n = baseline_diff(NULL, &ref.p, &site.p, rows, 64);
  assert_int_equal(n, NREF_KV + 1);
  for (i = 0; i < n; i++) {
    const struct baseline_row *row = &rows[i];

    if (i > 0)
      assert_true(strcmp(rows[i - 1].key, row->key) < 0);
    if (strcmp(row->key, "net.mlx5_7") == 0) {
      assert_string_equal(row->ref, "ib active 400G");
      assert_null(row->site);
      assert_true(row->differs);
      assert_int_equal(row->rule, BASELINE_INTERCONNECT);
      seen++;
    } else if (strcmp(row->key, "env.NCCL_ALGO") == 0) {
      assert_null(row->ref);
      assert_string_equal(row->site, "Ring");
      assert_true(row->differs);
      assert_int_equal(row->rule, BASELINE_NCCL_ENV);
      seen++;
    } else if (strcmp(row->key, "env.NCCL_DEBUG") == 0) {
      assert_true(row->differs);
      assert_int_equal(row->rule, -1);
      seen++;
    } else if (strcmp(row->key, "nccl.version") == 0) {
      assert_string_equal(row->ref, "2.21.5");
      assert_string_equal(row->site, "2.18.3");
      assert_true(row->differs);
      assert_int_equal(row->rule, BASELINE_NCCL_VERSION);
      seen++;
    } else {
      assert_false(row->differs);
      assert_string_equal(row->ref, row->site);
    }
  }
  assert_int_equal(seen, 4);
  assert_int_equal(rows[0].rule, BASELINE_BUNDLE);           /* bundle */
  assert_int_equal(rows[1].rule, -1);                        /* cuda.driver */
  assert_int_equal(rows[2].rule, BASELINE_CUDA_RUNTIME);
  /* Cut rows: the count says how many there are. */
  assert_int_equal(baseline_diff(NULL, &ref.p, &site.p, rows, 3), NREF_KV + 1);
  assert_int_equal(baseline_diff(NULL, &ref.p, &site.p, NULL, 0), NREF_KV + 1);
  /* A site never probed: every row absent at the site. */
  n = baseline_diff(NULL, &ref.p, NULL, rows, 64);
  assert_int_equal(n, NREF_KV);
  for (i = 0; i < n; i++) {
    assert_null(rows[i].site);
    assert_true(rows[i].differs);
  }
  i = 0;
  while (strcmp(rows[i].key, "gpu.driver") != 0)
    i++;
  assert_int_equal(rows[i].rule, BASELINE_DRIVER);
  assert_int_equal(rows[i + 1].rule, -1); /* gpu.memory_mib */
  assert_int_equal(rows[i + 2].rule, BASELINE_GPU_MODEL);
  assert_int_equal(rows[i + 3].rule, BASELINE_INTERCONNECT); /* interconnect */
  assert_int_equal(rows[i + 4].rule, -1);                    /* kernel */
}

/* The diff marks what the configured rules judge: a variable the rules
 * ignore, and a rule switched off, judge nothing. */
static void
test_diff_rows_follow_the_configured_rules(void **state)
{
  struct baseline_rules r;
  struct baseline_row rows[64];
  struct fx ref, site;
  size_t n;
  int algo = -2, hca = -2, version = -2;

  (void)state;
  baseline_rules_default(&r);
  r.env_ignore[0] = "NCCL_IB_HCA";
  r.env_ignore[1] = NULL;
  r.enabled &= ~(1u << BASELINE_NCCL_VERSION);
  fx_ref(&ref);
  fx_ref(&site);
  fx_set(&site, "env.NCCL_ALGO", "Ring");
  fx_set(&site, "env.NCCL_IB_HCA", "mlx5_9");
  fx_set(&site, "nccl.version", "2.18.3");
  n = baseline_diff(&r, &ref.p, &site.p, rows, 64);
  for (size_t i = 0; i < n && i < 64; i++) {
    if (strcmp(rows[i].key, "env.NCCL_ALGO") == 0)
      algo = rows[i].rule;
    else if (strcmp(rows[i].key, "env.NCCL_IB_HCA") == 0)
      hca = rows[i].rule;
    else if (strcmp(rows[i].key, "nccl.version") == 0)
      version = rows[i].rule;
  }
  assert_int_equal(algo, BASELINE_NCCL_ENV);
  assert_int_equal(hca, -1);
  assert_int_equal(version, -1);
}

static void
test_bw_diff_merges_sizes_with_percentages(void **state)
{
  struct baseline_rules r;
  struct baseline_bw_row rows[40];
  struct fx ref, site;
  struct baseline_point extra[3] = {
      {MIB, 32.0}, {3 * MIB, 100.0}, {8 * MIB, 261.68}};
  size_t n;

  (void)state;
  baseline_rules_default(&r);
  fx_ref(&ref);
  fx_half_bw(&site);
  n = baseline_bw_diff(&r, &ref.p, &site.p, rows, 40);
  assert_int_equal(n, NPOINTS);
  assert_int_equal(rows[0].bytes, 8);
  assert_true(rows[0].pct == -1); /* 0 GB/s at the reference */
  assert_false(rows[0].judged);
  assert_int_equal(rows[16].bytes, 512 * 1024);
  assert_true(rows[16].pct == 100);
  assert_false(rows[16].judged);
  assert_int_equal(rows[17].bytes, MIB);
  assert_true(rows[17].ref_gbps == 64.5);
  assert_true(rows[17].site_gbps == 32.25);
  assert_true(rows[17].pct == 50);
  assert_true(rows[17].judged);
  assert_int_equal(rows[30].bytes, 8LL << 30);

  /* Sizes on one side only are rows with -1 on the other. */
  site.p.allreduce = extra;
  site.p.npoints = 3;
  n = baseline_bw_diff(&r, &ref.p, &site.p, rows, 40);
  assert_int_equal(n, NPOINTS + 1);
  assert_int_equal(rows[18].bytes, 2 * MIB);
  assert_true(rows[18].site_gbps == -1);
  assert_true(rows[18].pct == -1);
  assert_int_equal(rows[19].bytes, 3 * MIB);
  assert_true(rows[19].ref_gbps == -1);
  assert_true(rows[19].site_gbps == 100.0);
  assert_true(rows[19].pct == -1);
  assert_true(rows[19].judged);
  assert_int_equal(rows[21].bytes, 8 * MIB);
  assert_true(rows[21].pct == 100);
  assert_int_equal(baseline_bw_diff(&r, &ref.p, &site.p, rows, 2),
                   NPOINTS + 1);
  /* A site that did not measure: every size missing there. */
  n = baseline_bw_diff(&r, &ref.p, NULL, rows, 40);
  assert_int_equal(n, NPOINTS);
  assert_true(rows[17].site_gbps == -1);
}

static void
test_rule_and_match_names_round_trip(void **state)
{
  int i;

  (void)state;
  for (i = 0; i < BASELINE_NRULES; i++)
    assert_int_equal(baseline_rule_from_name(baseline_rule_name(i)), i);
  assert_string_equal(baseline_rule_name(BASELINE_PROBED), "probed");
  assert_string_equal(baseline_rule_name(BASELINE_NCCL_VERSION),
                      "nccl_version");
  assert_string_equal(baseline_rule_name(BASELINE_UNIFORM), "uniform");
  assert_null(baseline_rule_name(BASELINE_NRULES));
  assert_int_equal(baseline_rule_from_name("nccl-version"), -1);
  assert_int_equal(baseline_rule_from_name(NULL), -1);
  assert_int_equal(baseline_match_from_name("any"), BASELINE_MATCH_ANY);
  assert_int_equal(baseline_match_from_name("major"), BASELINE_MATCH_MAJOR);
  assert_int_equal(baseline_match_from_name("major.minor"),
                   BASELINE_MATCH_MINOR);
  assert_int_equal(baseline_match_from_name("exact"), BASELINE_MATCH_EXACT);
  assert_int_equal(baseline_match_from_name("minor"), -1);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_against_itself_passes_every_rule),
      cmocka_unit_test(test_defaults_turn_every_rule_on),
      cmocka_unit_test(
          test_older_nccl_fails_at_major_minor_and_passes_at_major),
      cmocka_unit_test(test_versions_compare_by_number_not_text),
      cmocka_unit_test(test_cuda_runtime_matches_at_major_by_default),
      cmocka_unit_test(test_gpu_model_and_bundle_must_equal_the_reference),
      cmocka_unit_test(test_half_bandwidth_fails_busbw_naming_the_worst_size),
      cmocka_unit_test(
          test_busbw_judges_only_sizes_both_measured_from_the_minimum),
      cmocka_unit_test(
          test_half_bandwidth_passes_when_class_scale_halves_the_site_class),
      cmocka_unit_test(test_missing_ib_device_fails_interconnect),
      cmocka_unit_test(test_interconnect_is_judged_whatever_the_node_count),
      cmocka_unit_test(test_nccl_env_differences_one_finding_each),
      cmocka_unit_test(test_findings_past_the_cap_are_counted),
      cmocka_unit_test(test_driver_range_or_reference_major),
      cmocka_unit_test(test_never_probed_and_unprobed_reference),
      cmocka_unit_test(test_stale_result_fails_probed),
      cmocka_unit_test(test_site_that_skipped_measurement_fails_busbw),
      cmocka_unit_test(test_failed_check_fails_correct),
      cmocka_unit_test(test_nodes_unlike_node_0_fail_uniform),
      cmocka_unit_test(test_rules_switched_off_are_not_judged),
      cmocka_unit_test(test_long_values_are_cut_to_whole_characters),
      cmocka_unit_test(test_diff_rows_are_sorted_with_differs_and_rule),
      cmocka_unit_test(test_diff_rows_follow_the_configured_rules),
      cmocka_unit_test(test_bw_diff_merges_sizes_with_percentages),
      cmocka_unit_test(test_rule_and_match_names_round_trip),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
