/*
 * Paths a client or a peer agent gives us, confined to a root.
 *
 * Every path that reaches the agent (a dataset directory to publish, a
 * manifest entry, a link target) is relative to the agent's root and
 * must never name anything outside it: no absolute paths, no "..", and
 * no symlink followed on the way (a link inside the tree could point
 * anywhere).  Normalizing first and then opening component by component
 * without following links (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)
 * makes that a property of the open itself, not of a string check that a
 * rename between check and use could defeat.
 *
 * All functions are thread-safe (no state); they run on the thread pool.
 */
#ifndef TENBIN_SYNC_PATH_H
#define TENBIN_SYNC_PATH_H

#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

#define SYNCPATH_MAX 4096     /* bytes of a relative path, NUL excluded */
#define SYNCPATH_NAME_MAX 255 /* bytes of one component */
#define SYNCPATH_STORE ".tenbin" /* the agent's own top-level directory */

/*
 * Normalize a relative path into out (outlen bytes, NUL included):
 * repeated '/' and "." components are dropped, a trailing '/' too.
 * ERR_INVALID, naming the path, for an empty result, a leading '/', a
 * ".." component, a component longer than SYNCPATH_NAME_MAX, a path
 * longer than SYNCPATH_MAX or one that does not fit outlen.
 */
int syncpath_normalize(const char *in, char *out, size_t outlen,
                       struct err *e) WARN_UNUSED;
/* 1 when path is already normalized (what manifests must carry), else 0. */
int syncpath_is_normal(const char *path);
/*
 * 1 when a symlink at link_path (normalized, relative to the dataset's
 * top) with this target stays inside the dataset; 0 for an absolute
 * target, one that climbs above the top, and one with a ".." after a
 * name.  Only leading ".." components climb real directories (parents
 * of entries are directories, never links), so the lexical check holds
 * for the kernel's resolution too, whatever other links the names lead
 * through ("a/../.." with a -> "." would not).
 */
int syncpath_link_inside(const char *link_path, const char *target);
/* 1 for a valid dataset name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}. */
int syncpath_valid_name(const char *name);
/*
 * openat(dirfd, rel, flags, mode) that resolves rel beneath dirfd and
 * follows no symlink in any component, the last included.  rel must be
 * normalized.  Returns the new fd (caller closes) or a negative code:
 * ERR_NOT_FOUND (ENOENT), ERR_INVALID (a symlink or an escape on the
 * way), ERR_IO otherwise, with the path and strerror in e.
 */
int syncpath_openat(int dirfd, const char *rel, int flags, mode_t mode,
                    struct err *e) WARN_UNUSED;
/* mkdir -p of rel (normalized) beneath dirfd with the same rules;
 * existing directories are fine. */
int syncpath_mkdirs(int dirfd, const char *rel, mode_t mode, struct err *e)
    WARN_UNUSED;

#endif
