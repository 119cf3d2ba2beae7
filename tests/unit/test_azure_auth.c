/*
 * adapters/azure_auth: the token URL of a tenant and the client-
 * credentials body, as Microsoft documents them
 * (shared/research/cloud-contracts.md 3.1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "adapters/azure_auth.h"

static void
test_the_token_request_is_microsofts_client_credentials_form(void **state)
{
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(azure_token_url(AZURE_LOGIN,
                                   "72f988bf-86f1-41af-91ab-2d7cd011db47",
                                   &b, &e),
                   0);
  assert_string_equal(buf_str(&b),
                      "https://login.microsoftonline.com/72f988bf-86f1-"
                      "41af-91ab-2d7cd011db47/oauth2/v2.0/token");
  buf_reset(&b);
  assert_int_equal(azure_token_request("app-1", "s3cr&t=+", AZURE_ARM_SCOPE,
                                       &b),
                   0);
  assert_string_equal(buf_str(&b),
                      "client_id=app-1&scope=https%3A%2F%2Fmanagement.azure."
                      "com%2F.default&client_secret=s3cr%26t%3D%2B"
                      "&grant_type=client_credentials");
  buf_release(&b);
}

static void
test_a_tenant_that_is_no_id_or_domain_is_refused_naming_it(void **state)
{
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(azure_token_url(AZURE_LOGIN, "../common", &b, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "field 'tenant'"));
  assert_int_equal(azure_token_url(AZURE_LOGIN, "", &b, &e), ERR_INVALID);
  assert_int_equal(azure_token_url(AZURE_LOGIN, "a/b", &b, &e), ERR_INVALID);
  assert_int_equal(azure_token_url("http://127.0.0.1:9", "contoso.com", &b,
                                   &e),
                   0);
  assert_string_equal(buf_str(&b),
                      "http://127.0.0.1:9/contoso.com/oauth2/v2.0/token");
  buf_release(&b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_the_token_request_is_microsofts_client_credentials_form),
      cmocka_unit_test(
          test_a_tenant_that_is_no_id_or_domain_is_refused_naming_it),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
