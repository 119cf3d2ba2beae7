/*
 * The tenbin-probe document ("tenbin-probe/1", docs/BASELINE.md): what a
 * probe process reports about its node, read by tenbind from a peer it
 * does not trust.  Parsing validates every member it knows, caps every
 * size, and flattens the fingerprint into sorted key/value strings for
 * the diff and the drift rules (policies/baseline.h).
 *
 * A struct probe_doc owns everything it points to; every pointer an
 * accessor returns is borrowed from it and lives until probe_doc_free().
 */
#ifndef TENBIN_SPEC_PROBE_DOC_H
#define TENBIN_SPEC_PROBE_DOC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define PROBE_DOC_SCHEMA "tenbin-probe/1"
/* Limits on what a probe (a job, so a peer) controls. */
#define PROBE_DOC_MAX_BYTES (1024 * 1024)
#define PROBE_DOC_MAX_STRING 1024
#define PROBE_DOC_MAX_ENV 128
#define PROBE_DOC_MAX_NET 64
#define PROBE_DOC_MAX_GPUS 64    /* matrix rows, numa entries */
#define PROBE_DOC_MAX_RESULTS 192
#define PROBE_DOC_MAX_NODES 1024

enum probe_collective {
  PROBE_ALL_REDUCE = 0,
  PROBE_ALL_GATHER,
  PROBE_REDUCE_SCATTER,
  PROBE_NCOLLECTIVES
};

enum probe_measured {
  PROBE_MEASURE_DONE = 0,
  PROBE_MEASURE_SKIPPED,
  PROBE_MEASURE_FAILED,
};

struct probe_doc_kv {
  const char *key;
  const char *value;
};

struct probe_result {
  enum probe_collective collective;
  int64_t bytes;
  double time_us;
  double algbw_gbps;
  double busbw_gbps;
  int sampled; /* the check read a sample, not every element */
  int correct;
};

struct probe_doc;

/*
 * Parse len bytes of a probe document into *out (caller frees with
 * probe_doc_free).  ERR_TOO_LARGE over PROBE_DOC_MAX_BYTES; ERR_INVALID
 * naming the member ("fingerprint.net[3].kind: ...") for anything
 * malformed, mistyped, over a limit, or not valid UTF-8, and for a
 * schema other than PROBE_DOC_SCHEMA.  Unknown members are ignored.
 */
int probe_doc_parse(const char *text, size_t len, struct probe_doc **out,
                    struct err *e) WARN_UNUSED;
void probe_doc_free(struct probe_doc *d);

/* The document as parsed (borrowed): what tenbind stores and serves. */
const json_t *probe_doc_json(const struct probe_doc *d);
const char *probe_doc_host(const struct probe_doc *d);
int probe_doc_node_rank(const struct probe_doc *d);
int probe_doc_nodes(const struct probe_doc *d);
int64_t probe_doc_time_ms(const struct probe_doc *d);

/* The flattened fingerprint, sorted by key, keys unique. */
const struct probe_doc_kv *probe_doc_kv(const struct probe_doc *d,
                                        size_t *n);
/* The value of key, or NULL. */
const char *probe_doc_get(const struct probe_doc *d, const char *key);

enum probe_measured probe_doc_measured(const struct probe_doc *d);
/* Why the measurement was skipped or failed, or NULL. */
const char *probe_doc_reason(const struct probe_doc *d);
/* Results in document order; *n set. */
const struct probe_result *probe_doc_results(const struct probe_doc *d,
                                             size_t *n);
/* "all_reduce" for PROBE_ALL_REDUCE. */
const char *probe_collective_name(enum probe_collective c);

#endif
