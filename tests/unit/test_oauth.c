/*
 * adapters/oauth: token answers as Google and Microsoft write them (and
 * Microsoft's v1 endpoint, whose numbers are strings), refusals, and what
 * is no answer at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "adapters/oauth.h"

static void
test_token_answers_give_the_token_and_its_lifetime(void **state)
{
  static const char google[] = "{\"access_token\":\"ya29.c.abc\","
                               "\"expires_in\":3599,\"token_type\":"
                               "\"Bearer\"}";
  static const char v1[] = "{\"token_type\":\"Bearer\",\"expires_in\":"
                           "\"3599\",\"expires_on\":\"1795741200\","
                           "\"access_token\":\"eyJ0eXAi\"}";
  char token[OAUTH_TOKEN_LEN];
  int64_t ttl = 0;
  struct err e = {0};

  (void)state;
  assert_int_equal(oauth_token_parse(google, strlen(google), token, &ttl,
                                     &e),
                   0);
  assert_string_equal(token, "ya29.c.abc");
  assert_int_equal(ttl, 3599);
  assert_int_equal(oauth_token_parse(v1, strlen(v1), token, &ttl, &e), 0);
  assert_string_equal(token, "eyJ0eXAi");
  assert_int_equal(ttl, 3599);
}

static void
test_a_refusal_or_no_answer_says_why_and_gives_no_token(void **state)
{
  static const char refused[] = "{\"error\":\"invalid_client\","
                                "\"error_description\":\"AADSTS7000215: "
                                "Invalid client secret provided.\","
                                "\"error_codes\":[7000215]}";
  char token[OAUTH_TOKEN_LEN];
  int64_t ttl = 0;
  struct err e = {0};

  (void)state;
  assert_int_equal(oauth_token_parse(refused, strlen(refused), token, &ttl,
                                     &e),
                   ERR_UNAUTHORIZED);
  assert_string_equal(e.msg, "the token endpoint refused the credentials: "
                             "invalid_client: AADSTS7000215: Invalid client "
                             "secret provided.");
  assert_string_equal(token, "");
  assert_int_equal(oauth_token_parse("{\"access_token\":\"x\"}", 20, token,
                                     &ttl, &e),
                   ERR_SITE);
  assert_int_equal(oauth_token_parse("{\"access_token\":\"x\","
                                     "\"expires_in\":\"soon\"}",
                                     38, token, &ttl, &e),
                   ERR_SITE);
  assert_int_equal(oauth_token_parse("<html>", 6, token, &ttl, &e),
                   ERR_SITE);
  assert_string_equal(token, "");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_token_answers_give_the_token_and_its_lifetime),
      cmocka_unit_test(
          test_a_refusal_or_no_answer_says_why_and_gives_no_token),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
