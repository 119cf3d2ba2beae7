/*
 * Tests for util/err.c: the generated table accessors and the struct err
 * helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "util/err.h"

static void
test_every_code_has_its_name_message_and_status(void **state)
{
  static const struct {
    int code;
    const char *name;
    int status;
    const char *msg;
  } table[] = {
    {ERR_NOMEM, "NOMEM", 500, "out of memory"},
    {ERR_INVALID, "INVALID", 400, "invalid request"},
    {ERR_NOT_FOUND, "NOT_FOUND", 404, "not found"},
    {ERR_CONFLICT, "CONFLICT", 409, "conflict"},
    {ERR_UNPROCESSABLE, "UNPROCESSABLE", 422, "request cannot be satisfied"},
    {ERR_TOO_LARGE, "TOO_LARGE", 413, "too large"},
    {ERR_UNAUTHORIZED, "UNAUTHORIZED", 401, "missing or invalid token"},
    {ERR_FORBIDDEN, "FORBIDDEN", 403, "not allowed"},
    {ERR_IO, "IO", 500, "i/o error"},
    {ERR_DB, "DB", 500, "database error"},
    {ERR_UNAVAILABLE, "UNAVAILABLE", 503, "unavailable"},
    {ERR_INTERNAL, "INTERNAL", 500, "internal error"},
    {ERR_METHOD, "METHOD", 405, "method not allowed"},
    {ERR_TIMEOUT, "TIMEOUT", 504, "timed out"},
    {ERR_CONFIG, "CONFIG", 500, "bad configuration"},
    {ERR_SITE, "SITE", 502, "site error"},
    {ERR_BAD_STATE, "BAD_STATE", 409, "not allowed in the current state"},
  };
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
    assert_string_equal(err_name(table[i].code), table[i].name);
    assert_string_equal(err_str(table[i].code), table[i].msg);
    assert_int_equal(err_http_status(table[i].code), table[i].status);
    assert_int_equal(err_from_name(table[i].name), table[i].code);
  }
}

static void
test_err_from_name_reads_no_code_from_unknown_names(void **state)
{
  (void)state;
  assert_int_equal(err_from_name("TEAPOT"), 0);
  assert_int_equal(err_from_name("OK"), 0);
  assert_int_equal(err_from_name(""), 0);
  /* Names are exact, as err_name writes them. */
  assert_int_equal(err_from_name("not_found"), 0);
  assert_int_equal(err_from_name("NOT_FOUND "), 0);
}

/* A function that takes a format of its own, as the reply writers do. */
static int PRINTF_LIKE(3, 4)
vset_via(struct err *e, int code, const char *fmt, ...)
{
  va_list ap;
  int rc;

  va_start(ap, fmt);
  rc = err_vset(e, code, fmt, ap);
  va_end(ap);
  return rc;
}

static void
test_err_vset_formats_repairs_and_returns_the_code(void **state)
{
  /* 22 CJK characters of 3 bytes: "%.64s" cuts the 22nd after 1 byte */
  char name[22 * 3 + 1];
  struct err e;

  (void)state;
  for (int i = 0; i < 22; i++)
    memcpy(name + 3 * i, "\xe4\xb8\xad", 3);
  name[sizeof(name) - 1] = '\0';
  assert_int_equal(vset_via(&e, ERR_NOT_FOUND, "site '%.64s' not found",
                            name),
                   ERR_NOT_FOUND);
  assert_int_equal(e.code, ERR_NOT_FOUND);
  assert_int_equal(strlen(e.msg), strlen("site '' not found") + 64);
  assert_int_equal((unsigned char)e.msg[6 + 63], '?');
  assert_string_equal(e.msg + 6 + 64, "' not found");
  assert_int_equal(vset_via(NULL, ERR_IO, "%s", "x"), ERR_IO);
}

static void
test_codes_are_negative_and_stable(void **state)
{
  (void)state;
  /* Codes are append-only: these numbers are part of the contract. */
  assert_int_equal(ERR_OK, 0);
  assert_int_equal(ERR_NOMEM, -1);
  assert_int_equal(ERR_INVALID, -2);
  assert_int_equal(ERR_NOT_FOUND, -3);
  assert_int_equal(ERR_BAD_STATE, -17);
}

static void
test_ok_maps_to_200(void **state)
{
  (void)state;
  assert_string_equal(err_name(0), "OK");
  assert_string_equal(err_str(0), "ok");
  assert_int_equal(err_http_status(0), 200);
}

static void
test_unknown_code_maps_to_unknown_and_500(void **state)
{
  (void)state;
  assert_string_equal(err_name(-999), "UNKNOWN");
  assert_string_equal(err_name(5), "UNKNOWN");
  assert_string_equal(err_str(-999), "unknown error");
  assert_int_equal(err_http_status(-999), 500);
}

static void
test_err_set_records_code_and_message_and_returns_code(void **state)
{
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(err_set(&e, ERR_INVALID, "field '%s': must be %d", "x", 3),
                   ERR_INVALID);
  assert_int_equal(e.code, ERR_INVALID);
  assert_string_equal(e.msg, "field 'x': must be 3");
  assert_string_equal(err_msg(&e), "field 'x': must be 3");
}

static void
test_err_set_with_null_only_returns_the_code(void **state)
{
  (void)state;
  assert_int_equal(err_set(NULL, ERR_NOT_FOUND, "job '%s'", "j1"),
                   ERR_NOT_FOUND);
}

static void
test_err_set_truncates_a_long_message(void **state)
{
  struct err e;
  char big[1000];

  (void)state;
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  err_set(&e, ERR_INVALID, "%s", big);
  assert_int_equal(strlen(e.msg), ERR_MSG_SIZE - 1);
}

static void
test_err_prefix_prepends_and_returns_the_code(void **state)
{
  struct err e;

  (void)state;
  err_set(&e, ERR_INVALID, "must be an integer");
  assert_int_equal(err_prefix(&e, "sites[%d]", 2), ERR_INVALID);
  assert_string_equal(e.msg, "sites[2]: must be an integer");
  assert_int_equal(e.code, ERR_INVALID);
}

static void
test_err_prefix_keeps_the_result_within_the_buffer(void **state)
{
  struct err e;
  char big[400];

  (void)state;
  memset(big, 'p', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  err_set(&e, ERR_INVALID, "%s", big);
  err_prefix(&e, "%s", big);
  assert_true(strlen(e.msg) < ERR_MSG_SIZE);
  assert_non_null(strstr(e.msg, ": "));
}

static void
test_err_prefix_with_null_is_harmless(void **state)
{
  (void)state;
  assert_true(err_prefix(NULL, "x") < 0);
}

static void
test_err_clear_resets_and_msg_falls_back_to_the_default(void **state)
{
  struct err e;

  (void)state;
  err_set(&e, ERR_CONFLICT, "job 'a' exists");
  err_clear(&e);
  assert_int_equal(e.code, 0);
  assert_string_equal(e.msg, "");
  e.code = ERR_NOT_FOUND;
  assert_string_equal(err_msg(&e), "not found");
  err_clear(NULL);
}

static void
test_message_cut_inside_a_character_stays_valid_utf8(void **state)
{
  /* "xy" and 127 copies of U+00E9 (2 bytes each): the 255 bytes kept
   * end in the first byte of the last one, and "%.5s" cuts one too */
  char name[2 * 127 + 1];
  struct err e;

  (void)state;
  for (int i = 0; i < 127; i++)
    memcpy(name + 2 * i, "\xc3\xa9", 2);
  name[sizeof(name) - 1] = '\0';
  err_set(&e, ERR_INVALID, "xy%s", name);
  assert_int_equal(strlen(e.msg), ERR_MSG_SIZE - 1);
  assert_int_equal((unsigned char)e.msg[ERR_MSG_SIZE - 2], '?');
  assert_int_equal((unsigned char)e.msg[ERR_MSG_SIZE - 3], 0xa9);
  err_set(&e, ERR_INVALID, "'%.5s'", name);
  assert_string_equal(e.msg, "'\xc3\xa9\xc3\xa9?'");
  err_prefix(&e, "field '%.3s'", name);
  assert_string_equal(e.msg, "field '\xc3\xa9?': '\xc3\xa9\xc3\xa9?'");
}

static void
test_err_recode_keeps_the_message_and_changes_the_code(void **state)
{
  struct err e = {0};

  (void)state;
  err_set(&e, ERR_INVALID, "field 'x': must be a string");
  assert_int_equal(err_recode(&e, ERR_CONFIG), ERR_CONFIG);
  assert_int_equal(e.code, ERR_CONFIG);
  assert_string_equal(e.msg, "field 'x': must be a string");
  assert_int_equal(err_recode(NULL, ERR_CONFIG), ERR_CONFIG);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_every_code_has_its_name_message_and_status),
    cmocka_unit_test(test_codes_are_negative_and_stable),
    cmocka_unit_test(test_err_from_name_reads_no_code_from_unknown_names),
    cmocka_unit_test(test_err_vset_formats_repairs_and_returns_the_code),
    cmocka_unit_test(test_ok_maps_to_200),
    cmocka_unit_test(test_unknown_code_maps_to_unknown_and_500),
    cmocka_unit_test(test_err_set_records_code_and_message_and_returns_code),
    cmocka_unit_test(test_err_set_with_null_only_returns_the_code),
    cmocka_unit_test(test_err_set_truncates_a_long_message),
    cmocka_unit_test(test_err_prefix_prepends_and_returns_the_code),
    cmocka_unit_test(test_err_prefix_keeps_the_result_within_the_buffer),
    cmocka_unit_test(test_err_prefix_with_null_is_harmless),
    cmocka_unit_test(
        test_err_clear_resets_and_msg_falls_back_to_the_default),
    cmocka_unit_test(test_message_cut_inside_a_character_stays_valid_utf8),
    cmocka_unit_test(test_err_recode_keeps_the_message_and_changes_the_code),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
