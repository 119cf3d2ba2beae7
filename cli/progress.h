/*
 * Progress of a dataset replica as text: the one-line bar that
 * 'tenbin dataset sync' redraws on a terminal, the plain lines it writes
 * elsewhere, human byte counts and ETAs, and the smoothing of the rate.
 * Pure functions of their arguments (times are parameters, nothing is
 * printed), so every rule is a unit test.
 *
 *   struct cli_progress_rate rate;
 *   cli_progress_rate_init(&rate);
 *   ... per poll:
 *   cli_progress_rate_add(&rate, time_mono_ms(), bytes_done);
 *   p.rate = rate.bps;
 *   cli_progress_bar(&p, columns - 1, line, sizeof(line));
 *   printf("\r%s", line);
 */
#ifndef TENBIN_CLI_PROGRESS_H
#define TENBIN_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Enough for any line below (the bar is capped, the label cut). */
#define CLI_PROGRESS_SIZE 512
/* The plain form writes a line at most this often while moving. */
#define CLI_PROGRESS_PLAIN_MS 2000

/*
 * Content bytes (done/total) say how far the copy is; bytes on the wire
 * say what it costs.  A delta of 1 MB against a 48 MB file is 48 MB done
 * but 1 MB moved: the rate shown is the wire's, the ETA is content's.
 */
struct cli_progress {
  const char *label;   /* first word(s), e.g. the state; NULL for none */
  int64_t bytes_done;
  int64_t bytes_total; /* <= 0: not known (no bar, no percent, no ETA) */
  int64_t bytes_wire;  /* crossed the network so far */
  int64_t bytes_saved; /* content not sent, thanks to deltas and reuse */
  int64_t files_done;
  int64_t files_total; /* <= 0: not known */
  double rate;         /* smoothed content bytes/s, for the ETA; <= 0:
                          not known yet */
  double wire_rate;    /* smoothed bytes/s on the wire, shown; <= 0: not
                          known yet */
  int64_t elapsed_ms;  /* since the copy started; shown once it is done */
};

/*
 * The terminal form, at most width columns (the caller passes one less
 * than the terminal's, so the cursor never wraps):
 *   "[#######.......]   45%  1.17 GiB/2.60 GiB  wire 12.0 MiB
 *    4.00 MiB/s  saved 1.15 GiB  ETA 13s  files 120/300"
 * after the label when there is one: content done/total, then bytes on
 * the wire and their rate, then content not sent.  The numbers are
 * padded to fixed widths and an unknown rate shows as "--/s", so that
 * from one redraw to the next nothing moves; the bar takes the room
 * left, 10 to 40 cells.  When the line does not fit, fields go in this
 * order: files, saved, rate, label, wire, bar, ETA, bytes; the percent
 * alone is cut to width.  Writes no control characters (the caller adds
 * "\r"), only ASCII, so bytes are columns, and no trailing blanks.
 * Returns strlen(out).
 */
size_t cli_progress_bar(const struct cli_progress *p, size_t width,
                        char *out, size_t outlen);
/*
 * The plain form for logs and pipes, the same fields without the bar and
 * never cut: "ds@0123456789ab at gpu2: syncing  45%  1.17 GiB/2.60 GiB
 * wire 12.0 MiB  4.00 MiB/s  saved 1.15 GiB  ETA 13s  files 120/300".
 * Control characters of the label (server text) print as '?'.  Returns
 * strlen(out).
 */
size_t cli_progress_text(const struct cli_progress *p, char *out,
                         size_t outlen);

/*
 * done/total as a whole percent, rounded down so that 100 means done;
 * -1 when total <= 0 (not known).  Exact for any int64 values.
 */
int cli_progress_percent(int64_t done, int64_t total);
/*
 * A byte count in binary units, three significant digits: "0 B",
 * "999 B", "0.98 KiB", "1.50 KiB", "12.3 MiB", "123 GiB", "8.00 EiB".
 * Negative counts print as "0 B".
 */
void cli_progress_bytes(int64_t bytes, char *out, size_t outlen);
/*
 * The time left for remaining bytes at rate bytes/s, rounded up, as
 * cli_fmt_duration writes it ("13s", "4m05s"); "--" while the rate is
 * not known or 0, ">99d" past 99 days.
 */
void cli_progress_eta(int64_t remaining, double rate, char *out,
                      size_t outlen);

/*
 * The rate of a byte counter, smoothed for a server that updates its
 * counters in bursts: bytes over the span of the counter's last changes
 * (up to CLI_PROGRESS_RATE_POINTS of them, within 10 s), so polls that
 * fall between two updates change nothing.  A stall longer than the
 * usual gap between changes lowers the rate as it lasts.  The first
 * movement is measured from the last sample before it; a counter that
 * goes back (a new attempt) starts over.
 */
#define CLI_PROGRESS_RATE_POINTS 16

struct cli_progress_rate {
  double bps; /* bytes/s as of the last sample; 0 until it moved */
  int n;      /* points held, oldest first */
  int base;   /* points[0] is the sample before the first movement */
  struct {
    int64_t ms;
    int64_t bytes;
  } points[CLI_PROGRESS_RATE_POINTS];
};

void cli_progress_rate_init(struct cli_progress_rate *r);
/* One sample: the counter's value bytes at now_ms (a monotonic clock). */
void cli_progress_rate_add(struct cli_progress_rate *r, int64_t now_ms,
                           int64_t bytes);

/*
 * When the plain form writes a line: at once when the state changed
 * (the first sample included), else when the counters moved and
 * CLI_PROGRESS_PLAIN_MS passed since the last line; never for nothing.
 */
struct cli_progress_log {
  char state[32];     /* state of the last line, "" before one */
  int64_t bytes_done; /* counters of the last line */
  int64_t files_done;
  int64_t last_ms;    /* time of the last line; -1 before one */
};

void cli_progress_log_init(struct cli_progress_log *l);
/* 1 when a line is due now, and then records it as written; else 0. */
int cli_progress_log_due(struct cli_progress_log *l, const char *state,
                         int64_t bytes_done, int64_t files_done,
                         int64_t now_ms);

#endif
