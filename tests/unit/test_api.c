/*
 * Tests that each daemon's OpenAPI file and its route table describe the
 * same API: api/openapi.yaml and tenbind's api_routes[],
 * agent/agent-openapi.yaml and tenbin-agent's agent_routes.  Every
 * (method, pattern) of a table is an operation of its file and the other
 * way round, each operation's x-tenbin-role is the route's least role
 * (the agent's routes have none, and its file names none), and only the
 * public routes say "security: []".  Also that no table has two routes
 * for the same requests.
 *
 * The file is read as text, with no YAML library: it keeps a regular
 * layout (path keys at an indent of two spaces, methods at four, the
 * keys checked here at six; see the comment at its top), and the parser
 * below rejects anything else at those indents rather than guessing, so
 * a layout change fails loudly instead of hiding operations.  The first
 * tests run the parser on small inputs to show that it finds what it
 * should and refuses what it should.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_internal.h"
#include "agent/agent.h"
#include "util/alloc.h"
#include "util/buf.h"

/* The file is a few tens of KiB; a cap keeps a mistake from eating RAM. */
#define OPENAPI_MAX_BYTES (1024 * 1024)
#define OPS_MAX 64
#define KEY_MAX 256
#define WHY_MAX 256

/* One operation of the file. */
struct op {
  char method[8];     /* upper-case, as in the route tables */
  char path[KEY_MAX]; /* "/v1/jobs/{id}/cancel" */
  char role[16];      /* x-tenbin-role, "" when absent */
  int public;         /* 1 when it says "security: []" */
  int line;
};

struct spec {
  struct op ops[OPS_MAX];
  size_t n;
  char why[WHY_MAX]; /* what the parser refused, and on which line */
};

static const char *const http_methods[] = {
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
    NULL};

/* Keys a path item may hold besides its operations. */
static const char *const path_item_keys[] = {
    "parameters", "summary", "description", "servers", "$ref", NULL};

static int
in_list(const char *const *list, const char *s)
{
  for (size_t i = 0; list[i] != NULL; i++) {
    if (strcmp(list[i], s) == 0)
      return 1;
  }
  return 0;
}

/*
 * Split one "key: value" line (s, len bytes: the line after its indent,
 * with no newline) into key (copied, unquoted) and *value (pointing into
 * s, trimmed, a trailing comment cut off).  -1 when the line is not a
 * mapping key or the key does not fit.
 */
static int
split_key(const char *s, size_t len, char *key, size_t keycap,
          const char **value, size_t *vlen)
{
  const char *k = s;
  const char *v;
  size_t klen;
  size_t i = 0;
  size_t n;

  if (len > 0 && (s[0] == '"' || s[0] == '\'')) {
    const char *close = memchr(s + 1, s[0], len - 1);

    if (close == NULL)
      return -1;
    k = s + 1;
    klen = (size_t)(close - k);
    i = (size_t)(close - s) + 1;
    if (i >= len || s[i] != ':')
      return -1;
  } else {
    while (i < len && !(s[i] == ':' && (i + 1 == len || s[i + 1] == ' ')))
      i++;
    if (i == len)
      return -1;
    klen = i;
  }
  if (klen == 0 || klen >= keycap)
    return -1;
  memcpy(key, k, klen);
  key[klen] = '\0';
  i++; /* the colon */
  while (i < len && s[i] == ' ')
    i++;
  v = s + i;
  n = len - i;
  for (size_t j = 0; j < n; j++) {
    if (v[j] == '#' && (j == 0 || v[j - 1] == ' ')) {
      n = j;
      break;
    }
  }
  while (n > 0 && v[n - 1] == ' ')
    n--;
  *value = v;
  *vlen = n;
  return 0;
}

static int PRINTF_LIKE(3, 4)
refuse(struct spec *sp, int line, const char *fmt, ...)
{
  va_list ap;
  int n = snprintf(sp->why, sizeof(sp->why), "line %d: ", line);

  va_start(ap, fmt);
  vsnprintf(sp->why + n, sizeof(sp->why) - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

/* Append formatted text to the NUL-terminated msg of cap bytes (cut at
 * the end if need be). */
static void PRINTF_LIKE(3, 4)
append(char *msg, size_t cap, const char *fmt, ...)
{
  size_t used = strlen(msg);
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg + used, cap - used, fmt, ap);
  va_end(ap);
}

static int
value_is(const char *value, size_t vlen, const char *s)
{
  return vlen == strlen(s) && memcmp(value, s, vlen) == 0;
}

/* Handle a line at the indent of path keys (2). */
static int
on_path_key(struct spec *sp, int line, const char *key, size_t vlen,
            char *path, size_t pathcap)
{
  if (key[0] != '/' || vlen != 0)
    return refuse(sp, line, "expected a path key such as '  /v1/x:', got "
                  "'%.100s'", key);
  snprintf(path, pathcap, "%s", key);
  return 0;
}

/* Handle a line at the indent of operations (4); *op is set to the new
 * operation, or NULL for another key of the path item. */
static int
on_method_key(struct spec *sp, int line, const char *key, size_t vlen,
              const char *path, struct op **op)
{
  struct op *o;

  *op = NULL;
  if (path[0] == '\0')
    return refuse(sp, line, "key '%.100s' outside any path", key);
  if (in_list(path_item_keys, key))
    return 0;
  if (!in_list(http_methods, key) || vlen != 0)
    return refuse(sp, line, "expected a lower-case HTTP method, got "
                  "'%.100s'", key);
  if (sp->n == OPS_MAX)
    return refuse(sp, line, "more than %d operations", OPS_MAX);
  o = &sp->ops[sp->n++];
  for (size_t i = 0; key[i] != '\0' && i + 1 < sizeof(o->method); i++)
    o->method[i] = (char)(key[i] - 'a' + 'A');
  snprintf(o->path, sizeof(o->path), "%s", path);
  o->line = line;
  *op = o;
  return 0;
}

/*
 * Collect the operations under the top-level "paths:" key of text into
 * sp.  0, or -1 with sp->why saying what was refused where.
 */
static int
parse_openapi(const char *text, struct spec *sp)
{
  const char *p = text;
  int line = 0;
  int in_paths = 0;
  int seen_paths = 0;
  char path[KEY_MAX] = "";
  struct op *op = NULL;

  memset(sp, 0, sizeof(*sp));
  while (*p != '\0') {
    const char *eol = strchr(p, '\n');
    size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
    const char *line_start = p;
    size_t indent = 0;
    char key[KEY_MAX];
    const char *value;
    size_t vlen;
    int rc = 0;

    p = eol != NULL ? eol + 1 : p + len;
    line++;
    if (len > 0 && line_start[len - 1] == '\r')
      len--;
    while (indent < len && line_start[indent] == ' ')
      indent++;
    if (indent < len && line_start[indent] == '\t')
      return refuse(sp, line, "a tab in the indent");
    if (indent == len || line_start[indent] == '#')
      continue;
    if (indent == 0) {
      /* A new top-level key ends the paths section. */
      in_paths = split_key(line_start, len, key, sizeof(key), &value,
                           &vlen) == 0 &&
                 strcmp(key, "paths") == 0 && vlen == 0;
      seen_paths |= in_paths;
      path[0] = '\0';
      op = NULL;
      continue;
    }
    if (!in_paths || indent > 6)
      continue;
    if (indent % 2 != 0)
      return refuse(sp, line, "an indent of %zu spaces (2, 4 or 6 expected)",
                    indent);
    if (split_key(line_start + indent, len - indent, key, sizeof(key),
                  &value, &vlen) < 0) {
      if (indent == 6)
        continue; /* e.g. a list item of a path's parameters */
      return refuse(sp, line, "expected a key, got '%.*s'",
                    (int)(len - indent > 100 ? 100 : len - indent),
                    line_start + indent);
    }
    if (indent == 2) {
      rc = on_path_key(sp, line, key, vlen, path, sizeof(path));
      op = NULL;
    } else if (indent == 4) {
      rc = on_method_key(sp, line, key, vlen, path, &op);
    } else if (op != NULL && strcmp(key, "x-tenbin-role") == 0) {
      snprintf(op->role, sizeof(op->role), "%.*s", (int)vlen, value);
    } else if (op != NULL && strcmp(key, "security") == 0) {
      op->public = value_is(value, vlen, "[]");
    }
    if (rc < 0)
      return rc;
  }
  if (!seen_paths)
    return refuse(sp, line, "no top-level key 'paths'");
  return 0;
}

static const struct op *
find_op(const struct spec *sp, const char *method, const char *path)
{
  for (size_t i = 0; i < sp->n; i++) {
    if (strcmp(sp->ops[i].method, method) == 0 &&
        strcmp(sp->ops[i].path, path) == 0)
      return &sp->ops[i];
  }
  return NULL;
}

static const struct http_route *
find_route(const struct http_routes *t, const char *method, const char *path)
{
  for (size_t i = 0; i < t->count; i++) {
    const struct http_route *r = http_routes_at(t, i);

    if (strcmp(r->method, method) == 0 && strcmp(r->pattern, path) == 0)
      return r;
  }
  return NULL;
}

/*
 * Whether two patterns match the same request paths: equal segment by
 * segment, where any "{x}" segment equals any "{y}" one.
 */
static int
same_shape(const char *a, const char *b)
{
  while (*a != '\0' && *b != '\0') {
    if (*a == '{' && *b == '{') {
      a = strchr(a, '}');
      b = strchr(b, '}');
      if (a == NULL || b == NULL)
        return 0;
    } else if (*a != *b) {
      return 0;
    }
    a++;
    b++;
  }
  return *a == '\0' && *b == '\0';
}

/* ---- the files ---- */

static const char *
broker_role_of(int role)
{
  return broker_role_name((enum broker_role)role);
}

/* One daemon's API: its file, its table, and how its roles are named. */
struct daemon_api {
  const char *file;           /* from the source root */
  struct http_routes routes;
  const char *(*role_name)(int role); /* NULL: routes have no role */
  struct spec spec;
  int rc;                     /* of reading and parsing the file */
};

struct fixture {
  struct daemon_api apis[2];
};

static int
read_file(const char *path, struct buf *out, char *why, size_t whylen)
{
  FILE *f = fopen(path, "rb");
  char chunk[4096];
  int rc = 0;

  if (f == NULL) {
    snprintf(why, whylen, "cannot open '%s'", path);
    return -1;
  }
  for (;;) {
    size_t n = fread(chunk, 1, sizeof(chunk), f);

    if (n == 0)
      break;
    if (buf_add(out, chunk, n) < 0) {
      snprintf(why, whylen, "'%s' is larger than %d bytes", path,
               OPENAPI_MAX_BYTES);
      rc = -1;
      break;
    }
  }
  if (rc == 0 && ferror(f)) {
    snprintf(why, whylen, "cannot read '%s'", path);
    rc = -1;
  }
  fclose(f);
  return rc;
}

static void
load(struct daemon_api *d)
{
  char path[512];
  struct buf text;

  snprintf(path, sizeof(path), "%s/%s", TENBIN_SOURCE_DIR, d->file);
  buf_init(&text, OPENAPI_MAX_BYTES);
  d->rc = read_file(path, &text, d->spec.why, sizeof(d->spec.why));
  if (d->rc == 0)
    d->rc = parse_openapi(buf_str(&text), &d->spec);
  buf_release(&text);
}

static int
group_setup(void **state)
{
  struct fixture *fx = xcalloc(1, sizeof(*fx));

  fx->apis[0].file = "api/openapi.yaml";
  fx->apis[0].routes.base = api_routes;
  fx->apis[0].routes.count = api_route_count;
  fx->apis[0].routes.size = sizeof(api_routes[0]);
  fx->apis[0].role_name = broker_role_of;
  fx->apis[1].file = "agent/agent-openapi.yaml";
  fx->apis[1].routes = agent_routes;
  for (size_t i = 0; i < 2; i++)
    load(&fx->apis[i]);
  *state = fx;
  return 0;
}

static int
group_teardown(void **state)
{
  free(*state);
  return 0;
}

/* Daemon i's API with its parsed file, or a failure saying why there is
 * none. */
static const struct daemon_api *
api_of(void **state, size_t i)
{
  const struct fixture *fx = *state;
  const struct daemon_api *d = &fx->apis[i];

  if (d->rc != 0)
    fail_msg("%s: %s", d->file, d->spec.why);
  return d;
}

#define FOR_EACH_API(d, state)                                            \
  for (size_t api_i_ = 0; api_i_ < 2; api_i_++)                         \
    for (const struct daemon_api *d = api_of(state, api_i_); d != NULL; \
         d = NULL)

/* ---- the parser ---- */

static const char sample[] =
    "openapi: 3.0.3\n"
    "# a comment\n"
    "paths:\n"
    "  /a:\n"
    "    parameters:\n"
    "      - name: x\n"
    "    get:\n"
    "      x-tenbin-role: viewer  # least role\n"
    "      security: []\n"
    "      description: |\n"
    "        post:\n"
    "    post:\n"
    "      x-tenbin-role: admin\n"
    "      security:\n"
    "        - bearerAuth: []\n"
    "\n"
    "  \"/b/{id}\":\n"
    "    summary: b\n"
    "    delete:\n"
    "components:\n"
    "  x:\n"
    "    put:\n";

static void
test_parser_reads_paths_and_methods_at_their_indents(void **state)
{
  static struct spec parsed;
  struct spec *sp = &parsed;

  (void)state;
  assert_int_equal(parse_openapi(sample, sp), 0);
  assert_int_equal(sp->n, 3);
  assert_string_equal(sp->ops[0].method, "GET");
  assert_string_equal(sp->ops[0].path, "/a");
  assert_string_equal(sp->ops[0].role, "viewer");
  assert_int_equal(sp->ops[0].public, 1);
  assert_int_equal(sp->ops[0].line, 7);
  assert_string_equal(sp->ops[1].method, "POST");
  assert_string_equal(sp->ops[1].path, "/a");
  assert_string_equal(sp->ops[1].role, "admin");
  assert_int_equal(sp->ops[1].public, 0);
  assert_string_equal(sp->ops[2].method, "DELETE");
  assert_string_equal(sp->ops[2].path, "/b/{id}");
  assert_string_equal(sp->ops[2].role, "");
}

static void
test_parser_refuses_what_it_cannot_read_naming_the_line(void **state)
{
  static const struct {
    const char *text;
    const char *why;
  } cases[] = {
      {"paths:\n  /a:\n    gett:\n", "line 3: expected a lower-case HTTP "
                                      "method, got 'gett'"},
      {"paths:\n  /a:\n    GET:\n", "line 3: expected a lower-case HTTP "
                                     "method, got 'GET'"},
      {"paths:\n  a:\n", "line 2: expected a path key"},
      {"paths:\n  /a: {}\n", "line 2: expected a path key"},
      {"paths:\n  /a:\n\t  get:\n", "line 3: a tab in the indent"},
      {"paths:\n    get:\n", "line 2: key 'get' outside any path"},
      {"paths:\n  /a:\n     get:\n", "line 3: an indent of 5 spaces"},
      {"paths:\n  /a\n", "line 2: expected a key, got '/a'"},
      {"openapi: 3.0.3\ninfo:\n  /a:\n    get:\n", "no top-level key "
                                                   "'paths'"},
  };
  static struct spec parsed;
  struct spec *sp = &parsed;

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (parse_openapi(cases[i].text, sp) == 0)
      fail_msg("case %zu was accepted", i);
    if (strstr(sp->why, cases[i].why) == NULL)
      fail_msg("case %zu: got \"%s\", wanted \"%s\"", i, sp->why,
               cases[i].why);
  }
}

static void
test_patterns_of_the_same_shape_are_told_apart_from_others(void **state)
{
  (void)state;
  assert_true(same_shape("/v1/jobs/{id}", "/v1/jobs/{name}"));
  assert_true(same_shape("/v1/jobs", "/v1/jobs"));
  assert_false(same_shape("/v1/jobs/{id}", "/v1/jobs/{id}/log"));
  assert_false(same_shape("/v1/jobs/{id}", "/v1/jobs/list"));
  assert_false(same_shape("/v1/jobs", "/v1/job"));
}

/* ---- each file against its route table ---- */

static void
test_every_route_is_described_in_openapi(void **state)
{
  FOR_EACH_API(d, state) {
    char missing[2048] = "";

    assert_true(d->routes.count > 0);
    for (size_t i = 0; i < d->routes.count; i++) {
      const struct http_route *r = http_routes_at(&d->routes, i);

      if (find_op(&d->spec, r->method, r->pattern) == NULL)
        append(missing, sizeof(missing), " %s %s;", r->method, r->pattern);
    }
    if (missing[0] != '\0')
      fail_msg("routes missing from %s:%s", d->file, missing);
  }
}

static void
test_openapi_describes_no_route_that_does_not_exist(void **state)
{
  FOR_EACH_API(d, state) {
    const struct spec *sp = &d->spec;
    char extra[2048] = "";

    assert_true(sp->n > 0);
    for (size_t i = 0; i < sp->n; i++) {
      if (find_route(&d->routes, sp->ops[i].method, sp->ops[i].path) ==
          NULL)
        append(extra, sizeof(extra), " %s %s (line %d);", sp->ops[i].method,
               sp->ops[i].path, sp->ops[i].line);
    }
    if (extra[0] != '\0')
      fail_msg("operations of %s that its route table lacks:%s", d->file,
               extra);
  }
}

static void
test_openapi_describes_no_operation_twice(void **state)
{
  FOR_EACH_API(d, state) {
    const struct spec *sp = &d->spec;

    for (size_t i = 0; i < sp->n; i++) {
      for (size_t j = i + 1; j < sp->n; j++) {
        if (strcmp(sp->ops[i].method, sp->ops[j].method) == 0 &&
            strcmp(sp->ops[i].path, sp->ops[j].path) == 0)
          fail_msg("%s: %s %s is described on lines %d and %d", d->file,
                   sp->ops[i].method, sp->ops[i].path, sp->ops[i].line,
                   sp->ops[j].line);
      }
    }
  }
}

static void
test_route_table_has_no_duplicates(void **state)
{
  FOR_EACH_API(d, state) {
    for (size_t i = 0; i < d->routes.count; i++) {
      const struct http_route *a = http_routes_at(&d->routes, i);

      for (size_t j = i + 1; j < d->routes.count; j++) {
        const struct http_route *b = http_routes_at(&d->routes, j);

        /* The router takes the first match, so a second route of the
         * same method and shape could never be reached. */
        if (strcmp(a->method, b->method) == 0 &&
            same_shape(a->pattern, b->pattern))
          fail_msg("the table of %s: route %zu %s %s shadows route %zu "
                   "%s %s", d->file, i, a->method, a->pattern, j,
                   b->method, b->pattern);
      }
    }
  }
}

static void
test_openapi_roles_and_public_routes_match_the_route_table(void **state)
{
  FOR_EACH_API(d, state) {
    for (size_t i = 0; i < d->routes.count; i++) {
      const struct http_route *r = http_routes_at(&d->routes, i);
      const struct op *o = find_op(&d->spec, r->method, r->pattern);
      const char *role = d->role_name != NULL ? d->role_name(r->role) : "";
      int public = (r->flags & HTTP_ROUTE_PUBLIC) != 0;

      if (o == NULL)
        continue; /* reported by test_every_route_is_described_in_openapi */
      if (strcmp(o->role, role) != 0)
        fail_msg("%s: %s %s (line %d): x-tenbin-role is '%s', the route "
                 "table says '%s'", d->file, r->method, r->pattern, o->line,
                 o->role, role);
      if (o->public != public)
        fail_msg("%s: %s %s (line %d): %s", d->file, r->method, r->pattern,
                 o->line,
                 public ? "a public route needs 'security: []'"
                        : "'security: []' on a route that needs a token");
    }
  }
}

static void
test_csv_fields_are_quoted_and_formulas_neutralized(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(api__csv_field(&b, "vision", 0), 0);
  assert_int_equal(api__csv_field(&b, NULL, 0), 0);
  assert_int_equal(api__csv_field(&b, "a,b", 0), 0);
  assert_int_equal(api__csv_field(&b, "say \"hi\"", 0), 0);
  assert_int_equal(api__csv_field(&b, "=HYPERLINK(\"x\")", 0), 0);
  assert_int_equal(api__csv_field(&b, "+1", 0), 0);
  assert_int_equal(api__csv_field(&b, "-h100", 0), 0);
  assert_int_equal(api__csv_field(&b, "@SUM(A1)", 0), 0);
  assert_int_equal(api__csv_field(&b, "\tx", 1), 0);
  assert_string_equal(buf_str(&b),
                      "vision,,\"a,b\",\"say \"\"hi\"\"\",\"'=HYPERLINK(\"\"x\"\")\","
                      "\"'+1\",\"'-h100\",\"'@SUM(A1)\",\"'\tx\"\r\n");
  buf_release(&b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parser_reads_paths_and_methods_at_their_indents),
      cmocka_unit_test(
          test_parser_refuses_what_it_cannot_read_naming_the_line),
      cmocka_unit_test(
          test_patterns_of_the_same_shape_are_told_apart_from_others),
      cmocka_unit_test(test_every_route_is_described_in_openapi),
      cmocka_unit_test(test_openapi_describes_no_route_that_does_not_exist),
      cmocka_unit_test(test_openapi_describes_no_operation_twice),
      cmocka_unit_test(test_route_table_has_no_duplicates),
      cmocka_unit_test(
          test_openapi_roles_and_public_routes_match_the_route_table),
      cmocka_unit_test(test_csv_fields_are_quoted_and_formulas_neutralized),
  };

  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
