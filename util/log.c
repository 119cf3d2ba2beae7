/*
 * stderr logger.  Lines are formatted into one buffer and written with a
 * single write(2) so that concurrent writers (the shim, tests) never
 * interleave within a line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "timeutil.h"

static enum log_level min_level = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
log_set_level(enum log_level level)
{
  min_level = level;
}

int
log_parse_level(const char *s, enum log_level *out)
{
  for (int i = 0; i < 4; i++) {
    if (strcmp(s, level_names[i]) == 0) {
      *out = (enum log_level)i;
      return 0;
    }
  }
  return ERR_INVALID;
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
  char line[2048];
  char stamp[32];
  size_t n;
  va_list ap;
  int k;

  if (level < min_level)
    return;
  time_format_iso(time_now_ms(), stamp, sizeof(stamp));
  k = snprintf(line, sizeof(line), "%s %-5s ", stamp, level_names[level]);
  n = (k > 0) ? (size_t)k : 0;
  va_start(ap, fmt);
  k = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
  va_end(ap);
  if (k > 0)
    n += (size_t)k;
  if (n > sizeof(line) - 2)
    n = sizeof(line) - 2;
  line[n++] = '\n';
  if (write(STDERR_FILENO, line, n) < 0)
    return;
}
