/*
 * Tests for sync/manifest_text.c: the writer gives byte for byte what
 * jansson gave (version ids hash these bytes); the reader decodes what a JSON DOM
 * parser (jansson) decodes, whitespace, key order and escapes included;
 * refuses what jansson refused (NUL, lone surrogates, bad UTF-8, 64-bit
 * overflow, duplicate keys, deep nesting); and never reads past the text
 * (every prefix and random corruptions of a document, on exact-size heap
 * copies under ASan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/manifest.h"
#include "sync/manifest_text.h"
#include "util/buf.h"
#include "util/hash.h"

/* A heap copy of exactly n bytes, so reading byte n is an ASan error. */
static char *
exact_copy(const char *p, size_t n)
{
  char *c = malloc(n > 0 ? n : 1);

  assert_non_null(c);
  memcpy(c, p, n);
  return c;
}

/* Read every entry of text; the count, or the error code. */
static int
read_all(const char *text, size_t len, struct err *e)
{
  char *copy = exact_copy(text, len);
  struct mtext_reader r;
  struct mtext_entry o;
  int rc, n = 0;

  mtext_init(&r, copy, len);
  while ((rc = mtext_next(&r, &o, e)) == 1)
    n++;
  mtext_release(&r);
  free(copy);
  return rc < 0 ? rc : n;
}

static void
test_reads_fields_in_any_order_and_with_whitespace(void **state)
{
  static const char text[] =
      " {\n \"format\" : 1 ,\"entries\" :[ {\"type\":\"file\", \"size\":7,"
      "\"path\":\"a b\", \"mode\": 420, \"mtime_ns\" : -5,\"sha256\":\"x\","
      "\"segments\":[\"s0\", 3, \"s2\"], \"zz\": {\"k\":[1,true,null]},"
      " \"seglens\" : [ 8388608 ,\"x\", 1.5, -2, 33554432 ,[7],0]},"
      "\t{\"path\":\"l\",\"target\":\"t\",\"type\":\"link\"} ] } \n";
  char *copy = exact_copy(text, sizeof(text) - 1);
  struct mtext_reader r;
  struct mtext_entry o;
  struct err e = {0};

  (void)state;
  mtext_init(&r, copy, sizeof(text) - 1);
  assert_int_equal(mtext_next(&r, &o, &e), 1);
  assert_true(o.is_object);
  assert_string_equal(o.path, "a b");
  assert_string_equal(o.type, "file");
  assert_string_equal(o.sha256, "x");
  assert_int_equal(o.mode, 420);
  assert_int_equal(o.mtime_ns, -5);
  assert_int_equal(o.size, 7);
  assert_int_equal(o.nsegs, 3);
  assert_string_equal(o.segs[0], "s0");
  assert_null(o.segs[1]); /* not a string */
  assert_string_equal(o.segs[2], "s2");
  /* seglens: integers as read, anything else -1 */
  assert_true(o.has & MTEXT_SEGLENS);
  assert_int_equal(o.nlens, 7);
  assert_int_equal(o.lens[0], 8388608);
  assert_int_equal(o.lens[1], -1);
  assert_int_equal(o.lens[2], -1);
  assert_int_equal(o.lens[3], -1);
  assert_int_equal(o.lens[4], 33554432);
  assert_int_equal(o.lens[5], -1);
  assert_int_equal(o.lens[6], 0);
  assert_string_equal(o.unknown, "zz");
  assert_null(o.target);
  assert_int_equal(mtext_next(&r, &o, &e), 1);
  assert_string_equal(o.target, "t");
  assert_true(o.has == (MTEXT_PATH | MTEXT_TARGET | MTEXT_TYPE));
  assert_int_equal(mtext_next(&r, &o, &e), 0);
  assert_true(r.entries_seen && r.format_seen && r.format_is_int);
  assert_int_equal(r.format, 1);
  mtext_release(&r);
  free(copy);
}

static void
test_wrong_json_types_leave_the_field_unset_but_seen(void **state)
{
  static const char text[] =
      "{\"entries\":[{\"mode\":\"420\",\"path\":1,\"size\":1.5,"
      "\"mtime_ns\":1e3,\"segments\":\"x\",\"seglens\":{},"
      "\"type\":null}],\"format\":1}";
  char *copy = exact_copy(text, sizeof(text) - 1);
  struct mtext_reader r;
  struct mtext_entry o;
  struct err e = {0};

  (void)state;
  mtext_init(&r, copy, sizeof(text) - 1);
  assert_int_equal(mtext_next(&r, &o, &e), 1);
  assert_int_equal(o.has, 0);
  assert_true(o.seen == (MTEXT_MODE | MTEXT_PATH | MTEXT_SIZE |
                         MTEXT_MTIME | MTEXT_SEGMENTS | MTEXT_TYPE |
                         MTEXT_SEGLENS));
  assert_int_equal(o.nlens, 0);
  assert_null(o.path);
  mtext_release(&r);
  free(copy);
}

/* Strings as jansson writes them, with every flag that changes the
 * escaping, read back to the same bytes. */
static void
test_strings_decode_as_jansson_encodes_them(void **state)
{
  static const char *const strs[] = {
      "plain", "quote\" back\\slash /slash", "\b\f\n\r\t\x01\x1f\x7f",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "", "a\\u0041",
  };
  static const size_t flags[] = {JSON_COMPACT, JSON_INDENT(2),
                                 JSON_ENSURE_ASCII | JSON_COMPACT,
                                 JSON_ESCAPE_SLASH | JSON_ENSURE_ASCII};

  (void)state;
  for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
    for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
      json_t *doc = json_pack("{s:[{s:s,s:s}],s:i}", "entries", "path",
                              strs[i], "type", "dir", "format", 1);
      char *text = json_dumps(doc, flags[f]);
      char *copy = exact_copy(text, strlen(text));
      struct mtext_reader r;
      struct mtext_entry o;
      struct err e = {0};

      mtext_init(&r, copy, strlen(text));
      if (mtext_next(&r, &o, &e) != 1)
        fail_msg("string %zu flags %zu: %s (%s)", i, f, e.msg, text);
      assert_string_equal(o.path, strs[i]);
      mtext_release(&r);
      free(copy);
      free(text);
      json_decref(doc);
    }
  }
}

static void
test_refuses_what_jansson_refused(void **state)
{
  static const struct {
    const char *text, *msg;
  } cases[] = {
      {"{\"entries\":[{\"path\":\"a\\u0000b\"}],\"format\":1}", "\\u0000"},
      {"{\"entries\":[{\"path\":\"\\ud800\"}],\"format\":1}", "surrogate"},
      {"{\"entries\":[{\"path\":\"\\udc00\"}],\"format\":1}", "surrogate"},
      {"{\"entries\":[{\"path\":\"\\ud800\\u0041\"}],\"format\":1}",
       "surrogate"},
      {"{\"entries\":[{\"path\":\"\xc3\x28\"}],\"format\":1}", "UTF-8"},
      {"{\"entries\":[{\"path\":\"\xed\xa0\x80\"}],\"format\":1}", "UTF-8"},
      {"{\"entries\":[{\"path\":\"\xc0\xaf\"}],\"format\":1}", "UTF-8"},
      {"{\"entries\":[{\"path\":\"a\nb\"}],\"format\":1}", "control"},
      {"{\"entries\":[{\"path\":\"\\x\"}],\"format\":1}", "bad escape"},
      {"{\"entries\":[{\"path\":\"\\u12\"}],\"format\":1}", "\\u escape"},
      {"{\"entries\":[{\"size\":9223372036854775808}],\"format\":1}",
       "too big"},
      {"{\"entries\":[{\"size\":-9223372036854775809}],\"format\":1}",
       "too big"},
      {"{\"entries\":[{\"size\":01}],\"format\":1}", "expected"},
      {"{\"entries\":[{\"size\":-}],\"format\":1}", "bad number"},
      {"{\"entries\":[{\"size\":1.}],\"format\":1}", "bad number"},
      {"{\"entries\":[{\"path\":\"a\",\"path\":\"b\"}],\"format\":1}",
       "duplicate"},
      {"{\"entries\":[],\"entries\":[],\"format\":1}", "duplicate"},
      {"{\"entries\":[{},],\"format\":1}", "unexpected"},
      {"{\"entries\":[],\"format\":1,}", "expected"},
      {"{\"entries\":[],\"format\":1} x", "after the document"},
      {"{\"entries\":[{\"x\":tru}],\"format\":1}", "unexpected"},
      {"", "unexpected end"},
      {"[]", "not a JSON object"},
      {"{\"format\":1,\"other\":2}", "unknown field 'other'"},
  };

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct err e = {0};

    if (read_all(cases[i].text, strlen(cases[i].text), &e) != ERR_INVALID)
      fail_msg("case %zu accepted: %s", i, cases[i].text);
    if (strstr(e.msg, cases[i].msg) == NULL)
      fail_msg("case %zu: '%s' does not contain '%s'", i, e.msg,
               cases[i].msg);
  }
}

static void
test_nesting_in_an_unknown_field_is_bounded(void **state)
{
  char text[1024];
  struct err e = {0};
  size_t n = 0;

  (void)state;
  for (int depth = 60; depth <= 100; depth += 40) {
    n = (size_t)snprintf(text, sizeof(text), "{\"entries\":[{\"x\":");
    for (int i = 0; i < depth; i++)
      text[n++] = '[';
    for (int i = 0; i < depth; i++)
      text[n++] = ']';
    n += (size_t)snprintf(text + n, sizeof(text) - n, "}],\"format\":1}");
    if (depth == 60)
      assert_int_equal(read_all(text, n, &e), 1);
    else
      assert_int_equal(read_all(text, n, &e), ERR_INVALID);
  }
  assert_non_null(strstr(e.msg, "nested too deeply"));
}

/* Every prefix of a document is refused, and random corruptions are
 * read or refused, never read past (exact-size copies, ASan). */
static void
test_prefixes_and_corruptions_never_read_past_the_text(void **state)
{
  static const char doc[] =
      "{\"entries\":[{\"mode\":493,\"path\":\"d\",\"type\":\"dir\"},"
      "{\"mode\":420,\"mtime_ns\":12,\"path\":\"d/f\\u00e9\\n\","
      "\"seglens\":[1,2],\"segments\":[\"aa\",\"bb\"],\"sha256\":\"cc\","
      "\"size\":3,"
      "\"type\":\"file\"},{\"path\":\"d/l\",\"target\":\"f\","
      "\"type\":\"link\"}],\"format\":1}";
  const size_t len = sizeof(doc) - 1;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  struct err e = {0};

  (void)state;
  assert_int_equal(read_all(doc, len, &e), 3);
  for (size_t cut = 0; cut < len; cut++)
    assert_int_equal(read_all(doc, cut, &e), ERR_INVALID);
  for (int round = 0; round < 3000; round++) {
    char mut[sizeof(doc)];
    int rc;

    memcpy(mut, doc, len);
    for (int k = 0; k < 1 + round % 3; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      mut[(seed >> 33) % len] = (char)(seed >> 17);
    }
    rc = read_all(mut, len, &e);
    assert_true(rc == ERR_INVALID || (rc >= 0 && rc <= 3));
  }
}

/* An entry as jansson wrote it before mtext_put_entry (compact, sorted
 * keys): the reference the writer must match byte for byte. */
static char *
jansson_entry(const struct manifest_entry *me)
{
  static const char *const types[] = {"dir", "file", "link"};
  json_t *o = json_object();
  char hex[65], *text;

  json_object_set_new(o, "path", json_string(me->path));
  json_object_set_new(o, "type", json_string(types[me->type]));
  if (me->type == MANIFEST_LINK) {
    json_object_set_new(o, "target", json_string(me->target));
  } else {
    json_object_set_new(o, "mode", json_integer(me->mode & 07777));
  }
  if (me->type == MANIFEST_FILE) {
    json_object_set_new(o, "mtime_ns", json_integer(me->mtime_ns));
    json_object_set_new(o, "size", json_integer((json_int_t)me->size));
    hash_hex(me->sha256, 32, hex);
    json_object_set_new(o, "sha256", json_string(hex));
    if (me->segs != NULL) {
      json_t *a = json_array(), *l = json_array();

      for (uint32_t k = 0; k < me->nsegs; k++)
        json_array_append_new(l, json_integer((json_int_t)(
                                     me->segoff[k + 1] - me->segoff[k])));
      json_object_set_new(o, "seglens", l);
      for (uint32_t k = 0; k < me->nsegs; k++) {
        hash_hex(me->segs[k], 32, hex);
        json_array_append_new(a, json_string(hex));
      }
      json_object_set_new(o, "segments", a);
    }
  }
  text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  return text;
}

/* A random valid UTF-8 name, heavy in what needs escaping. */
static void
random_name(char *out, size_t cap, uint64_t *seed)
{
  static const char *const pieces[] = {
      "a", "Z", "0", "/", "\"", "\\", "\b", "\f", "\n", "\r", "\t",
      "\x01", "\x1f", "\x7f", " ", "\xc3\xa9", "\xe2\x82\xac",
      "\xf0\x9f\x98\x80", "u00", "\\u", ".", "-"};
  size_t n = 0;

  *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int k = 0; k < 1 + (int)((*seed >> 40) % 12); k++) {
    const char *p;

    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    p = pieces[(*seed >> 33) % (sizeof(pieces) / sizeof(pieces[0]))];
    if (n + strlen(p) + 1 > cap)
      break;
    memcpy(out + n, p, strlen(p));
    n += strlen(p);
  }
  out[n] = '\0';
}

static void
test_writer_gives_the_bytes_jansson_gave(void **state)
{
  uint64_t seed = 42;
  uint8_t segs[3][32];
  uint64_t segoff[4];
  struct buf b;

  (void)state;
  buf_init(&b, 1 << 20);
  for (int i = 0; i < 600; i++) {
    struct manifest_entry me;
    char path[64], target[64], *want;

    memset(&me, 0, sizeof(me));
    random_name(path, sizeof(path), &seed);
    random_name(target, sizeof(target), &seed);
    me.path = path;
    me.type = (enum manifest_type)(i % 3);
    me.mode = (uint32_t)(seed >> 20) & 0177777; /* bits past 07777 too */
    me.mtime_ns = i % 2 ? -(int64_t)(seed >> 3) : (int64_t)(seed >> 2);
    me.size = i % 5 == 0 ? MANIFEST_MAX_FILE_SIZE : (seed >> 30);
    memset(me.sha256, i, 32);
    if (me.type == MANIFEST_LINK)
      me.target = target;
    if (me.type == MANIFEST_FILE && i % 4 == 1) {
      memset(segs, i + 1, sizeof(segs));
      me.segs = segs;
      me.nsegs = 3;
      /* lengths from one digit to 2^50 */
      segoff[0] = 0;
      segoff[1] = 1 + (seed >> 60);
      segoff[2] = segoff[1] + MANIFEST_SEG_MIN + (seed >> 40);
      segoff[3] = segoff[2] + (i % 8 == 1 ? MANIFEST_MAX_FILE_SIZE
                                          : MANIFEST_SEG_MAX);
      me.segoff = segoff;
    }
    want = jansson_entry(&me);
    buf_reset(&b);
    assert_int_equal(mtext_put_entry(&b, &me), 0);
    if (b.len != strlen(want) || memcmp(b.data, want, b.len) != 0)
      fail_msg("entry %d differs:\n  jansson %s\n  mtext   %.*s", i, want,
               (int)b.len, b.data);
    free(want);
  }
  buf_release(&b);
}

static void
test_writer_refuses_names_that_are_not_utf8(void **state)
{
  struct manifest_entry me;
  struct buf b;

  (void)state;
  memset(&me, 0, sizeof(me));
  buf_init(&b, 1 << 10);
  me.type = MANIFEST_DIR;
  me.path = "bad\xff";
  assert_int_equal(mtext_put_entry(&b, &me), ERR_INVALID);
  me.type = MANIFEST_LINK;
  me.path = "l";
  me.target = "\xc3";
  assert_int_equal(mtext_put_entry(&b, &me), ERR_INVALID);
  /* a full buffer is ERR_TOO_LARGE */
  buf_release(&b);
  buf_init(&b, 8);
  me.target = "t";
  assert_int_equal(mtext_put_entry(&b, &me), ERR_TOO_LARGE);
  buf_release(&b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_writer_gives_the_bytes_jansson_gave),
      cmocka_unit_test(test_writer_refuses_names_that_are_not_utf8),
      cmocka_unit_test(test_reads_fields_in_any_order_and_with_whitespace),
      cmocka_unit_test(test_wrong_json_types_leave_the_field_unset_but_seen),
      cmocka_unit_test(test_strings_decode_as_jansson_encodes_them),
      cmocka_unit_test(test_refuses_what_jansson_refused),
      cmocka_unit_test(test_nesting_in_an_unknown_field_is_bounded),
      cmocka_unit_test(
          test_prefixes_and_corruptions_never_read_past_the_text),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
