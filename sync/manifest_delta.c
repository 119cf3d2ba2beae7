/*
 * Manifest deltas (manifest.h, docs/SYNC.md "Manifest deltas").
 *
 * A version of 20,000 files with a few hundred changed is 3.4 MB of
 * manifest, which every pull fetched, decoded and matched against the
 * previous version entry by entry: a fifth of a small change's pull.
 * Against the version the destination holds, the change is a few
 * hundred entries.  The delta names runs of the base's entries by
 * count, so the destination copies them decoded (checking only their
 * order and parents among the new neighbours) and decodes only the
 * entries it carries; it rebuilds the whole text, each kept run's bytes
 * copied from the base's stored text in one piece, to check its hash
 * and to store it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/manifest.h"
#include "sync/manifest_int.h"
#include "sync/manifest_text.h"
#include "util/alloc.h"
#include "util/buf.h"

#define TEXT_HEAD "{\"entries\":["
/* as manifest_encode writes them */
#define TEXT_TAIL "],\"format\":%d}"

/* ---- making ---- */

struct maker {
  struct buf out;
  struct buf lit;   /* JSON of the pending N run */
  char op;          /* pending run: 'C', 'S', 'N' or 0 */
  size_t count;
};

static int
flush_run(struct maker *k)
{
  int rc = 0;

  if (k->op == 'N')
    rc = buf_addf(&k->out, "N %zu %zu\n", k->count, k->lit.len) < 0 ||
         buf_add(&k->out, k->lit.data, k->lit.len) < 0;
  else if (k->op != 0)
    rc = buf_addf(&k->out, "%c %zu\n", k->op, k->count) < 0;
  k->op = 0;
  k->count = 0;
  k->lit.len = 0;
  return rc ? ERR_TOO_LARGE : 0;
}

/* One more entry of a run of op ('N': entry me, written as JSON). */
static int
add_op(struct maker *k, char op, const struct manifest_entry *me)
{
  int rc;

  if (k->op != op) {
    rc = flush_run(k);
    if (rc < 0)
      return rc;
    k->op = op;
  }
  if (op == 'N') {
    if (k->count > 0 && buf_add(&k->lit, ",", 1) < 0)
      return ERR_TOO_LARGE;
    rc = mtext_put_entry(&k->lit, me);
    if (rc < 0)
      return rc;
  }
  k->count++;
  return 0;
}

int
manifest_delta_make(const struct manifest *base, const char *base_id,
                    const struct manifest *m, size_t max_len, char **out,
                    size_t *len, struct err *e)
{
  struct maker k;
  size_t i = 0, j = 0;
  int rc = 0;

  memset(&k, 0, sizeof(k));
  buf_init(&k.out, max_len);
  buf_init(&k.lit, max_len);
  if (buf_addf(&k.out, MANIFEST_DELTA_MAGIC "%s %zu\n", base_id, m->n) < 0)
    rc = ERR_TOO_LARGE;
  /* Both are sorted by path: one merge walk. */
  while (rc == 0 && (i < base->n || j < m->n)) {
    int c = i == base->n ? 1 : j == m->n ? -1
                                         : strcmp(base->v[i].path,
                                                  m->v[j].path);

    if (c == 0 && manifest_entry_same(&base->v[i], &m->v[j])) {
      rc = add_op(&k, 'C', NULL);
      i++;
      j++;
    } else if (c <= 0) {
      rc = add_op(&k, 'S', NULL);
      i++;
    } else {
      rc = add_op(&k, 'N', &m->v[j]);
      j++;
    }
  }
  if (rc == 0)
    rc = flush_run(&k);
  if (rc == 0)
    *out = buf_take(&k.out, len);
  else if (rc == ERR_TOO_LARGE)
    rc = err_set(e, ERR_TOO_LARGE, "manifest delta: more than %zu bytes",
                 max_len);
  else
    rc = err_set(e, ERR_INVALID, "manifest delta: an entry is not valid "
                 "UTF-8");
  buf_release(&k.out);
  buf_release(&k.lit);
  return rc;
}

/* ---- applying ---- */

/* The next line of the delta (without its newline) into line; 0 at the
 * end, -1 when malformed. */
static int
next_line(const char *d, size_t len, size_t *pos, char *line, size_t cap)
{
  const char *nl;
  size_t n;

  if (*pos == len)
    return 0;
  nl = memchr(d + *pos, '\n', len - *pos);
  if (nl == NULL)
    return -1;
  n = (size_t)(nl - (d + *pos));
  if (n >= cap)
    return -1;
  memcpy(line, d + *pos, n);
  line[n] = '\0';
  *pos += n + 1;
  return 1;
}

/* A decimal count from min (0 or 1) to max, no leading zeros, ending at
 * the end of s (or, with end, anywhere: *end then points after it). */
static int
parse_count(const char *s, const char **end, uint64_t min, uint64_t max,
            uint64_t *out)
{
  uint64_t v = 0;
  const char *p = s;

  if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9'))
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (uint64_t)(*p - '0');
    if (v > max)
      return -1;
  }
  if (v < min)
    return -1;
  if (end != NULL)
    *end = p;
  else if (*p != '\0')
    return -1;
  *out = v;
  return 0;
}

/* Append the n entries of lit (JSON, commas between them), which is at
 * offset at of m's text, to m. */
static int
append_literal(struct manifest *m, const char *lit, size_t len, size_t n,
               size_t at, size_t max_entries, struct err *e)
{
  struct buf doc;
  struct mtext_reader r;
  struct mtext_entry o;
  size_t before = m->n;
  int rc;

  /* Read as a manifest of its own, so the reader sees exactly these
   * entries and nothing can close the array early. */
  buf_init(&doc, MANIFEST_MAX_TEXT);
  if (buf_adds(&doc, TEXT_HEAD) < 0 || buf_add(&doc, lit, len) < 0 ||
      buf_addf(&doc, TEXT_TAIL, MANIFEST_FORMAT) < 0) {
    buf_release(&doc);
    return err_set(e, ERR_INVALID, "manifest delta: too large");
  }
  mtext_init(&r, doc.data, doc.len);
  while ((rc = mtext_next(&r, &o, e)) == 1) {
    rc = manifest_append_decoded(m, &o, max_entries, e);
    if (rc < 0)
      break;
    manifest_set_span(m, m->n - 1, at + o.off - strlen(TEXT_HEAD), o.len);
  }
  if (rc == 0 && m->n - before != n)
    rc = err_set(e, ERR_INVALID, "manifest delta: a run of %zu entries "
                 "holds %zu", n, m->n - before);
  mtext_release(&r);
  buf_release(&doc);
  return rc;
}

/* Append base's entries [bi, bi + n) to the text t, with the commas
 * between them: their bytes in base_text when base has spans into it,
 * else written anew; where each went into spans.  ERR_INVALID when a
 * span is past base_text, ERR_TOO_LARGE past t's limit. */
static int
copy_run(const struct manifest *base, const char *base_text, size_t btlen,
         size_t bi, size_t n, struct buf *t, uint32_t (*spans)[2])
{
  if (base->span != NULL && base_text != NULL) {
    const uint32_t(*sp)[2] = base->span + bi;
    size_t from = sp[0][0], end = (size_t)sp[n - 1][0] + sp[n - 1][1];

    if (end > btlen || from > end)
      return ERR_INVALID;
    for (size_t k = 0; k < n; k++) {
      if (sp[k][0] < from || (size_t)sp[k][0] + sp[k][1] > end)
        return ERR_INVALID;
      spans[k][0] = (uint32_t)(t->len + sp[k][0] - from);
      spans[k][1] = sp[k][1];
    }
    return buf_add(t, base_text + from, end - from) < 0 ? ERR_TOO_LARGE : 0;
  }
  for (size_t k = 0; k < n; k++) {
    size_t at;

    if (k > 0 && buf_add(t, ",", 1) < 0)
      return ERR_TOO_LARGE;
    at = t->len;
    if (mtext_put_entry(t, &base->v[bi + k]) < 0)
      return ERR_TOO_LARGE;
    spans[k][0] = (uint32_t)at;
    spans[k][1] = (uint32_t)(t->len - at);
  }
  return 0;
}

int
manifest_delta_apply(const struct manifest *base, const char *base_id,
                     const char *base_text, size_t btlen,
                     const char *delta, size_t len, size_t max_entries,
                     char **text, size_t *text_len, struct manifest *m,
                     uint32_t **from, struct err *e)
{
  const size_t magic = strlen(MANIFEST_DELTA_MAGIC);
  struct buf t;
  char line[160];
  uint32_t *map = NULL;
  uint32_t (*spans)[2] = NULL;
  size_t spans_cap = 0;
  uint64_t count;
  size_t pos = 0, bi = 0;
  int rc = 0;

  manifest_release(m);
  buf_init(&t, MANIFEST_MAX_TEXT);
  /* Room for the version's text at once: it is about the kept part of
   * the base's and what the delta carries. */
  if (buf_grow(&t, btlen + len < MANIFEST_MAX_TEXT / 2 ? btlen + len + 64
                                                        : 0) < 0)
    goto too_large;
  if (next_line(delta, len, &pos, line, sizeof(line)) != 1 ||
      strncmp(line, MANIFEST_DELTA_MAGIC, magic) != 0 ||
      strlen(line) < magic + MANIFEST_ID_HEX + 2 ||
      line[magic + MANIFEST_ID_HEX] != ' ' ||
      parse_count(line + magic + MANIFEST_ID_HEX + 1, NULL, 0, max_entries,
                  &count) < 0) {
    rc = err_set(e, ERR_INVALID, "manifest delta: malformed header");
    goto out;
  }
  if (strncmp(line + magic, base_id, MANIFEST_ID_HEX) != 0) {
    rc = err_set(e, ERR_INVALID, "manifest delta: against %.12s, not "
                 "%.12s", line + magic, base_id);
    goto out;
  }
  map = xmalloc(((size_t)count + 1) * sizeof(*map));
  /* Room for the announced count, but never more than the delta can
   * hold: the base's entries plus one per 32 bytes of it (no entry's
   * JSON is shorter).  A header that lies reserves little, and is
   * refused below once the entries do not add up to it. */
  manifest_reserve(m, (size_t)count < base->n + len / 32
                          ? (size_t)count
                          : base->n + len / 32);
  if (buf_adds(&t, TEXT_HEAD) < 0)
    goto too_large;
  while (rc == 0) {
    const char *p;
    uint64_t n, lit_len = 0;
    size_t first = m->n;
    int got = next_line(delta, len, &pos, line, sizeof(line));

    if (got == 0)
      break;
    if (got < 0 || (line[0] != 'C' && line[0] != 'S' && line[0] != 'N') ||
        line[1] != ' ' ||
        parse_count(line + 2, line[0] == 'N' ? &p : NULL, 1, max_entries,
                    &n) < 0 ||
        (line[0] == 'N' &&
         (*p != ' ' ||
          parse_count(p + 1, NULL, 1, len - pos, &lit_len) < 0))) {
      rc = err_set(e, ERR_INVALID, "manifest delta: malformed operation "
                   "'%.40s'", line);
      break;
    }
    if (line[0] != 'N' && n > base->n - bi) {
      rc = err_set(e, ERR_INVALID, "manifest delta: %c %" PRIu64 " past "
                   "the base's %zu entries", line[0], n, base->n);
      break;
    }
    if (line[0] != 'S' && n > count - m->n) {
      rc = err_set(e, ERR_INVALID, "manifest delta: more than the %" PRIu64
                   " entries announced", count);
      break;
    }
    if (line[0] == 'S') {
      bi += (size_t)n;
      continue;
    }
    if (m->n > 0 && buf_add(&t, ",", 1) < 0)
      goto too_large;
    if (line[0] == 'N') {
      size_t at = t.len;

      if (buf_add(&t, delta + pos, (size_t)lit_len) < 0)
        goto too_large;
      rc = append_literal(m, delta + pos, (size_t)lit_len, (size_t)n, at,
                          max_entries, e);
      pos += (size_t)lit_len;
      for (size_t i = first; i < m->n; i++)
        map[i] = UINT32_MAX;
      continue;
    }
    if (n > spans_cap) {
      spans_cap = (size_t)n;
      spans = xrealloc(spans, spans_cap * sizeof(*spans));
    }
    rc = copy_run(base, base_text, btlen, bi, (size_t)n, &t, spans);
    if (rc == ERR_TOO_LARGE)
      goto too_large;
    if (rc < 0) {
      rc = err_set(e, ERR_INVALID, "manifest delta: the base's text does "
                   "not hold its entries %zu to %zu", bi,
                   bi + (size_t)n - 1);
      break;
    }
    for (uint64_t k = 0; rc == 0 && k < n; k++, bi++) {
      map[m->n] = (uint32_t)bi;
      rc = manifest_append_copy(m, &base->v[bi], max_entries, e);
      if (rc == 0)
        manifest_set_span(m, m->n - 1, spans[k][0], spans[k][1]);
    }
  }
  if (rc == 0 && m->n != count)
    rc = err_set(e, ERR_INVALID, "manifest delta: %zu entries, not the %"
                 PRIu64 " announced", m->n, count);
  if (rc < 0)
    goto out;
  if (buf_addf(&t, TEXT_TAIL, MANIFEST_FORMAT) < 0)
    goto too_large;
  if (m->v == NULL)
    m->v = xcalloc(1, sizeof(*m->v)); /* never NULL, as decode gives */
  *text = buf_take(&t, text_len);
  *from = map;
  map = NULL;
  goto out;

too_large:
  rc = err_set(e, ERR_INVALID, "manifest delta: the version's text is "
               "more than %zu bytes", MANIFEST_MAX_TEXT);
out:
  if (rc < 0)
    manifest_release(m);
  free(spans);
  free(map);
  buf_release(&t);
  return rc;
}
