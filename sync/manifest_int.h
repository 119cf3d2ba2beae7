/*
 * Between manifest.c (encoding, decoding, checks), manifest_scan.c
 * (scanning a tree), manifest_large.c (cutting and hashing one large
 * file) and manifest_delta.c (a version as the change from another).
 */
#ifndef TENBIN_SYNC_MANIFEST_INT_H
#define TENBIN_SYNC_MANIFEST_INT_H

#include "sync/manifest.h"
#include "sync/manifest_text.h"

/* Free what entry me owns / make de a deep copy of se (new contents). */
void manifest_entry_release(struct manifest_entry *me);
void manifest_entry_copy(struct manifest_entry *de,
                         const struct manifest_entry *se);
/* dst a deep copy of src (new contents). */
void manifest_check_copy(struct manifest_check *dst,
                         const struct manifest_check *src);
/* s with bytes outside printable ASCII as \xNN, for messages. */
void manifest_escape(const char *s, char *out, size_t outlen);
/* ts in nanoseconds, saturated past the year 2262. */
int64_t manifest_ns(const struct timespec *ts);

/*
 * Append to m (sorted and valid so far) one entry: decoded from o, or a
 * deep copy of src, an entry of another valid manifest.  Either way the
 * entry must sort after the last one and have its parent directory
 * listed; o's fields are checked too.  0, or ERR_INVALID naming the
 * entry (past max_entries as well); m then holds what was appended.
 */
int manifest_append_decoded(struct manifest *m, const struct mtext_entry *o,
                            size_t max_entries, struct err *e) WARN_UNUSED;
/* Room for n entries in m at once (nothing when it has it): a manifest
 * of known size grows without copying its entries at each doubling. */
void manifest_reserve(struct manifest *m, size_t n);
/* Entry i (< m->n) of m is at [off, off + len) of its text. */
void manifest_set_span(struct manifest *m, size_t i, size_t off,
                       size_t len);
int manifest_append_copy(struct manifest *m,
                         const struct manifest_entry *src,
                         size_t max_entries, struct err *e) WARN_UNUSED;

/*
 * Cut the file open at fd (me->size > MANIFEST_SEG_MIN bytes) into
 * segments by content and fill me (segments, hashes) and ck (checks,
 * fingerprints; its identity is the caller's), reusing what pe/pc, the
 * previous publish of the path (both may be NULL), say of segments found
 * again.  Reads with pread on one thread per core.  1 when the file is
 * one segment after all (nothing filled: hash it whole), 0 done, or
 * ERR_IO naming the file.
 */
int manifest_scan_large(int fd, struct manifest_entry *me,
                        struct manifest_check *ck,
                        const struct manifest_entry *pe,
                        const struct manifest_check *pc,
                        struct manifest_scan_stats *st, struct err *e)
    WARN_UNUSED;

#endif
