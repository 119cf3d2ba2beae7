/*
 * Running a helper program once and reading what it prints (nvidia-smi
 * for the local site's inventory and for tenbin-probe's fingerprint).
 * Synchronous: for start-up and one-shot tools, never on a loop that
 * serves anything.
 */
#ifndef TENBIN_UTIL_PROC_H
#define TENBIN_UTIL_PROC_H

#include <stddef.h>

#include "err.h"

/* The path of the executable prog in path (a PATH value; NULL:
 * "/usr/bin:/bin") into out.  -1 when there is none (or it does not
 * fit in outlen). */
int proc_find(const char *path, const char *prog, char *out, size_t outlen);

/*
 * Run exe with argv (NULL-terminated, argv[0] the name) and envp (NULL:
 * this process's), stdin and stderr on /dev/null, and put its stdout
 * (new string, free()) into *out.  It must exit 0 within timeout_ms and
 * print at most max bytes, or it is killed: ERR_TIMEOUT, ERR_TOO_LARGE,
 * ERR_IO (cannot start, or "failed with status N"), e naming argv[0]
 * and argv[1].
 */
int proc_capture(const char *exe, char *const argv[], char *const envp[],
                 int timeout_ms, size_t max, char **out, struct err *e)
    WARN_UNUSED;

#endif
