/*
 * adapters/gcp_auth: a service-account key file read (and refused, naming
 * the field), the JWT it signs compared with one openssl signed
 * (tests/data/gcp), and the token request's body.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "adapters/gcp_auth.h"

#define FILE_MAX (64 * 1024)

static size_t
slurp(const char *name, char *out, size_t cap)
{
  char path[512];
  FILE *f;
  size_t n;

  snprintf(path, sizeof(path), "%s/tests/data/gcp/%s", TENBIN_SOURCE_DIR,
           name);
  f = fopen(path, "rb");
  if (f == NULL)
    fail_msg("cannot open %s", path);
  n = fread(out, 1, cap - 1, f);
  fclose(f);
  out[n] = '\0';
  return n;
}

static void
test_the_jwt_is_the_one_openssl_signs(void **state)
{
  static const char prefix[] = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3A"
                               "grant-type%3Ajwt-bearer&assertion=";
  static char json[FILE_MAX], want[FILE_MAX];
  struct gcp_key *k = NULL;
  struct err e = {0};
  struct buf b;
  size_t n = slurp("service-account.json", json, sizeof(json));

  (void)state;
  assert_int_equal(gcp_key_load(json, n, &k, &e), 0);
  assert_string_equal(gcp_key_project(k), "demo-proj");
  assert_string_equal(gcp_key_token_uri(k), "http://127.0.0.1:1/token");
  n = slurp("jwt-1795737600.txt", want, sizeof(want));
  want[strcspn(want, "\n")] = '\0';
  buf_init(&b, FILE_MAX);
  assert_int_equal(gcp_jwt(k, 1795737600, GCP_SCOPE, &b, &e), 0);
  assert_string_equal(buf_str(&b), want);
  buf_reset(&b);
  assert_int_equal(gcp_token_request(k, 1795737600, GCP_SCOPE, &b, &e), 0);
  assert_int_equal(strncmp(buf_str(&b), prefix, strlen(prefix)), 0);
  assert_string_equal(buf_str(&b) + strlen(prefix), want);
  buf_release(&b);
  gcp_key_free(k);
}

/* A key file with one field replaced by value (JSON text) or, when value
 * is NULL, removed. */
static int
load_changed(const char *field, const char *value, struct err *e)
{
  static char json[FILE_MAX], out[FILE_MAX];
  struct gcp_key *k = NULL;
  char *at, *end;
  char key[64];
  int rc;

  slurp("service-account.json", json, sizeof(json));
  snprintf(key, sizeof(key), "\"%s\": ", field);
  at = strstr(json, key);
  assert_non_null(at);
  end = strchr(at + strlen(key) + 1, '"');
  assert_non_null(end);
  /* the value is a string: cut through its closing quote */
  if (value != NULL)
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - json + strlen(key)),
             json, value, end + 1);
  else
    snprintf(out, sizeof(out), "%.*s\"unused_%s\": \"\"%s",
             (int)(at - json), json, field, end + 1);
  rc = gcp_key_load(out, strlen(out), &k, e);
  gcp_key_free(k);
  return rc;
}

static void
test_a_key_file_that_is_not_one_is_refused_naming_the_field(void **state)
{
  static char json[FILE_MAX];
  struct gcp_key *k = NULL;
  struct err e = {0};
  size_t n;

  (void)state;
  assert_int_equal(load_changed("type", "\"authorized_user\"", &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'type'"));
  assert_int_equal(load_changed("client_email", NULL, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'client_email'"));
  assert_int_equal(load_changed("token_uri", "\"file:///etc/passwd\"", &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'token_uri'"));
  assert_int_equal(load_changed("private_key", "\"not a key\"", &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'private_key'"));
  n = slurp("ec-key.json", json, sizeof(json));
  assert_int_equal(gcp_key_load(json, n, &k, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "not an RSA private key"));
  assert_null(k);
  assert_int_equal(gcp_key_load("[1]", 3, &k, &e), ERR_INVALID);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_jwt_is_the_one_openssl_signs),
      cmocka_unit_test(
          test_a_key_file_that_is_not_one_is_refused_naming_the_field),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
