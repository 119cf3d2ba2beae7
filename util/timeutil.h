/*
 * Wall and monotonic clocks in milliseconds, ISO 8601 formatting, and
 * Slurm-style duration parsing (shared by the sbatch parser, the REST
 * validation and the CLI).
 */
#ifndef TENBIN_UTIL_TIMEUTIL_H
#define TENBIN_UTIL_TIMEUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Milliseconds since the Unix epoch. */
int64_t time_now_ms(void);
/* Milliseconds of CLOCK_MONOTONIC. */
int64_t time_mono_ms(void);
/* Format ms since the epoch as "2026-11-21T14:00:00.123Z" into out. */
void time_format_iso(int64_t ms, char *out, size_t outlen);
/*
 * Parse a Slurm time limit ("minutes", "minutes:seconds",
 * "hours:minutes:seconds", "days-hours", "days-hours:minutes",
 * "days-hours:minutes:seconds", or "UNLIMITED"/"INFINITE" = 0) into
 * seconds.  ERR_INVALID on anything else or a value over a year.
 */
int time_parse_slurm_duration(const char *s, int64_t *seconds) WARN_UNUSED;
/* Format seconds as "[D-]HH:MM:SS" into out. */
void time_format_duration(int64_t seconds, char *out, size_t outlen);

#endif
