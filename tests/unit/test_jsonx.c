/*
 * Tests for util/jsonx.c: strict parsing of request bodies and the field
 * table check that names every unknown or mistyped field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "util/jsonx.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

static int
parse(const char *text, json_t **out, struct err *e)
{
  *out = NULL;
  err_clear(e);
  return jsonx_parse_object(text, strlen(text), out, e);
}

static const struct jsonx_field fields[] = {
  {"name", JX_STRING},
  {"gpus", JX_INT},
  {"ratio", JX_NUMBER},
  {"hold", JX_BOOL},
  {"env", JX_OBJECT},
  {"command", JX_ARRAY},
  {"time", JX_STRING_OR_INT},
  {"args", JX_STRING_OR_ARRAY},
  {"any", JX_ANY},
  {NULL, 0},
};

static int
check(const char *text, const char *where, struct err *e)
{
  json_t *obj;
  int rc;

  if (parse(text, &obj, e) != 0)
    fail_msg("test JSON rejected: %s", e->msg);
  rc = jsonx_check(obj, fields, where, e);
  json_decref(obj);
  return rc;
}

static void
test_parse_gives_an_object(void **state)
{
  struct err e;
  json_t *obj;

  (void)state;
  assert_int_equal(parse("{\"a\": [1, 2], \"b\": {}}", &obj, &e), 0);
  assert_true(json_is_object(obj));
  assert_int_equal(json_array_size(json_object_get(obj, "a")), 2);
  json_decref(obj);
}

static void
test_parse_error_names_line_and_column(void **state)
{
  struct err e;
  json_t *obj;

  (void)state;
  assert_int_equal(parse("{\n  \"a\": 1,\n  \"b\": }", &obj, &e),
                   ERR_INVALID);
  assert_null(obj);
  assert_int_equal(e.code, ERR_INVALID);
  assert_contains(e.msg, "malformed JSON at line 3 column 8");
}

static void
test_parse_honours_the_length(void **state)
{
  struct err e;
  json_t *obj = NULL;
  const char *text = "{\"a\":1}garbage";

  (void)state;
  assert_int_equal(jsonx_parse_object(text, 7, &obj, &e), 0);
  json_decref(obj);
  assert_int_equal(jsonx_parse_object(text, strlen(text), &obj, &e),
                   ERR_INVALID);
}

static void
test_non_object_is_rejected(void **state)
{
  struct err e;
  json_t *obj;

  (void)state;
  assert_int_equal(parse("[1, 2]", &obj, &e), ERR_INVALID);
  assert_string_equal(e.msg, "request body must be a JSON object");
  assert_int_equal(parse("42", &obj, &e), ERR_INVALID);
  assert_int_equal(parse("\"s\"", &obj, &e), ERR_INVALID);
  assert_int_equal(parse("", &obj, &e), ERR_INVALID);
  assert_null(obj);
}

static void
test_duplicate_keys_are_rejected(void **state)
{
  struct err e;
  json_t *obj;

  (void)state;
  assert_int_equal(parse("{\"gpus\": 1, \"gpus\": 8}", &obj, &e),
                   ERR_INVALID);
  assert_contains(e.msg, "duplicate");
  assert_null(obj);
}

static void
test_nul_escape_is_rejected(void **state)
{
  struct err e;
  json_t *obj;

  (void)state;
  assert_int_equal(parse("{\"a\": \"x\\u0000y\"}", &obj, &e), ERR_INVALID);
  assert_null(obj);
}

static void
test_check_accepts_known_fields_of_the_right_type(void **state)
{
  struct err e;

  (void)state;
  assert_int_equal(check("{\"name\":\"a\",\"gpus\":2,\"ratio\":0.5,"
                         "\"hold\":true,\"env\":{},\"command\":[],"
                         "\"time\":\"1:00\",\"args\":\"x\",\"any\":[1]}",
                         "", &e),
                   0);
  assert_int_equal(check("{\"ratio\":3,\"time\":60,\"args\":[]}", "", &e),
                   0);
}

static void
test_check_names_an_unknown_field(void **state)
{
  struct err e;

  (void)state;
  assert_int_equal(check("{\"name\":\"a\",\"gpu\":2}", "", &e), ERR_INVALID);
  assert_string_equal(e.msg, "unknown field 'gpu'");
}

static void
test_check_names_a_mistyped_field_and_the_type_wanted(void **state)
{
  struct err e;

  (void)state;
  assert_int_equal(check("{\"gpus\":\"2\"}", "", &e), ERR_INVALID);
  assert_string_equal(e.msg, "field 'gpus' must be an integer");
  assert_int_equal(check("{\"gpus\":2.0}", "", &e), ERR_INVALID);
  assert_int_equal(check("{\"hold\":\"yes\"}", "", &e), ERR_INVALID);
  assert_string_equal(e.msg, "field 'hold' must be a boolean");
  assert_int_equal(check("{\"time\":1.5}", "", &e), ERR_INVALID);
  assert_string_equal(e.msg, "field 'time' must be a string or an integer");
  assert_int_equal(check("{\"env\":[]}", "", &e), ERR_INVALID);
  assert_string_equal(e.msg, "field 'env' must be an object");
}

static void
test_check_prefixes_names_with_where(void **state)
{
  struct err e;

  (void)state;
  assert_int_equal(check("{\"kind\":1}", "sites[0].", &e), ERR_INVALID);
  assert_string_equal(e.msg, "unknown field 'sites[0].kind'");
  assert_int_equal(check("{\"gpus\":true}", "sites[0].", &e), ERR_INVALID);
  assert_string_equal(e.msg, "field 'sites[0].gpus' must be an integer");
}

static void
test_check_accepts_null_for_any_field(void **state)
{
  struct err e;

  (void)state;
  assert_int_equal(check("{\"name\":null,\"gpus\":null,\"env\":null}", "",
                         &e),
                   0);
}

static void
test_check_rejects_a_non_object(void **state)
{
  struct err e;
  json_t *arr = json_array();

  (void)state;
  assert_int_equal(jsonx_check(arr, fields, "", &e), ERR_INVALID);
  json_decref(arr);
}

static void
test_int_in_range_and_default(void **state)
{
  struct err e;
  json_t *obj = json_pack("{s:i,s:n}", "gpus", 8, "nodes");
  int64_t v = -1;

  (void)state;
  assert_int_equal(jsonx_int(obj, "gpus", 0, 8, 1, &v, "", &e), 0);
  assert_int_equal(v, 8);
  assert_int_equal(jsonx_int(obj, "nodes", 1, 10, 3, &v, "", &e), 0);
  assert_int_equal(v, 3);
  assert_int_equal(jsonx_int(obj, "absent", 1, 10, 5, &v, "", &e), 0);
  assert_int_equal(v, 5);
  json_decref(obj);
}

static void
test_int_out_of_range_names_the_field_and_the_range(void **state)
{
  struct err e;
  json_t *obj = json_pack("{s:i,s:i,s:s}", "gpus", -1, "big", 4097, "str",
                          "4");
  int64_t v = 77;

  (void)state;
  assert_int_equal(jsonx_int(obj, "gpus", 0, 4096, 0, &v, "job.", &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "field 'job.gpus' must be between 0 and 4096");
  assert_int_equal(jsonx_int(obj, "big", 0, 4096, 0, &v, "", &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "field 'big' must be between 0 and 4096");
  assert_int_equal(jsonx_int(obj, "str", 0, 4096, 0, &v, "", &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "field 'str' must be an integer");
  assert_int_equal(v, 77);
  json_decref(obj);
}

static void
test_str_and_bool_accessors(void **state)
{
  json_t *obj = json_pack("{s:s,s:i,s:b,s:n}", "s", "v", "i", 1, "b", 1,
                          "n");

  (void)state;
  assert_string_equal(jsonx_str(obj, "s"), "v");
  assert_null(jsonx_str(obj, "i"));
  assert_null(jsonx_str(obj, "absent"));
  assert_true(jsonx_bool(obj, "b", 0));
  assert_int_equal(jsonx_bool(obj, "n", 7), 7);
  assert_int_equal(jsonx_bool(obj, "i", 0), 0);
  json_decref(obj);
}

static void
test_dump_is_compact(void **state)
{
  json_t *obj = json_pack("{s:i,s:[s]}", "a", 1, "b", "x y");
  char *s;

  (void)state;
  s = jsonx_dump(obj);
  assert_string_equal(s, "{\"a\":1,\"b\":[\"x y\"]}");
  free(s);
  json_decref(obj);
}

static void
test_dump_buf_appends_and_respects_the_cap(void **state)
{
  json_t *obj = json_pack("{s:s}", "key", "a long value here");
  struct buf b;

  (void)state;
  buf_init(&b, 64);
  assert_int_equal(buf_adds(&b, ">"), 0);
  assert_int_equal(jsonx_dump_buf(obj, &b), 0);
  assert_string_equal(buf_str(&b), ">{\"key\":\"a long value here\"}");
  buf_release(&b);

  buf_init(&b, 10);
  assert_int_equal(jsonx_dump_buf(obj, &b), ERR_TOO_LARGE);
  assert_true(b.len <= 10);
  buf_release(&b);
  json_decref(obj);
}

static void
test_set_str_and_set_time_write_null_for_absent(void **state)
{
  json_t *obj = json_object();

  (void)state;
  jsonx_set_str(obj, "a", "x");
  jsonx_set_str(obj, "b", NULL);
  jsonx_set_time(obj, "t", 1700000000123LL);
  jsonx_set_time(obj, "z", 0);
  assert_string_equal(jsonx_str(obj, "a"), "x");
  assert_true(json_is_null(json_object_get(obj, "b")));
  assert_string_equal(jsonx_str(obj, "t"), "2023-11-14T22:13:20.123Z");
  assert_true(json_is_null(json_object_get(obj, "z")));
  json_decref(obj);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse_gives_an_object),
    cmocka_unit_test(test_parse_error_names_line_and_column),
    cmocka_unit_test(test_parse_honours_the_length),
    cmocka_unit_test(test_non_object_is_rejected),
    cmocka_unit_test(test_duplicate_keys_are_rejected),
    cmocka_unit_test(test_nul_escape_is_rejected),
    cmocka_unit_test(test_check_accepts_known_fields_of_the_right_type),
    cmocka_unit_test(test_check_names_an_unknown_field),
    cmocka_unit_test(test_check_names_a_mistyped_field_and_the_type_wanted),
    cmocka_unit_test(test_check_prefixes_names_with_where),
    cmocka_unit_test(test_check_accepts_null_for_any_field),
    cmocka_unit_test(test_check_rejects_a_non_object),
    cmocka_unit_test(test_int_in_range_and_default),
    cmocka_unit_test(test_int_out_of_range_names_the_field_and_the_range),
    cmocka_unit_test(test_str_and_bool_accessors),
    cmocka_unit_test(test_dump_is_compact),
    cmocka_unit_test(test_dump_buf_appends_and_respects_the_cap),
    cmocka_unit_test(test_set_str_and_set_time_write_null_for_absent),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
