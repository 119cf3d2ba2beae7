/*
 * Formatting of job, workload and site fields for humans, and the
 * percent-escaping of URL parts.
 */
#include "cli/format.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/timeutil.h"

void
cli_fmt_micro_dollars(int64_t micro, char *out, size_t outlen)
{
  snprintf(out, outlen, "%s%lld.%06lld", micro < 0 ? "-" : "",
           (long long)(micro < 0 ? -(micro / 1000000) : micro / 1000000),
           (long long)(micro < 0 ? -(micro % 1000000) : micro % 1000000));
}

/* Whole dollars and cents, rounded to the nearest cent. */
void
cli_fmt_cents(int64_t micro, char *out, size_t len)
{
  long long cents = (long long)(((micro < 0 ? -micro : micro) + 5000) /
                                10000);

  snprintf(out, len, "%s%lld.%02lld", micro < 0 && cents > 0 ? "-" : "",
           cents / 100, cents % 100);
}

void
cli_fmt_duration(int64_t seconds, char *out, size_t outlen)
{
  static const struct {
    long long secs;
    const char *name;
  } units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
  long long s = seconds < 0 ? 0 : (long long)seconds;
  size_t i = 0;
  long long big;
  long long small;

  while (i + 1 < sizeof(units) / sizeof(units[0]) && s < units[i].secs)
    i++;
  big = s / units[i].secs;
  if (i + 1 == sizeof(units) / sizeof(units[0])) {
    snprintf(out, outlen, "%llds", big);
    return;
  }
  small = s % units[i].secs / units[i + 1].secs;
  if (small == 0)
    snprintf(out, outlen, "%lld%s", big, units[i].name);
  else
    snprintf(out, outlen, "%lld%s %lld%s", big, units[i].name, small,
             units[i + 1].name);
}

void
cli_fmt_duration_compact(int64_t seconds, char *out, size_t outlen)
{
  long long s = seconds < 0 ? 0 : (long long)seconds;

  if (s < 60)
    snprintf(out, outlen, "%llds", s);
  else if (s < 3600)
    snprintf(out, outlen, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    snprintf(out, outlen, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else
    snprintf(out, outlen, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}

void
cli_fmt_time(int64_t ms, char *out, size_t outlen)
{
  /* Floor to whole seconds, also before 1970. */
  time_t secs = (time_t)(ms >= 0 ? ms / 1000 : -((999 - ms) / 1000));
  struct tm tm;

  /* localtime_r reads TZ without tzset(); a year strftime cannot write
   * falls back to the UTC form, which is never wrong. */
  if (localtime_r(&secs, &tm) == NULL ||
      strftime(out, outlen, "%Y-%m-%d %H:%M:%S", &tm) == 0)
    time_format_iso(ms, out, outlen);
}

const char *
cli_fmt_iso(const char *iso, char *out, size_t outlen)
{
  int64_t ms;

  if (iso == NULL)
    return NULL;
  if (time_parse_iso(iso, &ms) < 0)
    return iso;
  cli_fmt_time(ms, out, outlen);
  return out;
}

const char *
cli_fmt_iso_ago(const char *iso, int64_t now_ms, char *out, size_t outlen)
{
  char at[CLI_FMT_SIZE];
  char d[CLI_FMT_SIZE];
  int64_t ms;

  if (iso == NULL)
    return NULL;
  if (time_parse_iso(iso, &ms) < 0)
    return iso;
  cli_fmt_time(ms, at, sizeof(at));
  cli_fmt_duration((ms > now_ms ? ms - now_ms : now_ms - ms) / 1000, d,
                   sizeof(d));
  snprintf(out, outlen, ms > now_ms ? "%s (in %s)" : "%s (%s ago)", at, d);
  return out;
}

void
cli_fmt_job_time(const json_t *job, int64_t now_ms, char *out,
                 size_t outlen)
{
  const char *started = json_string_value(json_object_get(job, "started_at"));
  const char *ended = json_string_value(json_object_get(job, "ended_at"));
  const char *created = json_string_value(json_object_get(job, "created_at"));
  int64_t from;
  int64_t to = now_ms;

  if (started != NULL && time_parse_iso(started, &from) == 0) {
    if (ended != NULL && time_parse_iso(ended, &to) < 0)
      to = now_ms;
  } else if (created == NULL || time_parse_iso(created, &from) < 0) {
    snprintf(out, outlen, "-");
    return;
  }
  cli_fmt_duration((to - from) / 1000, out, outlen);
}

void
cli_fmt_gpus(int64_t gpus, const char *gpu_type, char *out, size_t outlen)
{
  if (gpus > 0 && gpu_type != NULL && gpu_type[0] != '\0')
    snprintf(out, outlen, "%lldx%s", (long long)gpus, gpu_type);
  else
    snprintf(out, outlen, "%lld", (long long)(gpus > 0 ? gpus : 0));
}

const char *
cli_signal_name(int64_t sig)
{
  static const struct {
    int num;
    const char *name;
  } names[] = {
      {SIGHUP, "HUP"},   {SIGINT, "INT"},   {SIGQUIT, "QUIT"},
      {SIGILL, "ILL"},   {SIGTRAP, "TRAP"}, {SIGABRT, "ABRT"},
      {SIGBUS, "BUS"},   {SIGFPE, "FPE"},   {SIGKILL, "KILL"},
      {SIGUSR1, "USR1"}, {SIGSEGV, "SEGV"}, {SIGUSR2, "USR2"},
      {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"}, {SIGTERM, "TERM"},
      {SIGXCPU, "XCPU"},
  };

  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (names[i].num == sig)
      return names[i].name;
  return NULL;
}

void
cli_fmt_exit(const json_t *job, char *out, size_t outlen)
{
  const json_t *code = json_object_get(job, "exit_code");
  const json_t *sig = json_object_get(job, "signal");
  const char *name;

  /* A signal is the more telling of the two: exit_code may echo it. */
  if (json_is_integer(sig) && json_integer_value(sig) > 0) {
    name = cli_signal_name(json_integer_value(sig));
    if (name != NULL)
      snprintf(out, outlen, "SIG%s", name);
    else
      snprintf(out, outlen, "sig %lld", (long long)json_integer_value(sig));
  } else if (json_is_integer(code)) {
    snprintf(out, outlen, "%lld", (long long)json_integer_value(code));
  } else {
    snprintf(out, outlen, "%s", "");
  }
}

void
cli_fmt_time_limit(const json_t *v, char *out, size_t outlen)
{
  int64_t seconds;

  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    /* Integer time limits are minutes, as in Slurm. */
    if (json_integer_value(v) == 0)
      snprintf(out, outlen, "unlimited");
    else
      time_format_duration(json_integer_value(v) * 60, out, outlen);
  } else if (json_is_string(v)) {
    if (time_parse_slurm_duration(json_string_value(v), &seconds) < 0)
      snprintf(out, outlen, "%s", json_string_value(v));
    else if (seconds == 0)
      snprintf(out, outlen, "unlimited");
    else
      time_format_duration(seconds, out, outlen);
  } else {
    snprintf(out, outlen, "-");
  }
}

int
cli_fmt_site_gpus(const json_t *gpus, struct buf *out)
{
  size_t i;
  json_t *g;
  int rc = 0;
  int n = 0;

  json_array_foreach(gpus, i, g) {
    const char *type = json_string_value(json_object_get(g, "type"));

    if (!json_is_object(g))
      continue;
    json_int_t down = json_integer_value(json_object_get(g, "down"));
    json_int_t pending = json_integer_value(json_object_get(g, "pending"));
    json_int_t grow = json_integer_value(json_object_get(g, "grow"));

    rc = buf_addf(out, "%s%s %lld/%lld", n > 0 ? ", " : "",
                  type != NULL ? type : "any",
                  (long long)json_integer_value(json_object_get(g, "in_use")),
                  (long long)json_integer_value(json_object_get(g, "total")));
    /* Only what is news: most sites have nothing down or waiting. */
    if (rc == 0 && down > 0)
      rc = buf_addf(out, " (%lld down)", (long long)down);
    if (rc == 0 && pending > 0)
      rc = buf_addf(out, " +%lld waiting", (long long)pending);
    if (rc == 0 && grow > 0)
      rc = buf_addf(out, " (%lld to start)", (long long)grow);
    if (rc < 0)
      return rc;
    n++;
  }
  if (n == 0)
    rc = buf_adds(out, "-");
  return rc;
}

/* Characters a shell takes literally in an unquoted word. */
static int
shell_safe(const char *s)
{
  if (s[0] == '\0')
    return 0;
  for (; *s != '\0'; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
          (*s >= '0' && *s <= '9') || strchr("_@%+=:,./-", *s) != NULL))
      return 0;
  return 1;
}

int
cli_fmt_argv(const json_t *argv, struct buf *out)
{
  size_t i;
  json_t *v;
  int rc = 0;

  json_array_foreach(argv, i, v) {
    const char *s = json_string_value(v);

    if (s == NULL)
      continue;
    if (i > 0)
      rc = buf_adds(out, " ");
    if (rc == 0 && shell_safe(s)) {
      rc = buf_adds(out, s);
    } else if (rc == 0) {
      rc = buf_adds(out, "'");
      for (const char *p = s; *p != '\0' && rc == 0; p++)
        rc = *p == '\'' ? buf_adds(out, "'\\''") : buf_add(out, p, 1);
      if (rc == 0)
        rc = buf_adds(out, "'");
    }
    if (rc < 0)
      return rc;
  }
  return rc;
}

/* RFC 3986 unreserved characters, independent of the locale. */
static int
is_unreserved(unsigned char c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
         c == '~';
}

int
cli_url_escape(struct buf *out, const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *p = (const unsigned char *)s;
  int rc = 0;

  for (; *p != '\0' && rc == 0; p++) {
    if (is_unreserved(*p)) {
      rc = buf_add(out, p, 1);
    } else {
      char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};

      rc = buf_add(out, esc, sizeof(esc));
    }
  }
  return rc;
}

int
cli_url_add_query(struct buf *out, const char *key, const char *value)
{
  int rc;

  if (value == NULL)
    return 0;
  rc = buf_adds(out, strchr(buf_str(out), '?') != NULL ? "&" : "?");
  if (rc == 0)
    rc = cli_url_escape(out, key);
  if (rc == 0)
    rc = buf_adds(out, "=");
  if (rc == 0)
    rc = cli_url_escape(out, value);
  return rc;
}

int
cli_url_add_segment(struct buf *out, const char *prefix, const char *name)
{
  int rc = buf_adds(out, prefix);

  if (rc == 0)
    rc = cli_url_escape(out, name);
  return rc;
}

int
cli_fmt_script(const char *script, struct buf *out)
{
  size_t n = strlen(script);
  int rc = 0;

  for (size_t i = 0; rc == 0 && i < n; i++) {
    unsigned char c = (unsigned char)script[i];
    char shown = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f
                     ? '?'
                     : (char)c;

    rc = buf_add(out, &shown, 1);
  }
  if (rc == 0 && (n == 0 || script[n - 1] != '\n'))
    rc = buf_add(out, "\n", 1);
  return rc;
}
