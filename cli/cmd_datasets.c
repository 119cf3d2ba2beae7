/*
 * The dataset commands: 'dataset add|publish|sync|ls|show', and
 * 'datasets' for the listing (as 'sites' and 'workloads' are).  Parsing
 * lives in args.c and the progress line in progress.c; this file does
 * the requests, the watching and the printing.
 *
 * 'dataset sync' asks tenbind for a replica, then polls the dataset
 * (GET /v1/datasets/NAME is the route that reports replicas) until that
 * replica is complete or failed.  Watching is only watching: the copy
 * is the work of tenbind and the agents, so Ctrl-C, a closed terminal or
 * a lost connection stop the CLI, never the copy.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/format.h"
#include "cli/progress.h"
#include "cli/table.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

#define WATCH_INTERVAL_MS 250
/* Long enough for tenbind to restart under a watcher. */
#define WATCH_UNREACHABLE_MS 30000
/* The replica was just created: a listing without it is a short race. */
#define WATCH_MISSING_MS 10000
/* The shell's status for a command that SIGINT ended. */
#define EXIT_INTERRUPTED 130
/* Listings show this much of a version id; 'sync' takes it back. */
#define SHORT_ID 12
#define MAX_PATH_LEN 512
#define MAX_BODY ((size_t)64 << 10)
#define LINE_SIZE 1024

static const char datasets_usage[] =
    "usage: tenbin datasets\n\nList datasets (as 'tenbin dataset ls').\n";

static volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
  (void)sig;
  interrupted = 1;
}

/* Sleep ms, cut short by a signal so that Ctrl-C is seen at once. */
static void
nap(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

  nanosleep(&ts, NULL);
}

/* s on f with control characters as '?': names and errors are input. */
static void
put_clean(const char *s, FILE *f)
{
  for (; *s != '\0'; s++)
    fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

/* The first SHORT_ID characters of a version id, "-" for none. */
static const char *
short_id(const char *v, char *out, size_t outlen)
{
  if (v == NULL || v[0] == '\0')
    return "-";
  snprintf(out, outlen, "%.*s", SHORT_ID, v);
  return out;
}

static const char *
human(const json_t *obj, const char *key, char *out, size_t outlen)
{
  cli_progress_bytes(json_integer_value(json_object_get(obj, key)), out,
                     outlen);
  return out;
}

static int64_t
int_of(const json_t *obj, const char *key)
{
  return json_integer_value(json_object_get(obj, key));
}

/*
 * Append "/v1/datasets/NAME" + suffix to path (set up with MAX_PATH_LEN);
 * ERR_INVALID when too long.
 */
static int
dataset_path(struct buf *path, const char *name, const char *suffix,
             struct err *e)
{
  if (cli_url_add_segment(path, "/v1/datasets/", name) < 0 ||
      buf_adds(path, suffix) < 0)
    return err_set(e, ERR_INVALID, "dataset name too long");
  return 0;
}

/* POST body (a JSON object) to path; the reply as cli_request gives. */
static int
post_json(struct cli *cli, const char *path, const json_t *body,
          struct cli_response *r, json_t **reply, struct err *e)
{
  struct buf text;
  int rc;

  buf_init(&text, MAX_BODY);
  if (jsonx_dump_buf(body, &text) < 0)
    rc = err_set(e, ERR_TOO_LARGE, "request larger than %zu KiB",
                 MAX_BODY >> 10);
  else
    rc = cli_request(cli, "POST", path, &text, r, reply, e);
  buf_release(&text);
  return rc;
}

/* GET /v1/datasets/NAME into *d (new reference). */
static int
get_dataset(struct cli *cli, const char *name, struct cli_response *r,
            json_t **d, struct err *e)
{
  struct buf path;
  int rc;

  buf_init(&path, MAX_PATH_LEN);
  rc = dataset_path(&path, name, "", e);
  if (rc == 0)
    rc = cli_request(cli, "GET", buf_str(&path), NULL, r, d, e);
  buf_release(&path);
  return rc;
}

/* ---- ls ---- */

static int
list_datasets(struct cli *cli)
{
  static const char *const head[] = {"NAME",   "PROJECT", "SOURCE",
                                     "PATH",   "LATEST",  "VERSIONS"};
  struct cli_response r;
  struct cli_table t;
  struct err e = {0};
  json_t *reply = NULL;
  json_t *d;
  size_t i;
  int status = CLI_EXIT_OK;

  cli_response_init(&r);
  cli_table_init(&t, head, 6);
  cli_table_set_max(&t, 3, 48);
  cli_table_set_right(&t, 5);
  if (cli_request(cli, "GET", "/v1/datasets", NULL, &r, &reply, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  if (cli->json) {
    cli_print_raw(&r);
    goto out;
  }
  json_array_foreach(json_object_get(reply, "datasets"), i, d) {
    const json_t *v = json_object_get(d, "versions");
    char latest[SHORT_ID + 1];
    char versions[32];
    const char *row[6];
    const char *project = jsonx_str(d, "project");

    /* A count by the contract; an array of them would do as well. */
    snprintf(versions, sizeof(versions), "%lld",
             (long long)(json_is_array(v) ? (json_int_t)json_array_size(v)
                                          : json_integer_value(v)));
    row[0] = jsonx_str(d, "name");
    /* No project: an admin's dataset (from before projects, or given
     * none). */
    row[1] = project != NULL ? project : "-";
    row[2] = jsonx_str(d, "source_site");
    row[3] = jsonx_str(d, "path");
    row[4] = short_id(jsonx_str(d, "latest"), latest, sizeof(latest));
    row[5] = versions;
    cli_table_add(&t, row);
  }
  if (cli_table_print(&t, stdout) < 0)
    status = CLI_EXIT_FAIL;
out:
  json_decref(reply);
  cli_table_release(&t);
  cli_response_release(&r);
  return status;
}

int
cli_cmd_datasets(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  int status = CLI_EXIT_OK;
  int first;

  if (!cli_parsed(cli_args_positional(argc, argv, 0, 0, &first, &e),
                  datasets_usage, &e, &status))
    return status;
  return list_datasets(cli);
}

static int
dataset_ls(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  int status = CLI_EXIT_OK;
  int first;

  if (!cli_parsed(cli_args_positional(argc, argv, 0, 0, &first, &e),
                  cli_dataset_ls_usage, &e, &status))
    return status;
  return list_datasets(cli);
}

/* ---- add, publish ---- */

static int
dataset_add(struct cli *cli, int argc, char **argv)
{
  struct cli_response r;
  struct err e = {0};
  json_t *body = NULL;
  json_t *reply = NULL;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_dataset_add_parse(argc, argv, &body, &e),
                  cli_dataset_add_usage, &e, &status))
    return status;
  cli_response_init(&r);
  if (post_json(cli, "/v1/datasets", body, &r, &reply, &e) < 0) {
    status = cli_fail(&e);
  } else if (cli->json) {
    cli_print_raw(&r);
  } else {
    fputs("added dataset ", stdout);
    put_clean(jsonx_str(body, "name"), stdout);
    fputs(" (", stdout);
    put_clean(jsonx_str(body, "source_site"), stdout);
    fputs(":", stdout);
    put_clean(jsonx_str(body, "path"), stdout);
    if (jsonx_str(body, "project") != NULL) {
      fputs(", project ", stdout);
      put_clean(jsonx_str(body, "project"), stdout);
    }
    fputs(")\n", stdout);
  }
  json_decref(reply);
  json_decref(body);
  cli_response_release(&r);
  return status;
}

static int
dataset_publish(struct cli *cli, int argc, char **argv)
{
  struct cli_response r;
  struct buf path;
  struct err e = {0};
  json_t *body = json_object();
  json_t *v = NULL;
  const char *name;
  const char *id;
  char files[32];
  char bytes[CLI_FMT_SIZE];
  int status = CLI_EXIT_OK;

  buf_init(&path, MAX_PATH_LEN);
  cli_response_init(&r);
  if (!cli_parsed(cli_dataset_name_parse(argc, argv, &name, &e),
                  cli_dataset_publish_usage, &e, &status))
    goto out;
  if (dataset_path(&path, name, "/versions", &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  /* Publishing hashes the whole tree at the source: no time limit. */
  cli->client.timeout_s = 0;
  if (post_json(cli, buf_str(&path), body, &r, &v, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  if (cli->json) {
    cli_print_raw(&r);
    goto out;
  }
  id = jsonx_str(v, "version");
  snprintf(files, sizeof(files), "%lld", (long long)int_of(v, "files"));
  human(v, "bytes", bytes, sizeof(bytes));
  /* 200: the same content was published before, so the same id. */
  printf("%s %s@", r.status == 200 ? "unchanged:" : "published", name);
  put_clean(id != NULL ? id : "?", stdout);
  printf(": %s files, %s\n", files, bytes);
out:
  json_decref(v);
  json_decref(body);
  buf_release(&path);
  cli_response_release(&r);
  return status;
}

/* ---- show ---- */

/* The PROGRESS cell of a replica: "45% of 2.60 GiB", "100%", "-". */
static void
progress_cell(const json_t *rep, char *out, size_t outlen)
{
  const char *state = jsonx_str(rep, "state");
  int64_t done = int_of(rep, "bytes_done");
  int64_t total = int_of(rep, "bytes_total");
  int pct = cli_progress_percent(done, total);
  char b[32]; /* "999 EiB" at most */

  if (state != NULL && strcmp(state, "complete") == 0) {
    snprintf(out, outlen, "100%%");
  } else if (pct >= 0) {
    cli_progress_bytes(total, b, sizeof(b));
    snprintf(out, outlen, "%d%% of %s", pct, b);
  } else if (done > 0) {
    cli_progress_bytes(done, out, outlen);
  } else {
    snprintf(out, outlen, "-");
  }
}

static int
print_versions(const json_t *versions)
{
  static const char *const head[] = {"VERSION", "FILES", "BYTES",
                                     "CREATED"};
  struct cli_table t;
  json_t *v;
  size_t i;
  int rc;

  cli_table_init(&t, head, 4);
  cli_table_set_right(&t, 1);
  cli_table_set_right(&t, 2);
  json_array_foreach(versions, i, v) {
    char id[SHORT_ID + 1];
    char files[32];
    char bytes[CLI_FMT_SIZE];
    char created[CLI_FMT_SIZE];
    const char *row[4];

    snprintf(files, sizeof(files), "%lld", (long long)int_of(v, "files"));
    row[0] = short_id(jsonx_str(v, "version"), id, sizeof(id));
    row[1] = files;
    row[2] = human(v, "bytes", bytes, sizeof(bytes));
    row[3] = cli_fmt_iso(jsonx_str(v, "created"), created, sizeof(created));
    cli_table_add(&t, row);
  }
  rc = cli_table_print(&t, stdout);
  cli_table_release(&t);
  return rc;
}

static int
print_replicas(const json_t *replicas)
{
  static const char *const head[] = {"SITE",  "VERSION", "STATE", "PROGRESS",
                                     "MOVED", "SAVED",   "ERROR"};
  struct cli_table t;
  json_t *rep;
  size_t i;
  int rc;

  cli_table_init(&t, head, 7);
  cli_table_set_max(&t, 0, 24);
  cli_table_set_right(&t, 4);
  cli_table_set_right(&t, 5);
  /* The error is the last column and shown whole: a cut reason is one
   * the user must fetch again with --json. */
  json_array_foreach(replicas, i, rep) {
    char id[SHORT_ID + 1];
    char progress[CLI_FMT_SIZE];
    char moved[CLI_FMT_SIZE];
    char saved[CLI_FMT_SIZE];
    const char *row[7];

    progress_cell(rep, progress, sizeof(progress));
    row[0] = jsonx_str(rep, "site");
    row[1] = short_id(jsonx_str(rep, "version"), id, sizeof(id));
    row[2] = jsonx_str(rep, "state");
    row[3] = progress;
    row[4] = human(rep, "bytes_wire", moved, sizeof(moved));
    row[5] = human(rep, "bytes_saved", saved, sizeof(saved));
    row[6] = jsonx_str(rep, "error");
    cli_table_add(&t, row);
  }
  rc = cli_table_print(&t, stdout);
  cli_table_release(&t);
  return rc;
}

static int
show_dataset(const json_t *d)
{
  const json_t *versions = json_object_get(d, "versions");
  const json_t *replicas = json_object_get(d, "replicas");
  char count[32];
  char created[CLI_FMT_TIME_SIZE];
  struct cli_table t;
  int rc;

  cli_table_init(&t, NULL, 2);
  snprintf(count, sizeof(count), "%zu", json_array_size(versions));
  cli_table_add_kv(&t, "name", jsonx_str(d, "name"));
  cli_table_add_kv(&t, "project", jsonx_str(d, "project") != NULL
                                      ? jsonx_str(d, "project")
                                      : "- (admins only)");
  cli_table_add_kv(&t, "source", jsonx_str(d, "source_site"));
  cli_table_add_kv(&t, "path", jsonx_str(d, "path"));
  cli_table_add_kv(&t, "latest", jsonx_str(d, "latest"));
  cli_table_add_kv(&t, "versions", count);
  cli_table_add_kv(&t, "created",
                   cli_fmt_iso_ago(jsonx_str(d, "created"), time_now_ms(),
                                   created, sizeof(created)));
  rc = cli_table_print(&t, stdout);
  cli_table_release(&t);
  /* The tables' headers tell them apart; an empty one is left out. */
  if (rc == 0 && json_array_size(versions) > 0) {
    fputc('\n', stdout);
    rc = print_versions(versions);
  }
  if (rc == 0 && json_array_size(replicas) > 0) {
    fputc('\n', stdout);
    rc = print_replicas(replicas);
  }
  return rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static int
dataset_show(struct cli *cli, int argc, char **argv)
{
  struct cli_response r;
  struct err e = {0};
  json_t *d = NULL;
  const char *name;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_dataset_name_parse(argc, argv, &name, &e),
                  cli_dataset_show_usage, &e, &status))
    return status;
  cli_response_init(&r);
  if (get_dataset(cli, name, &r, &d, &e) < 0)
    status = cli_fail(&e);
  else if (cli->json)
    cli_print_raw(&r);
  else
    status = show_dataset(d);
  json_decref(d);
  cli_response_release(&r);
  return status;
}

/* ---- sync ---- */

/*
 * The whole id of the version that starts with prefix, as the listings
 * show short ids; prefix itself when none does (tenbind then says what
 * is wrong with it).  ERR_INVALID when several do.
 */
static int
resolve_version(struct cli *cli, const char *name, const char *prefix,
                char *out, size_t outlen, struct err *e)
{
  struct cli_response r;
  json_t *d = NULL;
  json_t *v;
  const char *found = NULL;
  size_t n = strlen(prefix);
  size_t i;
  int matches = 0;
  int rc;

  cli_response_init(&r);
  rc = get_dataset(cli, name, &r, &d, e);
  if (rc < 0)
    goto out;
  json_array_foreach(json_object_get(d, "versions"), i, v) {
    const char *id = jsonx_str(v, "version");

    if (id != NULL && strncmp(id, prefix, n) == 0) {
      found = id;
      matches++;
    }
  }
  if (matches > 1) {
    rc = err_set(e, ERR_INVALID,
                 "version '%s' of %s is ambiguous: %d versions start with it",
                 prefix, name, matches);
    goto out;
  }
  snprintf(out, outlen, "%s", found != NULL ? found : prefix);
out:
  json_decref(d);
  cli_response_release(&r);
  return rc;
}

/* What one 'dataset sync' watches, and the state of its output. */
struct watch {
  struct cli *cli;
  const char *name;
  const char *site;
  char version[CLI_VERSION_LEN + 1]; /* the replica's; "" until known */
  char label[256];                   /* "NAME@SHORT at SITE" */
  int tty;                           /* redraw one bar line */
  size_t drawn;                      /* columns of the bar on screen */
  int on_line;                       /* a bar line wants its newline */
  int64_t start_ms;                  /* monotonic, when watching began */
  int64_t deadline_ms;               /* monotonic; 0: no --timeout */
  struct cli_progress_rate rate;     /* content bytes, for the ETA */
  struct cli_progress_rate wire;     /* bytes on the wire, shown */
  struct cli_progress_log log;
  char waiting[LINE_SIZE];           /* error and next try last printed */
};

static void
watch_set_version(struct watch *w, const char *version)
{
  char id[SHORT_ID + 1];

  snprintf(w->version, sizeof(w->version), "%s",
           version != NULL ? version : "");
  snprintf(w->label, sizeof(w->label), "%s@%s at %s", w->name,
           short_id(version, id, sizeof(id)), w->site);
}

/* The replica of w's version at w's site in a dataset, borrowed. */
static const json_t *
find_replica(const struct watch *w, const json_t *d)
{
  json_t *rep;
  size_t i;

  json_array_foreach(json_object_get(d, "replicas"), i, rep) {
    const char *site = jsonx_str(rep, "site");
    const char *version = jsonx_str(rep, "version");

    if (site != NULL && version != NULL && strcmp(site, w->site) == 0 &&
        strcmp(version, w->version) == 0)
      return rep;
  }
  return NULL;
}

static size_t
term_columns(void)
{
  struct winsize ws;
  const char *env = getenv("COLUMNS");
  long n;

  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  if (env != NULL) {
    char *end = NULL;

    n = strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n < 10000)
      return (size_t)n;
  }
  return 80;
}

/* End the bar line, so that what follows starts on a line of its own. */
static void
end_line(struct watch *w)
{
  if (w->on_line)
    fputc('\n', stdout);
  w->on_line = 0;
  w->drawn = 0;
  fflush(stdout);
}

/*
 * How long the copy ran (or has run) by tenbind's clock; ERR_INVALID
 * when tenbind did not say when it started.
 */
static int
copy_time(const json_t *rep, int64_t *ms)
{
  int64_t from;
  int64_t to;

  if (time_parse_iso(jsonx_str(rep, "started"), &from) < 0)
    return ERR_INVALID;
  if (time_parse_iso(jsonx_str(rep, "finished"), &to) < 0)
    to = time_now_ms();
  *ms = to > from ? to - from : 0;
  return 0;
}

/* Show one poll's state of the replica: redraw the bar or log a line. */
static void
show_progress(struct watch *w, const json_t *rep, int64_t now)
{
  const char *state = jsonx_str(rep, "state");
  char label[512];
  char line[CLI_PROGRESS_SIZE];
  struct cli_progress p;
  size_t cols;
  size_t n;

  if (state == NULL)
    state = "?";
  /* The bar says "syncing" by itself; other states need the word. */
  p.label = strcmp(state, "syncing") != 0 ? state : NULL;
  p.bytes_done = int_of(rep, "bytes_done");
  p.bytes_total = int_of(rep, "bytes_total");
  p.bytes_wire = int_of(rep, "bytes_wire");
  p.bytes_saved = int_of(rep, "bytes_saved");
  p.files_done = int_of(rep, "files_done");
  p.files_total = int_of(rep, "files_total");
  cli_progress_rate_add(&w->rate, now, p.bytes_done);
  cli_progress_rate_add(&w->wire, now, p.bytes_wire);
  p.rate = w->rate.bps;
  p.wire_rate = w->wire.bps;
  if (copy_time(rep, &p.elapsed_ms) < 0)
    p.elapsed_ms = now - w->start_ms;
  if (!w->tty) {
    if (!cli_progress_log_due(&w->log, state, p.bytes_done, p.files_done,
                              now))
      return;
    snprintf(label, sizeof(label), "%s: %s", w->label, state);
    p.label = label;
    cli_progress_text(&p, line, sizeof(line));
    puts(line);
    fflush(stdout);
    return;
  }
  cols = term_columns();
  n = cli_progress_bar(&p, cols > 1 ? cols - 1 : 1, line, sizeof(line));
  fputc('\r', stdout);
  fputs(line, stdout);
  /* Blank what a longer line before left, within the terminal's width. */
  for (size_t i = n; i < w->drawn && i + 1 < cols; i++)
    fputc(' ', stdout);
  fflush(stdout);
  w->drawn = n;
  w->on_line = 1;
}

/*
 * The replica ended: its summary (or its JSON, unless the caller printed
 * the server's reply already) and the exit status.
 */
static int
finish(struct watch *w, const json_t *rep, int printed)
{
  const char *state = jsonx_str(rep, "state");
  const char *error = jsonx_str(rep, "error");
  char bytes[CLI_FMT_SIZE], moved[CLI_FMT_SIZE], saved[CLI_FMT_SIZE];
  char took[CLI_FMT_SIZE];
  char msg[LINE_SIZE];
  int64_t ms;
  int ok = state != NULL && strcmp(state, "complete") == 0;

  end_line(w);
  if (w->cli->json && !printed) {
    char *text = jsonx_dump(rep);

    puts(text);
    free(text);
  } else if (!w->cli->json && ok) {
    put_clean(w->label, stdout);
    printf(": complete, %lld files, %s; moved %s, saved %s",
           (long long)int_of(rep, "files_total"),
           human(rep, "bytes_total", bytes, sizeof(bytes)),
           human(rep, "bytes_wire", moved, sizeof(moved)),
           human(rep, "bytes_saved", saved, sizeof(saved)));
    /* A replica that was there already has no copy to time. */
    if (copy_time(rep, &ms) == 0) {
      cli_fmt_duration(ms / 1000, took, sizeof(took));
      printf(", in %s", took);
    }
    fputc('\n', stdout);
  }
  if (ok)
    return CLI_EXIT_OK;
  snprintf(msg, sizeof(msg), "%s failed: %s", w->label,
           error != NULL ? error : "no reason given");
  cli_message("", msg, "");
  return CLI_EXIT_FAIL;
}

/*
 * The copy cannot go on (tenbind keeps trying): say why and when the
 * next try goes, once per reason and try, on stderr, between bars.
 */
static void
show_waiting(struct watch *w, const json_t *rep)
{
  const char *error = jsonx_str(rep, "error");
  const char *next_try = jsonx_str(rep, "next_try");
  char line[LINE_SIZE];
  char key[LINE_SIZE];
  char when[CLI_FMT_SIZE];
  char at[CLI_FMT_SIZE];
  int64_t next;
  int64_t left;

  if (error == NULL)
    return;
  /* The same reason and the same next try: nothing new to say (the
   * countdown alone is not news). */
  snprintf(key, sizeof(key), "%s\n%s", error,
           next_try != NULL ? next_try : "");
  if (strcmp(key, w->waiting) == 0)
    return;
  snprintf(w->waiting, sizeof(w->waiting), "%s", key);
  if (time_parse_iso(next_try, &next) == 0) {
    left = next - time_now_ms();
    cli_fmt_duration(left > 0 ? (left + 999) / 1000 : 0, when,
                     sizeof(when));
    cli_fmt_time(next, at, sizeof(at));
    snprintf(line, sizeof(line), "%s: waiting: %s; next try in %s (%s)",
             w->label, error, when, at);
  } else {
    snprintf(line, sizeof(line), "%s: waiting: %s", w->label, error);
  }
  end_line(w);
  cli_message("", line, "");
}

/* --timeout ran out: say what the replica was doing and give up. */
static int
give_up(struct watch *w, const json_t *rep)
{
  const char *state = rep != NULL ? jsonx_str(rep, "state") : NULL;
  const char *error = rep != NULL ? jsonx_str(rep, "error") : NULL;
  char msg[LINE_SIZE];

  end_line(w);
  snprintf(msg, sizeof(msg), "%s: not complete after --timeout (%s%s%s); "
           "the copy goes on (see 'tenbin dataset show %s')",
           w->label, state != NULL ? state : "no replica listed",
           error != NULL ? ": " : "", error != NULL ? error : "", w->name);
  cli_message("", msg, "");
  return CLI_EXIT_FAIL;
}

static int
is_final(const char *state)
{
  return state != NULL &&
         (strcmp(state, "complete") == 0 || strcmp(state, "failed") == 0 ||
          strcmp(state, "superseded") == 0);
}

/*
 * Poll the dataset until the replica in w ends.  tenbind being away
 * (unreachable or 5xx) is waited out for WATCH_UNREACHABLE_MS, since
 * the copy goes on without it; any other error ends the watch.
 */
static int
watch(struct watch *w)
{
  struct cli_response r;
  struct err e = {0};
  char msg[LINE_SIZE];
  json_t *d = NULL;
  int64_t away_since = -1;
  int64_t missing_since = -1;
  int status = CLI_EXIT_FAIL;

  cli_response_init(&r);
  while (!interrupted) {
    const json_t *rep;
    int64_t now;
    int rc;

    json_decref(d);
    d = NULL;
    rc = get_dataset(w->cli, w->name, &r, &d, &e);
    now = time_mono_ms();
    /* Ctrl-C during the request may have failed it: not worth a word. */
    if (interrupted)
      break;
    if (w->deadline_ms > 0 && now >= w->deadline_ms) {
      status = give_up(w, rc == 0 ? find_replica(w, d) : NULL);
      goto out;
    }
    if (rc == ERR_UNAVAILABLE) {
      end_line(w);
      if (away_since < 0) {
        away_since = now;
        cli_message("", err_msg(&e), "; still trying");
      } else if (now - away_since >= WATCH_UNREACHABLE_MS) {
        cli_fail(&e);
        goto out;
      }
      nap(WATCH_INTERVAL_MS * 4);
      continue;
    }
    if (rc < 0) {
      end_line(w);
      cli_fail(&e);
      goto out;
    }
    away_since = -1;
    /* A reply without the replica's version: follow the latest. */
    if (w->version[0] == '\0')
      watch_set_version(w, jsonx_str(d, "latest"));
    rep = find_replica(w, d);
    if (rep == NULL) {
      if (missing_since < 0) {
        missing_since = now;
      } else if (now - missing_since >= WATCH_MISSING_MS) {
        end_line(w);
        snprintf(msg, sizeof(msg), "tenbind lists no replica of %s",
                 w->label);
        cli_message("", msg, "");
        goto out;
      }
    } else {
      missing_since = -1;
      if (is_final(jsonx_str(rep, "state"))) {
        /* The full bar, once; a failed copy keeps its last one. */
        if (w->tty && !w->cli->json &&
            strcmp(jsonx_str(rep, "state"), "complete") == 0)
          show_progress(w, rep, now);
        status = finish(w, rep, 0);
        goto out;
      }
      show_waiting(w, rep);
      if (!w->cli->json)
        show_progress(w, rep, now);
    }
    nap(WATCH_INTERVAL_MS);
  }
  end_line(w);
  snprintf(msg, sizeof(msg),
           "stopped watching; the copy of %s goes on (see 'tenbin dataset "
           "show %s')",
           w->label, w->name);
  cli_message("", msg, "");
  status = EXIT_INTERRUPTED;
out:
  json_decref(d);
  cli_response_release(&r);
  return status;
}

/* The replica as POST answered it, for --no-wait. */
static int
print_requested(struct watch *w, const struct cli_response *r,
                const json_t *rep)
{
  const char *state = jsonx_str(rep, "state");

  if (w->cli->json)
    cli_print_raw(r);
  if (is_final(state))
    return finish(w, rep, w->cli->json);
  if (!w->cli->json) {
    put_clean(w->label, stdout);
    fputs(": ", stdout);
    put_clean(state != NULL ? state : "requested", stdout);
    fputc('\n', stdout);
  }
  return CLI_EXIT_OK;
}

static int
dataset_sync(struct cli *cli, int argc, char **argv)
{
  struct cli_dataset_sync o;
  struct cli_response r;
  struct buf path;
  struct err e = {0};
  struct sigaction sa, old_sa;
  struct watch w;
  char version[CLI_VERSION_LEN + 1];
  json_t *body = NULL;
  json_t *rep = NULL;
  int status = CLI_EXIT_OK;

  buf_init(&path, MAX_PATH_LEN);
  cli_response_init(&r);
  if (!cli_parsed(cli_dataset_sync_parse(argc, argv, &o, &e),
                  cli_dataset_sync_usage, &e, &status))
    goto out;
  snprintf(version, sizeof(version), "%s", o.version);
  if (strcmp(o.version, "latest") != 0 &&
      strlen(o.version) < CLI_VERSION_LEN &&
      resolve_version(cli, o.name, o.version, version, sizeof(version), &e) <
          0) {
    status = cli_fail(&e);
    goto out;
  }
  if (dataset_path(&path, o.name, "/replicas", &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  body = cli_dataset_sync_body(&o, version);
  if (post_json(cli, buf_str(&path), body, &r, &rep, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  memset(&w, 0, sizeof(w));
  w.cli = cli;
  w.name = o.name;
  w.site = o.site;
  w.tty = isatty(STDOUT_FILENO);
  w.start_ms = time_mono_ms();
  if (o.timeout_s > 0)
    w.deadline_ms = w.start_ms + o.timeout_s * 1000;
  cli_progress_rate_init(&w.rate);
  cli_progress_rate_init(&w.wire);
  cli_progress_log_init(&w.log);
  /* The replica names the version that "latest" was resolved to. */
  if (jsonx_str(rep, "version") != NULL)
    watch_set_version(&w, jsonx_str(rep, "version"));
  else if (strcmp(version, "latest") != 0)
    watch_set_version(&w, version);
  else
    watch_set_version(&w, NULL);
  if (!o.wait) {
    status = print_requested(&w, &r, rep);
    goto out;
  }
  /* Ctrl-C ends the watch, not the process; a second one does. */
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigint;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  interrupted = 0;
  sigaction(SIGINT, &sa, &old_sa);
  status = watch(&w);
  sigaction(SIGINT, &old_sa, NULL);
out:
  json_decref(rep);
  json_decref(body);
  cli_response_release(&r);
  buf_release(&path);
  return status;
}

/* ---- dispatch ---- */

static const struct {
  const char *name;
  cli_cmd_fn fn;
} subcommands[] = {
    {"add", dataset_add},   {"publish", dataset_publish},
    {"sync", dataset_sync}, {"ls", dataset_ls},
    {"show", dataset_show},
};

int
cli_cmd_dataset(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL) {
    err_set(&e, ERR_INVALID,
            "a subcommand is needed (add, publish, sync, ls or show)");
    return cli_usage_error(cli_dataset_usage, &e);
  }
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
    fputs(cli_dataset_usage, stdout);
    return CLI_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
    if (strcmp(sub, subcommands[i].name) == 0)
      return subcommands[i].fn(cli, argc - 1, argv + 1);
  err_set(&e, ERR_INVALID, "unknown subcommand '%s'", sub);
  return cli_usage_error(cli_dataset_usage, &e);
}
