/*
 * Token answers (oauth.h).
 */
#include "adapters/oauth.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/jsonx.h"

/* "expires_in" as a positive number of seconds, or 0. */
static int64_t
lifetime(const json_t *v)
{
  const char *s = json_string_value(v);
  char *end;
  long long n;

  if (json_is_integer(v))
    return json_integer_value(v) > 0 ? json_integer_value(v) : 0;
  if (s == NULL || s[0] == '\0')
    return 0;
  n = strtoll(s, &end, 10);
  return *end == '\0' && n > 0 ? n : 0;
}

int
oauth_token_parse(const char *json, size_t len, char token[OAUTH_TOKEN_LEN],
                  int64_t *expires_in_s, struct err *e)
{
  json_t *obj = NULL;
  const char *t, *why;
  int64_t ttl;
  int rc = jsonx_parse_object(json, len, &obj, e);

  token[0] = '\0';
  if (rc < 0) {
    rc = err_set(e, ERR_SITE, "the token endpoint answered no JSON object");
    goto out;
  }
  why = jsonx_str(obj, "error");
  if (why != NULL) {
    const char *d = jsonx_str(obj, "error_description");

    rc = err_set(e, ERR_UNAUTHORIZED, "the token endpoint refused the "
                 "credentials: %.64s%s%.200s", why, d != NULL ? ": " : "",
                 d != NULL ? d : "");
    goto out;
  }
  t = jsonx_str(obj, "access_token");
  ttl = lifetime(json_object_get(obj, "expires_in"));
  if (t == NULL || t[0] == '\0' || strlen(t) >= OAUTH_TOKEN_LEN ||
      ttl <= 0) {
    rc = err_set(e, ERR_SITE, "the token endpoint's answer has no usable "
                 "access_token and expires_in");
    goto out;
  }
  memcpy(token, t, strlen(t) + 1);
  *expires_in_s = ttl;
out:
  json_decref(obj);
  return rc;
}
