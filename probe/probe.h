/*
 * tenbin-probe: what a site's GPU node runs to fingerprint its software
 * stack and measure NCCL collectives (docs: the "tenbin-probe/1"
 * document, spec/probe_doc.h on the reading side).  One process per
 * node, one NCCL rank per local GPU.
 *
 * Everything here but main() lives in the static library `probe`, so the
 * unit test builds whole documents against fake /sys, /proc and /etc
 * trees.  Every function that reads the system takes a sysroot prefix
 * ("" in production) and the environment as envp (main passes environ;
 * the library never reads environ itself).
 *
 * Ownership follows jansson's words: functions returning json_t * give a
 * new reference (the caller decrefs); strings marked "new" are freed with
 * free().
 */
#ifndef TENBIN_PROBE_PROBE_H
#define TENBIN_PROBE_PROBE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define PROBE_SCHEMA "tenbin-probe/1"
#define PROBE_VERSION "0.1.0"

/* Limits of the document (the schema's, so tenbind never refuses it). */
#define PROBE_MAX_STR 1024   /* bytes of any string, "..." included */
#define PROBE_MAX_ENV 128    /* NCCL_* and CUDA_* variables */
#define PROBE_MAX_NET 64     /* net entries */
#define PROBE_MAX_GPUS 64    /* GPUs of one node */
#define PROBE_MAX_NODES 1024
#define PROBE_MAX_SIZES 64   /* message sizes per collective */
/* A topology cell is a short nvidia-smi word: X, NV18, PXB, NODE... */
#define PROBE_CELL_SIZE 8

/* What one run does: options and environment, resolved by main. */
struct probe_opts {
  const char *sysroot;    /* "" in production; a test tree in tests */
  const char *bundle_dir; /* --bundle, or NULL for $TENBIN_BUNDLE_DIR */
  int node_rank;          /* 0 .. nodes-1 (probe_place) */
  int nodes;              /* 1 .. PROBE_MAX_NODES */
  int measure;            /* 0 with --no-measure */
  int64_t min_bytes;      /* power of two >= 4 */
  int64_t max_bytes;      /* power of two >= min_bytes */
  int iters;              /* timed iterations per size, >= 1 */
  int warmup;             /* untimed iterations before them, >= 1 */
  int rendezvous_timeout_s;
  const char *url;   /* tenbind's probe URL base, or NULL (borrowed) */
  const char *token; /* its bearer token, or NULL (borrowed, secret) */
};

/* Defaults of the measurement options (the rest zero). */
void probe_opts_init(struct probe_opts *o);

/* ---- the document (doc.c) ---- */

/*
 * Build the whole document for o (new reference).  Never fails: what
 * cannot be read is absent or has a reason, and the measurement carries
 * its own status.
 */
json_t *probe_build(const struct probe_opts *o, char **envp);
/*
 * Node rank and node count: the options (NULL when not given), else
 * TENBIN_NODE_RANK/TENBIN_NODES, else SLURM_NODEID/SLURM_NNODES, else
 * 0 and 1.  ERR_INVALID naming the source for a non-number, nodes
 * outside 1..PROBE_MAX_NODES or a rank not below nodes.
 */
int probe_place(const char *opt_rank, const char *opt_nodes, char **envp,
                int *rank, int *nodes, struct err *e) WARN_UNUSED;
/*
 * A byte count: digits with an optional K, M or G (binary) suffix, at
 * most 64 GiB.  ERR_INVALID naming what (e.g. "--max-bytes").
 */
int probe_parse_size(const char *s, const char *what, int64_t *out,
                     struct err *e) WARN_UNUSED;
/* A new copy of s cut to at most max bytes (a cut string ends in
 * "..."), with bytes that are not UTF-8 replaced by '?'. */
char *probe_str_cap(const char *s, size_t max);
/* obj[key] = s capped to PROBE_MAX_STR; JSON null when s is NULL. */
void probe_set_str(json_t *obj, const char *key, const char *s);
/* The value of name in envp, or NULL (borrowed from envp). */
const char *probe_getenv(char **envp, const char *name);

/* The collectives measured, in document order. */
enum probe_coll {
  PROBE_COLL_ALL_REDUCE = 0,
  PROBE_COLL_ALL_GATHER,
  PROBE_COLL_REDUCE_SCATTER,
  PROBE_NCOLL
};
/* "all_reduce" ... */
const char *probe_coll_name(enum probe_coll c);
/*
 * The size nccl-tests prints for a collective moving count float32
 * elements per rank in its smaller buffer (all_reduce: the buffer;
 * all_gather: the send buffer; reduce_scatter: the receive buffer).
 */
int64_t probe_coll_bytes(enum probe_coll c, int64_t count, int nranks);
/* Bus bandwidth from algorithm bandwidth (nccl-tests PERFORMANCE.md):
 * x 2(n-1)/n for all_reduce, x (n-1)/n for the others; 0 for one rank. */
double probe_busbw(enum probe_coll c, double algbw, int nranks);
/* A measurement that did not run (new reference). */
json_t *probe_measurement_skipped(const struct probe_opts *o,
                                  const char *reason);

/* ---- the fingerprint from /sys, /proc, /etc and env (fingerprint.c) ---- */

/* Every NCCL_* and CUDA_* variable, sorted, at most PROBE_MAX_ENV, values
 * capped (new reference, an object). */
json_t *probe_fp_env(char **envp);
/* The first line of sysroot/proc/sys/kernel/osrelease (new string), or
 * NULL when unreadable. */
char *probe_fp_kernel(const char *sysroot);
/* PRETTY_NAME of sysroot/etc/os-release (or usr/lib/os-release),
 * unquoted (new string), or NULL. */
char *probe_fp_os(const char *sysroot);
/*
 * The network devices NCCL could use (new reference, an array sorted by
 * name, at most PROBE_MAX_NET): RDMA devices of /sys/class/infiniband as
 * ib, roce or efa, physical Ethernet interfaces of /sys/class/net as tcp.
 * *interconnect (static string) is the best kind among the active ones,
 * "none" when none is.
 */
json_t *probe_fp_net(const char *sysroot, const char **interconnect);
/* The container the probe runs in (new reference), or JSON null. */
json_t *probe_fp_container(const char *sysroot, char **envp);
/* The dataset bundle: dir (or $TENBIN_BUNDLE_DIR) and its VERSION (or
 * $TENBIN_BUNDLE_VERSION) (new reference), or JSON null when neither is
 * known.  dir is a real path, not under a sysroot. */
json_t *probe_fp_bundle(const char *dir, char **envp);
/* Read sysroot/path, at most max bytes (new string in *out).  The
 * codes of file_read. */
int probe_read(const char *sysroot, const char *path, size_t max,
               char **out) WARN_UNUSED;

/* ---- GPUs and their topology (gpuinfo.c) ---- */

/* An intra-node topology: nvidia-smi topo -m's GPU rows. */
struct probe_topo {
  int ngpus;
  char cell[PROBE_MAX_GPUS][PROBE_MAX_GPUS][PROBE_CELL_SIZE];
  int numa[PROBE_MAX_GPUS]; /* -1 unknown */
};

/*
 * Parse the output of `nvidia-smi topo -m` into t (pure): the GPU rows
 * only, in order GPU0.., their GPU columns and the NUMA Affinity column;
 * NIC rows and columns and the legends are skipped.  ERR_INVALID naming
 * what is wrong (no GPU header, a missing row, an unknown word).
 */
int probe_topo_parse(const char *text, struct probe_topo *t,
                     struct err *e) WARN_UNUSED;
/* "single" for one GPU, "nvlink" when a cell is NV#, else "pcie";
 * "unknown" for none. */
const char *probe_topo_class(const struct probe_topo *t);
/*
 * Parse `nvidia-smi --query-gpu=name,memory.total,driver_version
 * --format=csv,noheader` output into gpu (pure): model, count,
 * memory_mib, driver.  ERR_INVALID when a line is malformed.
 */
int probe_gpu_parse_query(const char *text, json_t *gpu,
                          struct err *e) WARN_UNUSED;
/*
 * The node's GPUs and their topology: NVML (dlopen'd) when it works,
 * else nvidia-smi found on envp's PATH, else source "none" with the
 * reason.  With a non-empty sysroot (tests) NVML is not tried, because
 * it would read the real machine.  *gpu and *topology: new references.
 */
void probe_gpu_collect(const char *sysroot, char **envp, json_t **gpu,
                       json_t **topology);

/* ---- NCCL and CUDA (measure.c, only with TENBIN_PROBE_NCCL) ---- */

/* Fill the fingerprint's cuda and nccl objects: versions, or null and
 * a reason (without NCCL built in: "built without NCCL"). */
void probe_versions(json_t *cuda, json_t *nccl);
/*
 * Measure all_reduce, all_gather and reduce_scatter over this node's
 * GPUs (and the other nodes', through tenbind's rendezvous): the
 * document's "measurement" member (new reference) with status done,
 * skipped (no GPU) or failed (the call and NCCL's or CUDA's message).
 */
json_t *probe_measure(const struct probe_opts *o);

/* ---- HTTP to tenbind (report.c) ---- */

/*
 * One request to base+path with the bearer token: method "GET", "PUT"
 * or "POST", body JSON or NULL, at most timeout_s seconds, a response
 * of at most max_resp bytes into *resp (new string, may be NULL when
 * not wanted).  *status: the HTTP status.  ERR_UNAVAILABLE when no
 * response came (connection refused, timeout), ERR_TOO_LARGE for a
 * response over max_resp, ERR_INVALID for a URL or token that cannot be
 * used.  The token is never written to a message.
 */
int probe_http(const char *method, const char *base, const char *path,
               const char *token, const char *body, long timeout_s,
               size_t max_resp, long *status, char **resp,
               struct err *e) WARN_UNUSED;
/*
 * POST the document (compact JSON text) to base/report: up to attempts
 * tries, waiting backoff_ms, then twice that..., after a connection
 * error or a 5xx; 30 s each.  0 on a 2xx; ERR_SITE naming the status,
 * ERR_UNAVAILABLE when tenbind could not be reached.
 */
int probe_report(const char *base, const char *token, const char *doc,
                 int attempts, long backoff_ms, struct err *e) WARN_UNUSED;

#endif
