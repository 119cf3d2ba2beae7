/*
 * The NCCL measurement: all_reduce, all_gather and reduce_scatter of
 * float32, out of place, over every GPU of every node of the run, at
 * message sizes from --min-bytes to --max-bytes in powers of two, timed
 * as nccl-tests times them and checked for correct sums.
 *
 * One process per node drives all its GPUs: one communicator per GPU,
 * created in one NCCL group, and every collective launched for all of
 * them inside one group.  Node 0 makes the NCCL id and hands it to the
 * other nodes through tenbind (PUT/GET {url}/nccl-id).
 *
 * Buffers are filled without kernels (the probe is built without nvcc):
 * one host chunk of the pattern is copied up, then doubled on the device
 * until the buffer is full.  Element i of global rank r is
 * ((r + i) % 8) + 1, so every expected sum is a small integer that float
 * holds exactly, whatever order NCCL adds in.
 *
 * Any CUDA or NCCL error ends the measurement as "failed" with the call
 * and the library's message; communicators and memory are always
 * released.  This file is only compiled when NCCL and the CUDA runtime
 * were found (TENBIN_PROBE_NCCL).
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

/* The host staging buffer, and the windows a sampled check reads. */
#define STAGE_BYTES (8LL << 20)
#define STAGE_ELEMS (STAGE_BYTES / 4)
#define FULL_CHECK_MAX (64LL << 20)
#define SAMPLE_WINDOWS 16
#define SAMPLE_WINDOW_ELEMS ((1LL << 20) / 4)
/* Free GPU memory kept aside for NCCL and the driver. */
#define SPARE_BYTES (1LL << 30)
/* A collective that has not finished after this long never will: a peer
 * died or the network is gone. */
#define WAIT_TIMEOUT_NS (900LL * 1000000000)
#define RENDEZVOUS_POLL_MS 200
#define RENDEZVOUS_RESP_MAX 4096

struct run {
  const struct probe_opts *o;
  int ngpus;  /* local GPUs = local ranks */
  int nranks; /* nodes x ngpus */
  int rank0;  /* global rank of local GPU 0 */
  ncclComm_t comm[PROBE_MAX_GPUS];
  cudaStream_t stream[PROBE_MAX_GPUS];
  float *send[PROBE_MAX_GPUS];
  float *recv[PROBE_MAX_GPUS];
  float *stage;          /* STAGE_BYTES of host memory */
  double sumtab[8];      /* sum over ranks q of ((q + m) % 8) + 1 */
  char why[512];         /* the first error, for the document */
};

static int
cuda_ok(struct run *r, cudaError_t ce, const char *call)
{
  if (ce == cudaSuccess)
    return 0;
  if (r->why[0] == '\0')
    snprintf(r->why, sizeof(r->why), "%s: %s", call,
             cudaGetErrorString(ce));
  return -1;
}

static int
nccl_ok(struct run *r, ncclResult_t nr, const char *call)
{
  if (nr == ncclSuccess)
    return 0;
  if (r->why[0] == '\0')
    snprintf(r->why, sizeof(r->why), "%s: %s", call, ncclGetErrorString(nr));
  return -1;
}

/* ---- versions ---- */

void
probe_versions(json_t *cuda, json_t *nccl)
{
  char s[32], reason[256] = "";
  int v = 0;
  cudaError_t ce;
  ncclResult_t nr;

  ce = cudaRuntimeGetVersion(&v);
  if (ce == cudaSuccess) {
    snprintf(s, sizeof(s), "%d.%d", v / 1000, (v % 1000) / 10);
    json_object_set_new(cuda, "runtime", json_string(s));
  } else {
    json_object_set_new(cuda, "runtime", json_null());
    snprintf(reason, sizeof(reason), "cudaRuntimeGetVersion: %s",
             cudaGetErrorString(ce));
  }
  v = 0;
  ce = cudaDriverGetVersion(&v);
  if (ce == cudaSuccess && v > 0) {
    snprintf(s, sizeof(s), "%d.%d", v / 1000, (v % 1000) / 10);
    json_object_set_new(cuda, "driver", json_string(s));
  } else {
    size_t k = strlen(reason);

    json_object_set_new(cuda, "driver", json_null());
    /* Without libcuda the call succeeds and gives 0 (its documented
     * answer for "no driver installed"). */
    snprintf(reason + k, sizeof(reason) - k, "%scudaDriverGetVersion: %s",
             k ? "; " : "",
             ce == cudaSuccess ? "no CUDA driver installed"
                               : cudaGetErrorString(ce));
  }
  if (reason[0] != '\0')
    probe_set_str(cuda, "reason", reason);

  v = 0;
  nr = ncclGetVersion(&v);
  if (nr == ncclSuccess && v > 0) {
    /* NCCL 2.9 changed the code from major*1000 + minor*100 + patch to
     * major*10000 + minor*100 + patch. */
    if (v >= 10000)
      snprintf(s, sizeof(s), "%d.%d.%d", v / 10000, (v % 10000) / 100,
               v % 100);
    else
      snprintf(s, sizeof(s), "%d.%d.%d", v / 1000, (v % 1000) / 100,
               v % 100);
    json_object_set_new(nccl, "version", json_string(s));
  } else {
    json_object_set_new(nccl, "version", json_null());
    snprintf(reason, sizeof(reason), "ncclGetVersion: %s",
             ncclGetErrorString(nr));
    probe_set_str(nccl, "reason", reason);
  }
}

/* ---- rendezvous ---- */

static int
put_id(struct run *r, const ncclUniqueId *id)
{
  const unsigned char *p = (const unsigned char *)id;
  char hex[2 * sizeof(*id) + 1];
  json_t *body = json_object();
  char *text;
  int64_t deadline =
      time_mono_ns() + (int64_t)r->o->rendezvous_timeout_s * 1000000000;
  struct err e = {0};
  long status = 0;
  int rc = -1;

  for (size_t i = 0; i < sizeof(*id); i++)
    snprintf(hex + 2 * i, 3, "%02x", p[i]);
  json_object_set_new(body, "id", json_string(hex));
  json_object_set_new(body, "gpus_per_node", json_integer(r->ngpus));
  text = jsonx_dump(body);
  json_decref(body);
  for (;;) {
    int hrc = probe_http("PUT", r->o->url, "/nccl-id", r->o->token, text,
                         10, RENDEZVOUS_RESP_MAX, &status, NULL, &e);

    if (hrc == 0 && status >= 200 && status < 300) {
      rc = 0;
      break;
    }
    if (hrc == 0 && status < 500) {
      snprintf(r->why, sizeof(r->why), "rendezvous: PUT /nccl-id: tenbind "
               "answered %ld", status);
      break;
    }
    if (hrc < 0 && hrc != ERR_UNAVAILABLE) {
      snprintf(r->why, sizeof(r->why), "rendezvous: %s", err_msg(&e));
      break;
    }
    if (time_mono_ns() > deadline) {
      snprintf(r->why, sizeof(r->why), "rendezvous: could not PUT the NCCL "
               "id within %d s (%s)", r->o->rendezvous_timeout_s,
               hrc < 0 ? err_msg(&e) : "tenbind answered 5xx");
      break;
    }
    time_sleep_ms(RENDEZVOUS_POLL_MS);
  }
  free(text);
  return rc;
}

static int
hexval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Node 0's answer into id; -1 with r->why for anything malformed. */
static int
parse_id(struct run *r, const char *text, ncclUniqueId *id)
{
  static const struct jsonx_field fields[] = {
      {"id", JX_STRING}, {"gpus_per_node", JX_INT}, {NULL, 0}};
  unsigned char *p = (unsigned char *)id;
  json_t *obj = NULL;
  struct err e = {0};
  const char *hex;
  int64_t gpus = 0;
  int rc = -1;

  if (jsonx_parse_object(text, strlen(text), &obj, &e) < 0 ||
      jsonx_check(obj, fields, "", &e) < 0 ||
      jsonx_int(obj, "gpus_per_node", 1, PROBE_MAX_GPUS, 0, &gpus, "",
                &e) < 0) {
    snprintf(r->why, sizeof(r->why), "rendezvous: GET /nccl-id: %s",
             err_msg(&e));
    goto out;
  }
  hex = jsonx_str(obj, "id");
  if (hex == NULL || strlen(hex) != 2 * sizeof(*id)) {
    snprintf(r->why, sizeof(r->why), "rendezvous: GET /nccl-id: 'id' is "
             "not %zu hex digits", 2 * sizeof(*id));
    goto out;
  }
  for (size_t i = 0; i < sizeof(*id); i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

    if (hi < 0 || lo < 0) {
      snprintf(r->why, sizeof(r->why), "rendezvous: GET /nccl-id: 'id' "
               "is not lowercase hex");
      goto out;
    }
    p[i] = (unsigned char)(hi << 4 | lo);
  }
  if (gpus != r->ngpus) {
    snprintf(r->why, sizeof(r->why), "node 0 has %lld GPUs and node %d "
             "has %d: every node of a run must have the same count",
             (long long)gpus, r->o->node_rank, r->ngpus);
    goto out;
  }
  rc = 0;
out:
  json_decref(obj);
  return rc;
}

static int
get_id(struct run *r, ncclUniqueId *id)
{
  int64_t deadline =
      time_mono_ns() + (int64_t)r->o->rendezvous_timeout_s * 1000000000;
  struct err e = {0};

  for (;;) {
    char *text = NULL;
    long status = 0;
    int hrc = probe_http("GET", r->o->url, "/nccl-id", r->o->token, NULL,
                         10, RENDEZVOUS_RESP_MAX, &status, &text, &e);

    if (hrc == 0 && status == 200) {
      int rc = parse_id(r, text, id);

      free(text);
      return rc;
    }
    free(text);
    /* 404: node 0 has not put it yet; no answer: tenbind restarting. */
    if (hrc == 0 && status != 404 && status < 500) {
      snprintf(r->why, sizeof(r->why), "rendezvous: GET /nccl-id: "
               "tenbind answered %ld", status);
      return -1;
    }
    if (hrc < 0 && hrc != ERR_UNAVAILABLE) {
      snprintf(r->why, sizeof(r->why), "rendezvous: %s", err_msg(&e));
      return -1;
    }
    if (time_mono_ns() > deadline) {
      snprintf(r->why, sizeof(r->why), "rendezvous: no NCCL id from node 0 "
               "within %d s", r->o->rendezvous_timeout_s);
      return -1;
    }
    time_sleep_ms(RENDEZVOUS_POLL_MS);
  }
}

static int
unique_id(struct run *r, ncclUniqueId *id)
{
  if (r->o->nodes > 1 && r->o->url == NULL) {
    snprintf(r->why, sizeof(r->why), "a run of %d nodes needs "
             "TENBIN_PROBE_URL for the NCCL rendezvous", r->o->nodes);
    return -1;
  }
  if (r->o->node_rank > 0)
    return get_id(r, id);
  if (nccl_ok(r, ncclGetUniqueId(id), "ncclGetUniqueId") < 0)
    return -1;
  return r->o->nodes > 1 ? put_id(r, id) : 0;
}

/* ---- communicators and waiting ---- */

static int
init_comms(struct run *r, const ncclUniqueId *id)
{
  ncclResult_t nr;
  int rc = 0;

  for (int i = 0; i < r->ngpus; i++) {
    if (cuda_ok(r, cudaSetDevice(i), "cudaSetDevice") < 0 ||
        cuda_ok(r, cudaStreamCreateWithFlags(&r->stream[i],
                                             cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags") < 0)
      return -1;
  }
  /* One process, several ranks: their inits must be in one group, or
   * the first would wait for the others forever. */
  nr = ncclGroupStart();
  if (nccl_ok(r, nr, "ncclGroupStart") < 0)
    return -1;
  for (int i = 0; i < r->ngpus && rc == 0; i++) {
    if (cuda_ok(r, cudaSetDevice(i), "cudaSetDevice") < 0 ||
        nccl_ok(r, ncclCommInitRank(&r->comm[i], r->nranks, *id,
                                    r->rank0 + i),
                "ncclCommInitRank") < 0)
      rc = -1;
  }
  nr = ncclGroupEnd();
  if (nccl_ok(r, nr, "ncclGroupEnd (ncclCommInitRank)") < 0)
    rc = -1;
  return rc;
}

/*
 * Wait until every local stream is idle.  A collective whose peer died
 * never ends, so NCCL's asynchronous error is polled alongside, under a
 * deadline.
 */
static int
wait_all(struct run *r)
{
  int64_t deadline = time_mono_ns() + WAIT_TIMEOUT_NS;

  for (int i = 0; i < r->ngpus; i++) {
    for (;;) {
      cudaError_t ce = cudaStreamQuery(r->stream[i]);

      if (ce == cudaSuccess)
        break;
      if (ce != cudaErrorNotReady)
        return cuda_ok(r, ce, "cudaStreamQuery");
      for (int j = 0; j < r->ngpus; j++) {
        ncclResult_t ae = ncclSuccess;

        if (nccl_ok(r, ncclCommGetAsyncError(r->comm[j], &ae),
                    "ncclCommGetAsyncError") < 0 ||
            nccl_ok(r, ae, "NCCL (asynchronous error)") < 0)
          return -1;
      }
      if (time_mono_ns() > deadline) {
        snprintf(r->why, sizeof(r->why), "a collective did not finish "
                 "within %lld s", WAIT_TIMEOUT_NS / 1000000000);
        return -1;
      }
    }
  }
  return 0;
}

/* The smallest free memory of any GPU of the run, agreed through an
 * all_reduce(min): every node must skip the same sizes, or the ones
 * that did not would wait for the others forever. */
static int
agree_free(struct run *r, int64_t *min_free)
{
  uint64_t *dev[PROBE_MAX_GPUS] = {0};
  uint64_t mine;
  int rc = -1;

  for (int i = 0; i < r->ngpus; i++) {
    size_t free_b = 0, total_b = 0;

    mine = 0;
    if (cuda_ok(r, cudaSetDevice(i), "cudaSetDevice") < 0 ||
        cuda_ok(r, cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo") < 0 ||
        cuda_ok(r, cudaMalloc((void **)&dev[i], sizeof(uint64_t)),
                "cudaMalloc") < 0)
      goto out;
    mine = free_b;
    if (cuda_ok(r, cudaMemcpy(dev[i], &mine, sizeof(mine),
                              cudaMemcpyHostToDevice), "cudaMemcpy") < 0)
      goto out;
  }
  if (nccl_ok(r, ncclGroupStart(), "ncclGroupStart") < 0)
    goto out;
  for (int i = 0; i < r->ngpus; i++)
    if (nccl_ok(r, ncclAllReduce(dev[i], dev[i], 1, ncclUint64, ncclMin,
                                 r->comm[i], r->stream[i]),
                "ncclAllReduce (free memory)") < 0)
      break;
  if (nccl_ok(r, ncclGroupEnd(), "ncclGroupEnd") < 0 || r->why[0] != '\0')
    goto out;
  if (wait_all(r) < 0 ||
      cuda_ok(r, cudaMemcpy(&mine, dev[0], sizeof(mine),
                            cudaMemcpyDeviceToHost), "cudaMemcpy") < 0)
    goto out;
  *min_free = (int64_t)mine;
  rc = 0;
out:
  for (int i = 0; i < r->ngpus; i++)
    if (dev[i] != NULL) {
      (void)cudaSetDevice(i);
      (void)cudaFree(dev[i]);
    }
  return rc;
}

/* ---- one size ---- */

/* Fill the n-element send buffer of local GPU i with its rank's
 * pattern: one host chunk, then device-to-device doubling. */
static int
fill(struct run *r, int i, size_t n)
{
  int rank = r->rank0 + i;
  size_t chunk = n < (size_t)STAGE_ELEMS ? n : (size_t)STAGE_ELEMS;
  size_t filled;

  /* STAGE_ELEMS is a multiple of 8, so each copy keeps the period. */
  for (size_t k = 0; k < chunk; k++)
    r->stage[k] = (float)(((size_t)rank + k) % 8 + 1);
  if (cuda_ok(r, cudaSetDevice(i), "cudaSetDevice") < 0 ||
      cuda_ok(r, cudaMemcpy(r->send[i], r->stage, chunk * 4,
                            cudaMemcpyHostToDevice), "cudaMemcpy") < 0)
    return -1;
  for (filled = chunk; filled < n;) {
    size_t m = filled < n - filled ? filled : n - filled;

    if (cuda_ok(r, cudaMemcpy(r->send[i] + filled, r->send[i], m * 4,
                              cudaMemcpyDeviceToDevice), "cudaMemcpy") < 0)
      return -1;
    filled += m;
  }
  /* The collectives run on non-blocking streams, which do not wait for
   * the copies above. */
  return cuda_ok(r, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

static int
launch(struct run *r, enum probe_coll c, size_t count)
{
  ncclResult_t nr = ncclSuccess;
  const char *call = "";

  if (nccl_ok(r, ncclGroupStart(), "ncclGroupStart") < 0)
    return -1;
  for (int i = 0; i < r->ngpus && nr == ncclSuccess; i++) {
    switch (c) {
    case PROBE_COLL_ALL_REDUCE:
      call = "ncclAllReduce";
      nr = ncclAllReduce(r->send[i], r->recv[i], count, ncclFloat32,
                         ncclSum, r->comm[i], r->stream[i]);
      break;
    case PROBE_COLL_ALL_GATHER:
      call = "ncclAllGather";
      nr = ncclAllGather(r->send[i], r->recv[i], count, ncclFloat32,
                         r->comm[i], r->stream[i]);
      break;
    case PROBE_COLL_REDUCE_SCATTER:
    default:
      call = "ncclReduceScatter";
      nr = ncclReduceScatter(r->send[i], r->recv[i], count, ncclFloat32,
                             ncclSum, r->comm[i], r->stream[i]);
      break;
    }
  }
  /* The group must be closed even after an error. */
  if (nccl_ok(r, nr, call) < 0) {
    (void)ncclGroupEnd();
    return -1;
  }
  return nccl_ok(r, ncclGroupEnd(), "ncclGroupEnd");
}

/* What element k of global rank g's receive buffer must hold. */
static float
expected(const struct run *r, enum probe_coll c, size_t count, int g,
         size_t k)
{
  switch (c) {
  case PROBE_COLL_ALL_REDUCE:
    return (float)r->sumtab[k % 8];
  case PROBE_COLL_ALL_GATHER: {
    size_t q = k / count, i = k % count;

    return (float)((q + i) % 8 + 1);
  }
  case PROBE_COLL_REDUCE_SCATTER:
  default:
    return (float)r->sumtab[((size_t)g * count + k) % 8];
  }
}

/* Compare elements [start, start+len) of local GPU i's receive buffer;
 * *bad set on a mismatch.  -1 on a CUDA error. */
static int
check_range(struct run *r, enum probe_coll c, size_t count, int i,
            size_t start, size_t len, int *bad)
{
  int g = r->rank0 + i;

  while (len > 0 && !*bad) {
    size_t m = len < (size_t)STAGE_ELEMS ? len : (size_t)STAGE_ELEMS;

    if (cuda_ok(r, cudaMemcpy(r->stage, r->recv[i] + start, m * 4,
                              cudaMemcpyDeviceToHost), "cudaMemcpy") < 0)
      return -1;
    for (size_t k = 0; k < m; k++) {
      float want = expected(r, c, count, g, start + k);

      if (r->stage[k] != want) {
        fprintf(stderr, "tenbin-probe: %s: rank %d element %zu is %g, "
                "expected %g\n", probe_coll_name(c), g, start + k,
                (double)r->stage[k], (double)want);
        *bad = 1;
        break;
      }
    }
    start += m;
    len -= m;
  }
  return 0;
}

/* Check every local receive buffer of n elements: all of it up to
 * FULL_CHECK_MAX, else its ends and SAMPLE_WINDOWS windows between. */
static int
check(struct run *r, enum probe_coll c, size_t count, size_t n,
      int *sampled, int *correct)
{
  int bad = 0;

  *sampled = (int64_t)n * 4 > FULL_CHECK_MAX;
  for (int i = 0; i < r->ngpus && !bad; i++) {
    if (cuda_ok(r, cudaSetDevice(i), "cudaSetDevice") < 0)
      return -1;
    if (!*sampled) {
      if (check_range(r, c, count, i, 0, n, &bad) < 0)
        return -1;
      continue;
    }
    if (check_range(r, c, count, i, 0, STAGE_ELEMS, &bad) < 0 ||
        check_range(r, c, count, i, n - STAGE_ELEMS, STAGE_ELEMS, &bad) < 0)
      return -1;
    for (int w = 1; w <= SAMPLE_WINDOWS; w++) {
      size_t at = (n - SAMPLE_WINDOW_ELEMS) / (SAMPLE_WINDOWS + 1) *
                  (size_t)w;

      if (check_range(r, c, count, i, at, SAMPLE_WINDOW_ELEMS, &bad) < 0)
        return -1;
    }
  }
  *correct = !bad;
  return 0;
}

static void
free_buffers(struct run *r)
{
  for (int i = 0; i < r->ngpus; i++) {
    if (r->send[i] == NULL && r->recv[i] == NULL)
      continue;
    (void)cudaSetDevice(i);
    (void)cudaFree(r->send[i]);
    (void)cudaFree(r->recv[i]);
    r->send[i] = r->recv[i] = NULL;
  }
}

/* Warm up, check, then time collective c with count elements per rank
 * (in the smaller buffer); one result appended to results. */
static int
measure_one(struct run *r, enum probe_coll c, size_t count, json_t *results)
{
  size_t nrecv = c == PROBE_COLL_ALL_GATHER ? count * (size_t)r->nranks
                                             : count;
  int64_t bytes = probe_coll_bytes(c, (int64_t)count, r->nranks);
  int sampled = 0, correct = 0;
  int64_t t0, t1;
  double time_us, algbw;
  json_t *res;

  for (int w = 0; w < r->o->warmup; w++)
    if (launch(r, c, count) < 0)
      return -1;
  if (wait_all(r) < 0 || check(r, c, count, nrecv, &sampled, &correct) < 0)
    return -1;
  t0 = time_mono_ns();
  for (int it = 0; it < r->o->iters; it++)
    if (launch(r, c, count) < 0)
      return -1;
  if (wait_all(r) < 0)
    return -1;
  t1 = time_mono_ns();
  time_us = (double)(t1 - t0) / 1000.0 / r->o->iters;
  /* bytes per microsecond / 1000 = GB/s (10^9 bytes/s). */
  algbw = time_us > 0 ? (double)bytes / time_us / 1000.0 : 0;
  res = json_object();
  json_object_set_new(res, "collective", json_string(probe_coll_name(c)));
  json_object_set_new(res, "bytes", json_integer(bytes));
  json_object_set_new(res, "time_us", json_real(time_us));
  json_object_set_new(res, "algbw_gbps", json_real(algbw));
  json_object_set_new(res, "busbw_gbps",
                      json_real(probe_busbw(c, algbw, r->nranks)));
  json_object_set_new(res, "check",
                      json_string(sampled ? "sampled" : "full"));
  json_object_set_new(res, "correct", json_boolean(correct));
  json_array_append_new(results, res);
  return 0;
}

/* Every size: buffers of size bytes per GPU (enough for all three
 * collectives out of place), filled once, then each collective. */
static int
run_sizes(struct run *r, json_t *results, char *note, size_t notelen)
{
  int64_t min_free = 0;
  int nsizes = 0;

  if (agree_free(r, &min_free) < 0)
    return -1;
  for (int64_t size = r->o->min_bytes;
       size <= r->o->max_bytes && nsizes < PROBE_MAX_SIZES;
       size *= 2, nsizes++) {
    size_t elems = (size_t)size / 4;

    if (2 * size + SPARE_BYTES > min_free) {
      snprintf(note, notelen, "sizes from %lld bytes up skipped: their "
               "buffers do not fit in free GPU memory (%lld MiB free, "
               "1 GiB kept spare)", (long long)size,
               (long long)(min_free >> 20));
      break;
    }
    for (int i = 0; i < r->ngpus; i++) {
      if (cuda_ok(r, cudaSetDevice(i), "cudaSetDevice") < 0 ||
          cuda_ok(r, cudaMalloc((void **)&r->send[i], (size_t)size),
                  "cudaMalloc") < 0 ||
          cuda_ok(r, cudaMalloc((void **)&r->recv[i], (size_t)size),
                  "cudaMalloc") < 0 ||
          fill(r, i, elems) < 0)
        return -1;
    }
    for (int c = 0; c < PROBE_NCOLL; c++) {
      /* The gather and the scatter split the buffer among the ranks; a
       * size smaller than one element per rank has nothing to time. */
      size_t count = c == PROBE_COLL_ALL_REDUCE ? elems
                                                 : elems / (size_t)r->nranks;

      if (count == 0)
        continue;
      if (measure_one(r, (enum probe_coll)c, count, results) < 0)
        return -1;
    }
    free_buffers(r);
  }
  return 0;
}

json_t *
probe_measure(const struct probe_opts *o)
{
  struct run *r = xcalloc(1, sizeof(*r));
  json_t *m = NULL, *results = json_array();
  ncclUniqueId id;
  char note[256] = "";
  char reason[600];
  int count = 0, failed = 1;
  cudaError_t ce;

  r->o = o;
  ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess || count <= 0) {
    snprintf(reason, sizeof(reason), "no GPU visible: cudaGetDeviceCount: "
             "%s", ce != cudaSuccess ? cudaGetErrorString(ce)
                                     : "no device found");
    m = probe_measurement_skipped(o, reason);
    goto out;
  }
  r->ngpus = count < PROBE_MAX_GPUS ? count : PROBE_MAX_GPUS;
  r->nranks = o->nodes * r->ngpus;
  r->rank0 = o->node_rank * r->ngpus;
  for (int mod = 0; mod < 8; mod++)
    for (int q = 0; q < r->nranks; q++)
      r->sumtab[mod] += (double)((q + mod) % 8 + 1);
  r->stage = xmalloc((size_t)STAGE_BYTES);
  memset(&id, 0, sizeof(id));
  if (unique_id(r, &id) < 0 || init_comms(r, &id) < 0 ||
      run_sizes(r, results, note, sizeof(note)) < 0)
    goto done;
  failed = 0;
done:
  m = json_object();
  json_object_set_new(m, "status", json_string(failed ? "failed" : "done"));
  if (failed)
    probe_set_str(m, "reason", r->why[0] ? r->why : "unknown error");
  if (note[0] != '\0')
    probe_set_str(m, "note", note);
  json_object_set_new(m, "ranks", json_integer(r->nranks));
  json_object_set_new(m, "nodes", json_integer(o->nodes));
  json_object_set_new(m, "gpus_per_node", json_integer(r->ngpus));
  json_object_set_new(m, "dtype", json_string("float32"));
  json_object_set_new(m, "iters", json_integer(o->iters));
  json_object_set_new(m, "warmup", json_integer(o->warmup));
  json_object_set_new(m, "results", results);
  results = NULL;
  free_buffers(r);
  for (int i = 0; i < r->ngpus; i++) {
    if (r->comm[i] != NULL) {
      /* After an error a peer may never answer: abort, do not wait. */
      if (failed)
        (void)ncclCommAbort(r->comm[i]);
      else
        (void)ncclCommDestroy(r->comm[i]);
    }
    if (r->stream[i] != NULL) {
      (void)cudaSetDevice(i);
      (void)cudaStreamDestroy(r->stream[i]);
    }
  }
out:
  json_decref(results);
  free(r->stage);
  free(r);
  return m;
}
