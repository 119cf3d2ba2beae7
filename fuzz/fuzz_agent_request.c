/*
 * What a peer or a broker sends tenbin-agent, read the way its routes
 * read it.  The first byte picks the kind of request:
 *   even: a batch request body (POST .../batch, serve.c): frames by
 *         serve_batch_parse (the route's own), signatures (SIG,
 *         SIGRANGE) by delta_sig_load;
 *   odd:  a JSON body (publish, pull): jsonx_parse_object, its "path"
 *         by syncpath_normalize, its "name" by syncpath_valid_name.
 */
#include "fuzz/fuzz.h"
#include "agent/agent_int.h"
#include "sync/delta.h"
#include "sync/path.h"
#include "sync/wire.h"
#include "util/jsonx.h"

#include <librsync.h>

static void
batch(const uint8_t *data, size_t size)
{
  struct wire_frame *frames = NULL;
  struct err e = {0};
  size_t n = 0;
  struct delta_sig *sig;

  if (serve_batch_parse(data, size, &frames, &n, &e) < 0) {
    FUZZ_CHECK(e.code == ERR_INVALID && frames == NULL);
    return;
  }
  FUZZ_CHECK(n > 0 && n <= AGENT_BATCH_FRAMES);
  for (size_t i = 0; i < n; i++) {
    const struct wire_frame f = frames[i];

    sig = NULL;
    if (f.kind == WIRE_SIG) {
      if (delta_sig_load(f.payload, f.len, &sig, &e) == 0)
        FUZZ_CHECK(sig != NULL);
    } else if (f.kind == WIRE_SIGRANGE && f.len > 8) {
      if (delta_sig_load(f.payload + 8, f.len - 8, &sig, &e) == 0)
        FUZZ_CHECK(sig != NULL);
    }
    delta_sig_free(sig);
  }
  free(frames);
}

static void
json_body(const uint8_t *data, size_t size)
{
  struct err e = {0};
  json_t *body = NULL;
  const char *s;
  char rel[SYNCPATH_MAX + 1];

  if (jsonx_parse_object((const char *)data, size, &body, &e) < 0)
    return;
  s = jsonx_str(body, "path");
  if (s != NULL && syncpath_normalize(s, rel, sizeof(rel), &e) == 0)
    FUZZ_CHECK(syncpath_is_normal(rel));
  s = jsonx_str(body, "name");
  if (s != NULL)
    (void)syncpath_valid_name(s);
  json_decref(body);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  /* librsync logs every corrupt signature; the fuzzer makes millions. */
  rs_trace_set_level(RS_LOG_EMERG);
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  if (data[0] % 2 == 0)
    batch(data + 1, size - 1);
  else
    json_body(data + 1, size - 1);
  return 0;
}
