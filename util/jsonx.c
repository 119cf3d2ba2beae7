/*
 * Strict JSON field validation on top of jansson.
 */
#include "jsonx.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "timeutil.h"

int
jsonx_parse_object(const char *text, size_t len, json_t **out, struct err *e)
{
  json_error_t jerr;
  json_t *v;

  /* JSON_REJECT_DUPLICATES: "a":1,"a":2 is ambiguous, so refuse it. */
  v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (v == NULL)
    return err_set(e, ERR_INVALID,
                   "malformed JSON at line %d column %d: %s", jerr.line,
                   jerr.column, jerr.text);
  if (!json_is_object(v)) {
    json_decref(v);
    return err_set(e, ERR_INVALID, "request body must be a JSON object");
  }
  *out = v;
  return 0;
}

static const char *
type_name(enum jsonx_type t)
{
  switch (t) {
  case JX_STRING:
    return "a string";
  case JX_INT:
    return "an integer";
  case JX_NUMBER:
    return "a number";
  case JX_BOOL:
    return "a boolean";
  case JX_OBJECT:
    return "an object";
  case JX_ARRAY:
    return "an array";
  case JX_STRING_OR_INT:
    return "a string or an integer";
  case JX_STRING_OR_ARRAY:
    return "a string or an array";
  case JX_ANY:
    break;
  }
  return "any value";
}

static int
type_ok(const json_t *v, enum jsonx_type t)
{
  switch (t) {
  case JX_ANY:
    return 1;
  case JX_STRING:
    return json_is_string(v);
  case JX_INT:
    return json_is_integer(v);
  case JX_NUMBER:
    return json_is_number(v);
  case JX_BOOL:
    return json_is_boolean(v);
  case JX_OBJECT:
    return json_is_object(v);
  case JX_ARRAY:
    return json_is_array(v);
  case JX_STRING_OR_INT:
    return json_is_string(v) || json_is_integer(v);
  case JX_STRING_OR_ARRAY:
    return json_is_string(v) || json_is_array(v);
  }
  return 0;
}

int
jsonx_check(const json_t *obj, const struct jsonx_field *fields,
            const char *where, struct err *e)
{
  const char *key;
  json_t *v;

  if (!json_is_object(obj))
    return err_set(e, ERR_INVALID, "'%s' must be an object", where);
  json_object_foreach((json_t *)obj, key, v) {
    const struct jsonx_field *f = fields;

    while (f->name != NULL && strcmp(f->name, key) != 0)
      f++;
    if (f->name == NULL)
      return err_set(e, ERR_INVALID, "unknown field '%s%.64s'", where, key);
    if (!json_is_null(v) && !type_ok(v, f->type))
      return err_set(e, ERR_INVALID, "field '%s%s' must be %s", where, key,
                     type_name(f->type));
  }
  return 0;
}

const char *
jsonx_str(const json_t *obj, const char *key)
{
  return json_string_value(json_object_get(obj, key));
}

int
jsonx_int(const json_t *obj, const char *key, int64_t min, int64_t max,
          int64_t dflt, int64_t *out, const char *where, struct err *e)
{
  json_t *v = json_object_get(obj, key);
  json_int_t n;

  if (v == NULL || json_is_null(v)) {
    *out = dflt;
    return 0;
  }
  if (!json_is_integer(v))
    return err_set(e, ERR_INVALID, "field '%s%s' must be an integer", where,
                   key);
  n = json_integer_value(v);
  if (n < min || n > max)
    return err_set(e, ERR_INVALID,
                   "field '%s%s' must be between %lld and %lld", where, key,
                   (long long)min, (long long)max);
  *out = n;
  return 0;
}

int
jsonx_bool(const json_t *obj, const char *key, int dflt)
{
  json_t *v = json_object_get(obj, key);

  if (!json_is_boolean(v))
    return dflt;
  return json_is_true(v);
}

char *
jsonx_dump(const json_t *v)
{
  char *s = json_dumps(v, JSON_COMPACT);

  if (s == NULL) {
    /* jansson only fails on OOM or on invalid input we never build. */
    return xstrdup("null");
  }
  return s;
}

static int
dump_cb(const char *data, size_t size, void *arg)
{
  return buf_add(arg, data, size) < 0 ? -1 : 0;
}

int
jsonx_dump_buf(const json_t *v, struct buf *b)
{
  size_t len = b->len;

  if (json_dump_callback(v, dump_cb, b, JSON_COMPACT) < 0) {
    /* Leave b as it was, like buf_add does on overflow. */
    b->len = len;
    if (b->data != NULL)
      b->data[len] = '\0';
    return ERR_TOO_LARGE;
  }
  return 0;
}

void
jsonx_set_str(json_t *obj, const char *key, const char *s)
{
  json_object_set_new(obj, key, s != NULL ? json_string(s) : json_null());
}

void
jsonx_set_time(json_t *obj, const char *key, int64_t ms)
{
  char stamp[40];

  if (ms <= 0) {
    json_object_set_new(obj, key, json_null());
    return;
  }
  time_format_iso(ms, stamp, sizeof(stamp));
  json_object_set_new(obj, key, json_string(stamp));
}
