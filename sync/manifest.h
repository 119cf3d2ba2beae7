/*
 * Manifests: what a dataset version is (docs/SYNC.md "Manifest").
 *
 * A manifest lists every directory, file and symlink of a version with
 * its mode, mtime, size and content hash; the SHA-256 of its canonical
 * JSON is the version id, so two publishes of the same tree give the same
 * id and a destination can check that the manifest it fetched is the one
 * it asked for.
 *
 * The source side also keeps "checks" beside a manifest: per file the
 * stat identity it was hashed with (to reuse hashes when republishing an
 * unchanged file) and an XXH3-128 per segment (to notice, cheaply and
 * while streaming, that a file changed after it was published).
 *
 * Value types (git's _init/_release): every pointer member is owned by
 * the struct.  Nothing here touches the loop; scanning and hashing are
 * meant for the thread pool, and each call is thread-safe.
 */
#ifndef TENBIN_SYNC_MANIFEST_H
#define TENBIN_SYNC_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sync/chunk.h"
#include "util/err.h"

#define MANIFEST_FORMAT 2
/* Segments are cut by content (sync/chunk.h): every one but a file's
 * last is at least SEG_MIN long, none more than SEG_MAX.  A file of one
 * segment has no segment list. */
#define MANIFEST_SEG_MIN CHUNK_MIN
#define MANIFEST_SEG_MAX CHUNK_MAX
#define MANIFEST_MAX_ENTRIES 4000000u
#define MANIFEST_MAX_FILE_SIZE ((uint64_t)1 << 50)
#define MANIFEST_MAX_TEXT ((size_t)1 << 30)
#define MANIFEST_ID_HEX 64
/* Fingerprint blocks: XXH3-128 of each 1 MiB of a large file's segments,
 * counted from each segment's start (a segment's last block may be
 * shorter), so two agents can tell which MiB of a segment differ without
 * a signature's per-byte work, wherever the segment sits in the file
 * (docs/SYNC.md "Fingerprints"). */
#define MANIFEST_FP_BLOCK ((uint64_t)1 << 20)

enum manifest_type { MANIFEST_DIR = 0, MANIFEST_FILE, MANIFEST_LINK };

struct manifest_entry {
  char *path;          /* normalized, relative to the dataset's top */
  enum manifest_type type;
  uint32_t mode;       /* permission bits (& 07777); 0 for links */
  int64_t mtime_ns;    /* files only */
  uint64_t size;       /* files only */
  uint8_t sha256[32];  /* files only: the content hash (two-level when
                          nsegs > 1) */
  uint32_t nsegs;      /* files only: 1, or the segments listed */
  uint8_t (*segs)[32]; /* SHA-256 per segment when nsegs > 1, else NULL
                          (then segment 0's hash is sha256) */
  uint64_t *segoff;    /* nsegs > 1: nsegs + 1 offsets (the last = size) */
  uint64_t *segfp;     /* nsegs > 1: nsegs + 1 indexes of each segment's
                          first fingerprint block (the last = the count) */
  char *target;        /* links only */
};

struct manifest {
  struct manifest_entry *v; /* sorted by path (strcmp) */
  size_t n;
  size_t cap;
  /* Decoded from text (manifest_decode, manifest_delta_apply): where
   * each entry's JSON is in it, offset and length; else NULL. */
  uint32_t (*span)[2];
  uint64_t bytes;           /* sum of file sizes */
  size_t files, dirs, links;
};

void manifest_init(struct manifest *m);
void manifest_release(struct manifest *m);
/* A deep copy of src into dst (new contents). */
void manifest_copy(struct manifest *dst, const struct manifest *src);

/* Byte range of segment k (< e->nsegs) of file entry e. */
void manifest_seg_range(const struct manifest_entry *e, uint32_t k,
                        uint64_t *off, uint64_t *len);
/* Index of the first fingerprint block of segment k of e; for
 * k == e->nsegs, the number of blocks of the file. */
uint64_t manifest_seg_fp(const struct manifest_entry *e, uint32_t k);
/* Set the segments of e (whose size is set) from n >= 2 lengths that add
 * up to its size: nsegs, segoff and segfp (segs is the caller's). */
void manifest_set_segments(struct manifest_entry *e, const uint64_t *lens,
                           uint32_t n);
/* Fingerprint blocks of a range of this length: ceil(len / FP_BLOCK). */
uint64_t manifest_nfp(uint64_t len);
/* The expected SHA-256 of segment k of entry e (borrowed). */
const uint8_t *manifest_seg_sha(const struct manifest_entry *e, uint32_t k);

/*
 * Canonical JSON of m into *out (new, free()) and its SHA-256 hex, the
 * version id, into id (65 bytes).  m must be sorted and valid.
 */
int manifest_encode(const struct manifest *m, char **out, size_t *len,
                    char id[MANIFEST_ID_HEX + 1], struct err *e)
    WARN_UNUSED;
/*
 * Parse and validate len bytes of manifest JSON into m (new contents).
 * Everything a peer could get wrong is ERR_INVALID naming the entry
 * index and path: limits, types, hex, segment counts and the two-level
 * hash, order, duplicates, missing parent directories, paths that are not
 * normal or escape (".."), links that point outside.
 */
int manifest_decode(const char *text, size_t len, struct manifest *m,
                    struct err *e) WARN_UNUSED;
/* manifest_decode with at most max_entries entries (a caller's smaller
 * bound; tests).  The text is read once, entry by entry, so memory grows
 * only with entries that passed every check. */
int manifest_decode_max(const char *text, size_t len, size_t max_entries,
                        struct manifest *m, struct err *e) WARN_UNUSED;
/* Index of the entry with this path, or -1 (binary search). */
ssize_t manifest_find(const struct manifest *m, const char *path);
/* 1 when a and b are the same entry (then their JSON is the same). */
int manifest_entry_same(const struct manifest_entry *a,
                        const struct manifest_entry *b);

/* ---- deltas: a version as the change from another ---- */

/*
 * A destination that holds version B and pulls version V fetches V's
 * manifest as a delta against B (docs/SYNC.md "Manifest deltas"): runs
 * of B's entries kept or dropped, and V's other entries as their JSON.
 * The text is
 *   "tenbin-manifest-delta 1 " B-id " " count "\n"
 * then operations, each a line and, for N, len bytes of JSON after it:
 *   "C n\n"        the next n entries of B are V's next entries
 *   "S n\n"        the next n entries of B are not in V
 *   "N n len\n"    V's next n entries, as they are in V's text, with
 *                  the commas between them
 * count is V's number of entries.
 */
#define MANIFEST_DELTA_MAGIC "tenbin-manifest-delta 1 "

/* The delta of m against base (base_id its version), both valid, into
 * *out (new, free()); ERR_TOO_LARGE when it would exceed max_len (the
 * caller then sends m whole). */
int manifest_delta_make(const struct manifest *base, const char *base_id,
                        const struct manifest *m, size_t max_len,
                        char **out, size_t *len, struct err *e)
    WARN_UNUSED;
/*
 * Apply len bytes of delta against base (a valid manifest, base_id its
 * version): V's text into *text (new, free(); its SHA-256 is the
 * caller's to check, for the delta proves nothing by itself), V into m
 * (new contents, spans set; checked as manifest_decode checks, with at
 * most max_entries entries) and into *from (new, free()) for each entry
 * of m the index of the same entry in base, or UINT32_MAX for one the
 * delta carried.  Kept entries' JSON is copied from base_text (btlen
 * bytes) where base has spans into it, else written anew (canonical).
 * ERR_INVALID for a malformed delta, one against another base, spans
 * past base_text, or a V that is not valid.
 */
int manifest_delta_apply(const struct manifest *base, const char *base_id,
                         const char *base_text, size_t btlen,
                         const char *delta, size_t len, size_t max_entries,
                         char **text, size_t *text_len, struct manifest *m,
                         uint32_t **from, struct err *e) WARN_UNUSED;

/* ---- source side: scanning and checks ---- */

struct manifest_check {
  uint64_t dev, ino, size;
  int64_t mtime_ns, ctime_ns;
  uint32_t nsegs;
  uint8_t (*xxh)[16]; /* XXH3-128 (canonical big-endian) per segment */
  uint32_t nfp;       /* large files: manifest_seg_fp(e, nsegs), else 0 */
  uint8_t (*fp)[16];  /* XXH3-128 per fingerprint block, or NULL */
};

/* Parallel to a manifest's entries (dirs and links have zeroed checks). */
struct manifest_checks {
  struct manifest_check *v;
  size_t n;
};

void manifest_checks_init(struct manifest_checks *c);
void manifest_checks_release(struct manifest_checks *c);
/* A deep copy of src into dst (new contents). */
void manifest_checks_copy(struct manifest_checks *dst,
                          const struct manifest_checks *src);
/* Save to path (written to path.tmp, then renamed) / load, for manifest
 * m; load checks that the counts of entries, segments and fingerprints
 * are m's. */
int manifest_checks_save(const struct manifest_checks *c, const char *path,
                         struct err *e) WARN_UNUSED;
int manifest_checks_load(const char *path, const struct manifest *m,
                         struct manifest_checks *c, struct err *e)
    WARN_UNUSED;

struct manifest_scan_stats {
  uint64_t files_hashed, bytes_hashed; /* read and hashed this time */
  uint64_t files_reused;               /* hashes reused from prev */
  uint64_t segments_reused;            /* of files read: SHA-256 kept
                                          because XXH3-128 matched prev */
  uint64_t segments_cut_ahead;         /* first publishes: segments cut
                                          by another core's region */
};

/* Called with each directory a scan lists, open at dirfd, before it is
 * listed (path "" for the top), from the scan's threads at once: a watch
 * (agent/watch.h) adds it there, so that no change after the listing is
 * missed. */
struct manifest_dir_hook {
  void (*fn)(void *arg, int dirfd, const char *path);
  void *arg;
};

/*
 * Build the manifest of the tree at rel (normalized) beneath rootfd into
 * out, with its checks.  Never follows a symlink (they become entries,
 * and must point inside the tree); skips a top-level ".tenbin" when rel
 * is the root itself ("."); refuses sockets, fifos and devices naming
 * them.  A file whose (dev, ino, size, mtime, ctime) equal those recorded
 * in prev/prev_checks (both may be NULL) keeps its recorded hashes;
 * others are read: a file of one segment once for its SHA-256 and
 * XXH3-128 (a file of at most 1 MiB found in prev at its path or, moved,
 * by its inode keeps the recorded SHA-256 when its XXH3-128 is the one
 * recorded there: a touch or a rename costs no SHA-256); a larger one
 * is cut into segments by content, and a segment
 * that is one of prev's segments of that path (same fingerprints, at any
 * offset: unchanged, or shifted by an insert or a delete before it)
 * keeps prev's SHA-256 and checks without being hashed again; the
 * others are SHA-256'd (a changed 2 GiB file then costs SHA-256 only
 * for its changed segments).  Segment checks are the XXH3-128 of the
 * segment's fingerprints.  Runs on the calling thread (large files on
 * one thread per core); st and hook may be NULL.
 */
int manifest_scan(int rootfd, const char *rel, const struct manifest *prev,
                  const struct manifest_checks *prev_checks,
                  const struct manifest_dir_hook *hook, struct manifest *out,
                  struct manifest_checks *checks,
                  struct manifest_scan_stats *st, struct err *e)
    WARN_UNUSED;

/* A path that may have changed since a scan (agent/watch.h notes them),
 * relative to the tree's top. */
#define MANIFEST_CHANGED_ENTRY 1u /* its content, mode or times */
#define MANIFEST_CHANGED_TREE 2u  /* created, deleted or renamed: a
                                     directory there is listed whole */
struct manifest_change {
  const char *path;
  unsigned flags;
};

/*
 * manifest_scan of the same tree, knowing what changed since prev was
 * scanned: changes (normalized paths in strcmp order, n of them) are
 * looked at as manifest_scan would, and every other entry is prev's.
 * What is beneath a directory is listed again only when the directory
 * was created, deleted or renamed, or was not one in prev.  Correct only
 * when every change since prev's scan began is in the list (a watch that
 * saw them all); ERR_CONFLICT when what is found does not fit prev (an
 * entry whose directory is not a change, or prev without its checks):
 * the caller then scans the whole tree.  Other errors as manifest_scan.
 */
int manifest_scan_changes(int rootfd, const char *rel,
                          const struct manifest *prev,
                          const struct manifest_checks *prev_checks,
                          const struct manifest_change *changes, size_t n,
                          const struct manifest_dir_hook *hook,
                          struct manifest *out,
                          struct manifest_checks *checks,
                          struct manifest_scan_stats *st, struct err *e)
    WARN_UNUSED;

#endif
