/*
 * Workload templates (PUT /v1/workloads/NAME, and the config's
 * "workloads"): JSON text, then broker__workload_validate, which checks
 * the definition, expands its placeholders with stand-in values and reads
 * the result as a job spec.
 */
#include "broker/broker_internal.h"
#include "fuzz/fuzz.h"
#include "util/jsonx.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct err e = {0};
  json_t *def = NULL;

  if (jsonx_parse_object((const char *)data, size, &def, &e) == 0 &&
      broker__workload_validate(def, &e) < 0)
    FUZZ_CHECK(e.code < 0 && e.msg[0] != '\0');
  json_decref(def);
  return 0;
}
