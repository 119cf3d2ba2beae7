/*
 * Manifests (docs/SYNC.md "Manifest"): canonical JSON, strict decoding,
 * scanning a tree and the source side's checks file.
 */
#include "manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
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
#include "util/utf8.h"

#define READ_CHUNK ((size_t)1 << 20)

void
manifest_init(struct manifest *m)
{
  memset(m, 0, sizeof(*m));
}

static void
entry_release(struct manifest_entry *me)
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
    entry_release(&m->v[i]);
  free(m->v);
  free(m->span);
  manifest_init(m);
}

static void *
dup_bytes(const void *p, size_t n)
{
  return p == NULL || n == 0 ? NULL : memcpy(xmalloc(n), p, n);
}

static void
entry_copy(struct manifest_entry *de, const struct manifest_entry *se)
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
    entry_copy(&dst->v[i], &src->v[i]);
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
static void
escape_name(const char *s, char *out, size_t outlen)
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

static int64_t
timespec_ns(const struct timespec *ts)
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
      escape_name(m->v[i].path, name, sizeof(name));
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
static void
entries_reserve(struct manifest *m, size_t i)
{
  if (i < m->cap)
    return;
  m->cap = m->cap ? 2 * m->cap : 16;
  m->v = xrealloc(m->v, m->cap * sizeof(*m->v));
  if (m->span != NULL)
    m->span = xrealloc(m->span, m->cap * sizeof(*m->span));
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
  entry_copy(me, src);
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
manifest_checks_copy(struct manifest_checks *dst,
                     const struct manifest_checks *src)
{
  dst->n = src->n;
  dst->v = src->n > 0 ? xmalloc(src->n * sizeof(*dst->v)) : NULL;
  for (size_t i = 0; i < src->n; i++) {
    const struct manifest_check *sc = &src->v[i];

    dst->v[i] = *sc;
    dst->v[i].xxh = dup_bytes(sc->xxh, (size_t)sc->nsegs * 16);
    dst->v[i].fp = dup_bytes(sc->fp, (size_t)sc->nfp * 16);
  }
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

/* ---- scanning ---- */

struct scan_item {
  struct manifest_entry me;
  struct manifest_check ck;
};

#define SCAN_THREADS_MAX 8

/*
 * A tree is listed by one thread per core (at most SCAN_THREADS_MAX),
 * a directory at a time: stat of every entry and the hashing of changed
 * small files are most of a republish of many small files.  The
 * directories still to list are shared; each thread keeps its own
 * entries, merged and sorted at the end.
 */
struct scan_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const char **dirs;   /* to list: paths borrowed from the entries */
  size_t ndirs, dcap;
  unsigned busy;       /* threads listing one (they may add more) */
  int failed;          /* a thread failed: the others stop */
  atomic_size_t entries;
  /* prev's one-segment files by inode, built before the threads start
   * (read-only then): 1 + index into prev, 0 empty. */
  uint32_t *by_ino;
  size_t ino_mask;
};

struct scan {
  struct scan_queue *q;
  int topfd;
  int at_root; /* the dataset is the agent's root: skip ".tenbin" */
  const struct manifest *prev;
  const struct manifest_checks *prev_checks;
  struct scan_item *v;
  size_t n, cap;
  uint8_t *buf;      /* READ_CHUNK bytes */
  EVP_MD_CTX *seg_ctx, *root_ctx;
  XXH3_state_t *xs;
  struct manifest_scan_stats st;
  struct err *e;     /* &err */
  struct err err;
  int rc;
  pthread_t tid;
};

static struct scan_item *
scan_add(struct scan *sc, const char *path, enum manifest_type type)
{
  struct scan_item *it;

  if (sc->n == sc->cap) {
    sc->cap = sc->cap ? sc->cap * 2 : 256;
    sc->v = xrealloc(sc->v, sc->cap * sizeof(*sc->v));
  }
  it = &sc->v[sc->n++];
  memset(it, 0, sizeof(*it));
  it->me.path = xstrdup(path);
  it->me.type = type;
  return it;
}

static size_t
ino_slot(uint64_t dev, uint64_t ino, size_t mask)
{
  return (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ dev) & mask;
}

/* Index prev's one-segment files by inode, for files moved since. */
static void
index_inodes(struct scan_queue *q, const struct manifest *prev,
             const struct manifest_checks *pcs)
{
  size_t cap = 16;

  if (prev == NULL || pcs == NULL || pcs->n != prev->n)
    return;
  while (cap < 2 * prev->n)
    cap *= 2;
  q->by_ino = xcalloc(cap, sizeof(*q->by_ino));
  q->ino_mask = cap - 1;
  for (size_t i = 0; i < prev->n; i++) {
    const struct manifest_check *pc = &pcs->v[i];
    size_t k;

    if (prev->v[i].type != MANIFEST_FILE || prev->v[i].nsegs != 1 ||
        pc->xxh == NULL)
      continue;
    for (k = ino_slot(pc->dev, pc->ino, q->ino_mask); q->by_ino[k] != 0;
         k = (k + 1) & q->ino_mask)
      ;
    q->by_ino[k] = (uint32_t)i + 1;
  }
}

/*
 * The previous entry that may hold its content when its stat identity
 * changed: the same path, or else the same inode (a file moved within
 * the tree; a rename changes the ctime).  scan_read keeps its SHA-256
 * when the XXH3-128 it recorded matches, as a large file's segments do.
 * j: prev's entry of the same path, or -1.
 */
static ssize_t
scan_candidate(const struct scan *sc, const struct scan_item *it, ssize_t j)
{
  const struct scan_queue *q = sc->q;

  if (j < 0 && q->by_ino != NULL) {
    for (size_t k = ino_slot(it->ck.dev, it->ck.ino, q->ino_mask);
         q->by_ino[k] != 0; k = (k + 1) & q->ino_mask) {
      const struct manifest_check *pc = &sc->prev_checks->v[q->by_ino[k] - 1];

      if (pc->ino == it->ck.ino && pc->dev == it->ck.dev) {
        j = (ssize_t)q->by_ino[k] - 1;
        break;
      }
    }
  }
  if (j < 0 || sc->prev->v[j].type != MANIFEST_FILE ||
      sc->prev->v[j].nsegs != 1 || sc->prev->v[j].size != it->me.size ||
      sc->prev_checks->v[j].xxh == NULL || it->me.size > READ_CHUNK)
    return -1;
  return j;
}

/* Reuse the hashes of prev when the stat identity is unchanged: 1 done;
 * else 0 and *jp prev's entry of the path, or -1. */
static int
scan_reuse(struct scan *sc, struct scan_item *it, ssize_t *jp)
{
  const struct manifest_entry *pe;
  const struct manifest_check *pc;
  ssize_t j;

  *jp = -1;
  if (sc->prev == NULL || sc->prev_checks == NULL ||
      sc->prev_checks->n != sc->prev->n)
    return 0;
  j = manifest_find(sc->prev, it->me.path);
  *jp = j;
  if (j < 0)
    return 0;
  pe = &sc->prev->v[j];
  pc = &sc->prev_checks->v[j];
  if (pe->type != MANIFEST_FILE || pe->size != it->me.size ||
      pc->size != it->ck.size || pc->dev != it->ck.dev ||
      pc->ino != it->ck.ino || pc->mtime_ns != it->ck.mtime_ns ||
      pc->ctime_ns != it->ck.ctime_ns || pc->xxh == NULL ||
      pc->nsegs != pe->nsegs ||
      (pe->nsegs > 1 && (pc->fp == NULL ||
                         pc->nfp != manifest_seg_fp(pe, pe->nsegs))))
    return 0;
  memcpy(it->me.sha256, pe->sha256, 32);
  it->me.nsegs = pe->nsegs;
  it->ck.nsegs = pc->nsegs;
  if (pe->nsegs > 1) {
    uint64_t *lens = xmalloc((size_t)pe->nsegs * sizeof(*lens));

    for (uint32_t k = 0; k < pe->nsegs; k++)
      lens[k] = pe->segoff[k + 1] - pe->segoff[k];
    manifest_set_segments(&it->me, lens, pe->nsegs);
    free(lens);
    it->me.segs = xmalloc((size_t)pe->nsegs * 32);
    memcpy(it->me.segs, pe->segs, (size_t)pe->nsegs * 32);
  }
  it->ck.xxh = xmalloc((size_t)pc->nsegs * 16);
  memcpy(it->ck.xxh, pc->xxh, (size_t)pc->nsegs * 16);
  if (pc->fp != NULL) {
    it->ck.nfp = pc->nfp;
    it->ck.fp = xmalloc((size_t)pc->nfp * 16);
    memcpy(it->ck.fp, pc->fp, (size_t)pc->nfp * 16);
  }
  return 1;
}

static void
set_identity(struct scan_item *it, const struct stat *st)
{
  it->ck.dev = (uint64_t)st->st_dev;
  it->ck.ino = (uint64_t)st->st_ino;
  it->ck.size = (uint64_t)st->st_size;
  it->ck.mtime_ns = timespec_ns(&st->st_mtim);
  it->ck.ctime_ns = timespec_ns(&st->st_ctim);
  it->me.size = it->ck.size;
  it->me.mtime_ns = it->ck.mtime_ns;
  it->me.mode = (uint32_t)st->st_mode & 07777;
  it->me.nsegs = 1; /* until a large file is cut */
  it->ck.nsegs = 1;
}

/* Up to want (> 0) more bytes of the file: their count, or ERR_IO
 * naming it (a file that ends before its size shrank). */
static ssize_t
read_more(struct scan *sc, int fd, const struct scan_item *it, void *buf,
          size_t want)
{
  ssize_t r;

  do {
    r = read(fd, buf, want);
  } while (r < 0 && errno == EINTR);
  if (r < 0)
    return err_set(sc->e, ERR_IO, "cannot read '%.200s': %s", it->me.path,
                   strerror(errno));
  if (r == 0)
    return err_set(sc->e, ERR_IO, "file '%.200s' shrank while being read",
                   it->me.path);
  return r;
}

/* 0 when fd, read to its size, has nothing more. */
static int
read_end(struct scan *sc, int fd, const struct scan_item *it)
{
  ssize_t r;

  do {
    r = read(fd, sc->buf, 1);
  } while (r < 0 && errno == EINTR);
  if (r != 0)
    return err_set(sc->e, ERR_IO, "file '%.200s' grew while being read",
                   it->me.path);
  return 0;
}

/* scan_read of a file of at most READ_CHUNK bytes with a candidate. */
static int
scan_read_small(struct scan *sc, int fd, struct scan_item *it, ssize_t cand)
{
  struct manifest_entry *me = &it->me;
  XXH128_canonical_t canon;
  size_t got = 0;
  ssize_t r;

  while (got < me->size) {
    r = read_more(sc, fd, it, sc->buf + got, (size_t)me->size - got);
    if (r < 0)
      return (int)r;
    got += (size_t)r;
  }
  sc->st.bytes_hashed += got;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(sc->buf, got));
  memcpy(it->ck.xxh[0], canon.digest, 16);
  if (memcmp(canon.digest, sc->prev_checks->v[cand].xxh[0], 16) == 0) {
    memcpy(me->sha256, sc->prev->v[cand].sha256, 32);
    sc->st.segments_reused++;
  } else {
    hash_sha256(sc->buf, got, me->sha256);
  }
  return read_end(sc, fd, it);
}

/* Read a file of one segment once, hashing it with XXH3-128 and
 * SHA-256, or keeping the SHA-256 of prev's entry cand (or -1) when the
 * file fits the buffer and its XXH3-128 is the one recorded there. */
static int
scan_read(struct scan *sc, int fd, struct scan_item *it, ssize_t cand)
{
  struct manifest_entry *me = &it->me;
  XXH128_canonical_t canon;
  unsigned int mdlen = 0;
  uint64_t left = me->size;
  ssize_t r;

  it->ck.xxh = xcalloc(1, 16);
  if (cand >= 0)
    return scan_read_small(sc, fd, it, cand);
  EVP_DigestInit_ex(sc->seg_ctx, EVP_sha256(), NULL);
  XXH3_128bits_reset(sc->xs);
  while (left > 0) {
    size_t want = left < READ_CHUNK ? (size_t)left : READ_CHUNK;

    r = read_more(sc, fd, it, sc->buf, want);
    if (r < 0)
      return (int)r;
    EVP_DigestUpdate(sc->seg_ctx, sc->buf, (size_t)r);
    XXH3_128bits_update(sc->xs, sc->buf, (size_t)r);
    left -= (uint64_t)r;
    sc->st.bytes_hashed += (uint64_t)r;
  }
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(sc->xs));
  memcpy(it->ck.xxh[0], canon.digest, 16);
  EVP_DigestFinal_ex(sc->seg_ctx, me->sha256, &mdlen);
  return read_end(sc, fd, it);
}

/* scan_read for a file that may be more than one segment. */
static int
scan_read_large(struct scan *sc, int fd, struct scan_item *it)
{
  const struct manifest_entry *pe = NULL;
  const struct manifest_check *pc = NULL;
  int rc;

  if (sc->prev != NULL && sc->prev_checks != NULL &&
      sc->prev_checks->n == sc->prev->n) {
    ssize_t j = manifest_find(sc->prev, it->me.path);

    if (j >= 0) {
      pe = &sc->prev->v[j];
      pc = &sc->prev_checks->v[j];
    }
  }
  rc = manifest_scan_large(fd, &it->me, &it->ck, pe, pc, &sc->st, sc->e);
  return rc == 1 ? scan_read(sc, fd, it, -1) : rc;
}

static int
scan_file(struct scan *sc, int dirfd, const char *name, const char *path,
          const struct stat *lst)
{
  struct scan_item *it = scan_add(sc, path, MANIFEST_FILE);
  struct stat st, after;
  ssize_t j;
  int fd, rc;

  set_identity(it, lst);
  if (it->me.size > MANIFEST_MAX_FILE_SIZE)
    return err_set(sc->e, ERR_INVALID, "file '%.200s': %llu bytes, more "
                   "than the limit of 2^50", path,
                   (unsigned long long)it->me.size);
  if (scan_reuse(sc, it, &j)) {
    sc->st.files_reused++;
    return 0;
  }
  /* O_NONBLOCK: if a fifo took the file's place, do not wait on it. */
  fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
              O_CLOEXEC);
  if (fd < 0)
    return err_set(sc->e, ERR_IO, "cannot open '%.200s': %s", path,
                   strerror(errno));
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
      st.st_dev != lst->st_dev || st.st_ino != lst->st_ino) {
    rc = err_set(sc->e, ERR_IO, "file '%.200s' changed while scanning",
                 path);
    goto out;
  }
  /* Record what was read: the identity of the open file. */
  set_identity(it, &st);
  if (it->me.size > MANIFEST_MAX_FILE_SIZE) {
    rc = err_set(sc->e, ERR_IO, "file '%.200s' changed while scanning",
                 path);
    goto out;
  }
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  if (it->me.size > MANIFEST_SEG_MIN)
    rc = scan_read_large(sc, fd, it);
  else
    rc = scan_read(sc, fd, it, sc->prev_checks != NULL
                                   ? scan_candidate(sc, it, j) : -1);
  if (rc < 0)
    goto out;
  if (fstat(fd, &after) < 0 || after.st_size != st.st_size ||
      timespec_ns(&after.st_mtim) != it->ck.mtime_ns) {
    rc = err_set(sc->e, ERR_IO, "file '%.200s' changed while being read",
                 path);
    goto out;
  }
  sc->st.files_hashed++;

out:
  close(fd);
  return rc;
}

static int
scan_link(struct scan *sc, int dirfd, const char *name, const char *path)
{
  char target[SYNCPATH_MAX + 2];
  char shown[128];
  struct scan_item *it;
  ssize_t r = readlinkat(dirfd, name, target, sizeof(target));

  if (r < 0)
    return err_set(sc->e, ERR_IO, "cannot read link '%.200s': %s", path,
                   strerror(errno));
  if ((size_t)r > SYNCPATH_MAX)
    return err_set(sc->e, ERR_INVALID, "link '%.200s': target longer than "
                   "%d bytes", path, SYNCPATH_MAX);
  target[r] = '\0';
  escape_name(target, shown, sizeof(shown));
  if (!utf8_valid(target, (size_t)r))
    return err_set(sc->e, ERR_INVALID, "link '%.100s': target '%s' is not "
                   "valid UTF-8", path, shown);
  if (!syncpath_link_inside(path, target))
    return err_set(sc->e, ERR_INVALID, "link '%.100s' -> '%s' points "
                   "outside the dataset", path, shown);
  it = scan_add(sc, path, MANIFEST_LINK);
  it->me.target = xstrdup(target);
  return 0;
}

static const char *
kind_name(mode_t mode)
{
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISFIFO(mode))
    return "a fifo";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "of an unknown type";
}

/* One child of directory dir (path "" for the top). */
static void
scan_push(struct scan_queue *q, const char *dir)
{
  pthread_mutex_lock(&q->mu);
  if (q->ndirs == q->dcap) {
    q->dcap = q->dcap ? q->dcap * 2 : 64;
    q->dirs = xrealloc(q->dirs, q->dcap * sizeof(*q->dirs));
  }
  q->dirs[q->ndirs++] = dir;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

/* The next directory to list, or NULL when there is none and no thread
 * can add one, or a thread failed. */
static const char *
scan_take(struct scan_queue *q)
{
  const char *dir = NULL;

  pthread_mutex_lock(&q->mu);
  while (q->ndirs == 0 && q->busy > 0 && !q->failed)
    pthread_cond_wait(&q->cv, &q->mu);
  if (q->ndirs > 0 && !q->failed) {
    dir = q->dirs[--q->ndirs];
    q->busy++;
  }
  pthread_mutex_unlock(&q->mu);
  return dir;
}

static void
scan_done_dir(struct scan_queue *q, int rc)
{
  pthread_mutex_lock(&q->mu);
  q->busy--;
  if (rc < 0)
    q->failed = 1;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

static int
scan_child(struct scan *sc, int dirfd, const char *dir, const char *name)
{
  char path[SYNCPATH_MAX + 1];
  char shown[128];
  size_t dlen = strlen(dir), nlen = strlen(name);
  struct stat st;

  if (dlen == 0 && strcmp(name, SYNCPATH_STORE) == 0) {
    if (sc->at_root)
      return 0;
    return err_set(sc->e, ERR_INVALID, "'%s' at the top of a dataset is "
                   "reserved for the agent", SYNCPATH_STORE);
  }
  if (!utf8_valid(name, nlen)) {
    escape_name(name, shown, sizeof(shown));
    return err_set(sc->e, ERR_INVALID, "name '%s' in '%.100s' is not valid "
                   "UTF-8", shown, dlen > 0 ? dir : ".");
  }
  if (dlen + (dlen > 0) + nlen > SYNCPATH_MAX)
    return err_set(sc->e, ERR_INVALID, "path '%.100s/%.100s': longer than "
                   "%d bytes", dir, name, SYNCPATH_MAX);
  /* Built by hand: snprintf here was a tenth of a 20,000-file scan. */
  memcpy(path, dir, dlen);
  if (dlen > 0)
    path[dlen++] = '/';
  memcpy(path + dlen, name, nlen + 1);
  if (atomic_fetch_add(&sc->q->entries, 1) >= MANIFEST_MAX_ENTRIES)
    return err_set(sc->e, ERR_INVALID, "more than %u entries",
                   MANIFEST_MAX_ENTRIES);
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return err_set(sc->e, ERR_IO, "cannot stat '%.200s': %s", path,
                   strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    struct scan_item *it = scan_add(sc, path, MANIFEST_DIR);

    it->me.mode = (uint32_t)st.st_mode & 07777;
    scan_push(sc->q, it->me.path);
    return 0;
  }
  if (S_ISREG(st.st_mode))
    return scan_file(sc, dirfd, name, path, &st);
  if (S_ISLNK(st.st_mode))
    return scan_link(sc, dirfd, name, path);
  return err_set(sc->e, ERR_INVALID, "'%.200s' is %s: only files, "
                 "directories and symlinks can be published", path,
                 kind_name(st.st_mode));
}

static int
scan_dir(struct scan *sc, const char *dir)
{
  struct dirent *de;
  DIR *dp;
  int fd, rc = 0;

  /* Each directory is opened from the top, never following a link, so
   * a thread has one directory open at a time however deep the tree is. */
  if (*dir == '\0')
    fd = openat(sc->topfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  else
    fd = syncpath_openat(sc->topfd, dir, O_RDONLY | O_DIRECTORY, 0, sc->e);
  if (fd < 0 && *dir == '\0')
    return err_set(sc->e, ERR_IO, "cannot open the dataset: %s",
                   strerror(errno));
  if (fd < 0)
    return fd;
  dp = fdopendir(fd);
  if (dp == NULL) {
    close(fd);
    return err_set(sc->e, ERR_IO, "cannot list '%.200s': %s",
                   *dir ? dir : ".", strerror(errno));
  }
  for (;;) {
    errno = 0;
    de = readdir(dp);
    if (de == NULL) {
      if (errno != 0)
        rc = err_set(sc->e, ERR_IO, "cannot list '%.200s': %s",
                     *dir ? dir : ".", strerror(errno));
      break;
    }
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    rc = scan_child(sc, dirfd(dp), dir, de->d_name);
    if (rc < 0)
      break;
  }
  closedir(dp);
  return rc;
}

static int
item_cmp(const void *a, const void *b)
{
  return strcmp(((const struct scan_item *)a)->me.path,
                ((const struct scan_item *)b)->me.path);
}

static void *
scan_worker(void *arg)
{
  struct scan *sc = arg;
  const char *dir;

  while ((dir = scan_take(sc->q)) != NULL) {
    sc->rc = scan_dir(sc, dir);
    scan_done_dir(sc->q, sc->rc);
    if (sc->rc < 0)
      break;
  }
  return NULL;
}

static void
scan_thread_init(struct scan *sc, struct scan_queue *q, int topfd,
                 int at_root, const struct manifest *prev,
                 const struct manifest_checks *prev_checks)
{
  memset(sc, 0, sizeof(*sc));
  sc->q = q;
  sc->topfd = topfd;
  sc->at_root = at_root;
  sc->prev = prev;
  sc->prev_checks = prev_checks;
  sc->e = &sc->err;
  sc->buf = xmalloc(READ_CHUNK);
  sc->seg_ctx = EVP_MD_CTX_new();
  sc->root_ctx = EVP_MD_CTX_new();
  sc->xs = XXH3_createState();
  if (sc->seg_ctx == NULL || sc->root_ctx == NULL || sc->xs == NULL)
    abort(); /* the alloc.h policy for small allocations */
}

static void
scan_thread_release(struct scan *sc)
{
  for (size_t i = 0; i < sc->n; i++) {
    entry_release(&sc->v[i].me);
    free(sc->v[i].ck.xxh);
    free(sc->v[i].ck.fp);
  }
  free(sc->v);
  free(sc->buf);
  EVP_MD_CTX_free(sc->seg_ctx);
  EVP_MD_CTX_free(sc->root_ctx);
  XXH3_freeState(sc->xs);
}

int
manifest_scan(int rootfd, const char *rel, const struct manifest *prev,
              const struct manifest_checks *prev_checks,
              struct manifest *out, struct manifest_checks *checks,
              struct manifest_scan_stats *st, struct err *e)
{
  struct scan_queue q;
  struct scan sc[SCAN_THREADS_MAX];
  struct scan_item *all = NULL;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  size_t nt = ncpu < 1 ? 1 : ncpu > SCAN_THREADS_MAX ? SCAN_THREADS_MAX
                                                     : (size_t)ncpu;
  size_t n = 0, k = 0;
  int topfd, rc = 0;

  manifest_release(out);
  manifest_checks_release(checks);
  topfd = syncpath_openat(rootfd, rel, O_RDONLY | O_DIRECTORY, 0, e);
  if (topfd < 0)
    return topfd;
  memset(&q, 0, sizeof(q));
  pthread_mutex_init(&q.mu, NULL);
  pthread_cond_init(&q.cv, NULL);
  atomic_init(&q.entries, 0);
  index_inodes(&q, prev, prev_checks);
  for (size_t t = 0; t < nt; t++)
    scan_thread_init(&sc[t], &q, topfd, strcmp(rel, ".") == 0, prev,
                     prev_checks);
  scan_push(&q, "");
  for (size_t t = 1; t < nt; t++)
    if (pthread_create(&sc[t].tid, NULL, scan_worker, &sc[t]) != 0)
      abort();
  scan_worker(&sc[0]);
  for (size_t t = 1; t < nt; t++)
    pthread_join(sc[t].tid, NULL);
  for (size_t t = 0; t < nt; t++) {
    if (sc[t].rc < 0 && rc == 0) {
      rc = sc[t].rc;
      *e = sc[t].err;
    }
    n += sc[t].n;
  }
  if (rc < 0)
    goto out;

  /* Each thread's entries in one array, sorted: readdir order is
   * arbitrary, and a depth-first one is not strcmp order either ('/'
   * sorts before most characters). */
  all = xmalloc((n > 0 ? n : 1) * sizeof(*all));
  for (size_t t = 0; t < nt; t++) {
    if (sc[t].n > 0)
      memcpy(all + k, sc[t].v, sc[t].n * sizeof(*all));
    k += sc[t].n;
    sc[t].n = 0; /* moved */
  }
  if (n > 1)
    qsort(all, n, sizeof(*all), item_cmp);
  out->v = xcalloc(n > 0 ? n : 1, sizeof(*out->v));
  out->cap = n;
  checks->v = xcalloc(n > 0 ? n : 1, sizeof(*checks->v));
  for (size_t i = 0; i < n; i++) {
    const struct manifest_entry *me = &all[i].me;

    out->v[i] = *me;
    checks->v[i] = all[i].ck;
    if (me->type == MANIFEST_DIR) {
      out->dirs++;
    } else if (me->type == MANIFEST_LINK) {
      out->links++;
    } else {
      out->files++;
      out->bytes += me->size;
    }
  }
  out->n = n;
  checks->n = n;
  if (st != NULL) {
    memset(st, 0, sizeof(*st));
    for (size_t t = 0; t < nt; t++) {
      st->files_hashed += sc[t].st.files_hashed;
      st->bytes_hashed += sc[t].st.bytes_hashed;
      st->files_reused += sc[t].st.files_reused;
      st->segments_reused += sc[t].st.segments_reused;
      st->segments_cut_ahead += sc[t].st.segments_cut_ahead;
    }
  }

out:
  free(all);
  for (size_t t = 0; t < nt; t++)
    scan_thread_release(&sc[t]);
  free(q.dirs);
  free(q.by_ino);
  pthread_mutex_destroy(&q.mu);
  pthread_cond_destroy(&q.cv);
  close(topfd);
  return rc;
}
