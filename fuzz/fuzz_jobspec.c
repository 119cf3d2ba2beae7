/*
 * The body of POST /v1/jobs as the job spec reads it: JSON text, then
 * jobspec_from_json (which runs the #SBATCH parser on a "script").  A
 * spec it accepts must round-trip: jobspec_to_json, read back, gives the
 * same JSON (the broker stores specs that way).
 */
#include "fuzz/fuzz.h"
#include "spec/jobspec.h"
#include "util/jsonx.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct job_spec s, again;
  struct err e = {0};
  json_t *obj = NULL;
  json_t *warnings = json_array();
  json_t *out = NULL, *out2 = NULL;

  jobspec_init(&s);
  jobspec_init(&again);
  if (jsonx_parse_object((const char *)data, size, &obj, &e) < 0)
    goto out;
  if (jobspec_from_json(&s, obj, warnings, &e) < 0)
    goto out;
  out = jobspec_to_json(&s);
  FUZZ_CHECK(jobspec_from_json(&again, out, NULL, &e) == 0);
  out2 = jobspec_to_json(&again);
  FUZZ_CHECK(json_equal(out, out2));

out:
  json_decref(out2);
  json_decref(out);
  jobspec_release(&again);
  jobspec_release(&s);
  json_decref(warnings);
  json_decref(obj);
  return 0;
}
