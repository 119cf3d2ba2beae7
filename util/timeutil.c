/*
 * Clocks and Slurm duration syntax.
 */
#include "timeutil.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_DURATION_S (366LL * 24 * 3600)

int64_t
time_now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
time_mono_ms(void)
{
  return time_mono_ns() / 1000000;
}

int64_t
time_mono_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
time_sleep_ms(int64_t ms)
{
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                        .tv_nsec = (long)(ms % 1000) * 1000000};

  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

void
time_format_iso(int64_t ms, char *out, size_t outlen)
{
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;

  gmtime_r(&secs, &tm);
  snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
           tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/* Read up to 9 digits as a non-negative number; advances *p. */
static int
read_number(const char **p, int64_t *out)
{
  int64_t v = 0;
  int n = 0;

  while (isdigit((unsigned char)**p)) {
    if (++n > 9)
      return ERR_INVALID;
    v = v * 10 + (**p - '0');
    (*p)++;
  }
  if (n == 0)
    return ERR_INVALID;
  *out = v;
  return 0;
}

int
time_parse_slurm_duration(const char *s, int64_t *seconds)
{
  int64_t parts[3];
  int64_t days = 0;
  int64_t total;
  const char *p = s;
  int nparts = 0;
  int has_days = 0;

  if (strcasecmp(s, "UNLIMITED") == 0 || strcasecmp(s, "INFINITE") == 0) {
    *seconds = 0;
    return 0;
  }
  if (strchr(s, '-') != NULL) {
    if (read_number(&p, &days) < 0 || *p != '-')
      return ERR_INVALID;
    p++;
    has_days = 1;
  }
  for (;;) {
    if (nparts == 3 || read_number(&p, &parts[nparts]) < 0)
      return ERR_INVALID;
    nparts++;
    if (*p == '\0')
      break;
    if (*p != ':')
      return ERR_INVALID;
    p++;
  }
  if (has_days) {
    /* days-hours[:minutes[:seconds]] */
    total = days * 86400 + parts[0] * 3600;
    if (nparts > 1)
      total += parts[1] * 60;
    if (nparts > 2)
      total += parts[2];
  } else if (nparts == 1) {
    total = parts[0] * 60; /* minutes */
  } else if (nparts == 2) {
    total = parts[0] * 60 + parts[1]; /* minutes:seconds */
  } else {
    total = parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  if (total > MAX_DURATION_S)
    return ERR_INVALID;
  *seconds = total;
  return 0;
}

void
time_format_duration(int64_t seconds, char *out, size_t outlen)
{
  int64_t d = seconds / 86400;
  int64_t h = (seconds % 86400) / 3600;
  int64_t m = (seconds % 3600) / 60;
  int64_t s = seconds % 60;

  if (d > 0)
    snprintf(out, outlen, "%lld-%02lld:%02lld:%02lld", (long long)d,
             (long long)h, (long long)m, (long long)s);
  else
    snprintf(out, outlen, "%02lld:%02lld:%02lld", (long long)h,
             (long long)m, (long long)s);
}

int
time_zone_parse(const char *s, int *offset_min)
{
  int h, m, n = 0;

  if (strcmp(s, "UTC") == 0 || strcmp(s, "Z") == 0) {
    *offset_min = 0;
    return 0;
  }
  if ((s[0] != '+' && s[0] != '-') ||
      sscanf(s + 1, "%2d:%2d%n", &h, &m, &n) != 2 || n != 5 ||
      s[1 + n] != '\0' || !isdigit((unsigned char)s[1]) || h > 14 || m > 59)
    return ERR_INVALID;
  *offset_min = (s[0] == '-' ? -1 : 1) * (h * 60 + m);
  return 0;
}

/* ms floored to a multiple of step (also for negative ms). */
static int64_t
floor_to(int64_t ms, int64_t step)
{
  int64_t q = ms / step;

  if (ms % step != 0 && ms < 0)
    q--;
  return q * step;
}

int64_t
time_day_start(int64_t ms, int offset_min)
{
  int64_t off = (int64_t)offset_min * 60000;

  return floor_to(ms + off, TIME_DAY_MS) - off;
}

/* The broken-down UTC date of the zone's local time ms. */
static void
local_tm(int64_t ms, int offset_min, struct tm *tm)
{
  time_t secs = (time_t)(floor_to(ms + (int64_t)offset_min * 60000, 1000) /
                         1000);

  gmtime_r(&secs, tm);
}

int64_t
time_month_start(int64_t ms, int offset_min)
{
  struct tm tm;

  local_tm(ms, offset_min, &tm);
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  return (int64_t)timegm(&tm) * 1000 - (int64_t)offset_min * 60000;
}

void
time_format_day(int64_t ms, int offset_min, char out[11])
{
  struct tm tm;

  local_tm(ms, offset_min, &tm);
  snprintf(out, 11, "%04u-%02u-%02u", (unsigned)(tm.tm_year + 1900) % 10000u,
           (unsigned)(tm.tm_mon + 1) % 100u, (unsigned)tm.tm_mday % 100u);
}

int
time_parse_day(const char *s, int offset_min, int64_t *ms)
{
  struct tm tm = {0};
  int y, mo, d, n = 0;
  char back[11];

  if (strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 ||
      n != 10 || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31)
    return ERR_INVALID;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  *ms = (int64_t)timegm(&tm) * 1000 - (int64_t)offset_min * 60000;
  /* timegm carries 2026-02-30 into March: such a day does not exist */
  time_format_day(*ms, offset_min, back);
  return strcmp(back, s) == 0 ? 0 : ERR_INVALID;
}

/* Read exactly n digits at *p into *out; advances *p. */
static int
read_digits(const char **p, int n, int *out)
{
  int v = 0;

  for (int i = 0; i < n; i++) {
    if (!isdigit((unsigned char)(*p)[i]))
      return ERR_INVALID;
    v = v * 10 + ((*p)[i] - '0');
  }
  *p += n;
  *out = v;
  return 0;
}

/* Expect the character c at *p; advances *p. */
static int
expect(const char **p, char c)
{
  if (**p != c)
    return ERR_INVALID;
  (*p)++;
  return 0;
}

int
time_parse_iso(const char *s, int64_t *ms)
{
  struct tm tm;
  const char *p = s;
  int year, mon, day, hour, min, sec;
  int frac = 0;
  int digits = 0;
  time_t t;

  if (s == NULL)
    return ERR_INVALID;
  if (read_digits(&p, 4, &year) < 0 || expect(&p, '-') < 0 ||
      read_digits(&p, 2, &mon) < 0 || expect(&p, '-') < 0 ||
      read_digits(&p, 2, &day) < 0 || expect(&p, 'T') < 0 ||
      read_digits(&p, 2, &hour) < 0 || expect(&p, ':') < 0 ||
      read_digits(&p, 2, &min) < 0 || expect(&p, ':') < 0 ||
      read_digits(&p, 2, &sec) < 0)
    return ERR_INVALID;
  if (*p == '.') {
    p++;
    /* Keep milliseconds; finer digits are read and dropped. */
    while (isdigit((unsigned char)*p)) {
      if (digits < 3) {
        frac = frac * 10 + (*p - '0');
        digits++;
      }
      p++;
    }
    if (digits == 0)
      return ERR_INVALID;
    for (; digits < 3; digits++)
      frac *= 10;
  }
  if (expect(&p, 'Z') < 0 || *p != '\0')
    return ERR_INVALID;
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 ||
      min > 59 || sec > 60)
    return ERR_INVALID;
  memset(&tm, 0, sizeof(tm));
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  t = timegm(&tm);
  *ms = (int64_t)t * 1000 + frac;
  return 0;
}
