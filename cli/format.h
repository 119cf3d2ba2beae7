/*
 * Human formatting of what tenbind returns (durations, ages, GPU counts,
 * exit statuses) and URL building with percent-escaping.  Pure functions
 * of their arguments: "now" is a parameter, so tests are exact.
 */
#ifndef TENBIN_CLI_FORMAT_H
#define TENBIN_CLI_FORMAT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

/* Enough for every cell these functions write. */
#define CLI_FMT_SIZE 64
/* Enough for a time with its distance from now (cli_fmt_iso_ago). */
#define CLI_FMT_TIME_SIZE 96

/*
 * A duration for people, in its two largest units: "42s", "3m 20s",
 * "2h 5m", "4d 3h"; a zero second unit is left out ("10m", "1h").
 * Negative values (clock skew) print as "0s".
 */
void cli_fmt_duration(int64_t seconds, char *out, size_t outlen);
/*
 * The same in at most five characters, "42s", "5m07s", "3h05m", "2d04h":
 * for the fixed-width fields of a progress bar, which must not jump as
 * the numbers change.
 */
void cli_fmt_duration_compact(int64_t seconds, char *out, size_t outlen);
/*
 * A time (milliseconds since the epoch) in the local time zone (TZ, else
 * /etc/localtime): "2026-11-27 14:03:12".  Every table and view of
 * tenbin shows times this way; --json keeps the server's ISO UTC.
 */
void cli_fmt_time(int64_t ms, char *out, size_t outlen);
/*
 * A time as tenbind writes it (ISO 8601 UTC) shown as cli_fmt_time does,
 * in out; returns out, or iso itself when it does not parse (shown as
 * sent), or NULL when iso is NULL: a table cell either way.
 */
const char *cli_fmt_iso(const char *iso, char *out, size_t outlen);
/*
 * As cli_fmt_iso, with how long ago it was (or how far ahead) by now_ms:
 * "2026-11-27 14:03:12 (5m 3s ago)", "... (in 2h 5m)".
 */
const char *cli_fmt_iso_ago(const char *iso, int64_t now_ms, char *out,
                            size_t outlen);
/* Micro-dollars as dollars with all six decimals: "1.905817" (money is
 * integer micro-dollars end to end; the CLI neither rounds nor adds). */
void cli_fmt_micro_dollars(int64_t micro, char *out, size_t outlen);
/* Micro-dollars as dollars and cents, rounded to the nearest cent
 * ("-0.03" when negative): tables of money people read. */
void cli_fmt_cents(int64_t micro, char *out, size_t len);
/*
 * The AGE/ELAPSED cell of a job object: the run time (ended_at or now
 * minus started_at) once it started, else the time since created_at;
 * "-" when the times are missing or malformed.
 */
void cli_fmt_job_time(const json_t *job, int64_t now_ms, char *out,
                      size_t outlen);
/* "2xh100", "2" without a type, "0" for no GPUs. */
void cli_fmt_gpus(int64_t gpus, const char *gpu_type, char *out,
                  size_t outlen);
/*
 * The EXIT cell of a job object: the exit code, "SIGKILL" (or "sig N")
 * when a signal ended it, "" while it has neither.
 */
void cli_fmt_exit(const json_t *job, char *out, size_t outlen);
/* The signal's name without "SIG" ("KILL"), or NULL when not known. */
const char *cli_signal_name(int64_t sig);
/*
 * A time limit as the server returns it (integer minutes or a Slurm
 * duration string) in Slurm "[D-]HH:MM:SS" form; "-" when absent, the
 * string verbatim when it does not parse.
 */
void cli_fmt_time_limit(const json_t *v, char *out, size_t outlen);
/*
 * Append a site's "gpus" array as "h100 2/8, a100 0/4" (in_use/total per
 * type) to out; "-" when the site lists none.
 */
int cli_fmt_site_gpus(const json_t *gpus, struct buf *out) WARN_UNUSED;

/*
 * Append the strings of a JSON array as one shell-style line: arguments
 * that a shell would split or expand are single-quoted ('it'\''s').
 */
int cli_fmt_argv(const json_t *argv, struct buf *out) WARN_UNUSED;

/*
 * Append a batch script for the terminal: as it is, but control
 * characters other than tab and newline (the script is user input) as
 * '?', and ending in a newline.
 */
int cli_fmt_script(const char *script, struct buf *out) WARN_UNUSED;

/* Append s percent-escaped (all but RFC 3986 unreserved bytes) to out. */
int cli_url_escape(struct buf *out, const char *s) WARN_UNUSED;
/*
 * Append "?key=value" (or "&key=value" once out holds a '?') with value
 * escaped; a NULL value appends nothing.
 */
int cli_url_add_query(struct buf *out, const char *key, const char *value)
    WARN_UNUSED;
/* Append prefix then name escaped as one path segment ("/v1/sites/"). */
int cli_url_add_segment(struct buf *out, const char *prefix,
                        const char *name) WARN_UNUSED;

#endif
