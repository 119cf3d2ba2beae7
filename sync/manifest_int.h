/*
 * Between manifest.c (scanning a tree) and manifest_large.c (cutting and
 * hashing one large file).
 */
#ifndef TENBIN_SYNC_MANIFEST_INT_H
#define TENBIN_SYNC_MANIFEST_INT_H

#include "sync/manifest.h"

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
