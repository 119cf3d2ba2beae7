/*
 * tenbin-agent node mode (agent/node.h; docs/NODES.md is the protocol).
 *
 * The agent holds the jobs tenbind assigned to this VM.  Each one runs
 * through the real local adapter, opened in-process on DIR/node with
 * the agent's own executable as the shim, exactly as the local site
 * runs jobs on tenbind's host.  The adapter's updates say how a job is
 * doing; the heartbeat tells tenbind, and its answer brings new
 * assignments, cancels, acknowledgements and, at the end, stop.
 *
 * A job that names a dataset starts once its version is here: the
 * agent library pulls it from the source agent tenbind named, in this
 * process, into DIR/datasets (no port is opened for it).  Meanwhile the
 * job is reported "submitted"; a pull that fails ends the job failed.
 * The bytes a job's own pull moved go with its final state, for tenbind
 * to bill.
 *
 * A job's stdout is streamed to tenbind while the job runs (a read on
 * the thread pool, then a PUT), and its final state is held back from
 * the heartbeat until the whole file has been sent: whoever sees the
 * final state at tenbind can read the whole log there.
 *
 * One heartbeat is in flight at a time.  The next goes heartbeat_ms
 * after an answer, at once after one when a job changed meanwhile, and
 * after a backoff with jitter (capped at 30 s, forever) while tenbind
 * cannot be reached: the jobs keep running all the while.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/local.h"
#include "agent/agent.h"
#include "agent/node.h"
#include "http/client.h"
#include "http/router.h"
#include "spec/jobspec.h"
#include "sync/agent_client.h"
#include "sync/path.h"
#include "util/alloc.h"
#include "util/fileio.h"
#include "util/jsonx.h"
#include "util/list.h"
#include "util/log.h"
#include "util/strv.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#define DEFAULT_LOG_FLUSH_MS 500u
#define DEFAULT_BACKOFF_MS 500u
#define MAX_BACKOFF_MS 30000u
#define HEARTBEAT_TIMEOUT_MS 20000u
#define LOG_TIMEOUT_MS 60000u
/* A log answer is {"size": N} or an error object. */
#define LOG_ANSWER_MAX (64u << 10)
/* Warn again about an unreachable tenbind this often. */
#define DOWN_WARN_MS (10 * 60 * 1000LL)
/* The last heartbeat after stop is tried this often before the agent
 * exits anyway: the node is being retired either way. */
#define STOP_TRIES 5
/* A final job whose log tenbind keeps failing to take is reported after
 * this many failed sends in a row, its log incomplete, rather than held
 * back forever. */
#define LOG_MAX_FAILS 20
/* 409s in a row that are followed at once; more wait for the tick. */
#define LOG_MAX_CONFLICTS 8
/* Ids acknowledged lately: an assignment of one again is a stale repeat,
 * never a job to run a second time. */
#define FORGOTTEN_MAX 256
#define TOKEN_MAX 4096
#define URL_MAX 1024
#define HOSTNAME_MAX 255

/* A job this agent holds, until tenbind acknowledges its final state. */
struct node_job {
  int64_t id;
  enum job_state state;  /* the site's: JOB_RUNNING until a final one */
  int submitted;         /* the local adapter has it (cancel goes there) */
  /* A job with a dataset, until it is submitted: */
  json_t *spec;          /* its spec, to start once the version is here */
  char *ds;              /* "NAME@VERSION", or NULL for no dataset */
  char *ds_dir;          /* the version's directory here, once pulled */
  int pulling;           /* its version is being pulled */
  int own_pull;          /* that pull is this job's: its bytes are too */
  int64_t pulled_bytes;  /* what its own pull put on the wire */
  int pull_failed;
  int cancel_sent;
  int exit_code;         /* -1 when not ended by exit */
  int sig;               /* 0 when not ended by a signal */
  char *reason;          /* the final state's, or NULL */
  char *alloc;           /* "0,1", or NULL */
  char *log_path;        /* its stdout, or NULL while unknown */
  int64_t run_ms;        /* wall clock: when it began running */
  int64_t end_ms;        /* wall clock: when it ended */
  uint64_t log_off;      /* log bytes tenbind holds */
  int log_busy;          /* a read or a PUT of its log is under way */
  int log_done;          /* no more log goes: all sent, or given up */
  int log_fails;         /* failed sends in a row */
  int log_conflicts;     /* 409s in a row */
  int log_warned;
  struct list link;      /* in struct node_agent's jobs */
};

struct node_agent {
  uv_loop_t *loop;
  char *server;            /* base URL, no trailing '/' */
  char *auth;              /* "Authorization: Bearer TOKEN" */
  char *hostname;
  char *version;
  unsigned log_flush_ms;
  unsigned backoff_ms;
  struct http_client *client;
  void *site;              /* the local adapter's ctx */
  struct agent *data;      /* pulls datasets into DIR/datasets */
  struct node_meta *meta;
  uv_timer_t hb_timer;     /* the next heartbeat */
  uv_timer_t log_timer;    /* log bytes go out on each tick */
  struct list jobs;        /* of struct node_job, oldest first */
  size_t njobs;
  int64_t forgotten[FORGOTTEN_MAX];
  size_t nforgotten;       /* entries written, ever */
  int hb_busy;             /* a heartbeat is in flight */
  int hb_again;            /* a job changed: the next one goes at once */
  int hb_last;             /* the one in flight is stop's last */
  int64_t hb_ms;           /* the interval tenbind asked for */
  unsigned fails;          /* failed heartbeats in a row */
  int reachable;           /* the last call to tenbind got an answer */
  int64_t down_since;      /* monotonic ms of the first failure, or 0 */
  int64_t down_warned;     /* monotonic ms of the last warning */
  uint64_t rng;            /* jitter (xorshift64) */
  struct node_interruption intr;
  int has_intr;
  int stopping;            /* tenbind said stop */
  int stop_tries;
  int exited;              /* on_exit was called */
  void (*on_exit)(void *arg, int status);
  void *on_exit_arg;
  int closing;
  int pending;             /* handles, requests and work not yet ended */
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* One read of a job's log and the PUT that carries it. */
struct log_chunk {
  uv_work_t work;
  struct node_agent *a;
  int64_t job_id;
  char *path;
  uint64_t off;            /* where the bytes start */
  char *data;              /* the bytes read (new), or NULL */
  size_t n;
  uint64_t size;           /* the file's size when it was read */
  int final;               /* the job had ended before the read began:
                              what it found is all there will be */
  int rc;
  struct err e;
};

/* ---- small things ---- */

int
node_provider_parse(const char *s, enum node_provider *out)
{
  static const char *const names[] = {"none", "aws", "gcp", "azure"};

  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (s != NULL && strcmp(s, names[i]) == 0) {
      *out = (enum node_provider)i;
      return 0;
    }
  }
  return ERR_INVALID;
}

const char *
node_provider_name(enum node_provider p)
{
  switch (p) {
  case NODE_PROVIDER_AWS:
    return "aws";
  case NODE_PROVIDER_GCP:
    return "gcp";
  case NODE_PROVIDER_AZURE:
    return "azure";
  default:
    return "none";
  }
}

/* obj[key] = s as JSON text (null for NULL), made valid UTF-8 first:
 * reasons and paths come from jobs and files. */
static void
set_text(json_t *obj, const char *key, const char *s)
{
  char *copy;

  if (s == NULL) {
    json_object_set_new(obj, key, json_null());
    return;
  }
  copy = xstrdup(s);
  utf8_repair(copy);
  json_object_set_new(obj, key, json_string(copy));
  free(copy);
}

static uint64_t
next_random(struct node_agent *a)
{
  uint64_t x = a->rng;

  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  a->rng = x;
  return x;
}

/* The wait before retry n (1, 2, ...): doubling from backoff_ms, capped,
 * and drawn from its upper half so that VMs that lost tenbind together
 * do not come back in step. */
static uint64_t
backoff_delay(struct node_agent *a, unsigned n)
{
  uint64_t d = a->backoff_ms;

  for (unsigned i = 1; i < n && d < MAX_BACKOFF_MS; i++)
    d *= 2;
  if (d > MAX_BACKOFF_MS)
    d = MAX_BACKOFF_MS;
  return d / 2 + next_random(a) % (d / 2 + 1);
}

/* A URL as the config may give it: http(s), capped, no blanks. */
static int
check_url(const char *what, const char *url, struct err *e)
{
  size_t n;

  if (url == NULL || url[0] == '\0')
    return err_set(e, ERR_CONFIG, "%s: a URL is required", what);
  n = strlen(url);
  if (n > URL_MAX)
    return err_set(e, ERR_CONFIG, "%s: longer than %d characters", what,
                   URL_MAX);
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
    return err_set(e, ERR_CONFIG, "%s '%.100s': want http:// or https://",
                   what, url);
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f)
      return err_set(e, ERR_CONFIG, "%s '%.100s': holds a blank or a "
                     "control character", what, url);
  }
  return 0;
}

/* A new copy of url without trailing slashes. */
static char *
url_base(const char *url)
{
  char *s = xstrdup(url);
  size_t n = strlen(s);

  while (n > 0 && s[n - 1] == '/')
    s[--n] = '\0';
  return s;
}

int
node_gpus_config(const char *spec, json_t **out, struct err *e)
{
  json_t *obj = NULL;
  const char *p = spec;
  int n = 0;
  int rc = ERR_CONFIG;

  if (spec == NULL || strcmp(spec, "auto") == 0) {
    *out = json_string("auto");
    return 0;
  }
  obj = json_object();
  if (strcmp(spec, "none") == 0)
    goto done;
  if (strlen(spec) > 256) {
    err_set(e, ERR_CONFIG, "--gpus: longer than 256 characters");
    goto out;
  }
  while (*p != '\0') {
    const char *colon = strchr(p, ':');
    const char *comma = strchr(p, ',');
    const char *end = comma != NULL ? comma : p + strlen(p);
    char type[ADAPTER_GPU_TYPE_LEN];
    char *num_end;
    long count;

    if (colon == NULL || colon > end || colon == p ||
        (size_t)(colon - p) >= sizeof(type)) {
      err_set(e, ERR_CONFIG, "--gpus '%.64s': want auto, none or TYPE:N[,"
              "TYPE:N] such as h100:8", spec);
      goto out;
    }
    memcpy(type, p, (size_t)(colon - p));
    type[colon - p] = '\0';
    errno = 0;
    count = strtol(colon + 1, &num_end, 10);
    if (num_end == colon + 1 || num_end != end || errno != 0 || count < 0 ||
        count > JOBSPEC_MAX_GPUS) {
      err_set(e, ERR_CONFIG, "--gpus '%.64s': the count of '%s' must be 0 "
              "to %d", spec, type, JOBSPEC_MAX_GPUS);
      goto out;
    }
    if (json_object_get(obj, type) != NULL || ++n > ADAPTER_MAX_POOLS) {
      err_set(e, ERR_CONFIG, "--gpus '%.64s': types must differ, at most "
              "%d of them", spec, ADAPTER_MAX_POOLS);
      goto out;
    }
    json_object_set_new(obj, type, json_integer(count));
    p = comma != NULL ? comma + 1 : end;
    if (comma != NULL && *p == '\0') {
      err_set(e, ERR_CONFIG, "--gpus '%.64s': ends with ','", spec);
      goto out;
    }
  }
done:
  *out = obj;
  obj = NULL;
  rc = 0;
out:
  json_decref(obj);
  return rc;
}

/* ---- the heartbeat answer ---- */

void
node_answer_release(struct node_answer *a)
{
  if (a == NULL)
    return;
  free(a->assign);
  free(a->cancel);
  free(a->ack);
  json_decref(a->root);
  memset(a, 0, sizeof(*a));
}

/* obj[key], an array of at most max entries or absent: *out borrowed,
 * NULL when absent or null. */
static int
get_array(const json_t *obj, const char *key, size_t max, json_t **out,
          struct err *e)
{
  json_t *v = json_object_get(obj, key);

  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_array(v))
    return err_set(e, ERR_INVALID, "field '%s' must be an array", key);
  if (json_array_size(v) > max)
    return err_set(e, ERR_INVALID, "field '%s' has %zu entries, at most %zu",
                   key, json_array_size(v), max);
  *out = v;
  return 0;
}

static int
positive_id(const json_t *v, int64_t *out)
{
  if (!json_is_integer(v) || json_integer_value(v) <= 0)
    return ERR_INVALID;
  *out = json_integer_value(v);
  return 0;
}

/* assign[i].dataset into *out (borrowed from item); absent or null is
 * none.  Each field is checked as the pull will use it. */
static int
get_dataset(const json_t *item, size_t i, struct node_dataset *out,
            struct err *e)
{
  const json_t *d = json_object_get(item, "dataset");
  char what[64];
  size_t n;

  memset(out, 0, sizeof(*out));
  if (d == NULL || json_is_null(d))
    return 0;
  if (!json_is_object(d))
    return err_set(e, ERR_INVALID, "field 'assign[%zu].dataset' must be "
                   "an object", i);
  out->name = jsonx_str(d, "name");
  out->version = jsonx_str(d, "version");
  out->url = jsonx_str(d, "url");
  out->token = jsonx_str(d, "token");
  if (out->name == NULL || !syncpath_valid_name(out->name))
    return err_set(e, ERR_INVALID, "field 'assign[%zu].dataset.name' must "
                   "match [A-Za-z0-9][A-Za-z0-9._-]{0,63}", i);
  if (out->version == NULL || !agentc_valid_version(out->version))
    return err_set(e, ERR_INVALID, "field 'assign[%zu].dataset.version' "
                   "must be 64 lowercase hex digits", i);
  snprintf(what, sizeof(what), "field 'assign[%zu].dataset.url'", i);
  if (check_url(what, out->url, e) < 0) {
    if (e != NULL)
      e->code = ERR_INVALID;
    return ERR_INVALID;
  }
  n = out->token != NULL ? strlen(out->token) : 0;
  if (n == 0 || n > TOKEN_MAX)
    return err_set(e, ERR_INVALID, "field 'assign[%zu].dataset.token' must "
                   "have 1 to %d characters", i, TOKEN_MAX);
  /* It goes into a header line. */
  for (size_t k = 0; k < n; k++) {
    if ((unsigned char)out->token[k] <= 0x20 ||
        (unsigned char)out->token[k] >= 0x7f)
      return err_set(e, ERR_INVALID, "field 'assign[%zu].dataset.token' "
                     "holds a blank or a character that is not printable "
                     "ASCII", i);
  }
  return 0;
}

/* An array of positive ids into a new array (*out; NULL when empty). */
static int
get_ids(const json_t *obj, const char *key, int64_t **out, size_t *n,
        struct err *e)
{
  json_t *arr;
  json_t *v;
  size_t i;
  int rc;

  *out = NULL;
  *n = 0;
  rc = get_array(obj, key, NODE_MAX_IDS, &arr, e);
  if (rc < 0 || arr == NULL || json_array_size(arr) == 0)
    return rc;
  *out = xcalloc(json_array_size(arr), sizeof(**out));
  json_array_foreach(arr, i, v) {
    if (positive_id(v, &(*out)[i]) < 0) {
      free(*out);
      *out = NULL;
      return err_set(e, ERR_INVALID, "field '%s[%zu]' must be a positive "
                     "integer", key, i);
    }
  }
  *n = json_array_size(arr);
  return 0;
}

int
node_answer_parse(const char *body, size_t len, struct node_answer *out,
                  struct err *e)
{
  struct node_answer a;
  json_t *v;
  json_t *arr;
  json_t *item;
  size_t i;
  int rc;

  memset(&a, 0, sizeof(a));
  if (len > NODE_ANSWER_MAX)
    return err_set(e, ERR_TOO_LARGE, "answer: larger than %u bytes",
                   NODE_ANSWER_MAX);
  rc = jsonx_parse_object(body, len, &a.root, e);
  if (rc < 0)
    return rc;
  rc = ERR_INVALID;
  a.heartbeat_ms = NODE_HEARTBEAT_DEFAULT_MS;
  v = json_object_get(a.root, "heartbeat_ms");
  if (v != NULL && !json_is_null(v)) {
    if (!json_is_integer(v)) {
      err_set(e, ERR_INVALID, "field 'heartbeat_ms' must be an integer");
      goto out;
    }
    a.heartbeat_ms = json_integer_value(v);
    if (a.heartbeat_ms < NODE_HEARTBEAT_MIN_MS)
      a.heartbeat_ms = NODE_HEARTBEAT_MIN_MS;
    if (a.heartbeat_ms > NODE_HEARTBEAT_MAX_MS)
      a.heartbeat_ms = NODE_HEARTBEAT_MAX_MS;
  }
  v = json_object_get(a.root, "stop");
  if (v != NULL && !json_is_null(v)) {
    if (!json_is_boolean(v)) {
      err_set(e, ERR_INVALID, "field 'stop' must be a boolean");
      goto out;
    }
    a.stop = json_is_true(v);
  }
  if (get_array(a.root, "assign", NODE_MAX_ASSIGN, &arr, e) < 0)
    goto out;
  if (arr != NULL && json_array_size(arr) > 0) {
    a.assign = xcalloc(json_array_size(arr), sizeof(*a.assign));
    json_array_foreach(arr, i, item) {
      if (!json_is_object(item) ||
          positive_id(json_object_get(item, "id"), &a.assign[i].id) < 0) {
        err_set(e, ERR_INVALID, "field 'assign[%zu].id' must be a positive "
                "integer", i);
        goto out;
      }
      a.assign[i].spec = json_object_get(item, "spec");
      if (!json_is_object(a.assign[i].spec)) {
        err_set(e, ERR_INVALID, "field 'assign[%zu].spec' must be an "
                "object", i);
        goto out;
      }
      if (get_dataset(item, i, &a.assign[i].dataset, e) < 0)
        goto out;
      a.nassign++;
    }
  }
  if (get_ids(a.root, "cancel", &a.cancel, &a.ncancel, e) < 0 ||
      get_ids(a.root, "ack", &a.ack, &a.nack, e) < 0)
    goto out;
  *out = a;
  memset(&a, 0, sizeof(a));
  rc = 0;
out:
  node_answer_release(&a);
  return rc;
}

/* ---- jobs ---- */

#define JOB_OF(q) LIST_ENTRY(q, struct node_job, link)

static struct node_job *
find_job(struct node_agent *a, int64_t id)
{
  struct list *q;

  LIST_FOREACH(q, &a->jobs) {
    if (JOB_OF(q)->id == id)
      return JOB_OF(q);
  }
  return NULL;
}

static int
was_forgotten(const struct node_agent *a, int64_t id)
{
  size_t n = a->nforgotten < FORGOTTEN_MAX ? a->nforgotten : FORGOTTEN_MAX;

  for (size_t i = 0; i < n; i++) {
    if (a->forgotten[i] == id)
      return 1;
  }
  return 0;
}

/* Whether the heartbeat reports j's final state: only once its whole
 * log is with tenbind. */
static int
reported_final(const struct node_job *j)
{
  return job_state_is_final(j->state) && j->log_done;
}

static void
free_job(struct node_job *j)
{
  if (j == NULL)
    return;
  list_remove(&j->link);
  json_decref(j->spec);
  free(j->ds);
  free(j->ds_dir);
  free(j->reason);
  free(j->alloc);
  free(j->log_path);
  free(j);
}

static void
forget_job(struct node_agent *a, struct node_job *j)
{
  a->forgotten[a->nforgotten++ % FORGOTTEN_MAX] = j->id;
  a->njobs--;
  free_job(j);
}

static void heartbeat_soon(struct node_agent *a);
static void log_kick(struct node_agent *a, struct node_job *j);

/* j ended here (or never started): state st, why. */
static void
job_end(struct node_job *j, enum job_state st, const char *reason,
        int exit_code, int sig, int64_t at_ms)
{
  j->state = st;
  free(j->reason);
  j->reason = xstrdup(reason);
  j->exit_code = exit_code;
  j->sig = sig;
  j->end_ms = at_ms > 0 ? at_ms : time_now_ms();
}

/* No more log will go for j: report its final state if it has one. */
static void
log_finished(struct node_agent *a, struct node_job *j)
{
  j->log_done = 1;
  if (job_state_is_final(j->state))
    heartbeat_soon(a);
}

/* The local adapter's updates, in the order they happened. */
static void
on_site_update(void *arg, const struct adapter_update *u, size_t n)
{
  struct node_agent *a = arg;

  for (size_t i = 0; i < n; i++) {
    struct node_job *j = find_job(a, u[i].job_id);

    if (j == NULL || job_state_is_final(j->state)) {
      log_debug("node: update for job %lld not held or already ended",
                (long long)u[i].job_id);
      continue;
    }
    if (u[i].alloc != NULL) {
      free(j->alloc);
      j->alloc = xstrdup(u[i].alloc);
    }
    if (u[i].log_path != NULL && j->log_path == NULL)
      j->log_path = xstrdup(u[i].log_path);
    if (u[i].state == JOB_QUEUED) {
      /* Only an adopted job that never started says this. */
      job_end(j, JOB_LOST, "never started on the node", -1, 0, u[i].at_ms);
    } else if (job_state_is_final(u[i].state)) {
      job_end(j, u[i].state, u[i].reason, u[i].exit_code, u[i].signal,
              u[i].at_ms);
    } else {
      if (u[i].at_ms > 0 && u[i].state == JOB_RUNNING)
        j->run_ms = u[i].at_ms;
      continue;
    }
    log_info("node: job %lld ended %s: %s", (long long)j->id,
             job_state_name(j->state), j->reason != NULL ? j->reason : "");
    /* The rest of its log goes now; then the heartbeat says it ended. */
    if (j->log_path == NULL)
      log_finished(a, j);
    else
      log_kick(a, j);
  }
}

/* ---- the log ---- */

static void
log_chunk_free(struct log_chunk *c)
{
  free(c->path);
  free(c->data);
  free(c);
}

/* The thread pool: read up to NODE_LOG_CHUNK bytes from c->off. */
static void
log_read_work(uv_work_t *w)
{
  struct log_chunk *c = w->data;
  struct stat st;
  size_t want;
  int fd;

  /* The job chooses this path: a fifo must not block the pool, and a
   * link put there does not lead elsewhere. */
  fd = file_open_regular(c->path, O_RDONLY | O_NOFOLLOW, &c->e);
  if (fd < 0) {
    c->rc = fd;
    return;
  }
  if (fstat(fd, &st) < 0) {
    c->rc = err_set(&c->e, ERR_IO, "cannot stat '%s': %s", c->path,
                    strerror(errno));
    goto out;
  }
  c->size = (uint64_t)st.st_size;
  if (c->size <= c->off)
    goto out;
  want = c->size - c->off > NODE_LOG_CHUNK ? NODE_LOG_CHUNK
                                           : (size_t)(c->size - c->off);
  c->data = xmalloc(want);
  while (c->n < want) {
    ssize_t r = pread(fd, c->data + c->n, want - c->n,
                      (off_t)(c->off + c->n));

    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      c->rc = err_set(&c->e, ERR_IO, "cannot read '%s': %s", c->path,
                      strerror(errno));
      goto out;
    }
    if (r == 0)
      break;
    c->n += (size_t)r;
  }
out:
  close(fd);
}

static void node_exit(struct node_agent *a, int status);
static void maybe_finish(struct node_agent *a);
static void mark_down(struct node_agent *a, const char *why);

/* A log send failed in a way that may pass.  Only tenbind's own
 * refusals count towards giving up: a network that is down is waited
 * out like it is for the heartbeat. */
static void
log_failed(struct node_agent *a, struct node_job *j, const char *why,
           int counts)
{
  if (counts)
    j->log_fails++;
  if (!j->log_warned) {
    j->log_warned = 1;
    log_warn("node: job %lld: log: %s (tried again)", (long long)j->id, why);
  }
  if (job_state_is_final(j->state) && j->log_fails >= LOG_MAX_FAILS) {
    log_warn("node: job %lld: its log stops at %llu bytes after %d failed "
             "sends; reporting its end", (long long)j->id,
             (unsigned long long)j->log_off, j->log_fails);
    log_finished(a, j);
  }
}

/* tenbind's word on what it holds: {"size": N} with N >= 0. */
static int
answer_size(const struct http_client_response *resp, uint64_t *size)
{
  json_t *obj = NULL;
  json_t *v;
  int rc = ERR_INVALID;

  if (resp->len > LOG_ANSWER_MAX ||
      jsonx_parse_object(resp->body, resp->len, &obj, NULL) < 0)
    return ERR_INVALID;
  v = json_object_get(obj, "size");
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *size = (uint64_t)json_integer_value(v);
    rc = 0;
  }
  json_decref(obj);
  return rc;
}

static void
on_log_put(void *arg, int rc, const struct http_client_response *resp,
           const struct err *e)
{
  struct log_chunk *c = arg;
  struct node_agent *a = c->a;
  struct node_job *j;
  uint64_t size;
  char why[ERR_MSG_SIZE + 32];

  a->pending--;
  j = a->closing || a->exited ? NULL : find_job(a, c->job_id);
  if (j == NULL)
    goto out;
  j->log_busy = 0;
  if (rc < 0) {
    mark_down(a, err_msg(e));
    log_failed(a, j, err_msg(e), 0);
    goto out;
  }
  if (resp->status == 401) {
    log_error("node: tenbind refused the node token (401 on a log)");
    node_exit(a, NODE_EXIT_REFUSED);
    goto out;
  }
  if (resp->status == 200 || resp->status == 409) {
    if (answer_size(resp, &size) < 0) {
      log_failed(a, j, "an answer without its size", 1);
      goto out;
    }
    j->log_off = size;
    j->log_fails = 0;
    if (resp->status == 409) {
      /* tenbind holds other than we thought: go on from what it has. */
      log_debug("node: job %lld: log resumes at %llu", (long long)j->id,
                (unsigned long long)size);
      if (++j->log_conflicts > LOG_MAX_CONFLICTS)
        goto out;
    } else {
      j->log_conflicts = 0;
    }
    if (c->final && j->log_off >= c->size && resp->status == 200)
      log_finished(a, j);
    else if (j->log_off < c->size || resp->status == 409 ||
             job_state_is_final(j->state))
      log_kick(a, j);
    goto out;
  }
  snprintf(why, sizeof(why), "tenbind answered %d", resp->status);
  if (resp->status >= 500) {
    log_failed(a, j, why, 1);
  } else {
    struct err pe = {0};

    /* tenbind will not take this log (gone, too large...): the job's
     * state still matters more than the rest of its output. */
    if (http_error_parse(resp->body, resp->len, &pe) < 0)
      snprintf(why, sizeof(why), "tenbind answered %d: %s", resp->status,
               err_msg(&pe));
    log_warn("node: job %lld: log not sent further: %s", (long long)j->id,
             why);
    log_finished(a, j);
  }
out:
  log_chunk_free(c);
  maybe_finish(a);
}

static void
log_put(struct node_agent *a, struct node_job *j, struct log_chunk *c)
{
  struct http_client_request r;
  const char *headers[] = {a->auth, "Content-Type: application/octet-stream",
                           NULL};
  struct err e = {0};
  char *url;
  size_t n = strlen(a->server) + 96;

  url = xmalloc(n);
  snprintf(url, n, "%s/v1/nodes/jobs/%lld/log?offset=%llu", a->server,
           (long long)j->id, (unsigned long long)c->off);
  memset(&r, 0, sizeof(r));
  r.method = "PUT";
  r.url = url;
  r.headers = headers;
  r.body = c->data;
  r.body_len = c->n;
  r.timeout_ms = LOG_TIMEOUT_MS;
  r.max_response = LOG_ANSWER_MAX;
  if (http_client_send(a->client, &r, on_log_put, c, &e) < 0) {
    log_failed(a, j, err_msg(&e), 1);
    log_chunk_free(c);
  } else {
    /* The client copied the body. */
    free(c->data);
    c->data = NULL;
    j->log_busy = 1;
    a->pending++;
  }
  free(url);
}

static void
after_log_read(uv_work_t *w, int status)
{
  struct log_chunk *c = w->data;
  struct node_agent *a = c->a;
  struct node_job *j;

  (void)status;
  a->pending--;
  j = a->closing || a->exited ? NULL : find_job(a, c->job_id);
  if (j == NULL)
    goto drop;
  j->log_busy = 0;
  if (c->rc < 0 && c->rc != ERR_NOT_FOUND && !j->log_warned) {
    j->log_warned = 1;
    log_warn("node: job %lld: log: %s", (long long)j->id, err_msg(&c->e));
  }
  if (c->rc < 0 || c->n == 0) {
    /* Nothing to send.  After the job ended that is final: all of it is
     * with tenbind (or tenbind claims more than there is, or the file
     * never came or cannot be read, and the job's state matters more).
     * A job that ended during the read is read once more. */
    if (c->final)
      log_finished(a, j);
    else if (job_state_is_final(j->state))
      log_kick(a, j);
    goto drop;
  }
  log_put(a, j, c);
  maybe_finish(a);
  return;
drop:
  log_chunk_free(c);
  maybe_finish(a);
}

/* Read and send j's next log bytes, unless that is under way already. */
static void
log_kick(struct node_agent *a, struct node_job *j)
{
  struct log_chunk *c;

  if (a->closing || a->exited || j->log_busy || j->log_done ||
      j->log_path == NULL)
    return;
  c = xcalloc(1, sizeof(*c));
  c->a = a;
  c->job_id = j->id;
  c->path = xstrdup(j->log_path);
  c->off = j->log_off;
  c->final = job_state_is_final(j->state);
  c->work.data = c;
  j->log_busy = 1;
  a->pending++;
  /* uv_queue_work fails only for a NULL work_cb. */
  if (uv_queue_work(a->loop, &c->work, log_read_work, after_log_read) != 0)
    abort();
}

static void
on_log_tick(uv_timer_t *t)
{
  struct node_agent *a = t->data;
  struct list *q;

  /* While tenbind cannot be reached, only the heartbeat knocks. */
  if (!a->reachable)
    return;
  LIST_FOREACH(q, &a->jobs)
    log_kick(a, JOB_OF(q));
}

/* ---- applying an answer ---- */

static void
cancel_job(struct node_agent *a, struct node_job *j)
{
  struct adapter_job aj = {.id = j->id};
  struct err e = {0};

  if (job_state_is_final(j->state) || j->cancel_sent)
    return;
  if (!j->submitted && j->spec != NULL) {
    /* Still waiting for its dataset (or for room): nothing runs yet.
     * The pull goes on; another job may want the version. */
    j->pulling = 0;
    job_end(j, JOB_CANCELLED, "cancelled before it started", -1, 0, 0);
    log_finished(a, j);
    log_info("node: job %lld cancelled before it started",
             (long long)j->id);
    return;
  }
  if (!j->submitted)
    return;
  if (adapter_local_ops.cancel(a->site, &aj, &e) < 0) {
    log_warn("node: job %lld: cannot cancel: %s", (long long)j->id,
             err_msg(&e));
    return;
  }
  j->cancel_sent = 1;
  log_info("node: job %lld: cancelling", (long long)j->id);
}

/* Set or replace KEY=value in a job's environment. */
static void
env_set(char ***env, const char *key, const char *value)
{
  size_t klen = strlen(key);
  size_t n = klen + strlen(value) + 2;
  char *kv = xmalloc(n);

  snprintf(kv, n, "%s=%s", key, value);
  for (size_t i = 0; *env != NULL && (*env)[i] != NULL; i++) {
    if (strncmp((*env)[i], key, klen) == 0 && (*env)[i][klen] == '=') {
      free((*env)[i]);
      (*env)[i] = kv;
      return;
    }
  }
  strv_push(env, kv);
  free(kv);
}

/*
 * Hand j (its spec from specj) to the local adapter, with its dataset's
 * directory when it has one.  0 started; ERR_UNAVAILABLE when the GPUs
 * are busy now; another code with why (whylen bytes) when it cannot run.
 */
static int
job_submit(struct node_agent *a, struct node_job *j, const json_t *specj,
           char *why, size_t whylen)
{
  struct job_spec spec;
  struct adapter_job aj;
  struct err e = {0};
  int rc;

  jobspec_init(&spec);
  rc = jobspec_from_json(&spec, specj, NULL, &e);
  if (rc < 0) {
    snprintf(why, whylen, "spec: %s", err_msg(&e));
    goto out;
  }
  if (j->ds_dir != NULL) {
    env_set(&spec.env, "TENBIN_DATASET_DIR", j->ds_dir);
    env_set(&spec.env, "TENBIN_DATASET", j->ds);
  }
  memset(&aj, 0, sizeof(aj));
  aj.id = j->id;
  aj.spec = &spec;
  rc = adapter_local_ops.submit(a->site, &aj, &e);
  if (rc == ERR_CONFLICT) {
    /* A shim from an earlier agent runs it still: watch that one. */
    err_clear(&e);
    rc = adapter_local_ops.adopt(a->site, &aj, &e);
  }
  if (rc < 0)
    snprintf(why, whylen, "%s", err_msg(&e));
out:
  jobspec_release(&spec);
  return rc;
}

/* 0 when specj reads as a job spec, else a code with why. */
static int
spec_check(const json_t *specj, char *why, size_t whylen)
{
  struct job_spec spec;
  struct err e = {0};
  int rc;

  jobspec_init(&spec);
  rc = jobspec_from_json(&spec, specj, NULL, &e);
  if (rc < 0)
    snprintf(why, whylen, "spec: %s", err_msg(&e));
  jobspec_release(&spec);
  return rc;
}

/* j could not run: it ended failed, why, and tenbind hears of it. */
static void
job_cannot_run(struct node_agent *a, struct node_job *j, const char *why)
{
  log_warn("node: job %lld cannot run: %s", (long long)j->id, why);
  job_end(j, JOB_FAILED, why, -1, 0, 0);
  j->log_done = 1;
  heartbeat_soon(a);
}

/* Start j, whose version is here, unless the GPUs are busy: then it
 * waits, held, for the next heartbeat's answer to try again (tenbind
 * assigns it no more: it saw it). */
static void
start_pulled(struct node_agent *a, struct node_job *j)
{
  char why[ERR_MSG_SIZE + 16];
  int rc = job_submit(a, j, j->spec, why, sizeof(why));

  if (rc == ERR_UNAVAILABLE) {
    log_debug("node: job %lld waits for room: %s", (long long)j->id, why);
    return;
  }
  json_decref(j->spec);
  j->spec = NULL;
  if (rc < 0) {
    job_cannot_run(a, j, why);
    return;
  }
  j->submitted = 1;
  j->run_ms = time_now_ms();
  log_info("node: job %lld started, with %s in %s", (long long)j->id, j->ds,
           j->ds_dir);
  heartbeat_soon(a);
}

/* What agent_pull calls back with: the job id, not the job, which may
 * be gone by then. */
struct pull_wait {
  struct node_agent *a;
  int64_t job_id;
};

static void
on_pulled(void *arg, const struct agent_pull_end *end)
{
  struct pull_wait *w = arg;
  struct node_agent *a = w->a;
  struct node_job *j;
  char why[ERR_MSG_SIZE + 160];

  j = a->closing || a->exited ? NULL : find_job(a, w->job_id);
  free(w);
  /* Cancelled meanwhile, or the agent is going: nothing to start. */
  if (j == NULL || !j->pulling)
    return;
  j->pulling = 0;
  if (j->own_pull)
    j->pulled_bytes = (int64_t)end->bytes_wire;
  if (!end->complete) {
    j->pull_failed = 1;
    snprintf(why, sizeof(why), "dataset %.140s: the pull failed: %s",
             j->ds, end->error != NULL ? end->error : "no reason given");
    json_decref(j->spec);
    j->spec = NULL;
    job_cannot_run(a, j, why);
    return;
  }
  log_info("node: job %lld: %s is here (%llu bytes on the wire)",
           (long long)j->id, j->ds, (unsigned long long)end->bytes_wire);
  j->ds_dir = xstrdup(end->path);
  start_pulled(a, j);
}

/* Pull as's dataset for j (held, its spec kept): it starts when the
 * version is here.  0, or a code with why (whylen bytes). */
static int
pull_dataset(struct node_agent *a, struct node_job *j,
             const struct node_assign *as, char *why, size_t whylen)
{
  const struct node_dataset *d = &as->dataset;
  char path[PATH_MAX];
  struct pull_wait *w = xcalloc(1, sizeof(*w));
  struct agent_pull_req r = {.name = d->name,
                             .version = d->version,
                             .src_url = d->url,
                             .src_token = d->token,
                             .cb = on_pulled,
                             .arg = w};
  struct err e = {0};
  size_t n = strlen(d->name) + strlen(d->version) + 2;
  int rc;

  j->ds = xmalloc(n);
  snprintf(j->ds, n, "%s@%s", d->name, d->version);
  j->spec = json_incref(as->spec);
  w->a = a;
  w->job_id = j->id;
  rc = agent_pull(a->data, &r, path, sizeof(path), &e);
  if (rc < 0) {
    free(w);
    snprintf(why, whylen, "dataset %.140s: %s", j->ds, err_msg(&e));
    return rc;
  }
  if (rc == AGENT_PULL_HELD) {
    /* Pulled for an earlier job: nothing moves. */
    free(w);
    j->ds_dir = xstrdup(path);
    return 0;
  }
  j->pulling = 1;
  j->own_pull = rc == AGENT_PULL_STARTED;
  log_info("node: job %lld waits for %s from %s", (long long)j->id, j->ds,
           d->url);
  return 0;
}

static void
take_assignment(struct node_agent *a, const struct node_assign *as)
{
  struct node_job *j;
  char why[ERR_MSG_SIZE + 160];
  int rc;

  if (find_job(a, as->id) != NULL)
    return; /* a repeat until the heartbeat reports it */
  if (was_forgotten(a, as->id)) {
    log_warn("node: job %lld was acknowledged already; its assignment "
             "again is ignored", (long long)as->id);
    return;
  }
  if (a->stopping)
    return;
  if (a->njobs >= NODE_MAX_JOBS) {
    log_warn("node: holding %d jobs; job %lld waits", NODE_MAX_JOBS,
             (long long)as->id);
    return;
  }
  j = xcalloc(1, sizeof(*j));
  list_init(&j->link);
  j->id = as->id;
  j->state = JOB_RUNNING;
  j->exit_code = -1;
  j->run_ms = time_now_ms();
  if (as->dataset.name != NULL) {
    /* Held from now on, whatever comes: tenbind sees it "submitted"
     * while the version comes, and assigns it no more.  A spec that
     * can never run is said so before anything moves. */
    rc = spec_check(as->spec, why, sizeof(why));
    if (rc == 0)
      rc = pull_dataset(a, j, as, why, sizeof(why));
    if (rc < 0)
      goto failed;
    if (!j->pulling)
      start_pulled(a, j);
    goto held;
  }
  rc = job_submit(a, j, as->spec, why, sizeof(why));
  if (rc == ERR_UNAVAILABLE) {
    /* No room now: not held, so tenbind assigns it again. */
    log_info("node: job %lld waits: %s", (long long)as->id, why);
    free_job(j);
    return;
  }
  if (rc < 0)
    goto failed;
  j->submitted = 1;
  log_info("node: job %lld started", (long long)j->id);
  goto held;
failed:
  json_decref(j->spec);
  j->spec = NULL;
  log_warn("node: job %lld cannot run: %s", (long long)j->id, why);
  job_end(j, JOB_FAILED, why, -1, 0, 0);
  j->log_done = 1;
held:
  list_insert_tail(&a->jobs, &j->link);
  a->njobs++;
  heartbeat_soon(a);
}

static int
all_reported_final(const struct node_agent *a)
{
  const struct list *q;

  LIST_FOREACH(q, &a->jobs) {
    if (!reported_final(JOB_OF(q)))
      return 0;
  }
  return 1;
}

static void
begin_stop(struct node_agent *a)
{
  struct list *q;

  if (a->stopping)
    return;
  a->stopping = 1;
  log_info("node: tenbind retires this node: cancelling its jobs");
  LIST_FOREACH(q, &a->jobs)
    cancel_job(a, JOB_OF(q));
  heartbeat_soon(a);
}

static void
apply_answer(struct node_agent *a, const struct node_answer *ans)
{
  struct node_job *j;
  struct list *q;

  a->hb_ms = ans->heartbeat_ms;
  for (size_t i = 0; i < ans->nack; i++) {
    j = find_job(a, ans->ack[i]);
    if (j != NULL && reported_final(j))
      forget_job(a, j);
    else if (j != NULL)
      log_warn("node: tenbind acknowledged job %lld, which has not ended "
               "here", (long long)ans->ack[i]);
  }
  for (size_t i = 0; i < ans->ncancel; i++) {
    j = find_job(a, ans->cancel[i]);
    if (j != NULL)
      cancel_job(a, j);
  }
  for (size_t i = 0; i < ans->nassign; i++)
    take_assignment(a, &ans->assign[i]);
  if (ans->stop)
    begin_stop(a);
  /* Jobs whose version is here but whose GPUs were busy: again. */
  LIST_FOREACH(q, &a->jobs) {
    j = JOB_OF(q);
    if (j->spec != NULL && !j->pulling && j->ds_dir != NULL &&
        !job_state_is_final(j->state))
      start_pulled(a, j);
  }
}

/* ---- the heartbeat ---- */

static json_t *
job_json(const struct node_job *j)
{
  int final = reported_final(j);
  /* Not started yet: its dataset comes, or its GPUs are busy. */
  int waiting = !final && !j->submitted && j->spec != NULL;
  json_t *o = json_object();
  char why[256];

  json_object_set_new(o, "id", json_integer(j->id));
  json_object_set_new(o, "state", json_string(job_state_name(
                                      final     ? j->state
                                      : waiting ? JOB_SUBMITTED
                                                : JOB_RUNNING)));
  json_object_set_new(o, "exit_code", json_integer(final ? j->exit_code
                                                         : -1));
  json_object_set_new(o, "signal", json_integer(final ? j->sig : 0));
  if (waiting) {
    snprintf(why, sizeof(why), j->pulling ? "pulling dataset %.140s onto "
             "the node" : "dataset %.140s pulled; waiting for GPUs", j->ds);
    set_text(o, "reason", why);
  } else {
    set_text(o, "reason", final ? j->reason : NULL);
  }
  set_text(o, "alloc", j->alloc);
  json_object_set_new(o, "at_ms", json_integer(final ? j->end_ms
                                                     : j->run_ms));
  if (final && j->ds != NULL) {
    json_object_set_new(o, "pulled_bytes", json_integer(j->pulled_bytes));
    json_object_set_new(o, "pull_failed", json_boolean(j->pull_failed));
  }
  return o;
}

static json_t *
heartbeat_json(struct node_agent *a)
{
  struct adapter_capacity cap;
  json_t *body = json_object();
  json_t *jobs = json_array();
  struct list *q;
  int64_t gpus = 0;

  adapter_local_ops.capacity(a->site, &cap);
  for (int i = 0; i < cap.npools; i++)
    gpus += cap.pools[i].total;
  set_text(body, "hostname", a->hostname);
  set_text(body, "agent_version", a->version);
  json_object_set_new(body, "gpus", json_integer(gpus));
  /* A VM has one kind of GPU; were there more, the first is named. */
  set_text(body, "gpu_type", cap.npools > 0 ? cap.pools[0].type : NULL);
  LIST_FOREACH(q, &a->jobs)
    json_array_append_new(jobs, job_json(JOB_OF(q)));
  json_object_set_new(body, "jobs", jobs);
  if (a->has_intr) {
    json_t *i = json_object();

    json_object_set_new(i, "provider",
                        json_string(node_provider_name(a->intr.provider)));
    set_text(i, "notice", a->intr.notice);
    json_object_set_new(i, "ends_ms", json_integer(a->intr.ends_ms));
    json_object_set_new(body, "interruption", i);
  } else {
    json_object_set_new(body, "interruption", json_null());
  }
  return body;
}

static void heartbeat_failed(struct node_agent *a, const char *why);
static void on_heartbeat(void *arg, int rc,
                         const struct http_client_response *resp,
                         const struct err *e);

static int
heartbeat_send(struct node_agent *a, struct err *e)
{
  struct http_client_request r;
  const char *headers[] = {a->auth, "Content-Type: application/json",
                           "Accept: application/json", NULL};
  json_t *body;
  char *text;
  char *url;
  size_t n = strlen(a->server) + 32;
  int rc;

  if (a->closing || a->exited || a->hb_busy)
    return 0;
  body = heartbeat_json(a);
  text = jsonx_dump(body);
  url = xmalloc(n);
  snprintf(url, n, "%s/v1/nodes/heartbeat", a->server);
  memset(&r, 0, sizeof(r));
  r.method = "POST";
  r.url = url;
  r.headers = headers;
  r.body = text;
  r.body_len = strlen(text);
  r.timeout_ms = HEARTBEAT_TIMEOUT_MS;
  r.max_response = NODE_ANSWER_MAX;
  rc = http_client_send(a->client, &r, on_heartbeat, a, e);
  if (rc == 0) {
    a->hb_busy = 1;
    a->hb_again = 0;
    a->hb_last = a->stopping && all_reported_final(a);
    a->pending++;
  }
  json_decref(body);
  free(text);
  free(url);
  return rc;
}

static void
on_hb_timer(uv_timer_t *t)
{
  struct node_agent *a = t->data;
  struct err e = {0};

  if (heartbeat_send(a, &e) < 0)
    heartbeat_failed(a, err_msg(&e));
}

static void
schedule_heartbeat(struct node_agent *a, uint64_t ms)
{
  if (!a->closing && !a->exited)
    uv_timer_start(&a->hb_timer, on_hb_timer, ms, 0);
}

/* Something tenbind should hear of: at once, unless a heartbeat is in
 * flight (the next follows its answer) or tenbind is unreachable (the
 * backoff stands). */
static void
heartbeat_soon(struct node_agent *a)
{
  a->hb_again = 1;
  if (!a->hb_busy && a->fails == 0)
    schedule_heartbeat(a, 0);
}

/* A call to tenbind failed; heartbeats back off, logs wait for one to
 * get through. */
static void
mark_down(struct node_agent *a, const char *why)
{
  int64_t now = time_mono_ms();

  a->reachable = 0;
  if (a->down_since == 0) {
    a->down_since = now;
    a->down_warned = now;
    log_warn("node: tenbind: %s (retrying)", why);
  } else if (now - a->down_warned >= DOWN_WARN_MS) {
    a->down_warned = now;
    log_warn("node: tenbind unreachable for %lld minutes: %s; jobs keep "
             "running, still trying", (long long)((now - a->down_since) /
                                                  60000), why);
  }
}

static void
heartbeat_failed(struct node_agent *a, const char *why)
{
  mark_down(a, why);
  a->fails++;
  if (a->hb_last && ++a->stop_tries >= STOP_TRIES) {
    log_warn("node: the last heartbeat did not get through; exiting");
    node_exit(a, NODE_EXIT_STOPPED);
    return;
  }
  schedule_heartbeat(a, backoff_delay(a, a->fails));
}

static void
on_heartbeat(void *arg, int rc, const struct http_client_response *resp,
             const struct err *e)
{
  struct node_agent *a = arg;
  struct node_answer ans;
  struct err pe = {0};
  char why[ERR_MSG_SIZE + 32];
  struct list *q;

  a->pending--;
  a->hb_busy = 0;
  if (a->closing || a->exited)
    goto out;
  if (rc < 0) {
    heartbeat_failed(a, err_msg(e));
    goto out;
  }
  if (resp->status == 401) {
    log_error("node: tenbind refused the node token (401); exiting");
    node_exit(a, NODE_EXIT_REFUSED);
    goto out;
  }
  if (resp->status != 200) {
    if (http_error_parse(resp->body, resp->len, &pe) < 0)
      snprintf(why, sizeof(why), "heartbeat answered %d: %s", resp->status,
               err_msg(&pe));
    else
      snprintf(why, sizeof(why), "heartbeat answered %d", resp->status);
    heartbeat_failed(a, why);
    goto out;
  }
  if (node_answer_parse(resp->body, resp->len, &ans, &pe) < 0) {
    snprintf(why, sizeof(why), "heartbeat answer: %s", err_msg(&pe));
    heartbeat_failed(a, why);
    goto out;
  }
  if (a->down_since != 0)
    log_info("node: tenbind reached again");
  a->fails = 0;
  a->down_since = 0;
  a->reachable = 1;
  a->stop_tries = 0;
  apply_answer(a, &ans);
  node_answer_release(&ans);
  if (a->hb_last) {
    log_info("node: retired; exiting");
    node_exit(a, NODE_EXIT_STOPPED);
    goto out;
  }
  /* Logs that waited for tenbind go now. */
  LIST_FOREACH(q, &a->jobs)
    log_kick(a, JOB_OF(q));
  schedule_heartbeat(a, a->hb_again ? 0 : (uint64_t)a->hb_ms);
out:
  maybe_finish(a);
}

/* ---- the interruption notice ---- */

static void
on_interruption(void *arg, const struct node_interruption *i)
{
  struct node_agent *a = arg;

  log_warn("node: %s announces the end of this VM: %s",
           node_provider_name(i->provider), i->notice);
  a->intr = *i;
  a->has_intr = 1;
  heartbeat_soon(a);
}

/* ---- start, exit and close ---- */

static void
node_exit(struct node_agent *a, int status)
{
  if (a->exited)
    return;
  a->exited = 1;
  uv_timer_stop(&a->hb_timer);
  uv_timer_stop(&a->log_timer);
  if (a->on_exit != NULL)
    a->on_exit(a->on_exit_arg, status);
}

static int
check_config(const struct node_config *cfg, struct err *e)
{
  size_t n;
  int rc;

  rc = check_url("--server", cfg->server, e);
  if (rc == 0 && cfg->metadata_url != NULL)
    rc = check_url("metadata URL", cfg->metadata_url, e);
  if (rc < 0)
    return rc;
  if (cfg->root == NULL || cfg->root[0] == '\0')
    return err_set(e, ERR_CONFIG, "--root: a directory is required");
  if (strlen(cfg->root) > PATH_MAX / 2)
    return err_set(e, ERR_CONFIG, "--root: longer than %d characters",
                   PATH_MAX / 2);
  n = cfg->token != NULL ? strlen(cfg->token) : 0;
  if (n == 0 || n > TOKEN_MAX)
    return err_set(e, ERR_CONFIG, "the node token must have 1 to %d "
                   "characters (--token-file or TENBIN_NODE_TOKEN)",
                   TOKEN_MAX);
  for (size_t i = 0; i < n; i++) {
    /* It goes into a header line. */
    if ((unsigned char)cfg->token[i] <= 0x20 ||
        (unsigned char)cfg->token[i] >= 0x7f)
      return err_set(e, ERR_CONFIG, "the node token holds a blank or a "
                     "character that is not printable ASCII");
  }
  if ((int)cfg->provider < (int)NODE_PROVIDER_NONE ||
      (int)cfg->provider > (int)NODE_PROVIDER_AZURE)
    return err_set(e, ERR_CONFIG, "unknown provider %d", (int)cfg->provider);
  return 0;
}

static char *
own_hostname(void)
{
  char name[HOSTNAME_MAX + 1];

  if (gethostname(name, sizeof(name)) < 0)
    return xstrdup("unknown");
  name[HOSTNAME_MAX] = '\0';
  return xstrdup(name);
}

/* Open the local adapter on ROOT/node with the gpus config. */
static int
open_site(struct node_agent *a, const struct node_config *cfg,
          struct err *e)
{
  char self[PATH_MAX];
  const char *exe = cfg->self_exe;
  struct adapter_env env;
  json_t *config = NULL;
  json_t *gpus = NULL;
  char *state = NULL;
  size_t n;
  int rc;

  rc = node_gpus_config(cfg->gpus, &gpus, e);
  if (rc < 0)
    goto out;
  if (exe == NULL) {
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (len <= 0) {
      rc = err_set(e, ERR_INTERNAL, "cannot read /proc/self/exe: %s",
                   strerror(errno));
      goto out;
    }
    self[len] = '\0';
    exe = self;
  }
  n = strlen(cfg->root) + sizeof("/node");
  state = xmalloc(n);
  snprintf(state, n, "%s/node", cfg->root);
  config = json_object();
  json_object_set_new(config, "gpus", gpus);
  gpus = NULL;
  memset(&env, 0, sizeof(env));
  env.loop = a->loop;
  env.site_name = cfg->site != NULL ? cfg->site : "node";
  env.state_dir = state;
  env.self_exe = exe;
  env.instance = "node";
  env.update = on_site_update;
  env.update_arg = a;
  rc = adapter_local_ops.open(&env, config, &a->site, e);
  if (rc < 0)
    err_prefix(e, "the local adapter on '%s'", state);
out:
  json_decref(gpus);
  json_decref(config);
  free(state);
  return rc;
}

/* The agent library on ROOT/datasets, in-process and listening
 * nowhere: it pulls jobs' dataset versions, with tenbind's CA file and
 * its rule on tokens over plain http. */
static int
open_data(struct node_agent *a, const struct node_config *cfg,
          struct err *e)
{
  struct agent_config ac;
  size_t n = strlen(cfg->root) + sizeof("/datasets");
  char *dir = xmalloc(n);
  int rc;

  snprintf(dir, n, "%s/datasets", cfg->root);
  if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
    rc = err_set(e, ERR_CONFIG, "cannot create '%s': %s", dir,
                 strerror(errno));
    goto out;
  }
  memset(&ac, 0, sizeof(ac));
  ac.root = dir;
  ac.draft_ms = -1;
  ac.ca_file = cfg->ca_file;
  ac.allow_insecure_tokens = cfg->allow_insecure_tokens;
  rc = agent_start(a->loop, &ac, &a->data, e);
  if (rc < 0)
    err_prefix(e, "datasets in '%s'", dir);
out:
  free(dir);
  return rc;
}

int
node_agent_start(uv_loop_t *loop, const struct node_config *cfg,
                 struct node_agent **out, struct err *e)
{
  struct http_client_config cc;
  struct node_agent *a;
  size_t n;
  int rc;

  rc = check_config(cfg, e);
  if (rc < 0)
    return rc;
  a = xcalloc(1, sizeof(*a));
  a->loop = loop;
  list_init(&a->jobs);
  a->server = url_base(cfg->server);
  n = strlen(cfg->token) + 32;
  a->auth = xmalloc(n);
  snprintf(a->auth, n, "Authorization: Bearer %s", cfg->token);
  a->hostname = cfg->hostname != NULL ? xstrdup(cfg->hostname)
                                      : own_hostname();
  a->version = xstrdup(cfg->agent_version != NULL ? cfg->agent_version
                                                  : "unknown");
  a->log_flush_ms = cfg->log_flush_ms > 0 ? cfg->log_flush_ms
                                          : DEFAULT_LOG_FLUSH_MS;
  a->backoff_ms = cfg->backoff_ms > 0 ? cfg->backoff_ms : DEFAULT_BACKOFF_MS;
  a->hb_ms = NODE_HEARTBEAT_DEFAULT_MS;
  a->rng = (uint64_t)uv_hrtime() ^ ((uint64_t)getpid() << 32) ^
           (uint64_t)(uintptr_t)a;
  if (a->rng == 0)
    a->rng = 1;
  a->on_exit = cfg->on_exit;
  a->on_exit_arg = cfg->on_exit_arg;
  uv_timer_init(loop, &a->hb_timer);
  uv_timer_init(loop, &a->log_timer);
  a->hb_timer.data = a;
  a->log_timer.data = a;
  a->pending = 2;
  /* From here on a failure closes what is open through node_agent_close:
   * the caller runs the loop to let it go. */
  rc = open_site(a, cfg, e);
  if (rc == 0)
    rc = open_data(a, cfg, e);
  if (rc < 0)
    goto fail;
  memset(&cc, 0, sizeof(cc));
  cc.ca_file = cfg->ca_file;
  cc.allow_insecure_tokens = cfg->allow_insecure_tokens != 0;
  cc.user_agent = "tenbin-agent-node";
  rc = http_client_new(loop, &cc, &a->client, e);
  if (rc < 0)
    goto fail;
  if (cfg->provider != NODE_PROVIDER_NONE) {
    rc = node_meta_start(loop, cfg->provider, cfg->metadata_url,
                         cfg->meta_poll_ms, on_interruption, a, &a->meta, e);
    if (rc < 0)
      goto fail;
  }
  /* The first heartbeat registers the node; one that cannot even be
   * sent (a token in clear, a URL curl refuses) is a config error. */
  rc = heartbeat_send(a, e);
  if (rc < 0) {
    err_prefix(e, "--server");
    rc = ERR_CONFIG;
    if (e != NULL)
      e->code = ERR_CONFIG;
    goto fail;
  }
  a->reachable = 1;
  uv_timer_start(&a->log_timer, on_log_tick, a->log_flush_ms,
                 a->log_flush_ms);
  log_info("node: registering with %s as '%s'", a->server, a->hostname);
  *out = a;
  return 0;
fail:
  node_agent_close(a, NULL, NULL);
  return rc;
}

static void
maybe_finish(struct node_agent *a)
{
  void (*cb)(void *arg);
  void *arg;
  struct list *q;
  struct list *tmp;

  if (!a->closing || a->pending > 0)
    return;
  cb = a->close_cb;
  arg = a->close_arg;
  LIST_FOREACH_SAFE(q, tmp, &a->jobs)
    free_job(JOB_OF(q));
  free(a->server);
  free(a->auth);
  free(a->hostname);
  free(a->version);
  free(a);
  if (cb != NULL)
    cb(arg);
}

static void
on_part_closed(void *arg)
{
  struct node_agent *a = arg;

  a->pending--;
  maybe_finish(a);
}

static void
on_timer_closed(uv_handle_t *h)
{
  on_part_closed(h->data);
}

void
node_agent_close(struct node_agent *a, void (*cb)(void *arg), void *arg)
{
  a->closing = 1;
  a->close_cb = cb;
  a->close_arg = arg;
  /* The timers count in pending until their close callbacks: nothing
   * is freed from inside this call. */
  uv_close((uv_handle_t *)&a->hb_timer, on_timer_closed);
  uv_close((uv_handle_t *)&a->log_timer, on_timer_closed);
  if (a->meta != NULL) {
    a->pending++;
    node_meta_close(a->meta, on_part_closed, a);
    a->meta = NULL;
  }
  if (a->data != NULL) {
    /* Pulls stop (their staging stays for the next start); jobs that
     * waited for them hear so from inside this call, and let go. */
    a->pending++;
    agent_close(a->data, on_part_closed, a);
    a->data = NULL;
  }
  if (a->site != NULL) {
    /* Jobs keep running under their shims. */
    a->pending++;
    adapter_local_ops.close(a->site, on_part_closed, a);
    a->site = NULL;
  }
  if (a->client != NULL) {
    /* Requests in flight end first (ERR_UNAVAILABLE), then this. */
    a->pending++;
    http_client_close(a->client, on_part_closed, a);
    a->client = NULL;
  }
}
