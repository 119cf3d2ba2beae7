/*
 * Clocks and Slurm duration syntax.
 */
#include "timeutil.h"

#include <ctype.h>
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
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
