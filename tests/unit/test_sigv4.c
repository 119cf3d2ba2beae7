/*
 * adapters/sigv4: every vector of tests/data/sigv4 (four of AWS's SigV4
 * test suite and a RunInstances request signed by botocore), read from
 * its files: the request, then the canonical request, the string to sign
 * and the Authorization header must be the vector's byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/sigv4.h"
#include "util/buf.h"

#define VECTOR_MAX (64 * 1024)
#define TOKEN                                                              \
  "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"

/* A vector's file NAME.EXT, whole, into out (NUL-terminated). */
static void
slurp(const char *name, const char *ext, struct buf *out)
{
  char path[512];
  FILE *f;
  char chunk[4096];
  size_t n;

  snprintf(path, sizeof(path), "%s/tests/data/sigv4/%s.%s",
           TENBIN_SOURCE_DIR, name, ext);
  f = fopen(path, "rb");
  if (f == NULL)
    fail_msg("cannot open %s", path);
  buf_reset(out);
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
    assert_int_equal(buf_add(out, chunk, n), 0);
  fclose(f);
  assert_int_equal(buf_adds(out, ""), 0);
}

/* A parsed .req: "METHOD PATH[?QUERY] HTTP/1.1", "Name:value" lines, a
 * blank line, the body.  Strings point into text. */
struct parsed {
  char *text;
  struct sigv4_request r;
  struct sigv4_header h[8];
  char *query;
};

static void
parse_req(char *text, struct parsed *p)
{
  char *line = text, *next, *sp, *q;

  memset(p, 0, sizeof(*p));
  p->text = text;
  p->r.headers = p->h;
  next = strchr(line, '\n');
  if (next != NULL)
    *next++ = '\0';
  sp = strchr(line, ' ');
  assert_non_null(sp);
  *sp = '\0';
  p->r.method = line;
  p->r.path = sp + 1;
  sp = strchr(sp + 1, ' ');
  assert_non_null(sp);
  *sp = '\0';
  q = strchr(p->r.path, '?');
  if (q != NULL) {
    *q = '\0';
    p->r.query = q + 1;
  }
  for (line = next; line != NULL && *line != '\0' && *line != '\n';
       line = next) {
    char *colon = strchr(line, ':');

    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    assert_non_null(colon);
    *colon = '\0';
    assert_true(p->r.nheaders < 7);
    p->h[p->r.nheaders++] = (struct sigv4_header){line, colon + 1};
  }
  if (line != NULL && *line == '\n') {
    p->r.body = line + 1;
    p->r.body_len = strlen(line + 1);
  }
}

static void
check_vector(const char *name, const char *service, int token)
{
  const struct sigv4_key k = {"AKIDEXAMPLE",
                              "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                              "us-east-1", service};
  struct buf req, want, got;
  struct parsed p;

  buf_init(&req, VECTOR_MAX);
  buf_init(&want, VECTOR_MAX);
  buf_init(&got, VECTOR_MAX);
  slurp(name, "req", &req);
  parse_req(req.data, &p);
  if (token)
    p.h[p.r.nheaders++] =
        (struct sigv4_header){"X-Amz-Security-Token", TOKEN};

  slurp(name, "creq", &want);
  assert_int_equal(sigv4_canonical_request(&p.r, &got), 0);
  assert_string_equal(buf_str(&got), buf_str(&want));

  slurp(name, "sts", &want);
  buf_reset(&got);
  slurp(name, "creq", &req);
  assert_int_equal(sigv4_string_to_sign(buf_str(&req), "20150830T123600Z", &k,
                                        &got),
                   0);
  assert_string_equal(buf_str(&got), buf_str(&want));

  slurp(name, "req", &req);
  parse_req(req.data, &p);
  if (token)
    p.h[p.r.nheaders++] =
        (struct sigv4_header){"X-Amz-Security-Token", TOKEN};
  slurp(name, "authz", &want);
  buf_reset(&got);
  assert_int_equal(sigv4_authorization(&p.r, &k, "20150830T123600Z", &got),
                   0);
  assert_string_equal(buf_str(&got), buf_str(&want));
  buf_release(&req);
  buf_release(&want);
  buf_release(&got);
}

static void
test_get_vanilla_signs_as_the_suite_says(void **state)
{
  (void)state;
  check_vector("get-vanilla", "service", 0);
}

static void
test_query_parameters_are_sorted_by_name(void **state)
{
  (void)state;
  check_vector("get-vanilla-query-order-key-case", "service", 0);
}

static void
test_a_session_token_is_a_signed_header(void **state)
{
  (void)state;
  check_vector("get-vanilla-with-session-token", "service", 1);
}

static void
test_a_form_body_and_its_content_type_are_signed(void **state)
{
  (void)state;
  check_vector("post-x-www-form-urlencoded", "service", 0);
}

static void
test_an_ec2_run_instances_request_signs_as_botocore_signs_it(void **state)
{
  (void)state;
  check_vector("ec2-runinstances-spot", "ec2", 0);
}

static void
test_encoding_sorting_and_header_values_follow_the_rules(void **state)
{
  const struct sigv4_header h[] = {{"Host", "example.amazonaws.com"},
                                   {"X-Amz-Date", "20150830T123600Z"},
                                   {"My-Header1", "  a   b \t c  "}};
  const struct sigv4_request r = {"GET", "/a b/c~d", "b=2&a-b=1&a=3&a", h,
                                  3, NULL, 0};
  struct buf b;
  char date[SIGV4_DATE_LEN];

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(sigv4_uri_encode(&b, "a b/+=~é"), 0);
  assert_string_equal(buf_str(&b), "a%20b%2F%2B%3D~%C3%A9");
  buf_reset(&b);
  assert_int_equal(sigv4_canonical_request(&r, &b), 0);
  /* '/' kept in the path; a name sorts before a longer one it prefixes
   * ("a" < "a-b"); a bare name gets '='; values trimmed and squeezed */
  assert_string_equal(buf_str(&b),
                      "GET\n/a%20b/c~d\na=&a=3&a-b=1&b=2\n"
                      "host:example.amazonaws.com\nmy-header1:a b c\n"
                      "x-amz-date:20150830T123600Z\n\n"
                      "host;my-header1;x-amz-date\n"
                      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4959"
                      "91b7852b855");
  sigv4_date(1440938160000LL, date);
  assert_string_equal(date, "20150830T123600Z");
  buf_release(&b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_vanilla_signs_as_the_suite_says),
      cmocka_unit_test(test_query_parameters_are_sorted_by_name),
      cmocka_unit_test(test_a_session_token_is_a_signed_header),
      cmocka_unit_test(test_a_form_body_and_its_content_type_are_signed),
      cmocka_unit_test(
          test_an_ec2_run_instances_request_signs_as_botocore_signs_it),
      cmocka_unit_test(
          test_encoding_sorting_and_header_values_follow_the_rules),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
