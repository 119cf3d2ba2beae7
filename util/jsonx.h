/*
 * jansson helpers for strict request validation.
 *
 * Ownership follows jansson's words: "new reference" (caller decrefs),
 * "borrowed reference" (valid while the parent lives).
 *
 * Every REST body and the config file are checked against a field table,
 * so an unknown or mistyped field is an ERR_INVALID that names it:
 *
 *   static const struct jsonx_field fields[] = {
 *     {"name", JX_STRING}, {"gpus", JX_INT}, {NULL, 0}};
 *   if (jsonx_check(obj, fields, "", e) < 0) ...
 */
#ifndef TENBIN_UTIL_JSONX_H
#define TENBIN_UTIL_JSONX_H

#include <jansson.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

enum jsonx_type {
  JX_ANY = 0,
  JX_STRING,
  JX_INT,
  JX_NUMBER, /* integer or real */
  JX_BOOL,
  JX_OBJECT,
  JX_ARRAY,
  JX_STRING_OR_INT, /* e.g. a time limit: 60 or "1:00:00" */
  JX_STRING_OR_ARRAY,
};

struct jsonx_field {
  const char *name; /* NULL ends the table */
  enum jsonx_type type;
};

/*
 * Parse len bytes of JSON text into *out (new reference).  ERR_INVALID
 * with "malformed JSON at line L column C: reason" on failure, and when
 * the top level is not an object.
 */
int jsonx_parse_object(const char *text, size_t len, json_t **out,
                       struct err *e) WARN_UNUSED;
/*
 * Check that obj is an object whose keys all appear in fields with the
 * right type (JSON null is accepted for any field and means "absent").
 * where prefixes field names in messages ("sites[0]." gives
 * "field 'sites[0].kind' ...").
 */
int jsonx_check(const json_t *obj, const struct jsonx_field *fields,
                const char *where, struct err *e) WARN_UNUSED;
/* Borrowed string of obj[key], or NULL when absent, null or not a string. */
const char *jsonx_str(const json_t *obj, const char *key);
/*
 * obj[key] as an integer in [min, max] into *out; dflt when absent or
 * null.  ERR_INVALID naming where+key when out of range.
 */
int jsonx_int(const json_t *obj, const char *key, int64_t min, int64_t max,
              int64_t dflt, int64_t *out, const char *where, struct err *e)
    WARN_UNUSED;
/* obj[key] as a boolean; dflt when absent or null. */
int jsonx_bool(const json_t *obj, const char *key, int dflt);
/*
 * Serialize v compactly (new string, free with free()).  Never NULL.
 */
char *jsonx_dump(const json_t *v);
/* Append v's compact serialization to b. */
int jsonx_dump_buf(const json_t *v, struct buf *b) WARN_UNUSED;
/* Set obj[key] to a new string copy of s, or JSON null when s is NULL. */
void jsonx_set_str(json_t *obj, const char *key, const char *s);
/* Set obj[key] to an ISO 8601 time, or JSON null when ms <= 0. */
void jsonx_set_time(json_t *obj, const char *key, int64_t ms);

#endif
