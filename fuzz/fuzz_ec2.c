/*
 * EC2's answers (adapters/aws_ec2.c): whatever bytes come back from the
 * cloud are read without a crash, never into more instances than the
 * caller's array holds, and a refusal says why.
 */
#include <string.h>

#include "adapters/aws_ec2.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct ec2_instance in[3];
  struct ec2_answer a = {.instances = in, .max = 3};
  struct err e = {0};

  if (ec2_parse((const char *)data, size, &a, &e) < 0)
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0');
  FUZZ_CHECK(a.n <= 3 && a.n <= a.nout);
  for (size_t i = 0; i < a.n; i++)
    FUZZ_CHECK(in[i].ntags >= 0 && in[i].ntags <= EC2_MAX_TAGS &&
               memchr(in[i].id, '\0', sizeof(in[i].id)) != NULL);
  return 0;
}
