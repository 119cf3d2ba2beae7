/*
 * Manifests (docs/SYNC.md "Manifest"): canonical JSON, strict decoding
 * and the source side's checks file (scanning a tree: manifest_scan.c).
 */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "sync/manifest_int.h"
#include "sync/manifest_text.h"
#include "sync/path.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/hash.h"

#define READ_CHUNK ((size_t)1 << 20)

void
manifest_init(struct manifest *m)
{
  memset(m, 0, sizeof(*m));
}

void
manifest_entry_release(struct manifest_entry *me)
{
  free(me->path);
  free(me->segs);
  free(me->segoff);
  free(me->segfp);
  free(me->target);
}

void
manifest_release(struct manifest *m)
{
  for (size_t i = 0; i < m->n; i++)
    manifest_entry_release(&m->v[i]);
  free(m->v);
  free(m->span);
  manifest_init(m);
}

static void *
dup_bytes(const void *p, size_t n)
{
  return p == NULL || n == 0 ? NULL : memcpy(xmalloc(n), p, n);
}

void
manifest_entry_copy(struct manifest_entry *de, const struct manifest_entry *se)
{
  *de = *se;
  de->path = xstrdup(se->path);
  de->segs = dup_bytes(se->segs, (size_t)se->nsegs * sizeof(*se->segs));
  de->segoff = dup_bytes(se->segoff, se->segoff == NULL ? 0
                         : ((size_t)se->nsegs + 1) * sizeof(uint64_t));
  de->segfp = dup_bytes(se->segfp, se->segfp == NULL ? 0
                        : ((size_t)se->nsegs + 1) * sizeof(uint64_t));
  de->target = se->target != NULL ? xstrdup(se->target) : NULL;
}

void
manifest_copy(struct manifest *dst, const struct manifest *src)
{
  *dst = *src;
  dst->cap = src->n;
  dst->v = src->n > 0 ? xmalloc(src->n * sizeof(*dst->v)) : NULL;
  for (size_t i = 0; i < src->n; i++)
    manifest_entry_copy(&dst->v[i], &src->v[i]);
  dst->span = dup_bytes(src->span, src->span == NULL ? 0
                        : src->n * sizeof(*src->span));
}

int
manifest_entry_same(const struct manifest_entry *a,
                    const struct manifest_entry *b)
{
  if (a->type != b->type || a->mode != b->mode ||
      strcmp(a->path, b->path) != 0)
    return 0;
  if (a->type == MANIFEST_LINK)
    return strcmp(a->target, b->target) == 0;
  if (a->type == MANIFEST_DIR)
    return 1;
  return a->size == b->size && a->mtime_ns == b->mtime_ns &&
         a->nsegs == b->nsegs && memcmp(a->sha256, b->sha256, 32) == 0 &&
         (a->nsegs == 1 ||
          (memcmp(a->segs, b->segs, (size_t)a->nsegs * 32) == 0 &&
           memcmp(a->segoff, b->segoff,
                  ((size_t)a->nsegs + 1) * sizeof(uint64_t)) == 0));
}

uint64_t
manifest_nfp(uint64_t len)
{
  return len / MANIFEST_FP_BLOCK + (len % MANIFEST_FP_BLOCK != 0);
}

void
manifest_seg_range(const struct manifest_entry *e, uint32_t k,
                   uint64_t *off, uint64_t *len)
{
  if (e->segoff == NULL) {
    *off = 0;
    *len = e->size;
    return;
  }
  *off = e->segoff[k];
  *len = e->segoff[k + 1] - e->segoff[k];
}

uint64_t
manifest_seg_fp(const struct manifest_entry *e, uint32_t k)
{
  if (e->segfp == NULL)
    return k == 0 ? 0 : manifest_nfp(e->size);
  return e->segfp[k];
}

void
manifest_set_segments(struct manifest_entry *e, const uint64_t *lens,
                      uint32_t n)
{
  free(e->segoff);
  free(e->segfp);
  e->nsegs = n;
  e->segoff = xmalloc(((size_t)n + 1) * sizeof(*e->segoff));
  e->segfp = xmalloc(((size_t)n + 1) * sizeof(*e->segfp));
  e->segoff[0] = 0;
  e->segfp[0] = 0;
  for (uint32_t k = 0; k < n; k++) {
    e->segoff[k + 1] = e->segoff[k] + lens[k];
    e->segfp[k + 1] = e->segfp[k] + manifest_nfp(lens[k]);
  }
}

const uint8_t *
manifest_seg_sha(const struct manifest_entry *e, uint32_t k)
{
  if (k >= e->nsegs)
    return NULL;
  return e->segs != NULL ? e->segs[k] : e->sha256;
}

ssize_t
manifest_find(const struct manifest *m, const char *path)
{
  size_t lo = 0, hi = m->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(m->v[mid].path, path);

    if (c == 0)
      return (ssize_t)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/* ---- helpers ---- */

/* s with bytes outside printable ASCII as \xNN, for error messages
 * (which end up in JSON, so must be valid UTF-8 themselves). */
void
manifest_escape(const char *s, char *out, size_t outlen)
{
  static const char digits[] = "0123456789abcdef";
  size_t n = 0;

  for (; *s != '\0' && n + 5 < outlen; s++) {
    unsigned char c = (unsigned char)*s;

    if (c >= 0x20 && c < 0x7f) {
      out[n++] = (char)c;
    } else {
      out[n++] = '\\';
      out[n++] = 'x';
      out[n++] = digits[c >> 4];
      out[n++] = digits[c & 15];
    }
  }
  out[n] = '\0';
}

int64_t
manifest_ns(const struct timespec *ts)
{
  int64_t ns;

  /* Saturate instead of wrapping for times past the year 2262. */
  if (__builtin_mul_overflow((int64_t)ts->tv_sec, (int64_t)1000000000,
                             &ns) ||
      __builtin_add_overflow(ns, (int64_t)ts->tv_nsec, &ns))
    return ts->tv_sec < 0 ? INT64_MIN : INT64_MAX;
  return ns;
}

/* ---- canonical JSON ---- */

/*
 * The canonical text is '{"entries":[' E ',' E ... '],"format":2}' with
 * each entry E written by mtext_put_entry: the bytes jansson gave for
 * the whole object with JSON_COMPACT | JSON_SORT_KEYS, written straight
 * into one buffer.
 */
int
manifest_encode(const struct manifest *m, char **out, size_t *len,
                char id[MANIFEST_ID_HEX + 1], struct err *e)
{
  struct buf b;
  int rc = 0;

  buf_init(&b, MANIFEST_MAX_TEXT);
  if (buf_adds(&b, "{\"entries\":[") < 0)
    goto too_large;
  for (size_t i = 0; i < m->n; i++) {
    char name[256];
    int put;

    if (i > 0 && buf_adds(&b, ",") < 0)
      goto too_large;
    put = mtext_put_entry(&b, &m->v[i]);
    if (put == ERR_INVALID) {
      manifest_escape(m->v[i].path, name, sizeof(name));
      rc = err_set(e, ERR_INVALID, "entry %zu '%s': not valid UTF-8", i,
                   name);
      goto out;
    }
    if (put < 0)
      goto too_large;
  }
  if (buf_addf(&b, "],\"format\":%d}", MANIFEST_FORMAT) < 0)
    goto too_large;
  hash_sha256_hex(b.data, b.len, id);
  *out = buf_take(&b, len);
  goto out;

too_large:
  rc = err_set(e, ERR_TOO_LARGE, "manifest: more than %zu bytes of text",
               MANIFEST_MAX_TEXT);
out:
  buf_release(&b);
  return rc;
}

/* ---- decoding ---- */

/* 1 when a component of the path is "..". */
static int
has_dotdot(const char *path)
{
  const char *p = path;

  for (;;) {
    if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == '\0'))
      return 1;
    p = strchr(p, '/');
    if (p == NULL)
      return 0;
    p++;
  }
}

static int
in_store(const char *path)
{
  size_t n = strlen(SYNCPATH_STORE);

  return strncmp(path, SYNCPATH_STORE, n) == 0 &&
         (path[n] == '\0' || path[n] == '/');
}

/*
 * Index among the first hi entries whose path is the first len bytes of
 * key, or -1.  Entries before hi are sorted (checked as they are read).
 */
static ssize_t
find_prefix(const struct manifest *m, size_t hi, const char *key,
            size_t len)
{
  size_t lo = 0;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char *p = m->v[mid].path;
    int c = strncmp(p, key, len);

    if (c == 0 && p[len] != '\0')
      c = 1; /* p is longer, so after the key */
    if (c == 0)
      return (ssize_t)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/* Error for entry i, whose path (maybe NULL yet) is quoted. */
static int PRINTF_LIKE(4, 5)
entry_err(struct err *e, size_t i, const char *path, const char *fmt, ...)
{
  char what[200];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  if (path == NULL)
    return err_set(e, ERR_INVALID, "entry %zu: %s", i, what);
  return err_set(e, ERR_INVALID, "entry %zu '%.100s': %s", i, path, what);
}

static const unsigned dir_fields = MTEXT_MODE | MTEXT_PATH | MTEXT_TYPE;
static const unsigned file_fields = MTEXT_MODE | MTEXT_MTIME | MTEXT_PATH |
                                    MTEXT_SEGMENTS | MTEXT_SHA256 |
                                    MTEXT_SIZE | MTEXT_TYPE | MTEXT_SEGLENS;
static const unsigned link_fields = MTEXT_PATH | MTEXT_TARGET | MTEXT_TYPE;

/* The name of the lowest field bit in bits (for "unknown field"). */
static const char *
field_name(unsigned bits)
{
  static const char *const names[] = {"path", "type", "mode", "mtime_ns",
                                      "size", "sha256", "segments",
                                      "target", "seglens"};

  for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (bits & (1u << i))
      return names[i];
  return "?";
}

static int
decode_file(const struct mtext_entry *o, size_t i,
            struct manifest_entry *me, struct err *e)
{
  if (!(o->has & MTEXT_MTIME))
    return entry_err(e, i, me->path, "field 'mtime_ns' must be an "
                     "integer");
  me->mtime_ns = o->mtime_ns;
  if (!(o->has & MTEXT_SIZE) || o->size < 0 ||
      (uint64_t)o->size > MANIFEST_MAX_FILE_SIZE)
    return entry_err(e, i, me->path, "field 'size' must be an integer "
                     "from 0 to 2^50");
  me->size = (uint64_t)o->size;
  me->nsegs = 1;
  if (hash_unhex(o->sha256, me->sha256, 32) < 0)
    return entry_err(e, i, me->path, "field 'sha256' must be 64 "
                     "lowercase hex digits");
  if ((o->seen & (MTEXT_SEGMENTS | MTEXT_SEGLENS)) == 0)
    return me->size <= MANIFEST_SEG_MAX ? 0 :
           entry_err(e, i, me->path, "fields 'seglens' and 'segments' are "
                     "required for a file larger than %llu MiB",
                     (unsigned long long)(MANIFEST_SEG_MAX >> 20));
  if ((o->has & (MTEXT_SEGMENTS | MTEXT_SEGLENS)) !=
      (MTEXT_SEGMENTS | MTEXT_SEGLENS))
    return entry_err(e, i, me->path, "fields 'seglens' and 'segments' "
                     "must both be arrays");
  if (o->nsegs != o->nlens || o->nsegs < 2 ||
      o->nsegs > me->size / MANIFEST_SEG_MIN + 1)
    return entry_err(e, i, me->path, "%zu segment hashes and %zu lengths: "
                     "a file of %llu bytes has from 2 to %llu of each, or "
                     "no list", o->nsegs, o->nlens,
                     (unsigned long long)me->size,
                     (unsigned long long)(me->size / MANIFEST_SEG_MIN + 1));
  {
    uint64_t *lens = xmalloc(o->nlens * sizeof(*lens));
    uint64_t sum = 0;
    size_t k;

    for (k = 0; k < o->nlens; k++) {
      int last = k + 1 == o->nlens;

      if (o->lens[k] < (last ? 1 : (int64_t)MANIFEST_SEG_MIN) ||
          o->lens[k] > (int64_t)MANIFEST_SEG_MAX ||
          (uint64_t)o->lens[k] > me->size - sum)
        break;
      lens[k] = (uint64_t)o->lens[k];
      sum += lens[k];
    }
    if (k == o->nlens && sum == me->size)
      manifest_set_segments(me, lens, (uint32_t)o->nlens);
    free(lens);
    if (me->segoff == NULL && k == o->nlens)
      return entry_err(e, i, me->path, "the segment lengths add up to "
                       "%llu, not the size", (unsigned long long)sum);
    if (me->segoff == NULL && k + 1 == o->nlens)
      return entry_err(e, i, me->path, "segment %zu (the last): its length "
                       "must be an integer from 1 byte to %llu MiB within "
                       "the file", k,
                       (unsigned long long)(MANIFEST_SEG_MAX >> 20));
    if (me->segoff == NULL)
      return entry_err(e, i, me->path, "segment %zu: its length must be an "
                       "integer from %llu MiB to %llu MiB within the file", k,
                       (unsigned long long)(MANIFEST_SEG_MIN >> 20),
                       (unsigned long long)(MANIFEST_SEG_MAX >> 20));
  }
  me->segs = xcalloc(me->nsegs, sizeof(*me->segs));
  for (uint32_t k = 0; k < me->nsegs; k++) {
    if (hash_unhex(o->segs[k], me->segs[k], 32) < 0)
      return entry_err(e, i, me->path, "segment %u must be 64 lowercase "
                       "hex digits", k);
  }
  {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    EVP_Digest(me->segs, (size_t)me->nsegs * 32, md, &mdlen, EVP_sha256(),
               NULL);
    if (mdlen != 32 || memcmp(md, me->sha256, 32) != 0)
      return entry_err(e, i, me->path, "sha256 is not the SHA-256 of the "
                       "segment hashes");
  }
  return 0;
}

/* Entry i (path set) in its place after the valid entries before it:
 * in strcmp order, not a duplicate, its parent a directory listed
 * before it. */
static int
place_check(const struct manifest *m, size_t i, struct err *e)
{
  const char *path = m->v[i].path;
  const char *slash;

  if (i > 0) {
    int c = strcmp(m->v[i - 1].path, path);

    if (c == 0)
      return entry_err(e, i, path, "duplicate path");
    if (c > 0)
      return entry_err(e, i, path, "not sorted (after '%.60s')",
                       m->v[i - 1].path);
  }
  slash = strrchr(path, '/');
  if (slash != NULL) {
    size_t plen = (size_t)(slash - path);
    const char *prev = i > 0 ? m->v[i - 1].path : "";
    ssize_t j;

    /* Most entries follow a sibling, whose parent was found already. */
    if (strncmp(prev, path, plen + 1) == 0 &&
        strchr(prev + plen + 1, '/') == NULL)
      return 0;
    j = find_prefix(m, i, path, plen);

    if (j < 0)
      return entry_err(e, i, path, "parent directory '%.*s' is not listed "
                       "before it", (int)(plen < 60 ? plen : 60), path);
    if (m->v[j].type != MANIFEST_DIR)
      return entry_err(e, i, path, "parent '%.*s' is not a directory",
                       (int)(plen < 60 ? plen : 60), path);
  }
  return 0;
}

/* Decode entry i into m->v[i]; the entries before it are valid. */
static int
decode_entry(const struct mtext_entry *o, size_t i, struct manifest *m,
             struct err *e)
{
  struct manifest_entry *me = &m->v[i];
  const char *path = o->path, *type = o->type;
  unsigned fields;

  if (!o->is_object)
    return entry_err(e, i, NULL, "not an object");
  if (path == NULL)
    return entry_err(e, i, NULL, "field 'path' (a string) is required");
  if (type == NULL)
    return entry_err(e, i, path, "field 'type' (a string) is required");
  if (strcmp(type, "dir") == 0) {
    me->type = MANIFEST_DIR;
    fields = dir_fields;
  } else if (strcmp(type, "file") == 0) {
    me->type = MANIFEST_FILE;
    fields = file_fields;
  } else if (strcmp(type, "link") == 0) {
    me->type = MANIFEST_LINK;
    fields = link_fields;
  } else {
    return entry_err(e, i, path, "unknown type '%.40s'", type);
  }
  if (o->unknown[0] != '\0')
    return entry_err(e, i, path, "unknown field '%.40s' for a %s",
                     o->unknown, type);
  if (o->seen & ~fields)
    return entry_err(e, i, path, "unknown field '%s' for a %s",
                     field_name(o->seen & ~fields), type);
  if (has_dotdot(path))
    return entry_err(e, i, path, "path escapes the dataset ('..')");
  if (!syncpath_is_normal(path))
    return entry_err(e, i, path, "path is not normalized");
  if (in_store(path))
    return entry_err(e, i, path, "path is inside '%s', the agent's own "
                     "store", SYNCPATH_STORE);
  me->path = xstrdup(path);
  if (place_check(m, i, e) < 0)
    return ERR_INVALID;

  if (me->type == MANIFEST_LINK) {
    const char *target = o->target;

    if (target == NULL || *target == '\0')
      return entry_err(e, i, path, "field 'target' (a non-empty string) "
                       "is required");
    if (strlen(target) > SYNCPATH_MAX)
      return entry_err(e, i, path, "target longer than %d bytes",
                       SYNCPATH_MAX);
    if (!syncpath_link_inside(path, target))
      return entry_err(e, i, path, "link target '%.60s' points outside "
                       "the dataset", target);
    me->target = xstrdup(target);
    return 0;
  }
  if (!(o->has & MTEXT_MODE) || o->mode < 0 || o->mode > 07777)
    return entry_err(e, i, path, "field 'mode' must be an integer from 0 "
                     "to 4095");
  me->mode = (uint32_t)o->mode;
  if (me->type == MANIFEST_FILE)
    return decode_file(o, i, me, e);
  return 0;
}

/* Room for entry i, growing the array geometrically. */
void
manifest_reserve(struct manifest *m, size_t n)
{
  if (n <= m->cap)
    return;
  m->cap = n;
  m->v = xrealloc(m->v, m->cap * sizeof(*m->v));
  if (m->span != NULL)
    m->span = xrealloc(m->span, m->cap * sizeof(*m->span));
}

static void
entries_reserve(struct manifest *m, size_t i)
{
  if (i < m->cap)
    return;
  manifest_reserve(m, m->cap ? 2 * m->cap : 16);
}

/* A new zeroed entry at the end of m, counted at once so that release
 * frees a half-filled one; or ERR_INVALID past max_entries. */
static struct manifest_entry *
entry_push(struct manifest *m, size_t max_entries, struct err *e)
{
  struct manifest_entry *me;

  if (m->n >= max_entries) {
    err_set(e, ERR_INVALID, "manifest: more than %zu entries, the limit",
            max_entries);
    return NULL;
  }
  entries_reserve(m, m->n);
  me = &m->v[m->n++];
  memset(me, 0, sizeof(*me));
  return me;
}

/* Count the last entry of m into its totals. */
static int
entry_count(struct manifest *m, struct err *e)
{
  const struct manifest_entry *me = &m->v[m->n - 1];

  if (me->type == MANIFEST_DIR) {
    m->dirs++;
  } else if (me->type == MANIFEST_LINK) {
    m->links++;
  } else {
    /* 4M files of 2^50 bytes would not fit in 64 bits. */
    if (m->bytes > UINT64_MAX - me->size)
      return entry_err(e, m->n - 1, me->path, "total size overflows");
    m->bytes += me->size;
    m->files++;
  }
  return 0;
}

int
manifest_append_decoded(struct manifest *m, const struct mtext_entry *o,
                        size_t max_entries, struct err *e)
{
  int rc;

  if (entry_push(m, max_entries, e) == NULL)
    return ERR_INVALID;
  rc = decode_entry(o, m->n - 1, m, e);
  return rc < 0 ? rc : entry_count(m, e);
}

void
manifest_set_span(struct manifest *m, size_t i, size_t off, size_t len)
{
  if (m->span == NULL)
    m->span = xmalloc(m->cap * sizeof(*m->span));
  m->span[i][0] = (uint32_t)off;
  m->span[i][1] = (uint32_t)len;
}

int
manifest_append_copy(struct manifest *m, const struct manifest_entry *src,
                     size_t max_entries, struct err *e)
{
  struct manifest_entry *me = entry_push(m, max_entries, e);

  if (me == NULL)
    return ERR_INVALID;
  manifest_entry_copy(me, src);
  if (place_check(m, m->n - 1, e) < 0)
    return ERR_INVALID;
  return entry_count(m, e);
}

int
manifest_decode(const char *text, size_t len, struct manifest *m,
                struct err *e)
{
  return manifest_decode_max(text, len, MANIFEST_MAX_ENTRIES, m, e);
}

int
manifest_decode_max(const char *text, size_t len, size_t max_entries,
                    struct manifest *m, struct err *e)
{
  struct mtext_reader r;
  struct mtext_entry o;
  int rc;

  manifest_release(m);
  if (len > MANIFEST_MAX_TEXT)
    return err_set(e, ERR_INVALID, "manifest: %zu bytes of text, more "
                   "than the limit of %zu", len, MANIFEST_MAX_TEXT);
  mtext_init(&r, text, len);
  /* Never NULL, even for a version without entries. */
  m->cap = 16;
  m->v = xcalloc(m->cap, sizeof(*m->v));
  while ((rc = mtext_next(&r, &o, e)) == 1) {
    rc = manifest_append_decoded(m, &o, max_entries, e);
    if (rc < 0)
      goto out;
    manifest_set_span(m, m->n - 1, o.off, o.len);
  }
  if (rc < 0)
    goto out;
  if (!r.format_seen || !r.format_is_int || r.format != MANIFEST_FORMAT) {
    rc = err_set(e, ERR_INVALID, "manifest: field 'format' must be %d",
                 MANIFEST_FORMAT);
    goto out;
  }
  if (!r.entries_seen) {
    rc = err_set(e, ERR_INVALID, "manifest: field 'entries' (an array) "
                 "is required");
    goto out;
  }

out:
  mtext_release(&r);
  if (rc < 0)
    manifest_release(m);
  return rc;
}

/* ---- checks ---- */

void
manifest_checks_init(struct manifest_checks *c)
{
  memset(c, 0, sizeof(*c));
}

void
manifest_check_copy(struct manifest_check *dst,
                    const struct manifest_check *src)
{
  *dst = *src;
  dst->xxh = dup_bytes(src->xxh, (size_t)src->nsegs * 16);
  dst->fp = dup_bytes(src->fp, (size_t)src->nfp * 16);
}

void
manifest_checks_copy(struct manifest_checks *dst,
                     const struct manifest_checks *src)
{
  dst->n = src->n;
  dst->v = src->n > 0 ? xmalloc(src->n * sizeof(*dst->v)) : NULL;
  for (size_t i = 0; i < src->n; i++)
    manifest_check_copy(&dst->v[i], &src->v[i]);
}

void
manifest_checks_release(struct manifest_checks *c)
{
  for (size_t i = 0; i < c->n; i++) {
    free(c->v[i].xxh);
    free(c->v[i].fp);
  }
  free(c->v);
  manifest_checks_init(c);
}

/*
 * The checks file, all integers little-endian:
 *   "TBCHECKS" u32 version (3) u32 0 u64 n
 *   n times: u64 dev ino size, i64 mtime_ns ctime_ns, u32 nsegs, u32 nfp,
 *            nsegs * 16 bytes of XXH3-128, nfp * 16 bytes of XXH3-128
 *   u64 XXH3-64 of every byte before it
 * The trailing hash makes a truncated, torn or foreign file an error
 * rather than wrong checks.
 */
#define CHECKS_MAGIC "TBCHECKS"
#define CHECKS_VERSION 3u /* 3: segments cut by content */
#define CHECKS_HEAD 24
#define CHECKS_REC 48

static void
put_u32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void
put_u64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
get_u32(const uint8_t *p)
{
  uint32_t v = 0;

  for (int i = 3; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static uint64_t
get_u64(const uint8_t *p)
{
  uint64_t v = 0;

  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

struct wbuf {
  int fd;
  uint8_t *b;
  size_t n;
  XXH3_state_t *h;
  int err; /* errno of the first failed write */
};

/* Write all n bytes; 0 or the errno of the failure. */
static int
write_all(int fd, const uint8_t *p, size_t n)
{
  while (n > 0) {
    ssize_t r = write(fd, p, n);

    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return errno;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static void
wbuf_flush(struct wbuf *w)
{
  XXH3_64bits_update(w->h, w->b, w->n);
  if (w->err == 0)
    w->err = write_all(w->fd, w->b, w->n);
  w->n = 0;
}

static void
wbuf_add(struct wbuf *w, const void *data, size_t n)
{
  const uint8_t *p = data;

  while (n > 0) {
    size_t k = READ_CHUNK - w->n < n ? READ_CHUNK - w->n : n;

    memcpy(w->b + w->n, p, k);
    w->n += k;
    p += k;
    n -= k;
    if (w->n == READ_CHUNK)
      wbuf_flush(w);
  }
}

int
manifest_checks_save(const struct manifest_checks *c, const char *path,
                     struct err *e)
{
  char tmp[4096 + 8];
  uint8_t rec[CHECKS_REC];
  struct wbuf w = {-1, NULL, 0, NULL, 0};
  int rc = 0;

  if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
    return err_set(e, ERR_INVALID, "checks path '%.200s': too long", path);
  w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd < 0)
    return err_set(e, ERR_IO, "cannot create '%.200s': %s", tmp,
                   strerror(errno));
  w.b = xmalloc(READ_CHUNK);
  w.h = XXH3_createState();
  if (w.h == NULL)
    abort(); /* the alloc.h policy for small allocations */
  XXH3_64bits_reset(w.h);

  memcpy(rec, CHECKS_MAGIC, 8);
  put_u32(rec + 8, CHECKS_VERSION);
  put_u32(rec + 12, 0);
  put_u64(rec + 16, c->n);
  wbuf_add(&w, rec, CHECKS_HEAD);
  for (size_t i = 0; i < c->n; i++) {
    const struct manifest_check *ck = &c->v[i];
    uint32_t nsegs = ck->xxh != NULL ? ck->nsegs : 0;
    uint32_t nfp = nsegs > 0 && ck->fp != NULL ? ck->nfp : 0;

    put_u64(rec, ck->dev);
    put_u64(rec + 8, ck->ino);
    put_u64(rec + 16, ck->size);
    put_u64(rec + 24, (uint64_t)ck->mtime_ns);
    put_u64(rec + 32, (uint64_t)ck->ctime_ns);
    put_u32(rec + 40, nsegs);
    put_u32(rec + 44, nfp);
    wbuf_add(&w, rec, CHECKS_REC);
    if (nsegs > 0)
      wbuf_add(&w, ck->xxh, (size_t)nsegs * 16);
    if (nfp > 0)
      wbuf_add(&w, ck->fp, (size_t)nfp * 16);
  }
  wbuf_flush(&w);
  put_u64(rec, XXH3_64bits_digest(w.h));
  if (w.err == 0)
    w.err = write_all(w.fd, rec, 8);
  if (w.err == 0 && fsync(w.fd) < 0)
    w.err = errno;
  if (close(w.fd) < 0 && w.err == 0)
    w.err = errno;
  w.fd = -1;
  if (w.err != 0) {
    rc = err_set(e, ERR_IO, "cannot write '%.200s': %s", tmp,
                 strerror(w.err));
    goto out;
  }
  if (rename(tmp, path) < 0)
    rc = err_set(e, ERR_IO, "cannot rename '%.200s': %s", tmp,
                 strerror(errno));

out:
  if (rc < 0)
    unlink(tmp);
  XXH3_freeState(w.h);
  free(w.b);
  return rc;
}

static int
read_all(const char *path, uint8_t **out, size_t *len, struct err *e)
{
  struct stat st;
  uint8_t *data = NULL;
  size_t off = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int rc = 0;

  if (fd < 0)
    return err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_IO,
                   "cannot open '%.200s': %s", path, strerror(errno));
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    rc = err_set(e, ERR_INVALID, "checks '%.200s': not a regular file",
                 path);
    goto out;
  }
  data = xmalloc_try((size_t)st.st_size + 1);
  if (data == NULL) {
    rc = err_set(e, ERR_NOMEM, "checks '%.200s': %lld bytes", path,
                 (long long)st.st_size);
    goto out;
  }
  while (off < (size_t)st.st_size) {
    ssize_t r = read(fd, data + off, (size_t)st.st_size - off);

    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rc = err_set(e, ERR_IO, "cannot read '%.200s': %s", path,
                   strerror(errno));
      goto out;
    }
    if (r == 0)
      break;
    off += (size_t)r;
  }
  *out = data;
  *len = off;
  data = NULL;

out:
  free(data);
  close(fd);
  return rc;
}

int
manifest_checks_load(const char *path, const struct manifest *m,
                     struct manifest_checks *c, struct err *e)
{
  size_t n = m->n;
  uint8_t *data = NULL;
  size_t len = 0, off;
  uint64_t count;
  int rc;

  manifest_checks_release(c);
  rc = read_all(path, &data, &len, e);
  if (rc < 0)
    return rc;
  if (len < CHECKS_HEAD + 8 || memcmp(data, CHECKS_MAGIC, 8) != 0 ||
      get_u32(data + 8) != CHECKS_VERSION ||
      get_u64(data + len - 8) != XXH3_64bits(data, len - 8)) {
    rc = err_set(e, ERR_INVALID, "checks '%.200s': not a checks file of "
                 "version %u, or damaged", path, CHECKS_VERSION);
    goto out;
  }
  count = get_u64(data + 16);
  if (count != n) {
    rc = err_set(e, ERR_INVALID, "checks '%.200s': %llu entries, the "
                 "manifest has %zu", path, (unsigned long long)count, n);
    goto out;
  }
  /* Every record takes 48 bytes, so a count the file cannot hold is
   * refused before allocating for it. */
  if (count > (len - CHECKS_HEAD - 8) / CHECKS_REC)
    goto short_file;
  c->v = xcalloc(n > 0 ? n : 1, sizeof(*c->v));
  off = CHECKS_HEAD;
  for (size_t i = 0; i < n; i++) {
    struct manifest_check *ck = &c->v[i];
    const uint8_t *p = data + off;

    if (len - 8 - off < CHECKS_REC)
      goto short_file;
    ck->dev = get_u64(p);
    ck->ino = get_u64(p + 8);
    ck->size = get_u64(p + 16);
    ck->mtime_ns = (int64_t)get_u64(p + 24);
    ck->ctime_ns = (int64_t)get_u64(p + 32);
    ck->nsegs = get_u32(p + 40);
    ck->nfp = get_u32(p + 44);
    off += CHECKS_REC;
    c->n = i + 1;
    if (ck->nsegs == 0 && ck->nfp == 0)
      continue;
    /* Checks describe the manifest's segments, or they are not these. */
    if (m->v[i].type != MANIFEST_FILE || ck->nsegs != m->v[i].nsegs ||
        ck->nfp != (ck->nsegs > 1 ? manifest_seg_fp(&m->v[i], ck->nsegs)
                                  : 0) ||
        (len - 8 - off) / 16 < ck->nsegs)
      goto short_file;
    ck->xxh = xmalloc((size_t)ck->nsegs * 16);
    memcpy(ck->xxh, data + off, (size_t)ck->nsegs * 16);
    off += (size_t)ck->nsegs * 16;
    if (ck->nfp == 0)
      continue;
    if ((len - 8 - off) / 16 < ck->nfp)
      goto short_file;
    ck->fp = xmalloc((size_t)ck->nfp * 16);
    memcpy(ck->fp, data + off, (size_t)ck->nfp * 16);
    off += (size_t)ck->nfp * 16;
  }
  if (off != len - 8)
    goto short_file;
  goto out;

short_file:
  rc = err_set(e, ERR_INVALID, "checks '%.200s': sizes do not add up, or "
               "do not fit the manifest", path);
out:
  free(data);
  if (rc < 0)
    manifest_checks_release(c);
  return rc;
}
