/*
 * What clients and the config say about money and time: a site's
 * "cost" block (JSON text, as the config has it: broker__site_cost), and
 * a report's query and a job's deadline (the first line "by", the second
 * a day, the third a zone, the fourth a time: broker_report_by_parse,
 * time_parse_day, time_zone_parse, time_parse_iso).  Whatever is refused
 * is refused with a message; a day or time that parses formats back the
 * same.
 */
#include <string.h>

#include "broker/broker_internal.h"
#include "fuzz/fuzz.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

#define LINE_MAX_LEN 256

/* Line k of data (k from 0) into out, NUL-terminated, cut to fit. */
static void
line(const uint8_t *data, size_t size, int k, char *out)
{
  size_t i = 0, n = 0;

  for (int l = 0; l < k && i < size; i++)
    if (data[i] == '\n')
      l++;
  while (i < size && data[i] != '\n' && n + 1 < LINE_MAX_LEN)
    out[n++] = (char)data[i++];
  out[n] = '\0';
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct site_cost c;
  struct err e = {0};
  json_t *cost = NULL;
  char by[LINE_MAX_LEN], day[LINE_MAX_LEN], zone[LINE_MAX_LEN];
  char iso[LINE_MAX_LEN], back[40];
  unsigned bits;
  int64_t ms;
  int tz = 0;

  memset(&c, 0, sizeof(c));
  if (jsonx_parse_object((const char *)data, size, &cost, &e) == 0) {
    if (broker__site_cost(&c, cost, 0, &e) < 0)
      FUZZ_CHECK(e.code < 0 && e.msg[0] != '\0');
    broker__site_cost_release(&c);
    json_decref(cost);
    return 0;
  }
  line(data, size, 0, by);
  line(data, size, 1, day);
  line(data, size, 2, zone);
  line(data, size, 3, iso);
  if (broker_report_by_parse(by, &bits, &e) < 0)
    FUZZ_CHECK(e.code == ERR_INVALID && strstr(e.msg, "'by'") != NULL);
  else
    FUZZ_CHECK(bits < 16);
  if (time_zone_parse(zone, &tz) == 0)
    FUZZ_CHECK(tz >= -14 * 60 && tz <= 14 * 60);
  if (time_parse_day(day, tz, &ms) == 0) {
    time_format_day(ms, tz, back);
    FUZZ_CHECK(strcmp(back, day) == 0);
    FUZZ_CHECK(time_day_start(ms, tz) == ms);
  }
  if (time_parse_iso(iso, &ms) == 0 && ms >= 0) {
    time_format_iso(ms, back, sizeof(back));
    FUZZ_CHECK(time_parse_iso(back, &ms) == 0);
  }
  return 0;
}
