/*
 * Whole-file helpers shared by the local adapter and the dataset agent:
 * durable atomic writes, capped reads, mkdir -p.  Synchronous and
 * stateless (safe from any thread).
 */
#ifndef TENBIN_UTIL_FILEIO_H
#define TENBIN_UTIL_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/*
 * Write len bytes of data to dir/name atomically and durably: a temporary
 * file (named with the pid, so two processes may write in one
 * directory), fchmod to mode (not the umask's), fsync, rename over name,
 * fsync of dir.  ERR_IO naming the file.
 */
int file_write_atomic(const char *dir, const char *name, const void *data,
                      size_t len, mode_t mode, struct err *e) WARN_UNUSED;
/*
 * Read the whole file path (at most max bytes) into *out (new,
 * NUL-terminated, free with free()); *len_out may be NULL.  ERR_NOT_FOUND
 * when it does not exist, ERR_TOO_LARGE past max, ERR_IO otherwise.
 */
int file_read(const char *path, size_t max, char **out, size_t *len_out,
              struct err *e) WARN_UNUSED;
/* fsync of directory dir: what makes a rename or a new name in it
 * durable.  ERR_IO naming it. */
int file_sync_dir(const char *dir, struct err *e) WARN_UNUSED;
/* mkdir -p path with mode for what it creates; existing ones are fine. */
int file_mkdirs(const char *path, mode_t mode, struct err *e) WARN_UNUSED;

#endif
