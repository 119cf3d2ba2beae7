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
/* Nanoseconds of CLOCK_MONOTONIC, for timing what takes microseconds. */
int64_t time_mono_ns(void);
/* Sleep ms milliseconds, the whole of them whatever signals come. */
void time_sleep_ms(int64_t ms);
/* Format ms since the epoch as "2026-11-21T14:00:00.123Z" into out. */
void time_format_iso(int64_t ms, char *out, size_t outlen);
/*
 * Parse "2026-11-21T14:00:00.123Z" (fraction optional, 'Z' required)
 * into milliseconds since the epoch.  ERR_INVALID on anything else.
 */
int time_parse_iso(const char *s, int64_t *ms) WARN_UNUSED;
/*
 * Parse a Slurm time limit ("minutes", "minutes:seconds",
 * "hours:minutes:seconds", "days-hours", "days-hours:minutes",
 * "days-hours:minutes:seconds", or "UNLIMITED"/"INFINITE" = 0) into
 * seconds.  ERR_INVALID on anything else or a value over a year.
 */
int time_parse_slurm_duration(const char *s, int64_t *seconds) WARN_UNUSED;
/* Format seconds as "[D-]HH:MM:SS" into out. */
void time_format_duration(int64_t seconds, char *out, size_t outlen);

/*
 * Calendar days in a fixed time zone, given as its offset from UTC in
 * minutes (reports and budgets count days and months in one zone).
 */
#define TIME_DAY_MS (24LL * 3600 * 1000)
/* "UTC", "Z", "+HH:MM" or "-HH:MM" (up to 14 hours) into *offset_min;
 * ERR_INVALID otherwise.  Zones with daylight saving are not fixed
 * offsets and are refused. */
int time_zone_parse(const char *s, int *offset_min) WARN_UNUSED;
/* The start of the day that holds ms, in the zone. */
int64_t time_day_start(int64_t ms, int offset_min);
/* The start of the month that holds ms, in the zone. */
int64_t time_month_start(int64_t ms, int offset_min);
/* "YYYY-MM-DD" of the day that holds ms, in the zone (out: 11 bytes). */
void time_format_day(int64_t ms, int offset_min, char out[11]);
/* The start of day "YYYY-MM-DD" in the zone; ERR_INVALID for anything
 * else, a day that does not exist included. */
int time_parse_day(const char *s, int offset_min, int64_t *ms) WARN_UNUSED;

#endif
