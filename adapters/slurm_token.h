/*
 * The JWT a Slurm site's slurmrestd wants in X-SLURM-USER-TOKEN.
 *
 * It comes from a file that something else keeps fresh (re-read whenever
 * the file changes) or from a command that mints one (`scontrol token
 * lifespan=3600`, a vault client), run again before the token expires
 * and whenever the site refuses it.  The command runs on the loop
 * (uv_spawn, stdout captured), never blocking it.
 *
 * Lifecycle: slurm_token_new() -> slurm_token_get()... ->
 * slurm_token_close(cb); the struct is freed before cb runs.
 */
#ifndef TENBIN_ADAPTERS_SLURM_TOKEN_H
#define TENBIN_ADAPTERS_SLURM_TOKEN_H

#include <stddef.h>
#include <uv.h>

#include "util/err.h"

/* Longest token accepted; a JWT of Slurm's is about 150 bytes. */
#define SLURM_TOKEN_MAX 8192

struct slurm_token;

/*
 * Exactly one of file and command (a /bin/sh command line) is set.  A
 * file that cannot be read is ERR_CONFIG naming it; a command is started
 * at once, and its first token arrives later.
 */
int slurm_token_new(uv_loop_t *loop, const char *file, const char *command,
                    struct slurm_token **out, struct err *e) WARN_UNUSED;

/*
 * The current token (borrowed until the next call), or NULL with why set
 * (unreadable file, command failed or still running).  Re-reads a changed
 * file, and starts the command again when the token expires within a
 * minute.
 */
const char *slurm_token_get(struct slurm_token *t, struct err *why);

/* The site refused the token: read or mint it again (at most every few
 * seconds, so a site that refuses every token is not hammered). */
void slurm_token_refused(struct slurm_token *t);

void slurm_token_close(struct slurm_token *t, void (*cb)(void *arg),
                       void *arg);

#endif
