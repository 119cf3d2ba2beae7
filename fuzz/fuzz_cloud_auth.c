/*
 * What Google's and Microsoft's token endpoints answer (adapters/oauth.c),
 * and what a Google key file holds (adapters/gcp_auth.c): read without a
 * crash, a token never longer than its room, a refusal saying why.
 */
#include <string.h>

#include "adapters/gcp_auth.h"
#include "adapters/oauth.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char token[OAUTH_TOKEN_LEN];
  struct gcp_key *k = NULL;
  struct err e = {0};
  int64_t ttl = 0;

  if (oauth_token_parse((const char *)data, size, token, &ttl, &e) == 0)
    FUZZ_CHECK(token[0] != '\0' && ttl > 0 &&
               memchr(token, '\0', sizeof(token)) != NULL);
  else
    FUZZ_CHECK(e.msg[0] != '\0' && token[0] == '\0');
  if (gcp_key_load((const char *)data, size, &k, &e) < 0)
    FUZZ_CHECK(k == NULL && e.code == ERR_INVALID);
  gcp_key_free(k);
  return 0;
}
