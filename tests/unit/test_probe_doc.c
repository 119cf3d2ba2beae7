/*
 * Tests for spec/probe_doc.c: the fixtures of tests/data/probe parse and
 * flatten to the keys and values the drift rules read; every malformed,
 * mistyped or oversized member is an ERR_INVALID naming its path; and
 * members the schema does not know are ignored.
 *
 * Error cases start from the reference fixture, change one member with
 * jansson and parse the result, so each proves one check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/probe_doc.h"
#include "util/fileio.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

#define MIB (1024LL * 1024)
#define GIB (1024 * MIB)

/* tests/data/probe/name as text (new; free with free()). */
static char *
fixture_text(const char *name, size_t *len)
{
  char path[512];
  struct err e = {0};
  char *text = NULL;

  snprintf(path, sizeof(path), "%s/tests/data/probe/%s", TENBIN_SOURCE_DIR,
           name);
  if (file_read(path, 4 * PROBE_DOC_MAX_BYTES, &text, len, &e) < 0)
    fail_msg("%s: %s", path, err_msg(&e));
  return text;
}

static struct probe_doc *
parse_fixture(const char *name)
{
  struct probe_doc *d = NULL;
  struct err e = {0};
  size_t len;
  char *text = fixture_text(name, &len);

  if (probe_doc_parse(text, len, &d, &e) < 0)
    fail_msg("%s: %s", name, err_msg(&e));
  free(text);
  return d;
}

static json_t *
ref_json(void)
{
  size_t len;
  char *text = fixture_text("ref-h100.json", &len);
  json_error_t jerr;
  json_t *j = json_loadb(text, len, 0, &jerr);

  free(text);
  assert_non_null(j);
  return j;
}

/* Serialize j (stolen) and parse it as a probe document. */
static int
parse_json(json_t *j, struct probe_doc **d, struct err *e)
{
  char *text = json_dumps(j, JSON_COMPACT);
  int rc;

  json_decref(j);
  assert_non_null(text);
  err_clear(e);
  rc = probe_doc_parse(text, strlen(text), d, e);
  free(text);
  return rc;
}

static json_t *
fp(json_t *root, const char *member)
{
  return json_object_get(json_object_get(root, "fingerprint"), member);
}

static json_t *
result(json_t *root, size_t i)
{
  return json_array_get(
      json_object_get(json_object_get(root, "measurement"), "results"), i);
}

/* ---- the fixtures ---- */

static const struct probe_doc_kv ref_kv[] = {
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
    {"topology.matrix",
     "X NV18 NV18 NV18 NV18 NV18 NV18 NV18 / "
     "NV18 X NV18 NV18 NV18 NV18 NV18 NV18 / "
     "NV18 NV18 X NV18 NV18 NV18 NV18 NV18 / "
     "NV18 NV18 NV18 X NV18 NV18 NV18 NV18 / "
     "NV18 NV18 NV18 NV18 X NV18 NV18 NV18 / "
     "NV18 NV18 NV18 NV18 NV18 X NV18 NV18 / "
     "NV18 NV18 NV18 NV18 NV18 NV18 X NV18 / "
     "NV18 NV18 NV18 NV18 NV18 NV18 NV18 X"},
    {"topology.numa", "0,0,0,0,1,1,1,1"},
};
#define NREF_KV (sizeof(ref_kv) / sizeof(ref_kv[0]))

static void
assert_kv_equal(const struct probe_doc *d, const struct probe_doc_kv *want,
                size_t nwant)
{
  size_t n;
  const struct probe_doc_kv *kv = probe_doc_kv(d, &n);
  size_t i;

  for (i = 0; i < n && i < nwant; i++) {
    assert_string_equal(kv[i].key, want[i].key);
    assert_string_equal(kv[i].value, want[i].value);
  }
  assert_int_equal(n, nwant);
}

static const struct probe_result *
find(const struct probe_doc *d, enum probe_collective c, int64_t bytes)
{
  size_t n;
  const struct probe_result *r = probe_doc_results(d, &n);
  size_t i;

  for (i = 0; i < n; i++) {
    if (r[i].collective == c && r[i].bytes == bytes)
      return &r[i];
  }
  fail_msg("no %s at %lld bytes", probe_collective_name(c),
           (long long)bytes);
  return NULL;
}

static void
test_reference_fixture_flattens_to_the_documented_keys(void **state)
{
  struct probe_doc *d = parse_fixture("ref-h100.json");

  (void)state;
  assert_kv_equal(d, ref_kv, NREF_KV);
  assert_string_equal(probe_doc_host(d), "dgx-h100-01");
  assert_int_equal(probe_doc_time_ms(d), 1795000000000LL);
  assert_int_equal(probe_doc_node_rank(d), 0);
  assert_int_equal(probe_doc_nodes(d), 1);
  assert_int_equal(probe_doc_measured(d), PROBE_MEASURE_DONE);
  assert_null(probe_doc_reason(d));
  assert_string_equal(probe_doc_get(d, "nccl.version"), "2.21.5");
  assert_string_equal(probe_doc_get(d, "topology.numa"), "0,0,0,0,1,1,1,1");
  assert_null(probe_doc_get(d, "container.image"));
  assert_null(probe_doc_get(d, "nccl"));
  assert_true(json_is_object(probe_doc_json(d)));
  assert_string_equal(
      json_string_value(json_object_get(probe_doc_json(d), "schema")),
      PROBE_DOC_SCHEMA);
  probe_doc_free(d);
}

/* Results as nccl-tests defines them: algbw = bytes / time, busbw =
 * algbw x 2(n-1)/n or (n-1)/n; the curve has the published shape. */
static void
test_reference_results_are_consistent_nccl_tests_lines(void **state)
{
  struct probe_doc *d = parse_fixture("ref-h100.json");
  size_t n;
  const struct probe_result *r = probe_doc_results(d, &n);
  size_t count[PROBE_NCOLLECTIVES] = {0};
  size_t i;

  (void)state;
  assert_int_equal(n, 93);
  for (i = 0; i < n; i++) {
    double factor = r[i].collective == PROBE_ALL_REDUCE ? 2.0 * 7 / 8 : 7.0 / 8;
    double alg = (double)r[i].bytes / r[i].time_us / 1e3;

    count[r[i].collective]++;
    assert_true(fabs(r[i].algbw_gbps - alg) <= 0.006);
    assert_true(fabs(r[i].busbw_gbps - alg * factor) <= 0.006);
    assert_true(r[i].correct);
    assert_int_equal(r[i].sampled, r[i].bytes >= 256 * MIB);
    assert_true(r[i].time_us >= 10 && r[i].time_us <= 40000);
  }
  assert_int_equal(count[PROBE_ALL_REDUCE], 31);
  assert_int_equal(count[PROBE_ALL_GATHER], 31);
  assert_int_equal(count[PROBE_REDUCE_SCATTER], 31);
  assert_int_equal(r[0].collective, PROBE_ALL_REDUCE);
  assert_int_equal(r[0].bytes, 8);
  assert_int_equal(r[n - 1].bytes, 8 * GIB);
  assert_true(find(d, PROBE_ALL_REDUCE, 8)->busbw_gbps < 0.01);
  assert_true(find(d, PROBE_ALL_REDUCE, MIB)->busbw_gbps > 20);
  assert_true(find(d, PROBE_ALL_REDUCE, MIB)->busbw_gbps < 100);
  for (i = 0; i < n; i++) {
    if (r[i].collective == PROBE_ALL_REDUCE && r[i].bytes >= GIB)
      assert_true(r[i].busbw_gbps > 470 && r[i].busbw_gbps < 490);
  }
  probe_doc_free(d);
}

static void
test_older_nccl_fixture_differs_in_version_and_host(void **state)
{
  struct probe_doc *d = parse_fixture("older-nccl.json");
  struct probe_doc_kv want[NREF_KV];
  size_t i;

  (void)state;
  memcpy(want, ref_kv, sizeof(want));
  for (i = 0; i < NREF_KV; i++) {
    if (strcmp(want[i].key, "nccl.version") == 0)
      want[i].value = "2.18.3";
  }
  assert_kv_equal(d, want, NREF_KV);
  assert_string_not_equal(probe_doc_host(d), "dgx-h100-01");
  probe_doc_free(d);
}

static void
test_half_bw_fixture_halves_all_reduce_from_1_mib(void **state)
{
  struct probe_doc *ref = parse_fixture("ref-h100.json");
  struct probe_doc *d = parse_fixture("half-bw.json");
  size_t n;
  const struct probe_result *r = probe_doc_results(d, &n);
  size_t i;

  (void)state;
  assert_kv_equal(d, ref_kv, NREF_KV);
  assert_int_equal(n, 93);
  for (i = 0; i < n; i++) {
    const struct probe_result *o = find(ref, r[i].collective, r[i].bytes);
    double want = o->busbw_gbps;

    if (r[i].collective == PROBE_ALL_REDUCE && r[i].bytes >= MIB)
      want /= 2;
    assert_true(fabs(r[i].busbw_gbps - want) <= 0.02);
  }
  probe_doc_free(d);
  probe_doc_free(ref);
}

static void
test_no_ib_fixture_lacks_one_ib_device(void **state)
{
  struct probe_doc *d = parse_fixture("no-ib.json");
  struct probe_doc_kv want[NREF_KV];
  size_t n = 0;
  size_t i;

  (void)state;
  for (i = 0; i < NREF_KV; i++) {
    if (strcmp(ref_kv[i].key, "net.mlx5_7") != 0)
      want[n++] = ref_kv[i];
  }
  assert_kv_equal(d, want, n);
  assert_null(probe_doc_get(d, "net.mlx5_7"));
  assert_string_equal(probe_doc_get(d, "net.mlx5_6"), "ib active 400G");
  probe_doc_free(d);
}

static void
test_no_gpu_fixture_has_no_gpu_facts_and_a_skipped_measurement(void **state)
{
  static const struct probe_doc_kv want[] = {
      {"interconnect", "tcp"},
      {"kernel", "5.15.0-105-generic"},
      {"net.eth0", "tcp active 25G"},
      {"os", "Ubuntu 22.04.4 LTS"},
      {"topology.class", "unknown"},
  };
  struct probe_doc *d = parse_fixture("no-gpu.json");
  size_t n;

  (void)state;
  assert_kv_equal(d, want, sizeof(want) / sizeof(want[0]));
  assert_int_equal(probe_doc_measured(d), PROBE_MEASURE_SKIPPED);
  assert_contains(probe_doc_reason(d), "no GPU visible");
  assert_null(probe_doc_get(d, "gpu.model"));
  assert_null(probe_doc_get(d, "nccl.version"));
  probe_doc_results(d, &n);
  assert_int_equal(n, 0);
  probe_doc_free(d);
}

/* ---- members ---- */

static void
test_unknown_members_are_ignored(void **state)
{
  json_t *j = ref_json();
  struct probe_doc *d = NULL;
  struct err e;

  (void)state;
  json_object_set_new(j, "future", json_pack("{s:[i,i]}", "x", 1, 2));
  json_object_set_new(json_object_get(j, "fingerprint"), "pci",
                      json_string("anything"));
  json_object_set_new(fp(j, "gpu"), "uuids", json_array());
  json_object_set_new(json_array_get(fp(j, "net"), 0), "mtu",
                      json_integer(9000));
  json_object_set_new(result(j, 0), "stddev", json_real(0.3));
  assert_int_equal(parse_json(j, &d, &e), 0);
  assert_kv_equal(d, ref_kv, NREF_KV);
  probe_doc_free(d);
}

static void
test_null_and_empty_facts_are_absent_keys(void **state)
{
  json_t *j = ref_json();
  struct probe_doc *d = NULL;
  struct err e;

  (void)state;
  json_object_set_new(fp(j, "cuda"), "runtime", json_null());
  json_object_set_new(fp(j, "gpu"), "count", json_null());
  json_object_set_new(json_object_get(j, "fingerprint"), "os",
                      json_string(""));
  json_object_set_new(fp(j, "topology"), "matrix", json_array());
  json_object_set_new(json_object_get(j, "fingerprint"), "nccl", json_null());
  assert_int_equal(parse_json(j, &d, &e), 0);
  assert_null(probe_doc_get(d, "cuda.runtime"));
  assert_null(probe_doc_get(d, "gpu.count"));
  assert_null(probe_doc_get(d, "os"));
  assert_null(probe_doc_get(d, "topology.matrix"));
  assert_null(probe_doc_get(d, "nccl.version"));
  assert_string_equal(probe_doc_get(d, "cuda.driver"), "12.4");
  probe_doc_free(d);
}

static void
test_env_variable_set_to_empty_is_a_key(void **state)
{
  json_t *j = ref_json();
  struct probe_doc *d = NULL;
  struct err e;

  (void)state;
  json_object_set_new(fp(j, "env"), "NCCL_ALGO", json_string(""));
  json_object_set_new(fp(j, "env"), "CUDA_VISIBLE_DEVICES",
                      json_string("0,1,2,3,4,5,6,7"));
  assert_int_equal(parse_json(j, &d, &e), 0);
  assert_string_equal(probe_doc_get(d, "env.NCCL_ALGO"), "");
  assert_string_equal(probe_doc_get(d, "env.CUDA_VISIBLE_DEVICES"),
                      "0,1,2,3,4,5,6,7");
  probe_doc_free(d);
}

static void
test_net_value_omits_an_absent_rate_and_keeps_a_fraction(void **state)
{
  json_t *j = ref_json();
  json_t *net = fp(j, "net");
  struct probe_doc *d = NULL;
  struct err e;

  (void)state;
  json_object_del(json_array_get(net, 0), "rate_gbps");
  json_object_set_new(json_array_get(net, 1), "rate_gbps", json_real(12.5));
  json_object_set_new(json_array_get(net, 2), "state", json_string("down"));
  assert_int_equal(parse_json(j, &d, &e), 0);
  assert_string_equal(probe_doc_get(d, "net.eth0"), "tcp active");
  assert_string_equal(probe_doc_get(d, "net.mlx5_0"), "ib active 12.5G");
  assert_string_equal(probe_doc_get(d, "net.mlx5_1"), "ib down 400G");
  probe_doc_free(d);
}

static void
test_container_digest_wins_over_the_image_tag(void **state)
{
  json_t *j = ref_json();
  struct probe_doc *d = NULL;
  struct err e;

  (void)state;
  json_object_set_new(
      json_object_get(j, "fingerprint"), "container",
      json_pack("{s:s,s:s,s:s}", "runtime", "enroot", "image",
                "nvcr.io/nvidia/pytorch:24.03-py3", "image_digest",
                "sha256:0123"));
  assert_int_equal(parse_json(j, &d, &e), 0);
  assert_string_equal(probe_doc_get(d, "container.image_digest"),
                      "sha256:0123");
  assert_null(probe_doc_get(d, "container.image"));
  probe_doc_free(d);

  j = ref_json();
  json_object_set_new(json_object_get(j, "fingerprint"), "container",
                      json_pack("{s:s,s:s}", "runtime", "podman", "image",
                                "nvcr.io/nvidia/pytorch:24.03-py3"));
  assert_int_equal(parse_json(j, &d, &e), 0);
  assert_string_equal(probe_doc_get(d, "container.image"),
                      "nvcr.io/nvidia/pytorch:24.03-py3");
  assert_null(probe_doc_get(d, "container.image_digest"));
  probe_doc_free(d);
}

static void
test_limits_themselves_are_accepted(void **state)
{
  json_t *j = ref_json();
  struct probe_doc *d = NULL;
  struct err e;
  char s[PROBE_DOC_MAX_STRING + 1];
  char name[65];

  (void)state;
  memset(s, 'a', PROBE_DOC_MAX_STRING);
  s[PROBE_DOC_MAX_STRING] = '\0';
  memset(name, 'n', 64);
  name[64] = '\0';
  json_object_set_new(json_object_get(j, "fingerprint"), "os",
                      json_string(s));
  json_object_set_new(result(j, 0), "bytes", json_integer(1LL << 40));
  json_object_set_new(json_array_get(fp(j, "net"), 0), "name",
                      json_string(name));
  assert_int_equal(parse_json(j, &d, &e), 0);
  assert_int_equal(strlen(probe_doc_get(d, "os")), PROBE_DOC_MAX_STRING);
  assert_non_null(probe_doc_get(d, "net.nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
                                   "nnnnnnnnnnnnnnnnnnnnnnnnnnnn"));
  probe_doc_free(d);
}

/* ---- errors, each naming the member ---- */

static void
mut_schema(json_t *j)
{
  json_object_set_new(j, "schema", json_string("tenbin-probe/2"));
}
static void
mut_no_schema(json_t *j)
{
  json_object_del(j, "schema");
}
static void
mut_net_kind_type(json_t *j)
{
  json_object_set_new(json_array_get(fp(j, "net"), 3), "kind",
                      json_integer(5));
}
static void
mut_net_kind_value(json_t *j)
{
  json_object_set_new(json_array_get(fp(j, "net"), 3), "kind",
                      json_string("myrinet"));
}
static void
mut_gpu_count_string(json_t *j)
{
  json_object_set_new(fp(j, "gpu"), "count", json_string("8"));
}
static void
mut_gpu_count_range(json_t *j)
{
  json_object_set_new(fp(j, "gpu"), "count", json_integer(65));
}
static void
mut_env_path(json_t *j)
{
  json_object_set_new(fp(j, "env"), "PATH", json_string("/usr/bin"));
}
static void
mut_env_lowercase(json_t *j)
{
  json_object_set_new(fp(j, "env"), "NCCL_ib_hca", json_string("mlx5"));
}
static void
mut_env_value_type(json_t *j)
{
  json_object_set_new(fp(j, "env"), "NCCL_IB_HCA", json_integer(5));
}
static void
mut_env_too_many(json_t *j)
{
  char name[32];
  int i;

  for (i = 0; i < PROBE_DOC_MAX_ENV + 1; i++) {
    snprintf(name, sizeof(name), "NCCL_X%d", i);
    json_object_set_new(fp(j, "env"), name, json_string("1"));
  }
}
static void
mut_net_duplicate(json_t *j)
{
  json_object_set_new(json_array_get(fp(j, "net"), 2), "name",
                      json_string("mlx5_0"));
}
static void
mut_net_name_chars(json_t *j)
{
  json_object_set_new(json_array_get(fp(j, "net"), 1), "name",
                      json_string("mlx5 0"));
}
static void
mut_net_name_long(json_t *j)
{
  char s[66];

  memset(s, 'n', 65);
  s[65] = '\0';
  json_object_set_new(json_array_get(fp(j, "net"), 1), "name",
                      json_string(s));
}
static void
mut_net_too_many(json_t *j)
{
  json_t *net = fp(j, "net");
  char name[16];
  int i;

  for (i = 0; i < PROBE_DOC_MAX_NET; i++) {
    snprintf(name, sizeof(name), "roce%d", i);
    json_array_append_new(net, json_pack("{s:s,s:s,s:s}", "name", name,
                                         "kind", "roce", "state", "down"));
  }
}
static void
mut_net_entry_type(json_t *j)
{
  json_array_set_new(fp(j, "net"), 4, json_string("mlx5_3"));
}
static void
mut_net_rate_negative(json_t *j)
{
  json_object_set_new(json_array_get(fp(j, "net"), 1), "rate_gbps",
                      json_integer(-400));
}
static void
mut_os_long(json_t *j)
{
  char s[PROBE_DOC_MAX_STRING + 2];

  memset(s, 'u', PROBE_DOC_MAX_STRING + 1);
  s[PROBE_DOC_MAX_STRING + 1] = '\0';
  json_object_set_new(json_object_get(j, "fingerprint"), "os",
                      json_string(s));
}
static void
mut_host_newline(json_t *j)
{
  json_object_set_new(j, "host", json_string("node\nforged line"));
}
static void
mut_host_empty(json_t *j)
{
  json_object_set_new(j, "host", json_string(""));
}
static void
mut_time_negative(json_t *j)
{
  json_object_set_new(j, "time_ms", json_integer(-1));
}
static void
mut_rank_past_nodes(json_t *j)
{
  json_object_set_new(j, "node_rank", json_integer(1));
}
static void
mut_class(json_t *j)
{
  json_object_set_new(fp(j, "topology"), "class", json_string("ethernet"));
}
static void
mut_matrix_row(json_t *j)
{
  json_array_set_new(json_object_get(fp(j, "topology"), "matrix"), 2,
                     json_integer(18));
}
static void
mut_numa_range(json_t *j)
{
  json_array_set_new(json_object_get(fp(j, "topology"), "numa"), 5,
                     json_integer(-2));
}
static void
mut_matrix_rows(json_t *j)
{
  json_t *m = json_object_get(fp(j, "topology"), "matrix");

  while (json_array_size(m) <= PROBE_DOC_MAX_GPUS)
    json_array_append_new(m, json_string("X"));
}
static void
mut_interconnect(json_t *j)
{
  json_object_set_new(json_object_get(j, "fingerprint"), "interconnect",
                      json_string("nvlink"));
}
static void
mut_fingerprint_type(json_t *j)
{
  json_object_set_new(j, "fingerprint", json_array());
}
static void
mut_bundle_type(json_t *j)
{
  json_object_set_new(json_object_get(j, "fingerprint"), "bundle",
                      json_string("v3"));
}
static void
mut_status(json_t *j)
{
  json_object_del(json_object_get(j, "measurement"), "status");
}
static void
mut_results_too_many(json_t *j)
{
  json_t *res = json_object_get(json_object_get(j, "measurement"), "results");
  int64_t b = 1LL << 20;

  while (json_array_size(res) <= PROBE_DOC_MAX_RESULTS)
    json_array_append_new(
        res, json_pack("{s:s,s:I,s:f,s:f,s:f,s:b}", "collective",
                       "all_reduce", "bytes", (json_int_t)b++, "time_us",
                       30.0, "algbw_gbps", 1.0, "busbw_gbps", 1.0,
                       "correct", 1));
}
static void
mut_result_negative(json_t *j)
{
  json_object_set_new(result(j, 0), "time_us", json_real(-1.5));
}
static void
mut_result_bytes_big(json_t *j)
{
  json_object_set_new(result(j, 7), "bytes", json_integer((1LL << 40) + 1));
}
static void
mut_result_bytes_zero(json_t *j)
{
  json_object_set_new(result(j, 7), "bytes", json_integer(0));
}
static void
mut_result_collective(json_t *j)
{
  json_object_set_new(result(j, 4), "collective", json_string("broadcast"));
}
static void
mut_result_correct(json_t *j)
{
  json_object_set_new(result(j, 5), "correct", json_string("yes"));
}
static void
mut_result_no_busbw(json_t *j)
{
  json_object_del(result(j, 6), "busbw_gbps");
}
static void
mut_result_repeat(json_t *j)
{
  json_object_set_new(result(j, 1), "bytes", json_integer(8));
}
static void
mut_result_check(json_t *j)
{
  json_object_set_new(result(j, 1), "check", json_string("none"));
}
static void
mut_ranks(json_t *j)
{
  json_object_set_new(json_object_get(j, "measurement"), "ranks",
                      json_integer(0));
}

struct bad_case {
  const char *what;
  void (*mutate)(json_t *);
  const char *msg; /* a part of the error message */
};

static const struct bad_case bad_cases[] = {
    {"schema", mut_schema, "schema: 'tenbin-probe/2' is not"},
    {"no schema", mut_no_schema, "schema: missing"},
    {"kind type", mut_net_kind_type,
     "fingerprint.net[3].kind: must be a string"},
    {"kind value", mut_net_kind_value,
     "fingerprint.net[3].kind: 'myrinet' is not one of ib, roce, efa, tcp"},
    {"count type", mut_gpu_count_string,
     "fingerprint.gpu.count: must be an integer"},
    {"count range", mut_gpu_count_range,
     "fingerprint.gpu.count: 65 is not between 0 and 64"},
    {"env PATH", mut_env_path, "fingerprint.env: name 'PATH'"},
    {"env lowercase", mut_env_lowercase,
     "fingerprint.env: name 'NCCL_ib_hca'"},
    {"env value", mut_env_value_type,
     "fingerprint.env.NCCL_IB_HCA: must be a string"},
    {"env count", mut_env_too_many, "fingerprint.env: 132 variables, at most"},
    {"net duplicate", mut_net_duplicate,
     "fingerprint.net[2].name: 'mlx5_0' appears twice"},
    {"net name", mut_net_name_chars, "fingerprint.net[1].name: 'mlx5 0'"},
    {"net name long", mut_net_name_long, "fingerprint.net[1].name: 'nnnn"},
    {"net count", mut_net_too_many, "fingerprint.net: 73 entries, at most 64"},
    {"net entry", mut_net_entry_type, "fingerprint.net[4]: must be an object"},
    {"net rate", mut_net_rate_negative,
     "fingerprint.net[1].rate_gbps: must not be negative"},
    {"os long", mut_os_long, "fingerprint.os: longer than 1024 bytes"},
    {"host newline", mut_host_newline, "host: contains a control character"},
    {"host empty", mut_host_empty, "host: must not be empty"},
    {"time", mut_time_negative, "time_ms: -1 is not between"},
    {"rank", mut_rank_past_nodes, "node_rank: 1 is not below nodes (1)"},
    {"class", mut_class, "fingerprint.topology.class: 'ethernet' is not one"},
    {"matrix row", mut_matrix_row,
     "fingerprint.topology.matrix[2]: must be a string"},
    {"matrix rows", mut_matrix_rows,
     "fingerprint.topology.matrix: 65 rows, at most 64"},
    {"numa", mut_numa_range, "fingerprint.topology.numa[5]: must be"},
    {"interconnect", mut_interconnect,
     "fingerprint.interconnect: 'nvlink' is not one of"},
    {"fingerprint", mut_fingerprint_type, "fingerprint: must be an object"},
    {"bundle", mut_bundle_type, "fingerprint.bundle: must be an object"},
    {"status", mut_status, "measurement.status: missing"},
    {"results", mut_results_too_many,
     "measurement.results: 193 entries, at most 192"},
    {"negative", mut_result_negative,
     "measurement.results[0].time_us: must not be negative"},
    {"bytes big", mut_result_bytes_big,
     "measurement.results[7].bytes: 1099511627777 is not between 1 and "
     "1099511627776"},
    {"bytes zero", mut_result_bytes_zero,
     "measurement.results[7].bytes: 0 is not between"},
    {"collective", mut_result_collective,
     "measurement.results[4].collective: 'broadcast' is not one of"},
    {"correct", mut_result_correct,
     "measurement.results[5].correct: must be a boolean"},
    {"busbw", mut_result_no_busbw,
     "measurement.results[6].busbw_gbps: missing"},
    {"repeat", mut_result_repeat,
     "measurement.results[1]: all_reduce at 8 bytes repeats results[0]"},
    {"check", mut_result_check, "measurement.results[1].check: 'none'"},
    {"ranks", mut_ranks, "measurement.ranks: 0 is not between"},
};

static void
test_malformed_members_are_rejected_naming_the_member(void **state)
{
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
    json_t *j = ref_json();
    struct probe_doc *d = (struct probe_doc *)&d; /* must become NULL */
    struct err e;
    int rc;

    bad_cases[i].mutate(j);
    rc = parse_json(j, &d, &e);
    if (rc != ERR_INVALID || strstr(e.msg, bad_cases[i].msg) == NULL)
      fail_msg("%s: got %d '%s', want '%s'", bad_cases[i].what, rc, e.msg,
               bad_cases[i].msg);
    assert_null(d);
  }
}

/* jansson refuses what JSON cannot carry as a number: the document
 * fails as malformed before any member is looked at. */
static void
test_non_finite_number_is_malformed_json(void **state)
{
  size_t len;
  char *text = fixture_text("ref-h100.json", &len);
  char *p = strstr(text, "\"time_us\": 14.0,");
  struct probe_doc *d = NULL;
  struct err e = {0};

  (void)state;
  assert_non_null(p);
  memcpy(p, "\"time_us\": 1e999", 16);
  assert_int_equal(probe_doc_parse(text, len, &d, &e), ERR_INVALID);
  assert_contains(e.msg, "probe document: malformed JSON");
  assert_null(d);
  free(text);
}

static void
test_not_a_document_is_rejected(void **state)
{
  static const char *const texts[] = {
      "", "[]", "\"tenbin-probe/1\"", "{", "{\"schema\":\"tenbin-probe/1\"}",
      "{\"schema\":\"tenbin-probe/1\",\"schema\":\"tenbin-probe/1\"}",
      "{\"schema\":\"tenbin-probe/1\",\"host\":\"h\xff\"}",
      "{\"schema\":\"tenbin-probe/1\",\"host\":\"a\\u0000b\"}",
  };
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    struct probe_doc *d = NULL;
    struct err e = {0};

    assert_int_equal(probe_doc_parse(texts[i], strlen(texts[i]), &d, &e),
                     ERR_INVALID);
    assert_null(d);
    assert_true(e.msg[0] != '\0');
  }
}

static void
test_oversize_document_is_too_large(void **state)
{
  size_t len = PROBE_DOC_MAX_BYTES + 1;
  char *text = malloc(len);
  struct probe_doc *d = NULL;
  struct err e = {0};

  (void)state;
  assert_non_null(text);
  /* Valid JSON all the same: the size alone is refused. */
  memset(text, ' ', len);
  text[0] = '{';
  text[len - 1] = '}';
  assert_int_equal(probe_doc_parse(text, len, &d, &e), ERR_TOO_LARGE);
  assert_null(d);
  assert_contains(e.msg, "1048577 bytes");
  free(text);
}

static void
test_collective_names(void **state)
{
  (void)state;
  assert_string_equal(probe_collective_name(PROBE_ALL_REDUCE), "all_reduce");
  assert_string_equal(probe_collective_name(PROBE_ALL_GATHER), "all_gather");
  assert_string_equal(probe_collective_name(PROBE_REDUCE_SCATTER),
                      "reduce_scatter");
  assert_null(probe_collective_name(PROBE_NCOLLECTIVES));
  probe_doc_free(NULL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_fixture_flattens_to_the_documented_keys),
      cmocka_unit_test(test_reference_results_are_consistent_nccl_tests_lines),
      cmocka_unit_test(test_older_nccl_fixture_differs_in_version_and_host),
      cmocka_unit_test(test_half_bw_fixture_halves_all_reduce_from_1_mib),
      cmocka_unit_test(test_no_ib_fixture_lacks_one_ib_device),
      cmocka_unit_test(
          test_no_gpu_fixture_has_no_gpu_facts_and_a_skipped_measurement),
      cmocka_unit_test(test_unknown_members_are_ignored),
      cmocka_unit_test(test_null_and_empty_facts_are_absent_keys),
      cmocka_unit_test(test_env_variable_set_to_empty_is_a_key),
      cmocka_unit_test(
          test_net_value_omits_an_absent_rate_and_keeps_a_fraction),
      cmocka_unit_test(test_container_digest_wins_over_the_image_tag),
      cmocka_unit_test(test_limits_themselves_are_accepted),
      cmocka_unit_test(test_malformed_members_are_rejected_naming_the_member),
      cmocka_unit_test(test_non_finite_number_is_malformed_json),
      cmocka_unit_test(test_not_a_document_is_rejected),
      cmocka_unit_test(test_oversize_document_is_too_large),
      cmocka_unit_test(test_collective_names),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
