/*
 * The agent's store: where versions, manifests, staging trees and cached
 * signatures live under ROOT/.tenbin (docs/SYNC.md "Agent store").
 *
 * Completeness is a property of the file system, so it survives a crash
 * without a database: a replica is complete exactly when data/NAME/V
 * exists, because it only ever appears by one rename of a verified
 * staging tree; a source version exists when its manifest, checks and
 * source path were all written (each by write + rename).
 *
 * The store holds only the root's fd and immutable strings, so every
 * function is safe from any thread.
 */
#ifndef TENBIN_SYNC_STORE_H
#define TENBIN_SYNC_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sync/manifest.h"
#include "util/err.h"

struct store;

/* Open (creating .tenbin and its folders) the store of root.  *out is
 * new: store_close().  fsync_publish: fsync data before publishing. */
int store_open(const char *root, int fsync_publish, struct store **out,
               struct err *e) WARN_UNUSED;
void store_close(struct store *s);
/* The root directory's fd (borrowed) and absolute path. */
int store_rootfd(const struct store *s);
const char *store_root(const struct store *s);
int store_fsync_publish(const struct store *s);

/* Absolute paths of the store's places, into out (PATH_MAX bytes). */
void store_manifest_path(const struct store *s, const char *name,
                         const char *v, char *out, size_t outlen);
void store_checks_path(const struct store *s, const char *name,
                       const char *v, char *out, size_t outlen);
void store_data_dir(const struct store *s, const char *name, const char *v,
                    char *out, size_t outlen);
void store_staging_dir(const struct store *s, const char *name,
                       const char *v, char *out, size_t outlen);
/* Where the next pull of name finds its prestaged tree (pull_prestage.c). */
void store_prestage_dir(const struct store *s, const char *name, char *out,
                        size_t outlen);
void store_sig_path(const struct store *s, const uint8_t sha[32],
                    size_t block_len, char *out, size_t outlen);
/* The fingerprints (XXH3-128 per MiB) of content sha, as this agent
 * computed them while verifying that content when it received it
 * (pull_work.c). */
void store_xxh_path(const struct store *s, const uint8_t sha[32], char *out,
                    size_t outlen);

/* file_write_atomic of an absolute path (split into dir and name). */
int store_write_file(const char *path, const void *data, size_t len,
                     struct err *e) WARN_UNUSED;

/* A version held here: a complete replica, or one published as source. */
struct store_version {
  char version[MANIFEST_ID_HEX + 1];
  char path[4096];  /* absolute directory of its files */
  int source;       /* 1: published here from a source path */
  int64_t mtime_ns; /* when it was completed or published */
};

/*
 * The versions of name held here, newest first, into *out (new array,
 * free()) and *n.  A source version whose source path is gone is left
 * out.
 */
int store_versions(const struct store *s, const char *name,
                   struct store_version **out, size_t *n, struct err *e)
    WARN_UNUSED;
/* One version: 1 found (filled), 0 not held here. */
int store_version_get(const struct store *s, const char *name,
                      const char *v, struct store_version *out);
/* Record that v of name was published here from rel (source side). */
int store_source_set(const struct store *s, const char *name, const char *v,
                     const char *rel, struct err *e) WARN_UNUSED;
/* The newest version published here from rel, if any: 1 found, 0 not. */
int store_source_latest(const struct store *s, const char *name,
                        const char *rel, char v[MANIFEST_ID_HEX + 1]);

#endif
