/*
 * Azure Resource Manager's answers (adapters/azure_arm.c): whatever bytes
 * come back, as a VM, a page of VMs, an operation or an error, are read
 * without a crash, never into more VMs than the caller's array holds,
 * and every string kept is terminated and valid UTF-8 (it ends up in
 * JSON); a refusal says why.  The same bytes as a header are a link
 * that is either refused or starts at the endpoint, and a Retry-After
 * that is -1 or within its cap.
 */
#include <string.h>
#include <strings.h>

#include "adapters/azure_arm.h"
#include "fuzz/fuzz.h"
#include "util/utf8.h"

#define BASE "https://management.azure.com"

static int
kept(const char *s, size_t cap)
{
  const char *end = memchr(s, '\0', cap);

  return end != NULL && utf8_valid(s, (size_t)(end - s));
}

static void
check_vm(const struct cloud_vm *vm)
{
  FUZZ_CHECK(kept(vm->id, sizeof(vm->id)) && kept(vm->zone, sizeof(vm->zone)) &&
             kept(vm->shape, sizeof(vm->shape)) &&
             kept(vm->instance, sizeof(vm->instance)) &&
             kept(vm->node, sizeof(vm->node)) &&
             kept(vm->name, sizeof(vm->name)) &&
             kept(vm->address, sizeof(vm->address)) &&
             kept(vm->end_reason, sizeof(vm->end_reason)));
  FUZZ_CHECK(vm->state >= CLOUD_VM_UNKNOWN && vm->state <= CLOUD_VM_GONE);
  FUZZ_CHECK(vm->launched_ms >= 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *json = (const char *)data;
  struct cloud_vm vm, vms[3];
  struct azarm_page page = {.vms = vms, .max = 3};
  struct azarm_operation op;
  struct azarm_error ae;
  struct err e = {0};
  char *s;
  int64_t ms;

  if (azarm_parse_vm(json, size, &vm, &e) < 0)
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0');
  else
    FUZZ_CHECK(vm.id[0] != '\0');
  check_vm(&vm);

  /* Every other input filters by an instance, as the pool does; the
   * others by a cluster's tag, reading a node tag, as the cloud block of
   * a slurm site does. */
  page.instance = size % 2 ? "tb-1" : NULL;
  page.tag_key = size % 2 ? NULL : "ClusterName";
  page.tag_value = "ml";
  page.name_tag = size % 2 ? NULL : "Name";
  if (azarm_parse_list(json, size, &page, &e) < 0)
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0' && page.n == 0);
  FUZZ_CHECK(page.n <= 3 && page.n <= page.nout);
  FUZZ_CHECK(kept(page.next_link, sizeof(page.next_link)));
  for (size_t i = 0; i < page.n; i++) {
    check_vm(&vms[i]);
    FUZZ_CHECK(page.instance == NULL ||
               strcmp(vms[i].instance, page.instance) == 0);
  }

  if (azarm_parse_operation(json, size, &op, &e) < 0)
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0');
  FUZZ_CHECK(op.status >= AZARM_OP_RUNNING &&
             op.status <= AZARM_OP_CANCELED);
  FUZZ_CHECK(kept(op.code, sizeof(op.code)) &&
             kept(op.message, sizeof(op.message)));

  if (azarm_parse_error(json, size, &ae, &e) < 0)
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0' && ae.code[0] == '\0');
  FUZZ_CHECK(kept(ae.code, sizeof(ae.code)) &&
             kept(ae.message, sizeof(ae.message)));
  FUZZ_CHECK(azarm_refusal(ae.code, ae.message, (int)(size % 600)) <=
             CLOUD_REFUSED_TRANSIENT);

  s = fuzz_cstr(data, size);
  if (azarm_link_ok(s, BASE))
    FUZZ_CHECK(strncasecmp(s, BASE "/", sizeof(BASE)) == 0 &&
               strlen(s) <= AZARM_URL_MAX);
  ms = azarm_retry_after_ms(s);
  FUZZ_CHECK(ms == -1 || (ms >= 0 && ms <= AZARM_RETRY_MAX_S * 1000));
  free(s);
  return 0;
}
