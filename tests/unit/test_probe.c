/*
 * Tests for probe/: tenbin-probe's fingerprint read from fake /sys,
 * /proc and /etc trees (tests/data/probe-sysroot/: an InfiniBand DGX
 * node in podman, a RoCE node in docker, an AWS EFA node, a plain TCP
 * VM), the nvidia-smi parsers with a fake nvidia-smi, the nccl-tests
 * arithmetic, the whole document's shape without GPUs, and the report's
 * HTTP against a one-connection server in a thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe/probe.h"
#include "util/alloc.h"
#include "util/fileio.h"

#define TREE TENBIN_SOURCE_DIR "/tests/data/probe-sysroot"

static json_t *
net_of(const char *root, const char **interconnect)
{
  return probe_fp_net(root, interconnect);
}

static const char *
str_at(const json_t *arr, size_t i, const char *key)
{
  return json_string_value(json_object_get(json_array_get(arr, i), key));
}

static json_int_t
int_at(const json_t *arr, size_t i, const char *key)
{
  return json_integer_value(json_object_get(json_array_get(arr, i), key));
}

/* ---- net ---- */

static void
test_ib_node_lists_eight_active_ib_ports_and_a_down_one(void **state)
{
  const char *ic = NULL;
  json_t *net = net_of(TREE "/ib-node", &ic);

  (void)state;
  /* lo is loopback and ib0 is IPoIB (type 32): neither is listed. */
  assert_int_equal(json_array_size(net), 9);
  for (size_t i = 0; i < 8; i++) {
    char name[16];

    snprintf(name, sizeof(name), "mlx5_%zu", i);
    assert_string_equal(str_at(net, i, "name"), name);
    assert_string_equal(str_at(net, i, "kind"), "ib");
    assert_string_equal(str_at(net, i, "state"), "active");
    assert_int_equal(int_at(net, i, "rate_gbps"), 400);
  }
  assert_string_equal(str_at(net, 8, "name"), "mlx5_8");
  assert_string_equal(str_at(net, 8, "state"), "down");
  assert_int_equal(int_at(net, 8, "rate_gbps"), 10);
  assert_string_equal(ic, "ib");
  json_decref(net);
}

static void
test_roce_ports_are_ethernet_link_layer_and_beat_tcp(void **state)
{
  const char *ic = NULL;
  json_t *net = net_of(TREE "/roce", &ic);

  (void)state;
  assert_int_equal(json_array_size(net), 3);
  assert_string_equal(str_at(net, 0, "name"), "eth0");
  assert_string_equal(str_at(net, 0, "kind"), "tcp");
  assert_int_equal(int_at(net, 0, "rate_gbps"), 200);
  assert_string_equal(str_at(net, 1, "name"), "mlx5_0");
  assert_string_equal(str_at(net, 1, "kind"), "roce");
  assert_string_equal(str_at(net, 1, "state"), "active");
  assert_int_equal(int_at(net, 1, "rate_gbps"), 200);
  assert_string_equal(str_at(net, 2, "kind"), "roce");
  assert_string_equal(str_at(net, 2, "state"), "down");
  assert_string_equal(ic, "roce");
  json_decref(net);
}

static void
test_efa_is_known_by_its_name_or_its_driver_link(void **state)
{
  const char *ic = NULL;
  json_t *net = net_of(TREE "/efa", &ic);

  (void)state;
  assert_int_equal(json_array_size(net), 3);
  assert_string_equal(str_at(net, 0, "name"), "efa_0");
  assert_string_equal(str_at(net, 0, "kind"), "efa");
  assert_string_equal(str_at(net, 1, "name"), "ens5");
  assert_string_equal(str_at(net, 1, "kind"), "tcp");
  assert_int_equal(int_at(net, 1, "rate_gbps"), 100);
  assert_string_equal(str_at(net, 2, "name"), "rdmap16s27");
  assert_string_equal(str_at(net, 2, "kind"), "efa");
  assert_int_equal(int_at(net, 2, "rate_gbps"), 100);
  assert_string_equal(ic, "efa");
  json_decref(net);
}

static void
test_plain_vm_lists_physical_ethernet_only(void **state)
{
  const char *ic = NULL;
  json_t *net = net_of(TREE "/plain", &ic);

  (void)state;
  /* lo and the veth (no device entry) are left out. */
  assert_int_equal(json_array_size(net), 2);
  assert_string_equal(str_at(net, 0, "name"), "eth0");
  assert_string_equal(str_at(net, 0, "state"), "active");
  assert_int_equal(int_at(net, 0, "rate_gbps"), 25);
  assert_string_equal(str_at(net, 1, "name"), "eth1");
  assert_string_equal(str_at(net, 1, "state"), "down");
  /* speed -1: no rate at all rather than a made-up one. */
  assert_null(json_object_get(json_array_get(net, 1), "rate_gbps"));
  assert_string_equal(ic, "tcp");
  json_decref(net);
}

static void
test_a_tree_without_devices_has_no_interconnect(void **state)
{
  const char *ic = NULL;
  json_t *net = net_of(TREE "/does-not-exist", &ic);

  (void)state;
  assert_int_equal(json_array_size(net), 0);
  assert_string_equal(ic, "none");
  json_decref(net);
}

/* ---- kernel, os ---- */

static void
test_kernel_and_os_come_from_osrelease_and_os_release(void **state)
{
  char *s;

  (void)state;
  s = probe_fp_kernel(TREE "/ib-node");
  assert_string_equal(s, "5.15.0-105-generic");
  free(s);
  s = probe_fp_os(TREE "/ib-node");
  assert_string_equal(s, "Ubuntu 22.04.4 LTS");
  free(s);
  /* /usr/lib/os-release when /etc has none; single quotes too. */
  s = probe_fp_os(TREE "/roce");
  assert_string_equal(s, "Rocky Linux 9.4 (Blue Onyx)");
  free(s);
  assert_null(probe_fp_kernel(TREE "/does-not-exist"));
  assert_null(probe_fp_os(TREE "/does-not-exist"));
}

/* ---- container ---- */

static void
test_podman_containerenv_gives_image_and_digest(void **state)
{
  char *env[] = {"PATH=/bin", NULL};
  json_t *c = probe_fp_container(TREE "/ib-node", env);

  (void)state;
  assert_string_equal(json_string_value(json_object_get(c, "runtime")),
                      "podman");
  assert_string_equal(json_string_value(json_object_get(c, "image")),
                      "nvcr.io/nvidia/pytorch:24.05-py3");
  assert_string_equal(json_string_value(json_object_get(c, "image_digest")),
                      "sha256:"
                      "abababababababababababababababab"
                      "abababababababababababababababab");
  json_decref(c);
}

static void
test_docker_enroot_and_site_variables_name_the_container(void **state)
{
  char *docker_env[] = {"TENBIN_IMAGE_DIGEST=sha256:1234", NULL};
  char *enroot_env[] = {"ENROOT_ROOTFS=/tmp/x", "TENBIN_IMAGE=img:1", NULL};
  char *site_env[] = {"TENBIN_IMAGE=img:2", NULL};
  char *podman_env[] = {"TENBIN_IMAGE_DIGEST=sha256:feed", NULL};
  json_t *c;

  (void)state;
  c = probe_fp_container(TREE "/roce", docker_env);
  assert_string_equal(json_string_value(json_object_get(c, "runtime")),
                      "docker");
  assert_string_equal(json_string_value(json_object_get(c, "image_digest")),
                      "sha256:1234");
  json_decref(c);
  c = probe_fp_container(TREE "/plain", enroot_env);
  assert_string_equal(json_string_value(json_object_get(c, "runtime")),
                      "enroot");
  assert_string_equal(json_string_value(json_object_get(c, "image")),
                      "img:1");
  json_decref(c);
  c = probe_fp_container(TREE "/plain", site_env);
  assert_string_equal(json_string_value(json_object_get(c, "runtime")),
                      "unknown");
  json_decref(c);
  /* The site's statement beats the runtime's file. */
  c = probe_fp_container(TREE "/ib-node", podman_env);
  assert_string_equal(json_string_value(json_object_get(c, "image_digest")),
                      "sha256:feed");
  json_decref(c);
  c = probe_fp_container(TREE "/plain", NULL);
  assert_true(json_is_null(c));
  json_decref(c);
}

/* ---- env ---- */

static void
test_env_keeps_nccl_and_cuda_variables_sorted(void **state)
{
  char *env[] = {"PATH=/bin",         "NCCL_SOCKET_IFNAME=eth0",
                 "CUDA_VISIBLE_DEVICES=0,1", "NCCL_IB_HCA=mlx5",
                 "NCCL_IB_HCA=second", "MY_NCCL_X=1",
                 "NCCLX=1",           "CUDA_=empty-name",
                 NULL};
  json_t *o = probe_fp_env(env);
  const char *keys[] = {"CUDA_", "CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA",
                        "NCCL_SOCKET_IFNAME"};
  const char *key;
  json_t *v;
  size_t i = 0;

  (void)state;
  assert_int_equal(json_object_size(o), 4);
  json_object_foreach(o, key, v) {
    assert_string_equal(key, keys[i]);
    i++;
  }
  /* The first of a duplicate wins, as getenv would have it. */
  assert_string_equal(json_string_value(json_object_get(o, "NCCL_IB_HCA")),
                      "mlx5");
  json_decref(o);
}

static void
test_env_is_capped_in_count_and_value_size(void **state)
{
  char **env = xcalloc(200 + 2, sizeof(*env));
  char *big = xmalloc(3000);
  json_t *o;
  const char *v;

  (void)state;
  for (int i = 0; i < 200; i++) {
    env[i] = xmalloc(32);
    snprintf(env[i], 32, "NCCL_V%03d=%d", i, i);
  }
  memcpy(big, "CUDA_BIG=", 9);
  memset(big + 9, 'x', 2990);
  big[2999] = '\0';
  big[100] = '\xff'; /* not UTF-8: replaced, not refused */
  env[200] = big;
  o = probe_fp_env(env);
  assert_int_equal(json_object_size(o), PROBE_MAX_ENV);
  /* Sorted first, then cut: CUDA_BIG and the lowest NCCL names stay. */
  v = json_string_value(json_object_get(o, "CUDA_BIG"));
  assert_non_null(v);
  assert_int_equal(strlen(v), PROBE_MAX_STR);
  assert_string_equal(v + PROBE_MAX_STR - 3, "...");
  assert_int_equal(v[91], '?');
  assert_non_null(json_object_get(o, "NCCL_V000"));
  assert_null(json_object_get(o, "NCCL_V199"));
  json_decref(o);
  for (int i = 0; i <= 200; i++)
    free(env[i]);
  free(env);
}

/* ---- bundle ---- */

static void
test_bundle_version_comes_from_version_file_or_env(void **state)
{
  char *none[] = {NULL};
  char *env_dir[] = {"TENBIN_BUNDLE_DIR=" TREE "/plain/bundle", NULL};
  char *env_version[] = {"TENBIN_BUNDLE_VERSION=v9", NULL};
  json_t *b;

  (void)state;
  b = probe_fp_bundle(TREE "/plain/bundle", none);
  assert_string_equal(json_string_value(json_object_get(b, "version")),
                      "v3-abcdef");
  assert_string_equal(json_string_value(json_object_get(b, "dir")),
                      TREE "/plain/bundle");
  json_decref(b);
  b = probe_fp_bundle(NULL, env_dir);
  assert_string_equal(json_string_value(json_object_get(b, "version")),
                      "v3-abcdef");
  json_decref(b);
  b = probe_fp_bundle(NULL, env_version);
  assert_string_equal(json_string_value(json_object_get(b, "version")),
                      "v9");
  assert_null(json_object_get(b, "dir"));
  json_decref(b);
  b = probe_fp_bundle(NULL, none);
  assert_true(json_is_null(b));
  json_decref(b);
}

static void
test_bundle_version_is_capped_at_128_bytes(void **state)
{
  char dir[] = "/tmp/test_probe_bundle_XXXXXX";
  char *line = xmalloc(401);
  char *none[] = {NULL};
  char path[128];
  json_t *b;
  const char *v;

  (void)state;
  assert_non_null(mkdtemp(dir));
  memset(line, 'v', 400);
  line[400] = '\0';
  assert_int_equal(file_write_atomic(dir, "VERSION", line, 400, 0644, NULL),
                   0);
  b = probe_fp_bundle(dir, none);
  v = json_string_value(json_object_get(b, "version"));
  assert_int_equal(strlen(v), 128);
  assert_string_equal(v + 125, "...");
  json_decref(b);
  free(line);
  snprintf(path, sizeof(path), "%s/VERSION", dir);
  unlink(path);
  rmdir(dir);
}

/* ---- placement and options ---- */

static void
test_place_takes_options_then_tenbin_then_slurm(void **state)
{
  char *none[] = {NULL};
  char *slurm[] = {"SLURM_NODEID=2", "SLURM_NNODES=4", NULL};
  char *both[] = {"SLURM_NODEID=2", "SLURM_NNODES=4", "TENBIN_NODE_RANK=1",
                  "TENBIN_NODES=3", NULL};
  int rank = -1, nodes = -1;

  (void)state;
  assert_int_equal(probe_place(NULL, NULL, none, &rank, &nodes, NULL), 0);
  assert_int_equal(rank, 0);
  assert_int_equal(nodes, 1);
  assert_int_equal(probe_place(NULL, NULL, slurm, &rank, &nodes, NULL), 0);
  assert_int_equal(rank, 2);
  assert_int_equal(nodes, 4);
  assert_int_equal(probe_place(NULL, NULL, both, &rank, &nodes, NULL), 0);
  assert_int_equal(rank, 1);
  assert_int_equal(nodes, 3);
  assert_int_equal(probe_place("0", "2", both, &rank, &nodes, NULL), 0);
  assert_int_equal(rank, 0);
  assert_int_equal(nodes, 2);
}

static void
test_place_refuses_bad_ranks_and_counts(void **state)
{
  char *none[] = {NULL};
  char *slurm[] = {"SLURM_NODEID=4", "SLURM_NNODES=4", NULL};
  struct err e = {0};
  int rank, nodes;

  (void)state;
  assert_int_equal(probe_place(NULL, "0", none, &rank, &nodes, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "--nodes '0'"));
  assert_int_equal(probe_place(NULL, "1025", none, &rank, &nodes, NULL),
                   ERR_INVALID);
  assert_int_equal(probe_place("-1", "2", none, &rank, &nodes, NULL),
                   ERR_INVALID);
  assert_int_equal(probe_place("1x", "2", none, &rank, &nodes, NULL),
                   ERR_INVALID);
  assert_int_equal(probe_place("2", "2", none, &rank, &nodes, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "below"));
  assert_int_equal(probe_place(NULL, NULL, slurm, &rank, &nodes, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "SLURM_NODEID"));
}

static void
test_sizes_take_binary_suffixes_up_to_64g(void **state)
{
  int64_t v = 0;

  (void)state;
  assert_int_equal(probe_parse_size("8", "x", &v, NULL), 0);
  assert_int_equal(v, 8);
  assert_int_equal(probe_parse_size("1K", "x", &v, NULL), 0);
  assert_int_equal(v, 1024);
  assert_int_equal(probe_parse_size("8G", "x", &v, NULL), 0);
  assert_int_equal(v, 8LL << 30);
  assert_int_equal(probe_parse_size("64G", "x", &v, NULL), 0);
  assert_int_equal(probe_parse_size("65G", "x", &v, NULL), ERR_INVALID);
  assert_int_equal(probe_parse_size("1T", "x", &v, NULL), ERR_INVALID);
  assert_int_equal(probe_parse_size("-1", "x", &v, NULL), ERR_INVALID);
  assert_int_equal(probe_parse_size("", "x", &v, NULL), ERR_INVALID);
}

/* ---- nvidia-smi parsers ---- */

static char *
read_sample(const char *name)
{
  char path[512];
  char *text = NULL;

  snprintf(path, sizeof(path), "%s/%s", TREE, name);
  assert_int_equal(file_read(path, 1 << 20, &text, NULL, NULL), 0);
  return text;
}

static void
test_topo_parser_reads_a_dgx_h100(void **state)
{
  struct probe_topo *t = xmalloc(sizeof(*t));
  char *text = read_sample("topo-dgx-h100.txt");

  (void)state;
  assert_int_equal(probe_topo_parse(text, t, NULL), 0);
  assert_int_equal(t->ngpus, 8);
  for (int i = 0; i < 8; i++) {
    for (int j = 0; j < 8; j++)
      assert_string_equal(t->cell[i][j], i == j ? "X" : "NV18");
    assert_int_equal(t->numa[i], i < 4 ? 0 : 1);
  }
  assert_string_equal(probe_topo_class(t), "nvlink");
  free(text);
  free(t);
}

static void
test_topo_parser_reads_a_pcie_box(void **state)
{
  struct probe_topo *t = xmalloc(sizeof(*t));
  char *text = read_sample("topo-pcie.txt");

  (void)state;
  assert_int_equal(probe_topo_parse(text, t, NULL), 0);
  assert_int_equal(t->ngpus, 4);
  assert_string_equal(t->cell[0][1], "NODE");
  assert_string_equal(t->cell[0][2], "SYS");
  assert_string_equal(t->cell[2][3], "PIX");
  assert_string_equal(t->cell[3][3], "X");
  assert_int_equal(t->numa[1], 0);
  assert_int_equal(t->numa[2], 1);
  assert_string_equal(probe_topo_class(t), "pcie");
  free(text);
  free(t);
}

static void
test_topo_parser_takes_one_gpu_and_a_space_separated_paste(void **state)
{
  struct probe_topo *t = xmalloc(sizeof(*t));
  const char *one = "\tGPU0\tCPU Affinity\tNUMA Affinity\n"
                    "GPU0\t X \t0-15\tN/A\n\nLegend:\n";
  const char *spaces = "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
                       "GPU0     X      PHB     0-7     0\n"
                       "GPU1    PHB      X      0-7     0\n";

  (void)state;
  assert_int_equal(probe_topo_parse(one, t, NULL), 0);
  assert_int_equal(t->ngpus, 1);
  assert_int_equal(t->numa[0], -1);
  assert_string_equal(probe_topo_class(t), "single");
  assert_int_equal(probe_topo_parse(spaces, t, NULL), 0);
  assert_int_equal(t->ngpus, 2);
  assert_string_equal(t->cell[1][0], "PHB");
  assert_string_equal(probe_topo_class(t), "pcie");
  free(t);
}

static void
test_topo_parser_names_what_is_malformed(void **state)
{
  struct probe_topo *t = xmalloc(sizeof(*t));
  struct err e = {0};

  (void)state;
  assert_int_equal(probe_topo_parse("No devices were found\n", t, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "no header"));
  assert_int_equal(probe_topo_parse("\tGPU0\tGPU1\nGPU0\t X \tNV4\n\n", t,
                                    &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "1 GPU rows for 2"));
  assert_int_equal(probe_topo_parse("\tGPU0\tGPU1\nGPU1\t X \tNV4\n", t,
                                    &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "GPU0 was expected"));
  assert_int_equal(probe_topo_parse("\tGPU0\tGPU1\nGPU0\t X \tnv 4\n", t,
                                    &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "not a link word"));
  assert_int_equal(probe_topo_parse("\tGPU1\tGPU0\n", t, &e), ERR_INVALID);
  free(t);
}

static void
test_query_parser_counts_gpus_and_reads_the_first(void **state)
{
  json_t *gpu = json_object();

  (void)state;
  assert_int_equal(probe_gpu_parse_query(
                       "NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15\n"
                       "NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15\n",
                       gpu, NULL),
                   0);
  assert_int_equal(json_integer_value(json_object_get(gpu, "count")), 2);
  assert_int_equal(json_integer_value(json_object_get(gpu, "memory_mib")),
                   81559);
  assert_string_equal(json_string_value(json_object_get(gpu, "model")),
                      "NVIDIA H100 80GB HBM3");
  assert_string_equal(json_string_value(json_object_get(gpu, "driver")),
                      "550.54.15");
  assert_int_equal(probe_gpu_parse_query("", gpu, NULL), ERR_INVALID);
  assert_int_equal(probe_gpu_parse_query("NVIDIA, lots, 1\n", gpu, NULL),
                   ERR_INVALID);
  assert_int_equal(probe_gpu_parse_query("a, 1 MiB\n", gpu, NULL),
                   ERR_INVALID);
  json_decref(gpu);
}

static void
test_gpu_collect_runs_nvidia_smi_from_the_job_path(void **state)
{
  char *env[] = {"PATH=/nonexistent:" TREE "/ib-node/usr/bin", NULL};
  char *nopath[] = {"PATH=/nonexistent", NULL};
  json_t *gpu = NULL, *topo = NULL;
  json_t *matrix;

  (void)state;
  probe_gpu_collect(TREE "/ib-node", env, &gpu, &topo);
  assert_string_equal(json_string_value(json_object_get(gpu, "source")),
                      "nvidia-smi");
  assert_int_equal(json_integer_value(json_object_get(gpu, "count")), 8);
  assert_string_equal(json_string_value(json_object_get(topo, "source")),
                      "nvidia-smi");
  assert_string_equal(json_string_value(json_object_get(topo, "class")),
                      "nvlink");
  matrix = json_object_get(topo, "matrix");
  assert_int_equal(json_array_size(matrix), 8);
  assert_string_equal(json_string_value(json_array_get(matrix, 0)),
                      "X NV18 NV18 NV18 NV18 NV18 NV18 NV18");
  assert_int_equal(
      json_integer_value(json_array_get(json_object_get(topo, "numa"), 7)),
      1);
  json_decref(gpu);
  json_decref(topo);

  probe_gpu_collect(TREE "/ib-node", nopath, &gpu, &topo);
  assert_string_equal(json_string_value(json_object_get(gpu, "source")),
                      "none");
  assert_non_null(strstr(json_string_value(json_object_get(gpu, "reason")),
                         "nvidia-smi not on PATH"));
  assert_string_equal(json_string_value(json_object_get(topo, "class")),
                      "unknown");
  json_decref(gpu);
  json_decref(topo);
}

/* ---- nccl-tests arithmetic ---- */

static void
test_busbw_follows_nccl_tests(void **state)
{
  (void)state;
  assert_true(probe_busbw(PROBE_COLL_ALL_REDUCE, 100, 8) == 175);
  assert_true(probe_busbw(PROBE_COLL_ALL_GATHER, 100, 8) == 87.5);
  assert_true(probe_busbw(PROBE_COLL_REDUCE_SCATTER, 100, 4) == 75);
  assert_true(probe_busbw(PROBE_COLL_ALL_REDUCE, 100, 2) == 100);
  assert_true(probe_busbw(PROBE_COLL_ALL_REDUCE, 100, 1) == 0);
  assert_true(probe_busbw(PROBE_COLL_ALL_GATHER, 100, 1) == 0);
  /* bytes: all_reduce its buffer; the others count x ranks x 4. */
  assert_int_equal(probe_coll_bytes(PROBE_COLL_ALL_REDUCE, 256, 8), 1024);
  assert_int_equal(probe_coll_bytes(PROBE_COLL_ALL_GATHER, 32, 8), 1024);
  assert_int_equal(probe_coll_bytes(PROBE_COLL_REDUCE_SCATTER, 32, 8),
                   1024);
  assert_string_equal(probe_coll_name(PROBE_COLL_REDUCE_SCATTER),
                      "reduce_scatter");
}

/* ---- the whole document ---- */

/* Every string in v (keys too) is at most PROBE_MAX_STR bytes. */
static void
assert_strings_capped(const json_t *v)
{
  const char *key;
  json_t *x;
  size_t i;

  if (json_is_string(v))
    assert_true(json_string_length(v) <= PROBE_MAX_STR);
  if (json_is_object(v))
    json_object_foreach((json_t *)v, key, x) {
      assert_true(strlen(key) <= PROBE_MAX_STR);
      assert_strings_capped(x);
    }
  if (json_is_array(v))
    json_array_foreach(v, i, x)
      assert_strings_capped(x);
}

static void
assert_type(const json_t *obj, const char *key, json_type type)
{
  json_t *v = json_object_get(obj, key);

  if (v == NULL)
    fail_msg("member '%s' is missing", key);
  if (json_typeof(v) != type)
    fail_msg("member '%s' has type %d, not %d", key, json_typeof(v), type);
}

static void
assert_document_shape(const json_t *doc)
{
  const json_t *fp = json_object_get(doc, "fingerprint");
  const json_t *m = json_object_get(doc, "measurement");
  const char *src;

  assert_string_equal(json_string_value(json_object_get(doc, "schema")),
                      "tenbin-probe/1");
  assert_type(doc, "probe_version", JSON_STRING);
  assert_type(doc, "host", JSON_STRING);
  assert_type(doc, "time_ms", JSON_INTEGER);
  assert_type(doc, "node_rank", JSON_INTEGER);
  assert_type(doc, "nodes", JSON_INTEGER);
  assert_type(doc, "fingerprint", JSON_OBJECT);
  assert_type(doc, "measurement", JSON_OBJECT);
  assert_type(fp, "gpu", JSON_OBJECT);
  src = json_string_value(json_object_get(json_object_get(fp, "gpu"),
                                          "source"));
  assert_non_null(src);
  if (strcmp(src, "none") == 0)
    assert_type(json_object_get(fp, "gpu"), "reason", JSON_STRING);
  assert_type(fp, "cuda", JSON_OBJECT);
  assert_type(fp, "nccl", JSON_OBJECT);
  assert_type(fp, "env", JSON_OBJECT);
  assert_type(fp, "topology", JSON_OBJECT);
  assert_type(json_object_get(fp, "topology"), "class", JSON_STRING);
  assert_type(fp, "net", JSON_ARRAY);
  assert_type(fp, "interconnect", JSON_STRING);
  assert_type(m, "status", JSON_STRING);
  assert_type(m, "results", JSON_ARRAY);
  assert_type(m, "dtype", JSON_STRING);
  if (strcmp(json_string_value(json_object_get(m, "status")), "done") != 0)
    assert_type(m, "reason", JSON_STRING);
  assert_strings_capped(doc);
}

static void
test_document_without_gpus_has_the_schema_shape(void **state)
{
  char *env[] = {"PATH=/nonexistent", "NCCL_DEBUG=WARN",
                 "TENBIN_BUNDLE_VERSION=v1", NULL};
  struct probe_opts o;
  json_t *doc, *fp, *m;

  (void)state;
  probe_opts_init(&o);
  o.sysroot = TREE "/ib-node";
  o.measure = 0;
  doc = probe_build(&o, env);
  assert_document_shape(doc);
  fp = json_object_get(doc, "fingerprint");
  m = json_object_get(doc, "measurement");
  assert_string_equal(json_string_value(json_object_get(fp, "kernel")),
                      "5.15.0-105-generic");
  assert_string_equal(json_string_value(json_object_get(fp, "interconnect")),
                      "ib");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(fp, "env"),
                                        "NCCL_DEBUG")),
      "WARN");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(fp, "container"),
                                        "runtime")),
      "podman");
  assert_string_equal(json_string_value(json_object_get(m, "status")),
                      "skipped");
  assert_string_equal(json_string_value(json_object_get(m, "reason")),
                      "skipped by --no-measure");
  json_decref(doc);
}

static void
test_measurement_without_a_gpu_is_skipped_with_a_reason(void **state)
{
  char *env[] = {"PATH=/nonexistent", NULL};
  struct probe_opts o;
  json_t *doc, *m;
  const char *status, *reason;

  (void)state;
  probe_opts_init(&o);
  o.sysroot = TREE "/plain";
  o.min_bytes = 8;
  o.max_bytes = 1024;
  o.iters = 1;
  o.warmup = 1;
  doc = probe_build(&o, env);
  assert_document_shape(doc);
  m = json_object_get(doc, "measurement");
  status = json_string_value(json_object_get(m, "status"));
  reason = json_string_value(json_object_get(m, "reason"));
  /* On a machine with a GPU this measures for real; without one (the
   * test machines) it must say why it did not. */
  if (strcmp(status, "skipped") == 0)
    assert_true(strstr(reason, "no GPU visible") != NULL ||
                strstr(reason, "built without NCCL") != NULL);
  else
    assert_true(strcmp(status, "done") == 0 || strcmp(status, "failed") == 0);
  json_decref(doc);
}

/* ---- report ---- */

struct fake_tenbind {
  int fd;
  int port;
  int statuses[4]; /* what to answer, one per connection */
  int nstatuses;
  char request[8192]; /* the last request */
};

static void *
fake_tenbind_run(void *arg)
{
  struct fake_tenbind *f = arg;

  for (int i = 0; i < f->nstatuses; i++) {
    int c = accept(f->fd, NULL, NULL);
    size_t len = 0;
    char reply[128];

    if (c < 0)
      break;
    /* Headers, then as many body bytes as Content-Length says. */
    for (;;) {
      ssize_t k = read(c, f->request + len, sizeof(f->request) - 1 - len);
      char *end, *cl;

      if (k <= 0)
        break;
      len += (size_t)k;
      f->request[len] = '\0';
      end = strstr(f->request, "\r\n\r\n");
      cl = strstr(f->request, "Content-Length: ");
      if (end != NULL &&
          (cl == NULL ||
           len - (size_t)(end + 4 - f->request) >=
               (size_t)strtol(cl + 16, NULL, 10)))
        break;
    }
    snprintf(reply, sizeof(reply),
             "HTTP/1.1 %d X\r\nContent-Length: 0\r\nConnection: close\r\n"
             "\r\n",
             f->statuses[i]);
    (void)write(c, reply, strlen(reply));
    close(c);
  }
  return NULL;
}

static void
fake_tenbind_start(struct fake_tenbind *f, pthread_t *th)
{
  struct sockaddr_in a = {0};
  socklen_t alen = sizeof(a);

  f->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(f->fd >= 0);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(f->fd, 4), 0);
  assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &alen), 0);
  f->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(th, NULL, fake_tenbind_run, f), 0);
}

static void
test_report_posts_with_the_token_and_retries_a_5xx(void **state)
{
  struct fake_tenbind *f = xcalloc(1, sizeof(*f));
  pthread_t th;
  char url[64];
  struct err e = {0};

  (void)state;
  f->statuses[0] = 503;
  f->statuses[1] = 204;
  f->nstatuses = 2;
  fake_tenbind_start(f, &th);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/probe/r1/", f->port);
  assert_int_equal(probe_report(url, "s3cret", "{\"a\":1}", 3, 1, &e), 0);
  pthread_join(th, NULL);
  close(f->fd);
  assert_non_null(strstr(f->request, "POST /v1/probe/r1/report HTTP/1.1"));
  assert_non_null(strstr(f->request, "Authorization: Bearer s3cret"));
  assert_non_null(strstr(f->request, "{\"a\":1}"));
  free(f);
}

static void
test_report_gives_up_on_a_4xx_without_retrying(void **state)
{
  struct fake_tenbind *f = xcalloc(1, sizeof(*f));
  pthread_t th;
  char url[64];
  struct err e = {0};

  (void)state;
  f->statuses[0] = 401;
  f->nstatuses = 1;
  fake_tenbind_start(f, &th);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", f->port);
  assert_int_equal(probe_report(url, "wrong", "{}", 5, 1, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "401"));
  assert_null(strstr(e.msg, "wrong"));
  pthread_join(th, NULL);
  close(f->fd);
  free(f);
}

static void
test_report_refuses_bad_urls_and_tokens_and_counts_tries(void **state)
{
  struct err e = {0};
  long status;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t alen = sizeof(a);
  char url[64];

  (void)state;
  assert_int_equal(probe_http("GET", "file:///etc", "/x", NULL, NULL, 1, 10,
                              &status, NULL, &e),
                   ERR_INVALID);
  assert_int_equal(probe_http("GET", "http://127.0.0.1:1", "/x",
                              "a\r\nX-Evil: 1", NULL, 1, 10, &status, NULL,
                              &e),
                   ERR_INVALID);
  assert_null(strstr(e.msg, "Evil"));
  /* A port bound but not listening refuses connections. */
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
  assert_int_equal(probe_report(url, "t", "{}", 2, 1, &e), ERR_UNAVAILABLE);
  assert_non_null(strstr(e.msg, "after 2 tries"));
  close(fd);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ib_node_lists_eight_active_ib_ports_and_a_down_one),
      cmocka_unit_test(test_roce_ports_are_ethernet_link_layer_and_beat_tcp),
      cmocka_unit_test(test_efa_is_known_by_its_name_or_its_driver_link),
      cmocka_unit_test(test_plain_vm_lists_physical_ethernet_only),
      cmocka_unit_test(test_a_tree_without_devices_has_no_interconnect),
      cmocka_unit_test(test_kernel_and_os_come_from_osrelease_and_os_release),
      cmocka_unit_test(test_podman_containerenv_gives_image_and_digest),
      cmocka_unit_test(
          test_docker_enroot_and_site_variables_name_the_container),
      cmocka_unit_test(test_env_keeps_nccl_and_cuda_variables_sorted),
      cmocka_unit_test(test_env_is_capped_in_count_and_value_size),
      cmocka_unit_test(test_bundle_version_comes_from_version_file_or_env),
      cmocka_unit_test(test_bundle_version_is_capped_at_128_bytes),
      cmocka_unit_test(test_place_takes_options_then_tenbin_then_slurm),
      cmocka_unit_test(test_place_refuses_bad_ranks_and_counts),
      cmocka_unit_test(test_sizes_take_binary_suffixes_up_to_64g),
      cmocka_unit_test(test_topo_parser_reads_a_dgx_h100),
      cmocka_unit_test(test_topo_parser_reads_a_pcie_box),
      cmocka_unit_test(
          test_topo_parser_takes_one_gpu_and_a_space_separated_paste),
      cmocka_unit_test(test_topo_parser_names_what_is_malformed),
      cmocka_unit_test(test_query_parser_counts_gpus_and_reads_the_first),
      cmocka_unit_test(test_gpu_collect_runs_nvidia_smi_from_the_job_path),
      cmocka_unit_test(test_busbw_follows_nccl_tests),
      cmocka_unit_test(test_document_without_gpus_has_the_schema_shape),
      cmocka_unit_test(test_measurement_without_a_gpu_is_skipped_with_a_reason),
      cmocka_unit_test(test_report_posts_with_the_token_and_retries_a_5xx),
      cmocka_unit_test(test_report_gives_up_on_a_4xx_without_retrying),
      cmocka_unit_test(
          test_report_refuses_bad_urls_and_tokens_and_counts_tries),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
