/*
 * What a node agent reads from outside (agent/node.c, node_meta.c):
 * tenbind's heartbeat answers and the three providers' metadata answers
 * never crash it, never yield more than the caps, and an interruption
 * read is printable and bounded.  The first byte picks the parser.
 */
#include <string.h>

#include "agent/node.h"
#include "fuzz/fuzz.h"

static void
check_interruption(int rc, const struct node_interruption *in)
{
  FUZZ_CHECK(rc == 0 || rc == 1 || rc == ERR_INVALID);
  if (rc != 1)
    return;
  FUZZ_CHECK(memchr(in->notice, '\0', sizeof(in->notice)) != NULL);
  for (const char *p = in->notice; *p != '\0'; p++)
    FUZZ_CHECK(*p >= 0x20 && *p < 0x7f);
  FUZZ_CHECK(in->ends_ms >= 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *body = (const char *)data + 1;
  struct node_interruption in;
  struct node_answer a;
  struct err e = {0};
  size_t len;
  int rc;

  if (size == 0)
    return 0;
  len = size - 1;
  memset(&in, 0, sizeof(in));
  switch (data[0] % 4) {
  case 0:
    memset(&a, 0, sizeof(a));
    if (node_answer_parse(body, len, &a, &e) < 0) {
      FUZZ_CHECK(e.msg[0] != '\0');
      return 0;
    }
    FUZZ_CHECK(a.nassign <= NODE_MAX_ASSIGN && a.ncancel <= NODE_MAX_IDS &&
               a.nack <= NODE_MAX_IDS);
    FUZZ_CHECK(a.heartbeat_ms >= NODE_HEARTBEAT_MIN_MS &&
               a.heartbeat_ms <= NODE_HEARTBEAT_MAX_MS);
    for (size_t i = 0; i < a.nassign; i++) {
      const struct node_dataset *d = &a.assign[i].dataset;

      FUZZ_CHECK(a.assign[i].id > 0 && json_is_object(a.assign[i].spec));
      /* A dataset comes whole, its token fit for a header, or not. */
      FUZZ_CHECK(d->name == NULL ||
                 (d->version != NULL && strlen(d->version) == 64 &&
                  d->url != NULL && d->token != NULL &&
                  strpbrk(d->token, " \r\n") == NULL));
    }
    for (size_t i = 0; i < a.ncancel; i++)
      FUZZ_CHECK(a.cancel[i] > 0);
    for (size_t i = 0; i < a.nack; i++)
      FUZZ_CHECK(a.ack[i] > 0);
    node_answer_release(&a);
    break;
  case 1:
    rc = node_meta_parse_aws(body, len, &in);
    check_interruption(rc, &in);
    break;
  case 2:
    rc = node_meta_parse_gcp(body, len, &in);
    check_interruption(rc, &in);
    break;
  default:
    rc = node_meta_parse_azure(body, len, "tenbin-abc-1", &in);
    check_interruption(rc, &in);
    break;
  }
  return 0;
}
