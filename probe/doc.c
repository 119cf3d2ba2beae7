/*
 * The probe's document, "tenbin-probe/1": options, placement of this
 * node, the pieces of the fingerprint put together, the measurement (or
 * why there is none), and the nccl-tests arithmetic of bytes and bus
 * bandwidth.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe/probe.h"
#include "util/alloc.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#define DEFAULT_MIN_BYTES 8
#define DEFAULT_MAX_BYTES (8LL << 30)
/* Past this a node's GPUs could not hold the buffers anyway. */
#define MAX_SIZE (64LL << 30)

void
probe_opts_init(struct probe_opts *o)
{
  memset(o, 0, sizeof(*o));
  o->sysroot = "";
  o->nodes = 1;
  o->measure = 1;
  o->min_bytes = DEFAULT_MIN_BYTES;
  o->max_bytes = DEFAULT_MAX_BYTES;
  o->iters = 20;
  o->warmup = 5;
  o->rendezvous_timeout_s = 300;
}

char *
probe_str_cap(const char *s, size_t max)
{
  size_t len = strlen(s);
  char *out;

  if (len <= max) {
    out = xstrdup(s);
  } else {
    size_t keep = max >= 3 ? max - 3 : 0;

    out = xmalloc(keep + 4);
    memcpy(out, s, keep);
    /* utf8_repair below turns a character cut here into '?'. */
    memcpy(out + keep, "...", 3);
    out[keep + 3] = '\0';
    if (max < 3)
      out[max] = '\0';
  }
  utf8_repair(out);
  return out;
}

void
probe_set_str(json_t *obj, const char *key, const char *s)
{
  char *v;

  if (s == NULL) {
    json_object_set_new(obj, key, json_null());
    return;
  }
  v = probe_str_cap(s, PROBE_MAX_STR);
  json_object_set_new(obj, key, json_string(v));
  free(v);
}

/* A decimal int in [min, max] into *out; -1 otherwise. */
static int
parse_int(const char *s, long min, long max, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
    return -1;
  *out = (int)v;
  return 0;
}

int
probe_place(const char *opt_rank, const char *opt_nodes, char **envp,
            int *rank, int *nodes, struct err *e)
{
  const char *rank_src = "--node-rank", *nodes_src = "--nodes";
  const char *r = opt_rank, *n = opt_nodes;

  if (r == NULL && (r = probe_getenv(envp, "TENBIN_NODE_RANK")) != NULL)
    rank_src = "TENBIN_NODE_RANK";
  else if (r == NULL && (r = probe_getenv(envp, "SLURM_NODEID")) != NULL)
    rank_src = "SLURM_NODEID";
  if (n == NULL && (n = probe_getenv(envp, "TENBIN_NODES")) != NULL)
    nodes_src = "TENBIN_NODES";
  else if (n == NULL && (n = probe_getenv(envp, "SLURM_NNODES")) != NULL)
    nodes_src = "SLURM_NNODES";
  *nodes = 1;
  *rank = 0;
  if (n != NULL && parse_int(n, 1, PROBE_MAX_NODES, nodes) < 0)
    return err_set(e, ERR_INVALID, "%s '%.32s': must be a number of nodes "
                   "from 1 to %d", nodes_src, n, PROBE_MAX_NODES);
  if (r != NULL && parse_int(r, 0, PROBE_MAX_NODES - 1, rank) < 0)
    return err_set(e, ERR_INVALID, "%s '%.32s': must be a node rank from "
                   "0", rank_src, r);
  if (*rank >= *nodes)
    return err_set(e, ERR_INVALID, "%s %d: must be below the number of "
                   "nodes (%s %d)", rank_src, *rank, nodes_src, *nodes);
  return 0;
}

int
probe_parse_size(const char *s, const char *what, int64_t *out,
                 struct err *e)
{
  char *end;
  long long v;
  int shift = 0;

  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno == 0 && end != s && v >= 0) {
    if (*end == 'K' || *end == 'k')
      shift = 10;
    else if (*end == 'M' || *end == 'm')
      shift = 20;
    else if (*end == 'G' || *end == 'g')
      shift = 30;
    if (shift != 0)
      end++;
    if (*end == '\0' && v <= (MAX_SIZE >> shift)) {
      *out = (int64_t)v << shift;
      return 0;
    }
  }
  return err_set(e, ERR_INVALID, "%s '%.32s': must be a byte count (K, M "
                 "or G may follow) of at most 64G", what, s);
}

const char *
probe_coll_name(enum probe_coll c)
{
  switch (c) {
  case PROBE_COLL_ALL_REDUCE:
    return "all_reduce";
  case PROBE_COLL_ALL_GATHER:
    return "all_gather";
  case PROBE_COLL_REDUCE_SCATTER:
    return "reduce_scatter";
  case PROBE_NCOLL:
    break;
  }
  return "unknown";
}

int64_t
probe_coll_bytes(enum probe_coll c, int64_t count, int nranks)
{
  /* nccl-tests prints all_reduce's buffer, and the big side of the
   * gather and the scatter: count x ranks x 4. */
  if (c == PROBE_COLL_ALL_REDUCE)
    return count * 4;
  return count * nranks * 4;
}

double
probe_busbw(enum probe_coll c, double algbw, int nranks)
{
  double n = nranks;

  if (nranks <= 1)
    return 0;
  if (c == PROBE_COLL_ALL_REDUCE)
    return algbw * 2 * (n - 1) / n;
  return algbw * (n - 1) / n;
}

json_t *
probe_measurement_skipped(const struct probe_opts *o, const char *reason)
{
  json_t *m = json_object();

  json_object_set_new(m, "status", json_string("skipped"));
  probe_set_str(m, "reason", reason);
  json_object_set_new(m, "nodes", json_integer(o->nodes));
  json_object_set_new(m, "dtype", json_string("float32"));
  json_object_set_new(m, "iters", json_integer(o->iters));
  json_object_set_new(m, "warmup", json_integer(o->warmup));
  json_object_set_new(m, "results", json_array());
  return m;
}

static void
set_owned_str(json_t *obj, const char *key, char *s)
{
  if (s != NULL)
    probe_set_str(obj, key, s);
  free(s);
}

static json_t *
fingerprint(const struct probe_opts *o, char **envp)
{
  json_t *fp = json_object();
  json_t *gpu = NULL, *topo = NULL;
  json_t *cuda = json_object(), *nccl = json_object();
  const char *interconnect = "none";
  json_t *net;

  probe_gpu_collect(o->sysroot, envp, &gpu, &topo);
  json_object_set_new(fp, "gpu", gpu);
  probe_versions(cuda, nccl);
  json_object_set_new(fp, "cuda", cuda);
  json_object_set_new(fp, "nccl", nccl);
  json_object_set_new(fp, "env", probe_fp_env(envp));
  json_object_set_new(fp, "topology", topo);
  net = probe_fp_net(o->sysroot, &interconnect);
  json_object_set_new(fp, "net", net);
  json_object_set_new(fp, "interconnect", json_string(interconnect));
  set_owned_str(fp, "kernel", probe_fp_kernel(o->sysroot));
  set_owned_str(fp, "os", probe_fp_os(o->sysroot));
  json_object_set_new(fp, "container",
                      probe_fp_container(o->sysroot, envp));
  json_object_set_new(fp, "bundle", probe_fp_bundle(o->bundle_dir, envp));
  return fp;
}

#ifndef TENBIN_PROBE_NCCL
void
probe_versions(json_t *cuda, json_t *nccl)
{
  json_object_set_new(cuda, "runtime", json_null());
  json_object_set_new(cuda, "driver", json_null());
  json_object_set_new(cuda, "reason",
                      json_string("built without the CUDA runtime"));
  json_object_set_new(nccl, "version", json_null());
  json_object_set_new(nccl, "reason", json_string("built without NCCL"));
}
#endif

json_t *
probe_build(const struct probe_opts *o, char **envp)
{
  json_t *doc = json_object();
  char host[256];

  json_object_set_new(doc, "schema", json_string(PROBE_SCHEMA));
  json_object_set_new(doc, "probe_version", json_string(PROBE_VERSION));
  if (gethostname(host, sizeof(host)) == 0) {
    host[sizeof(host) - 1] = '\0';
    probe_set_str(doc, "host", host);
  } else {
    probe_set_str(doc, "host", "unknown");
  }
  json_object_set_new(doc, "time_ms", json_integer(time_now_ms()));
  json_object_set_new(doc, "node_rank", json_integer(o->node_rank));
  json_object_set_new(doc, "nodes", json_integer(o->nodes));
  json_object_set_new(doc, "fingerprint", fingerprint(o, envp));
  if (!o->measure)
    json_object_set_new(doc, "measurement",
                        probe_measurement_skipped(o, "skipped by "
                                                     "--no-measure"));
  else
#ifdef TENBIN_PROBE_NCCL
    json_object_set_new(doc, "measurement", probe_measure(o));
#else
    json_object_set_new(doc, "measurement",
                        probe_measurement_skipped(
                            o, "tenbin-probe was built without NCCL"));
#endif
  return doc;
}
