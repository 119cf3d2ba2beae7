/*
 * Progress lines for 'tenbin dataset sync'.  Both forms are built from
 * the same fields; the terminal form then drops fields until the line
 * fits its width, the plain form keeps them all.
 */
#include "cli/progress.h"

#include <stdio.h>
#include <string.h>

#include "cli/format.h"

#define SEP "  "
#define SEP_LEN 2
#define BAR_MIN 10
#define BAR_MAX 40
#define BAR_DONE '#'
#define BAR_LEFT '.'
/* A terminal label is a state word; a plain one names the replica too. */
#define BAR_LABEL_MAX 16
#define TEXT_LABEL_MAX 160
#define FIELD_SIZE 192
/* Widths of the fields beside a bar: "1.25 GiB/2.50 GiB", "12.3 MiB/s",
 * "ETA 4d23h" (longer ETAs push the line, rarely). */
#define BYTES_SLOT 17
#define AMOUNT_SLOT 8 /* one byte count: "1.25 GiB", "12.3 MiB" */
#define RATE_SLOT 10
#define ETA_SLOT 9
/* The rate looks this far back (but always at two changes). */
#define RATE_WINDOW_MS 10000
#define ETA_MAX_S ((int64_t)99 * 86400)

enum {
  F_LABEL,
  F_BAR,
  F_PCT,
  F_BYTES,
  F_WIRE,
  F_RATE,
  F_SAVED,
  F_ETA,
  F_FILES,
  NFIELDS
};

struct fields {
  char text[NFIELDS][FIELD_SIZE]; /* F_BAR's is drawn once sized */
  int on[NFIELDS];
};

/*
 * floor(done * n / total) for 0 <= done < total and 0 < n < 128, exact
 * for every int64: the product is built bit by bit of n keeping only its
 * remainder modulo total, so nothing exceeds 2 * total < 2^64.
 */
static int64_t
scale(int64_t done, int64_t total, int64_t n)
{
  uint64_t d = (uint64_t)done;
  uint64_t t = (uint64_t)total;
  uint64_t q = 0;
  uint64_t r = 0;

  for (int bit = 6; bit >= 0; bit--) {
    q <<= 1;
    r <<= 1;
    if (r >= t) {
      r -= t;
      q++;
    }
    if (((uint64_t)n >> bit) & 1) {
      r += d;
      if (r >= t) {
        r -= t;
        q++;
      }
    }
  }
  return (int64_t)q;
}

int
cli_progress_percent(int64_t done, int64_t total)
{
  if (total <= 0)
    return -1;
  if (done >= total)
    return 100;
  if (done <= 0)
    return 0;
  return (int)scale(done, total, 100);
}

void
cli_progress_bytes(int64_t bytes, char *out, size_t outlen)
{
  static const char *const units[] = {"KiB", "MiB", "GiB",
                                      "TiB", "PiB", "EiB"};
  double v;
  size_t u = 0;

  if (bytes < 1000) {
    snprintf(out, outlen, "%lld B", (long long)(bytes > 0 ? bytes : 0));
    return;
  }
  /* Switch units before a value would round to 4 digits ("1000"). */
  v = (double)bytes / 1024.0;
  while (v >= 999.5 && u + 1 < sizeof(units) / sizeof(units[0])) {
    v /= 1024.0;
    u++;
  }
  if (v < 9.995)
    snprintf(out, outlen, "%.2f %s", v, units[u]);
  else if (v < 99.95)
    snprintf(out, outlen, "%.1f %s", v, units[u]);
  else
    snprintf(out, outlen, "%.0f %s", v, units[u]);
}

void
cli_progress_eta(int64_t remaining, double rate, char *out, size_t outlen)
{
  double secs;
  int64_t s;

  if (remaining <= 0) {
    cli_fmt_duration_compact(0, out, outlen);
    return;
  }
  if (!(rate > 0)) {
    snprintf(out, outlen, "--");
    return;
  }
  secs = (double)remaining / rate;
  /* Checked before the cast: a tiny rate gives more than int64 holds. */
  if (secs > (double)ETA_MAX_S) {
    snprintf(out, outlen, ">99d");
    return;
  }
  s = (int64_t)secs;
  if ((double)s < secs)
    s++;
  cli_fmt_duration_compact(s, out, outlen);
}

/*
 * Copy label into out with control characters as '?', cut to at most
 * max bytes at a character boundary; ascii also turns every non-ASCII
 * byte into '?', so that the terminal form's bytes are its columns.
 */
static void
copy_label(const char *label, size_t max, int ascii, char *out,
           size_t outlen)
{
  size_t n = strlen(label);

  if (n > max) {
    n = max;
    while (n > 0 && ((unsigned char)label[n] & 0xC0) == 0x80)
      n--;
  }
  if (n >= outlen)
    n = outlen - 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)label[i];

    out[i] = c < 0x20 || c == 0x7f || (ascii && c >= 0x80) ? '?' : (char)c;
  }
  out[n] = '\0';
}

/* Decimal digits of v > 0. */
static int
digits(int64_t v)
{
  int n = 1;

  while (v >= 10) {
    v /= 10;
    n++;
  }
  return n;
}

/*
 * The fields of p.  Beside a bar each has a fixed width while the
 * transfer runs (numbers padded, an unknown rate shown as "--/s"), so
 * the bar, which takes the room the others leave, keeps its size and
 * nothing moves from one redraw to the next.
 */
static void
fields_make(const struct cli_progress *p, int tty, struct fields *f)
{
  char done[32]; /* a byte count or a duration: "999 EiB", "9999d23h" */
  char total[32];
  char t[FIELD_SIZE];
  int known = p->bytes_total > 0;
  int pct = cli_progress_percent(p->bytes_done, p->bytes_total);
  long long files = p->files_done > 0 ? p->files_done : 0;
  int pad = tty && known;

  memset(f, 0, sizeof(*f));
  if (p->label != NULL && p->label[0] != '\0') {
    copy_label(p->label, tty ? BAR_LABEL_MAX : TEXT_LABEL_MAX, tty,
               f->text[F_LABEL], FIELD_SIZE);
    f->on[F_LABEL] = 1;
  }
  f->on[F_BAR] = tty && known;
  if (known) {
    snprintf(f->text[F_PCT], FIELD_SIZE, tty ? "%3d%%" : "%d%%", pct);
    f->on[F_PCT] = 1;
  }
  cli_progress_bytes(p->bytes_done, done, sizeof(done));
  if (known) {
    cli_progress_bytes(p->bytes_total, total, sizeof(total));
    snprintf(t, sizeof(t), "%s/%s", done, total);
  } else {
    snprintf(t, sizeof(t), "%s", done);
  }
  snprintf(f->text[F_BYTES], FIELD_SIZE, "%*s", pad ? BYTES_SLOT : 0, t);
  f->on[F_BYTES] = 1;
  cli_progress_bytes(p->bytes_wire, done, sizeof(done));
  snprintf(f->text[F_WIRE], FIELD_SIZE, "wire %*s", pad ? AMOUNT_SLOT : 0,
           done);
  f->on[F_WIRE] = 1;
  cli_progress_bytes(p->bytes_saved, done, sizeof(done));
  snprintf(f->text[F_SAVED], FIELD_SIZE, "saved %*s", pad ? AMOUNT_SLOT : 0,
           done);
  f->on[F_SAVED] = 1;
  if (p->wire_rate > 0) {
    /* A rate past int64 is a broken counter; the cap keeps the cast. */
    cli_progress_bytes(p->wire_rate < 9e18 ? (int64_t)p->wire_rate
                                           : INT64_MAX,
                       done, sizeof(done));
    snprintf(t, sizeof(t), "%s/s", done);
    f->on[F_RATE] = 1;
  } else {
    snprintf(t, sizeof(t), "--/s");
    f->on[F_RATE] = pad;
  }
  snprintf(f->text[F_RATE], FIELD_SIZE, "%*s", pad ? RATE_SLOT : 0, t);
  if (known && p->bytes_done >= p->bytes_total) {
    if (p->elapsed_ms > 0) {
      cli_fmt_duration_compact(p->elapsed_ms / 1000, done, sizeof(done));
      snprintf(f->text[F_ETA], FIELD_SIZE, "in %s", done);
      f->on[F_ETA] = 1;
    }
  } else if (known) {
    cli_progress_eta(p->bytes_total - (p->bytes_done > 0 ? p->bytes_done : 0),
                     p->rate, done, sizeof(done));
    snprintf(t, sizeof(t), "ETA %s", done);
    snprintf(f->text[F_ETA], FIELD_SIZE, "%-*s", pad ? ETA_SLOT : 0, t);
    f->on[F_ETA] = 1;
  }
  if (p->files_total > 0) {
    snprintf(f->text[F_FILES], FIELD_SIZE, "files %*lld/%lld",
             pad ? digits(p->files_total) : 0, files,
             (long long)p->files_total);
    f->on[F_FILES] = 1;
  } else if (files > 0) {
    snprintf(f->text[F_FILES], FIELD_SIZE, "files %lld", files);
    f->on[F_FILES] = 1;
  }
}

/* Columns the fields take with a bar of barw cells (plus brackets). */
static size_t
fields_width(const struct fields *f, size_t barw)
{
  size_t w = 0;
  size_t n = 0;

  for (int i = 0; i < NFIELDS; i++) {
    if (!f->on[i])
      continue;
    w += i == F_BAR ? barw + 2 : strlen(f->text[i]);
    n++;
  }
  return n > 0 ? w + SEP_LEN * (n - 1) : 0;
}

/* Join the fields that are on into out; returns strlen(out). */
static size_t
fields_join(const struct fields *f, char *out, size_t outlen)
{
  size_t len = 0;
  int first = 1;

  if (outlen == 0)
    return 0;
  out[0] = '\0';
  for (int i = 0; i < NFIELDS; i++) {
    int n;

    if (!f->on[i])
      continue;
    n = snprintf(out + len, outlen - len, "%s%s", first ? "" : SEP,
                 f->text[i]);
    first = 0;
    if (n < 0 || (size_t)n >= outlen - len)
      return strlen(out);
    len += (size_t)n;
  }
  /* A padded field may end the line: no trailing blanks. */
  while (len > 0 && out[len - 1] == ' ')
    out[--len] = '\0';
  return len;
}

size_t
cli_progress_bar(const struct cli_progress *p, size_t width, char *out,
                 size_t outlen)
{
  /* The least useful field goes first; the percent never does. */
  static const int drop[] = {F_FILES, F_SAVED, F_RATE, F_LABEL,
                             F_WIRE,  F_BAR,   F_ETA,  F_BYTES};
  struct fields f;
  size_t barw = 0;
  size_t k = 0;
  size_t len;

  fields_make(p, 1, &f);
  for (;;) {
    size_t fixed = fields_width(&f, 0);

    if (f.on[F_BAR] && width >= fixed + BAR_MIN) {
      barw = width - fixed < BAR_MAX ? width - fixed : BAR_MAX;
      break;
    }
    if (!f.on[F_BAR] && fixed <= width)
      break;
    if (k == sizeof(drop) / sizeof(drop[0]))
      break;
    f.on[drop[k++]] = 0;
  }
  if (f.on[F_BAR]) {
    char *b = f.text[F_BAR];
    size_t fill = barw;

    /* scale() stays below barw while done < total: full means done. */
    if (p->bytes_done < p->bytes_total)
      fill = p->bytes_done > 0 ? (size_t)scale(p->bytes_done, p->bytes_total,
                                               (int64_t)barw)
                               : 0;
    b[0] = '[';
    memset(b + 1, BAR_DONE, fill);
    memset(b + 1 + fill, BAR_LEFT, barw - fill);
    b[barw + 1] = ']';
    b[barw + 2] = '\0';
  }
  len = fields_join(&f, out, outlen);
  /* Only the percent is left and even it is too wide: cut it. */
  if (len > width) {
    out[width] = '\0';
    len = width;
  }
  return len;
}

size_t
cli_progress_text(const struct cli_progress *p, char *out, size_t outlen)
{
  struct fields f;

  fields_make(p, 0, &f);
  return fields_join(&f, out, outlen);
}

void
cli_progress_rate_init(struct cli_progress_rate *r)
{
  memset(r, 0, sizeof(*r));
}

/* Drop the oldest point. */
static void
rate_shift(struct cli_progress_rate *r)
{
  memmove(&r->points[0], &r->points[1], (size_t)(r->n - 1) *
                                            sizeof(r->points[0]));
  r->n--;
  r->base = 0;
}

void
cli_progress_rate_add(struct cli_progress_rate *r, int64_t now_ms,
                      int64_t bytes)
{
  int64_t span;
  int64_t gap;
  int64_t stalled;

  if (bytes < 0)
    bytes = 0;
  if (r->n == 0 || bytes < r->points[r->n - 1].bytes) {
    r->n = 1;
    r->base = 1;
    r->points[0].ms = now_ms;
    r->points[0].bytes = bytes;
    r->bps = 0;
    return;
  }
  if (now_ms <= r->points[r->n - 1].ms)
    return; /* no time passed: nothing to learn */
  if (bytes == r->points[r->n - 1].bytes) {
    /* Before any movement the base follows the polls. */
    if (r->n == 1) {
      r->points[0].ms = now_ms;
      return;
    }
  } else {
    if (r->n == CLI_PROGRESS_RATE_POINTS)
      rate_shift(r);
    r->points[r->n].ms = now_ms;
    r->points[r->n].bytes = bytes;
    r->n++;
    /* Two real changes time the bursts better than a poll before. */
    if (r->base && r->n > 2)
      rate_shift(r);
    while (r->n > 2 && now_ms - r->points[0].ms > RATE_WINDOW_MS)
      rate_shift(r);
  }
  if (r->n < 2)
    return;
  span = r->points[r->n - 1].ms - r->points[0].ms;
  gap = span / (r->n - 1);
  /* Past the usual gap, the time without news counts too. */
  stalled = now_ms - r->points[0].ms - gap;
  r->bps = (double)(r->points[r->n - 1].bytes - r->points[0].bytes) *
           1000.0 / (double)(stalled > span ? stalled : span);
}

void
cli_progress_log_init(struct cli_progress_log *l)
{
  memset(l, 0, sizeof(*l));
  l->last_ms = -1;
}

int
cli_progress_log_due(struct cli_progress_log *l, const char *state,
                     int64_t bytes_done, int64_t files_done, int64_t now_ms)
{
  char cur[sizeof(l->state)];
  int moved = bytes_done != l->bytes_done || files_done != l->files_done;

  /* Compared as stored, so a long state is not "new" every time. */
  snprintf(cur, sizeof(cur), "%s", state != NULL ? state : "");
  if (l->last_ms >= 0 && strcmp(cur, l->state) == 0 &&
      (!moved || now_ms - l->last_ms < CLI_PROGRESS_PLAIN_MS))
    return 0;
  memcpy(l->state, cur, sizeof(cur));
  l->bytes_done = bytes_done;
  l->files_done = files_done;
  l->last_ms = now_ms;
  return 1;
}
