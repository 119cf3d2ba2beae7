/*
 * Compute Engine's answers (adapters/gce.c): the same bytes read as an
 * instance list (with a name label or without), an Operation and an
 * error answer, without a crash, never into more VMs than the caller's
 * array holds, every string within its field, and a refusal saying why.
 */
#include <string.h>

#include "adapters/gce.h"
#include "fuzz/fuzz.h"

/* s ends within its field. */
#define ENDS(s) (memchr((s), '\0', sizeof(s)) != NULL)

static void
list(const char *json, size_t size)
{
  struct cloud_vm vms[3];
  char token[GCE_TOKEN_LEN];
  size_t n = 99, nout = 99;
  struct err e = {0};

  /* Every other input also reads a node label, as the cloud block of a
   * slurm site does. */
  if (gce_parse_list_named(json, size, size % 2 ? "node" : NULL, vms, 3, &n,
                           &nout, token, &e) < 0) {
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0');
    FUZZ_CHECK(n == 0 && nout == 0 && token[0] == '\0');
    return;
  }
  FUZZ_CHECK(n <= 3 && n <= nout && nout <= GCE_MAX_RESULTS);
  FUZZ_CHECK(ENDS(token));
  for (size_t i = 0; i < n; i++) {
    FUZZ_CHECK(vms[i].id[0] != '\0' && ENDS(vms[i].id));
    FUZZ_CHECK(ENDS(vms[i].zone) && ENDS(vms[i].shape) &&
               ENDS(vms[i].instance) && ENDS(vms[i].node) &&
               ENDS(vms[i].name) && ENDS(vms[i].address));
    FUZZ_CHECK(vms[i].state >= CLOUD_VM_UNKNOWN &&
               vms[i].state <= CLOUD_VM_GONE);
  }
}

static void
operation(const char *json, size_t size)
{
  struct gce_operation op;
  struct err e = {0};
  int rc = gce_parse_operation(json, size, &op, &e);

  FUZZ_CHECK(ENDS(op.name) && ENDS(op.target) && ENDS(op.error_code) &&
             ENDS(op.error_message));
  if (rc == 0) {
    FUZZ_CHECK(op.name[0] != '\0' && op.status != GCE_OP_UNKNOWN &&
               !op.failed);
    return;
  }
  FUZZ_CHECK(rc == ERR_SITE && e.msg[0] != '\0');
  /* only a finished operation fails; a refused answer says nothing */
  if (op.failed)
    FUZZ_CHECK(op.status == GCE_OP_DONE &&
               op.refusal <= CLOUD_REFUSED_TRANSIENT);
  else
    FUZZ_CHECK(op.status == GCE_OP_UNKNOWN && op.name[0] == '\0');
}

static void
error_answer(const char *json, size_t size)
{
  struct gce_error ge;

  gce_parse_error(json, size, 403, &ge);
  FUZZ_CHECK(ge.http_status == 403 && ge.code >= 0 && ge.code <= 999);
  FUZZ_CHECK(ENDS(ge.status) && ENDS(ge.reason) && ENDS(ge.message));
  FUZZ_CHECK(ge.refusal <= CLOUD_REFUSED_TRANSIENT);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *json = (const char *)data;

  list(json, size);
  operation(json, size);
  error_answer(json, size);
  return 0;
}
