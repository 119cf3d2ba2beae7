/*
 * A tenbin-probe document as tenbind reads it from a probe (a job, so a
 * peer it does not trust): probe_doc_parse on arbitrary bytes.  On
 * success every accessor is walked and the parser's promises checked:
 * the flattened keys sorted and unique, probe_doc_get finding each one,
 * every string within its cap, every result within its limits.
 */
#include <math.h>

#include "fuzz/fuzz.h"
#include "spec/probe_doc.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct probe_doc *d = NULL;
  struct err e = {0};
  const struct probe_doc_kv *kv;
  const struct probe_result *r;
  const char *reason;
  size_t n;
  size_t i;

  if (probe_doc_parse((const char *)data, size, &d, &e) < 0) {
    FUZZ_CHECK(d == NULL);
    FUZZ_CHECK(e.code < 0 && e.msg[0] != '\0');
    return 0;
  }
  FUZZ_CHECK(d != NULL);
  FUZZ_CHECK(json_is_object(probe_doc_json(d)));
  FUZZ_CHECK(probe_doc_host(d) != NULL && probe_doc_host(d)[0] != '\0');
  FUZZ_CHECK(strlen(probe_doc_host(d)) <= PROBE_DOC_MAX_STRING);
  FUZZ_CHECK(probe_doc_nodes(d) >= 1 &&
             probe_doc_nodes(d) <= PROBE_DOC_MAX_NODES);
  FUZZ_CHECK(probe_doc_node_rank(d) >= 0 &&
             probe_doc_node_rank(d) < probe_doc_nodes(d));
  FUZZ_CHECK(probe_doc_time_ms(d) >= 0);

  kv = probe_doc_kv(d, &n);
  FUZZ_CHECK(n <= 64 + PROBE_DOC_MAX_ENV + PROBE_DOC_MAX_NET);
  for (i = 0; i < n; i++) {
    FUZZ_CHECK(kv[i].key != NULL && kv[i].value != NULL);
    FUZZ_CHECK(i == 0 || strcmp(kv[i - 1].key, kv[i].key) < 0);
    FUZZ_CHECK(probe_doc_get(d, kv[i].key) == kv[i].value);
  }
  FUZZ_CHECK(probe_doc_get(d, "") == NULL);

  FUZZ_CHECK((unsigned)probe_doc_measured(d) <= PROBE_MEASURE_FAILED);
  reason = probe_doc_reason(d);
  FUZZ_CHECK(reason == NULL || strlen(reason) <= PROBE_DOC_MAX_STRING);
  FUZZ_CHECK(probe_doc_measured(d) != PROBE_MEASURE_DONE || reason == NULL);

  r = probe_doc_results(d, &n);
  FUZZ_CHECK(n <= PROBE_DOC_MAX_RESULTS);
  for (i = 0; i < n; i++) {
    FUZZ_CHECK(probe_collective_name(r[i].collective) != NULL);
    FUZZ_CHECK(r[i].bytes >= 1 && r[i].bytes <= (1LL << 40));
    FUZZ_CHECK(isfinite(r[i].time_us) && r[i].time_us >= 0);
    FUZZ_CHECK(isfinite(r[i].algbw_gbps) && r[i].algbw_gbps >= 0);
    FUZZ_CHECK(isfinite(r[i].busbw_gbps) && r[i].busbw_gbps >= 0);
    FUZZ_CHECK(r[i].correct == 0 || r[i].correct == 1);
  }
  probe_doc_free(d);
  return 0;
}
