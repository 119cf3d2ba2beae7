/*
 * Secrets kept in files (bearer tokens, TLS keys), and where a secret may
 * travel.
 *
 * Every token file tenbin reads goes through secret_read_file(): tenbind's
 * agent token_file, tenbin-agent --token-file, the Slurm adapter's
 * token_file, and the TLS key of either daemon.  A file that its group or
 * others may read or write is refused, as ssh refuses such a key: a token
 * that other users can read is a token they hold.
 */
#ifndef TENBIN_UTIL_SECRET_H
#define TENBIN_UTIL_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* A token is one line; a PEM key a few KiB. */
#define SECRET_FILE_MAX (64u * 1024u)

enum secret_flags {
  SECRET_FIRST_LINE = (1 << 0) /* keep the first line, trailing blanks cut */
};

/*
 * Read the secret in path into *out (new: free with secret_free(); *len
 * may be NULL).  ERR_INVALID when it is not a regular file (never
 * blocking on a fifo: file_open_regular), ERR_FORBIDDEN when its mode
 * lets group or others read or write it, ERR_NOT_FOUND when it does not
 * exist, ERR_TOO_LARGE past SECRET_FILE_MAX, ERR_INVALID when
 * SECRET_FIRST_LINE leaves nothing, ERR_IO otherwise; the message names
 * path.
 */
int secret_read_file(const char *path, unsigned flags, char **out,
                     size_t *len, struct err *e) WARN_UNUSED;
/* Wipe and free a secret read above (NULL-safe). */
void secret_free(char *s);

/*
 * Whether host (as in a URL: "127.0.0.1", "[::1]", "localhost") names
 * this machine's loopback: 127.0.0.0/8, ::1, ::ffff:127.x.y.z or
 * "localhost".  Any other name is not, since DNS may answer anything.
 */
bool secret_host_is_loopback(const char *host);

#endif
