/*
 * Whole-file helpers shared by the local adapter and the dataset agent:
 * durable atomic writes, capped reads, mkdir -p.  Synchronous and
 * stateless (safe from any thread).
 */
#ifndef TENBIN_UTIL_FILEIO_H
#define TENBIN_UTIL_FILEIO_H

#include <stddef.h>
#include <stdint.h>
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
 * Open path (flags: O_RDONLY, maybe O_NOFOLLOW; O_CLOEXEC is added) as
 * a regular file, never blocking: a fifo put where a file was expected
 * would otherwise hold the calling thread until someone writes to it.
 * Returns the fd (caller closes; O_NONBLOCK is set, which reads of a
 * regular file ignore) or ERR_NOT_FOUND when it does not exist,
 * ERR_INVALID naming the path when it is not a regular file (a fifo, a
 * directory, a device, a symlink with O_NOFOLLOW), ERR_IO otherwise.
 */
int file_open_regular(const char *path, int flags, struct err *e)
    WARN_UNUSED;
/* What a file of this mode is when it is not a regular one, for
 * messages: "a fifo", "a directory"... (static string). */
const char *file_kind(mode_t mode);
/*
 * Read the whole file path (at most max bytes) into *out (new,
 * NUL-terminated, free with free()); *len_out may be NULL.  ERR_NOT_FOUND
 * when it does not exist, ERR_INVALID when it is not a regular file
 * (file_open_regular), ERR_TOO_LARGE past max, ERR_IO otherwise.
 */
int file_read(const char *path, size_t max, char **out, size_t *len_out,
              struct err *e) WARN_UNUSED;
/*
 * Call fn(arg, p, n) on the bytes of [off, off+len) of fd, in order, read
 * with pread into buf (buflen bytes, the caller's) one chunk at a time:
 * chunks start at off + k x buflen.  0; fn's negative return (the walk
 * stops there; fn puts its own error in e); ERR_CONFLICT when the file
 * ends before off+len (it changed under the reader); ERR_IO naming the
 * offset when a read fails.
 */
int file_read_chunks(int fd, uint64_t off, uint64_t len, void *buf,
                     size_t buflen,
                     int (*fn)(void *arg, const uint8_t *p, size_t n),
                     void *arg, struct err *e) WARN_UNUSED;
/* fsync of directory dir: what makes a rename or a new name in it
 * durable.  ERR_IO naming it. */
int file_sync_dir(const char *dir, struct err *e) WARN_UNUSED;
/* mkdir -p path with mode for what it creates; existing ones are fine. */
int file_mkdirs(const char *path, mode_t mode, struct err *e) WARN_UNUSED;

#endif
