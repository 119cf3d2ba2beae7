/*
 * Reading manifest text without a JSON tree (see manifest_text.h).
 */
#include "sync/manifest_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/manifest.h"
#include "util/alloc.h"
#include "util/hash.h"
#include "util/utf8.h"

#define NEST_MAX 64 /* arrays and objects inside an unknown field */

enum {
  ST_START = 0, /* before the top-level object */
  ST_KEY,       /* after '{' or ',' at the top level */
  ST_ENTRY_FIRST,
  ST_ENTRY_NEXT,
  ST_AFTER_VALUE,
  ST_DONE,
};

/* ---- writing ---- */

/* s as a JSON string, escaped as jansson escapes without flags. */
static int
put_string(struct buf *b, const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  const char *run = s;

  if (buf_add(b, "\"", 1) < 0)
    return ERR_TOO_LARGE;
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    char esc[6] = {'\\', 0, 0, 0, 0, 0};
    size_t n = 2;

    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    default:
      memcpy(esc + 1, "u00", 3);
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      n = 6;
    }
    if (buf_add(b, run, (size_t)(s - run)) < 0 || buf_add(b, esc, n) < 0)
      return ERR_TOO_LARGE;
    run = s + 1;
  }
  if (buf_add(b, run, (size_t)(s - run)) < 0 || buf_add(b, "\"", 1) < 0)
    return ERR_TOO_LARGE;
  return 0;
}

static int
put_hex(struct buf *b, const uint8_t *bin)
{
  char h[67];

  h[0] = '"';
  hash_hex(bin, 32, h + 1);
  h[65] = '"';
  return buf_add(b, h, 66) < 0 ? ERR_TOO_LARGE : 0;
}

/* key (already quoted, with its colon), then v in decimal: printf's
 * parsing, per number of every entry, was a tenth of a publish. */
static int
put_num(struct buf *b, const char *key, int64_t v)
{
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  char d[24];
  size_t i = sizeof(d);

  do {
    d[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u > 0);
  if (v < 0)
    d[--i] = '-';
  return buf_adds(b, key) < 0 || buf_add(b, d + i, sizeof(d) - i) < 0
             ? ERR_TOO_LARGE
             : 0;
}

int
mtext_put_entry(struct buf *b, const struct manifest_entry *me)
{
  static const char *const types[] = {"dir", "file", "link"};
  const char *target = me->target != NULL ? me->target : "";
  int rc;

  if (!utf8_valid(me->path, strlen(me->path)) ||
      (me->type == MANIFEST_LINK && !utf8_valid(target, strlen(target))))
    return ERR_INVALID;
  /* Keys in byte order: mode, mtime_ns, path, seglens, segments, sha256,
   * size, target, type. */
  if (me->type == MANIFEST_LINK) {
    rc = buf_adds(b, "{\"path\":") < 0 ? ERR_TOO_LARGE
                                       : put_string(b, me->path);
    if (rc == 0)
      rc = buf_adds(b, ",\"target\":") < 0 ? ERR_TOO_LARGE
                                           : put_string(b, target);
  } else {
    rc = put_num(b, "{\"mode\":", me->mode & 07777);
    if (rc == 0 && me->type == MANIFEST_FILE)
      rc = put_num(b, ",\"mtime_ns\":", me->mtime_ns);
    if (rc == 0)
      rc = buf_adds(b, ",\"path\":") < 0 ? ERR_TOO_LARGE
                                         : put_string(b, me->path);
    if (rc == 0 && me->type == MANIFEST_FILE) {
      if (me->segs != NULL) {
        rc = buf_adds(b, ",\"seglens\":[") < 0 ? ERR_TOO_LARGE : 0;
        for (uint32_t k = 0; rc == 0 && k < me->nsegs; k++)
          rc = put_num(b, k > 0 ? "," : "",
                       (int64_t)(me->segoff[k + 1] - me->segoff[k]));
        if (rc == 0 && buf_adds(b, "],\"segments\":[") < 0)
          rc = ERR_TOO_LARGE;
        for (uint32_t k = 0; rc == 0 && k < me->nsegs; k++) {
          if (k > 0 && buf_adds(b, ",") < 0)
            rc = ERR_TOO_LARGE;
          if (rc == 0)
            rc = put_hex(b, me->segs[k]);
        }
        if (rc == 0 && buf_adds(b, "]") < 0)
          rc = ERR_TOO_LARGE;
      }
      if (rc == 0)
        rc = buf_adds(b, ",\"sha256\":") < 0 ? ERR_TOO_LARGE
                                             : put_hex(b, me->sha256);
      if (rc == 0)
        rc = put_num(b, ",\"size\":", (int64_t)me->size);
    }
  }
  if (rc == 0 && (buf_adds(b, ",\"type\":\"") < 0 ||
                  buf_adds(b, types[me->type]) < 0 || buf_adds(b, "\"}") < 0))
    rc = ERR_TOO_LARGE;
  return rc;
}

/* ---- reading ---- */

void
mtext_init(struct mtext_reader *r, const char *text, size_t len)
{
  memset(r, 0, sizeof(*r));
  r->start = r->p = text;
  r->end = text + len;
  buf_init(&r->scratch, MANIFEST_MAX_TEXT);
}

void
mtext_release(struct mtext_reader *r)
{
  buf_release(&r->scratch);
  free(r->segoff);
  free(r->segptr);
  free(r->lens);
  memset(r, 0, sizeof(*r));
}

static int
malformed(const struct mtext_reader *r, struct err *e, const char *what)
{
  return err_set(e, ERR_INVALID, "manifest: malformed JSON at byte %zu: %s",
                 (size_t)(r->p - r->start), what);
}

static void
skip_ws(struct mtext_reader *r)
{
  while (r->p < r->end &&
         (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
    r->p++;
}

/* The next byte after whitespace, or -1 at the end. */
static int
peek(struct mtext_reader *r)
{
  skip_ws(r);
  return r->p < r->end ? (unsigned char)*r->p : -1;
}

static int
expect(struct mtext_reader *r, char c, struct err *e)
{
  char what[24];

  if (peek(r) == (unsigned char)c) {
    r->p++;
    return 0;
  }
  snprintf(what, sizeof(what), "'%c' expected", c);
  return malformed(r, e, what);
}

static int
hex4(const char *p, unsigned *out)
{
  unsigned v = 0;

  for (int i = 0; i < 4; i++) {
    char c = p[i];

    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

static int
put_utf8(struct buf *b, unsigned cp)
{
  char u[4];
  size_t n;

  if (cp < 0x80) {
    u[0] = (char)cp, n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
  } else {
    u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
  }
  return buf_add(b, u, n);
}

/* A \u escape at r->p (after the backslash and 'u'), surrogate pairs
 * joined; NUL and lone surrogates are malformed. */
static int
escape_u(struct mtext_reader *r, unsigned *cp, struct err *e)
{
  unsigned lo;

  if (r->end - r->p < 4 || hex4(r->p, cp) < 0)
    return malformed(r, e, "bad \\u escape");
  r->p += 4;
  if (*cp >= 0xdc00 && *cp <= 0xdfff)
    return malformed(r, e, "lone low surrogate");
  if (*cp >= 0xd800 && *cp <= 0xdbff) {
    if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
        hex4(r->p + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
      return malformed(r, e, "lone high surrogate");
    r->p += 6;
    *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
  }
  if (*cp == 0)
    return malformed(r, e, "\\u0000 in a string");
  return 0;
}

/*
 * The string at r->p (after whitespace), decoded into the scratch buffer
 * with a NUL; *off is where it starts there.
 */
static int
read_string(struct mtext_reader *r, size_t *off, struct err *e)
{
  struct buf *b = &r->scratch;
  int rc;

  rc = expect(r, '"', e);
  if (rc < 0)
    return rc;
  *off = b->len;
  for (;;) {
    const char *run = r->p;
    unsigned char c;

    /* Copy plain bytes in runs, checking UTF-8 as they pass; stop at
     * a quote, escape or control. */
    while (r->p < r->end) {
      c = (unsigned char)*r->p;
      if (c >= 0x80) {
        size_t n = utf8_char((const unsigned char *)r->p,
                             (const unsigned char *)r->end);

        if (n == 0)
          return malformed(r, e, "string is not valid UTF-8");
        r->p += n;
      } else if (c >= 0x20 && c != '"' && c != '\\') {
        r->p++;
      } else {
        break;
      }
    }
    if (r->p > run && buf_add(b, run, (size_t)(r->p - run)) < 0)
      return err_set(e, ERR_INVALID, "manifest: strings too long");
    if (r->p >= r->end)
      return malformed(r, e, "unterminated string");
    c = (unsigned char)*r->p;
    if (c == '"') {
      r->p++;
      break;
    }
    if (c < 0x20)
      return malformed(r, e, "control character in a string");
    /* a backslash */
    if (r->end - r->p < 2)
      return malformed(r, e, "unterminated string");
    c = (unsigned char)r->p[1];
    r->p += 2;
    {
      static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
      const char *k = c != '\0' ? strchr(from, c) : NULL;
      unsigned cp;

      if (k != NULL) {
        rc = buf_add(b, &to[k - from], 1);
      } else if (c == 'u') {
        rc = escape_u(r, &cp, e);
        if (rc < 0)
          return rc;
        rc = put_utf8(b, cp);
      } else {
        r->p -= 2;
        return malformed(r, e, "bad escape");
      }
      if (rc < 0)
        return err_set(e, ERR_INVALID, "manifest: strings too long");
    }
  }
  if (buf_add(b, "", 1) < 0)
    return err_set(e, ERR_INVALID, "manifest: strings too long");
  return 0;
}

/*
 * A number at r->p: 1 an integer that fits in int64 (in *v), 0 a number
 * that is not an integer; malformed past 64 bits, as jansson was.
 */
static int
read_number(struct mtext_reader *r, int64_t *v, struct err *e)
{
  int neg = 0, integer = 1;
  uint64_t acc = 0, lim;

  skip_ws(r);
  if (r->p < r->end && *r->p == '-') {
    neg = 1;
    r->p++;
  }
  lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  if (r->p >= r->end || *r->p < '0' || *r->p > '9')
    return malformed(r, e, "bad number");
  if (*r->p == '0') {
    r->p++;
  } else {
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
      unsigned d = (unsigned)(*r->p - '0');

      if (acc > (lim - d) / 10)
        return malformed(r, e, "integer too big");
      acc = acc * 10 + d;
      r->p++;
    }
  }
  if (r->p < r->end && *r->p == '.') {
    integer = 0;
    r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
      return malformed(r, e, "bad number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
      r->p++;
  }
  if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
    integer = 0;
    r->p++;
    if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
      r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
      return malformed(r, e, "bad number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
      r->p++;
  }
  if (!integer)
    return 0;
  *v = neg ? (acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc)
           : (int64_t)acc;
  return 1;
}

static int
literal(struct mtext_reader *r, const char *word, struct err *e)
{
  size_t n = strlen(word);

  if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
    return malformed(r, e, "unexpected character");
  r->p += n;
  return 0;
}

/* Check and pass over any JSON value. */
static int
skip_value(struct mtext_reader *r, int depth, struct err *e)
{
  size_t at = r->scratch.len, off;
  int64_t ignore;
  int c = peek(r);
  int rc = 0;

  if (depth > NEST_MAX)
    return malformed(r, e, "nested too deeply");
  switch (c) {
  case '"':
    rc = read_string(r, &off, e);
    r->scratch.len = at;
    return rc;
  case 't':
    return literal(r, "true", e);
  case 'f':
    return literal(r, "false", e);
  case 'n':
    return literal(r, "null", e);
  case '[':
    r->p++;
    if (peek(r) == ']') {
      r->p++;
      return 0;
    }
    for (;;) {
      rc = skip_value(r, depth + 1, e);
      if (rc < 0)
        return rc;
      if (peek(r) == ',') {
        r->p++;
        continue;
      }
      return expect(r, ']', e);
    }
  case '{':
    r->p++;
    if (peek(r) == '}') {
      r->p++;
      return 0;
    }
    for (;;) {
      rc = read_string(r, &off, e);
      r->scratch.len = at;
      if (rc == 0)
        rc = expect(r, ':', e);
      if (rc == 0)
        rc = skip_value(r, depth + 1, e);
      if (rc < 0)
        return rc;
      if (peek(r) == ',') {
        r->p++;
        continue;
      }
      return expect(r, '}', e);
    }
  default:
    if (c == '-' || (c >= '0' && c <= '9'))
      return read_number(r, &ignore, e) < 0 ? ERR_INVALID : 0;
    return malformed(r, e, c < 0 ? "unexpected end" : "unexpected "
                     "character");
  }
}

/* At r->p, just after a '[': 1 when an element follows, 0 for "[]". */
static int
array_open(struct mtext_reader *r)
{
  r->p++;
  if (peek(r) != ']')
    return 1;
  r->p++;
  return 0;
}

/* After an element: 1 when another follows (past its ','), 0 at the
 * closing ']', or an error. */
static int
array_more(struct mtext_reader *r, struct err *e)
{
  int rc;

  if (peek(r) == ',') {
    r->p++;
    return 1;
  }
  rc = expect(r, ']', e);
  return rc < 0 ? rc : 0;
}

static const struct {
  const char *name;
  unsigned bit;
} fields[] = {
    {"path", MTEXT_PATH},         {"type", MTEXT_TYPE},
    {"mode", MTEXT_MODE},         {"mtime_ns", MTEXT_MTIME},
    {"size", MTEXT_SIZE},         {"sha256", MTEXT_SHA256},
    {"segments", MTEXT_SEGMENTS}, {"target", MTEXT_TARGET},
    {"seglens", MTEXT_SEGLENS},
};

/* The value of a known field into the entry being read. */
static int
read_field(struct mtext_reader *r, unsigned bit, struct mtext_entry *out,
           size_t stroff[4], struct err *e)
{
  int c = peek(r);
  int64_t v = 0;
  int rc;

  switch (bit) {
  case MTEXT_MODE:
  case MTEXT_MTIME:
  case MTEXT_SIZE:
    if (c != '-' && !(c >= '0' && c <= '9'))
      return skip_value(r, 0, e);
    rc = read_number(r, &v, e);
    if (rc <= 0)
      return rc;
    out->has |= bit;
    if (bit == MTEXT_MODE)
      out->mode = v;
    else if (bit == MTEXT_MTIME)
      out->mtime_ns = v;
    else
      out->size = v;
    return 0;
  case MTEXT_SEGMENTS:
    if (c != '[')
      return skip_value(r, 0, e);
    out->has |= bit;
    for (rc = array_open(r); rc == 1; rc = array_more(r, e)) {
      size_t off = SIZE_MAX;

      rc = peek(r) == '"' ? read_string(r, &off, e) : skip_value(r, 1, e);
      if (rc < 0)
        return rc;
      if (out->nsegs == r->segcap) {
        r->segcap = r->segcap ? 2 * r->segcap : 64;
        r->segoff = xrealloc(r->segoff, r->segcap * sizeof(*r->segoff));
      }
      r->segoff[out->nsegs++] = off;
    }
    return rc;
  case MTEXT_SEGLENS:
    if (c != '[')
      return skip_value(r, 0, e);
    out->has |= bit;
    for (rc = array_open(r); rc == 1; rc = array_more(r, e)) {
      c = peek(r);
      v = -1;
      rc = c == '-' || (c >= '0' && c <= '9') ? read_number(r, &v, e)
                                               : skip_value(r, 1, e);
      if (rc < 0)
        return rc;
      /* Each length needs a segment hash of 66 bytes or more in the same
       * text: refuse a list longer than the text could match. */
      if (out->nlens > MANIFEST_MAX_TEXT / 66)
        return malformed(r, e, "too many segment lengths");
      if (out->nlens == r->lencap) {
        r->lencap = r->lencap ? 2 * r->lencap : 64;
        r->lens = xrealloc(r->lens, r->lencap * sizeof(*r->lens));
      }
      /* a fraction, a negative or anything else is -1: invalid */
      r->lens[out->nlens++] = rc == 1 && v >= 0 ? v : -1;
    }
    return rc;
  default: {
    /* the four strings: path, type, sha256, target */
    int slot = bit == MTEXT_PATH ? 0 : bit == MTEXT_TYPE ? 1
                                     : bit == MTEXT_SHA256 ? 2 : 3;

    if (c != '"')
      return skip_value(r, 0, e);
    rc = read_string(r, &stroff[slot], e);
    if (rc == 0)
      out->has |= bit;
    return rc;
  }
  }
}

/* One element of the entries array. */
static int
read_entry(struct mtext_reader *r, struct mtext_entry *out, struct err *e)
{
  size_t stroff[4] = {0};
  int rc;

  memset(out, 0, sizeof(*out));
  r->scratch.len = 0;
  if (peek(r) != '{')
    return skip_value(r, 0, e);
  out->is_object = 1;
  out->off = (size_t)(r->p - r->start);
  r->p++;
  if (peek(r) == '}') {
    r->p++;
    out->len = (size_t)(r->p - r->start) - out->off;
    return 0;
  }
  for (;;) {
    size_t key;
    unsigned bit = 0;

    rc = read_string(r, &key, e);
    if (rc < 0)
      return rc;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
      if (strcmp(r->scratch.data + key, fields[i].name) == 0) {
        bit = fields[i].bit;
        break;
      }
    }
    if (bit != 0 && (out->seen & bit))
      return malformed(r, e, "duplicate object key");
    if (bit == 0 && out->unknown[0] == '\0')
      snprintf(out->unknown, sizeof(out->unknown), "%s",
               r->scratch.data + key);
    r->scratch.len = key; /* the key is not kept */
    rc = expect(r, ':', e);
    if (rc < 0)
      return rc;
    out->seen |= bit;
    rc = bit != 0 ? read_field(r, bit, out, stroff, e) : skip_value(r, 0, e);
    if (rc < 0)
      return rc;
    if (peek(r) == ',') {
      r->p++;
      continue;
    }
    rc = expect(r, '}', e);
    if (rc < 0)
      return rc;
    break;
  }
  out->len = (size_t)(r->p - r->start) - out->off;
  /* The scratch buffer no longer moves: offsets become pointers. */
  out->path = out->has & MTEXT_PATH ? r->scratch.data + stroff[0] : NULL;
  out->type = out->has & MTEXT_TYPE ? r->scratch.data + stroff[1] : NULL;
  out->sha256 = out->has & MTEXT_SHA256 ? r->scratch.data + stroff[2] : NULL;
  out->target = out->has & MTEXT_TARGET ? r->scratch.data + stroff[3] : NULL;
  if (out->nsegs > r->segptrcap) {
    r->segptrcap = out->nsegs;
    r->segptr = xrealloc(r->segptr, r->segptrcap * sizeof(*r->segptr));
  }
  for (size_t i = 0; i < out->nsegs; i++)
    r->segptr[i] = r->segoff[i] == SIZE_MAX ? NULL
                                            : r->scratch.data + r->segoff[i];
  out->segs = r->segptr;
  out->lens = r->lens;
  return 0;
}

int
mtext_next(struct mtext_reader *r, struct mtext_entry *out, struct err *e)
{
  int rc, c;

  for (;;) {
    switch (r->state) {
    case ST_START:
      if (peek(r) != '{') {
        rc = skip_value(r, 0, e);
        if (rc < 0)
          return rc;
        return err_set(e, ERR_INVALID, "manifest: not a JSON object");
      }
      r->p++;
      /* "{}": AFTER_VALUE takes the '}' */
      r->state = peek(r) == '}' ? ST_AFTER_VALUE : ST_KEY;
      break;
    case ST_KEY: {
      size_t key;

      r->scratch.len = 0;
      rc = read_string(r, &key, e);
      if (rc == 0)
        rc = expect(r, ':', e);
      if (rc < 0)
        return rc;
      if (strcmp(r->scratch.data + key, "entries") == 0) {
        if (r->entries_seen)
          return malformed(r, e, "duplicate object key");
        r->entries_seen = 1;
        if (peek(r) != '[') {
          rc = skip_value(r, 0, e);
          if (rc < 0)
            return rc;
          return err_set(e, ERR_INVALID, "manifest: field 'entries' (an "
                         "array) is required");
        }
        r->p++;
        r->state = ST_ENTRY_FIRST;
      } else if (strcmp(r->scratch.data + key, "format") == 0) {
        if (r->format_seen)
          return malformed(r, e, "duplicate object key");
        r->format_seen = 1;
        c = peek(r);
        if (c == '-' || (c >= '0' && c <= '9')) {
          rc = read_number(r, &r->format, e);
          if (rc < 0)
            return rc;
          r->format_is_int = rc;
        } else {
          rc = skip_value(r, 0, e);
          if (rc < 0)
            return rc;
        }
        r->state = ST_AFTER_VALUE;
      } else {
        return err_set(e, ERR_INVALID, "manifest: unknown field '%.40s'",
                       r->scratch.data + key);
      }
      break;
    }
    case ST_ENTRY_FIRST:
      if (peek(r) == ']') {
        r->p++;
        r->state = ST_AFTER_VALUE;
        break;
      }
      rc = read_entry(r, out, e);
      if (rc < 0)
        return rc;
      r->state = ST_ENTRY_NEXT;
      return 1;
    case ST_ENTRY_NEXT:
      c = peek(r);
      if (c == ']') {
        r->p++;
        r->state = ST_AFTER_VALUE;
        break;
      }
      rc = expect(r, ',', e);
      if (rc == 0)
        rc = read_entry(r, out, e);
      if (rc < 0)
        return rc;
      return 1;
    case ST_AFTER_VALUE:
      c = peek(r);
      if (c == ',') {
        r->p++;
        r->state = ST_KEY;
        break;
      }
      rc = expect(r, '}', e);
      if (rc < 0)
        return rc;
      if (peek(r) != -1)
        return malformed(r, e, "text after the document");
      r->state = ST_DONE;
      return 0;
    default:
      return 0;
    }
  }
}
