/*
 * Manifest text (sync/ internal): the JSON syntax of manifests, written
 * and read without building a JSON tree.
 *
 * Writing gives exactly the bytes jansson gave with JSON_COMPACT |
 * JSON_SORT_KEYS (version ids are hashes of these bytes, so they must
 * never change; test_sync_manifest_text compares the two).
 *
 * A destination decodes every manifest it pulls, and one of a
 * million-file dataset is a hundred MB of JSON: a DOM costs a dozen
 * allocations per entry.  This reader walks the text once and hands
 * manifest.c one entry at a time, its fields decoded into a scratch
 * buffer that the next entry reuses; manifest.c checks their meaning.
 * It accepts any JSON (whitespace, key order) that a DOM parser would,
 * except strings holding NUL and integers past 64 bits, which are
 * malformed here as they were for jansson.
 *
 * Not thread-safe per reader; readers share nothing.
 */
#ifndef TENBIN_SYNC_MANIFEST_TEXT_H
#define TENBIN_SYNC_MANIFEST_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

/* Fields of an entry; in mtext_entry.has when present with the right JSON
 * type (a string, an integer, an array of strings). */
enum {
  MTEXT_PATH = 1 << 0,
  MTEXT_TYPE = 1 << 1,
  MTEXT_MODE = 1 << 2,
  MTEXT_MTIME = 1 << 3,
  MTEXT_SIZE = 1 << 4,
  MTEXT_SHA256 = 1 << 5,
  MTEXT_SEGMENTS = 1 << 6,
  MTEXT_TARGET = 1 << 7,
  MTEXT_SEGLENS = 1 << 8,
};

/* One entry as written; pointers into the reader, valid until the next
 * call. */
struct mtext_entry {
  int is_object;          /* 0: the array element is not an object */
  unsigned has;           /* MTEXT_* */
  unsigned seen;          /* MTEXT_* present, whatever their type */
  char unknown[48];       /* the first field not in MTEXT_*, or "" */
  const char *path, *type, *target, *sha256;
  int64_t mode, mtime_ns, size;
  const char **segs;      /* segments' strings; NULL for a non-string */
  size_t nsegs;
  const int64_t *lens;    /* seglens' integers; -1 for anything else */
  size_t nlens;
  size_t off, len;        /* the entry's bytes in the text */
};

struct mtext_reader {
  const char *start, *p, *end;
  int format_seen;
  int64_t format;         /* "format" when format_seen and an integer */
  int format_is_int;
  int entries_seen;
  int state;              /* where in the document (manifest_text.c) */
  struct buf scratch;     /* decoded strings of the current entry */
  size_t *segoff;         /* offsets into scratch of the segments */
  size_t segcap;
  const char **segptr;
  size_t segptrcap;
  int64_t *lens;          /* seglens of the current entry */
  size_t lencap;
};

void mtext_init(struct mtext_reader *r, const char *text, size_t len);
void mtext_release(struct mtext_reader *r);

/*
 * The next entry of the manifest's "entries" array into out: 1 an
 * entry, 0 the end of the document (then r->entries_seen,
 * r->format_seen and r->format say what the top level held).
 * ERR_INVALID for text that is not JSON ("malformed JSON at byte N"),
 * for a top level that is not an object, and for a field at the top
 * level other than "entries" and "format" (named).
 */
int mtext_next(struct mtext_reader *r, struct mtext_entry *out,
               struct err *e) WARN_UNUSED;

struct manifest_entry;

/* Append entry me as its canonical JSON object to b.  ERR_INVALID when
 * its path or target is not valid UTF-8 (no JSON string can hold it),
 * ERR_TOO_LARGE when b is full; b may then hold part of it. */
int mtext_put_entry(struct buf *b, const struct manifest_entry *me)
    WARN_UNUSED;

#endif
