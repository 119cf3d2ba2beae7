/*
 * What slurmrestd's answers mean whatever the OpenAPI version: tags, job
 * states and wait statuses, error objects, output patterns, and the gres
 * and hostlist strings every version carries verbatim.
 */
#include "adapters/slurm_schema.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/buf.h"

/* A job's alloc string: far more than any real allocation needs. */
#define MAX_ALLOC (64 * 1024)
/* Hosts one hostlist may expand to before pairing gives up. */
#define MAX_HOSTS 65536

const struct slurm_schema *
slurm_schema_find(const char *version)
{
  if (version != NULL && strcmp(version, slurm_schema_v0038.version) == 0)
    return &slurm_schema_v0038;
  return NULL;
}

void
slurm_job_list_release(struct slurm_job_list *l)
{
  if (l == NULL)
    return;
  for (size_t i = 0; i < l->n; i++) {
    struct slurm_job *j = &l->jobs[i];

    free(j->state);
    free(j->reason);
    free(j->nodes);
    free(j->alloc);
    free(j->stdout_path);
    free(j->name);
    free(j->user);
  }
  free(l->jobs);
  l->jobs = NULL;
  l->n = 0;
}

void
slurm_node_list_release(struct slurm_node_list *l)
{
  if (l == NULL)
    return;
  free(l->nodes);
  l->nodes = NULL;
  l->n = 0;
}

/* ---- tags ---- */

void
slurm_tag_format(char *out, size_t outsz, const char *instance, int64_t id)
{
  snprintf(out, outsz, "%s%s:%" PRId64, SLURM_TAG_PREFIX, instance, id);
}

int64_t
slurm_tag_parse(const char *tag, const char *instance)
{
  size_t plen = strlen(SLURM_TAG_PREFIX);
  size_t ilen;
  const char *p;
  int64_t id = 0;
  int digits = 0;

  if (tag == NULL || instance == NULL ||
      strncmp(tag, SLURM_TAG_PREFIX, plen) != 0)
    return -1;
  ilen = strlen(instance);
  p = tag + plen;
  if (strncmp(p, instance, ilen) != 0 || p[ilen] != ':')
    return -1;
  /* Strict: digits only, no sign, no blank, no more than 18 of them, so
   * a user's comment that merely looks similar is never taken for ours. */
  for (p += ilen + 1; *p != '\0'; p++) {
    if (*p < '0' || *p > '9' || ++digits > 18)
      return -1;
    id = id * 10 + (*p - '0');
  }
  return digits > 0 && id > 0 ? id : -1;
}

/* ---- job states ---- */

static const char *const signal_names[] = {
  NULL,   "HUP",  "INT",    "QUIT", "ILL",    "TRAP", "ABRT",  "BUS",
  "FPE",  "KILL", "USR1",   "SEGV", "USR2",   "PIPE", "ALRM",  "TERM",
  "STKFLT", "CHLD", "CONT", "STOP", "TSTP",   "TTIN", "TTOU",  "URG",
  "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH",  "IO",   "PWR",   "SYS",
};

/* Decode a raw wait status (written out: the macros of <sys/wait.h> take
 * an int, Slurm hands us an int64). */
static void
decode_status(int64_t raw, int *exit_code, int *sig)
{
  *exit_code = -1;
  *sig = 0;
  if (raw < 0)
    return;
  if ((raw & 0x7f) == 0)
    *exit_code = (int)((raw >> 8) & 0xff);
  else if ((raw & 0x7f) != 0x7f)
    *sig = (int)(raw & 0x7f);
}

/* "STATE" or "STATE (reason)" unless the reason says nothing. */
static void
state_with_reason(char *out, size_t outsz, const char *state,
                  const char *reason)
{
  if (reason == NULL || reason[0] == '\0' || strcmp(reason, "None") == 0)
    snprintf(out, outsz, "%.64s", state);
  else
    snprintf(out, outsz, "%.64s (%.120s)", state, reason);
}

static void
describe_end(struct slurm_outcome *o)
{
  size_t n = sizeof(signal_names) / sizeof(signal_names[0]);

  if (o->signal > 0 && (size_t)o->signal < n)
    snprintf(o->reason, sizeof(o->reason), "killed by signal %d (SIG%s)",
             o->signal, signal_names[o->signal]);
  else if (o->signal > 0)
    snprintf(o->reason, sizeof(o->reason), "killed by signal %d",
             o->signal);
  else
    snprintf(o->reason, sizeof(o->reason), "exit code %d", o->exit_code);
}

static int
state_in(const char *state, const char *const *list)
{
  for (; *list != NULL; list++) {
    if (strcasecmp(state, *list) == 0)
      return 1;
  }
  return 0;
}

/*
 * Waiting states, held ones included: REQUEUE_HOLD, RESV_DEL_HOLD and
 * SPECIAL_EXIT (requeued and held by an epilog) run again once someone
 * releases them, so the job is not over.  CONFIGURING means the nodes
 * are allocated and booting: the job has started as far as Slurm's
 * accounting goes.
 */
static const char *const waiting_states[] = {
  "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
  "SPECIAL_EXIT", NULL};
static const char *const running_states[] = {
  "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED",
  "SIGNALING", "STAGE_OUT", "RESIZING", NULL};
/* Ended for a reason of Slurm's own; its name says why. */
static const char *const failed_states[] = {
  "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
  "OUT_OF_MEMORY", "REVOKED", NULL};

void
slurm_job_outcome(const struct slurm_job *j, struct slurm_outcome *out)
{
  const char *state = j->state != NULL ? j->state : "";
  const char *reason = j->reason;

  memset(out, 0, sizeof(*out));
  decode_status(j->exit_raw, &out->exit_code, &out->signal);
  if (state_in(state, waiting_states)) {
    out->state = JOB_SUBMITTED;
    state_with_reason(out->reason, sizeof(out->reason), state, reason);
  } else if (state_in(state, running_states)) {
    out->state = JOB_RUNNING;
    state_with_reason(out->reason, sizeof(out->reason), state, reason);
  } else if (strcasecmp(state, "COMPLETED") == 0) {
    /* COMPLETED is Slurm's word for exit code 0; a status it could not
     * record (slurmdbd's PENDING) does not contradict it. */
    if (out->exit_code < 0 && out->signal == 0)
      out->exit_code = 0;
    out->state = out->exit_code == 0 ? JOB_SUCCEEDED : JOB_FAILED;
    describe_end(out);
  } else if (strcasecmp(state, "FAILED") == 0) {
    out->state = JOB_FAILED;
    if (out->signal > 0 || out->exit_code > 0)
      describe_end(out);
    else
      state_with_reason(out->reason, sizeof(out->reason), "FAILED",
                        reason);
  } else if (strcasecmp(state, "CANCELLED") == 0) {
    /* The status of a cancelled job is the signal that ended it (15),
     * or 0 when it never started: no exit code either way. */
    out->state = JOB_CANCELLED;
    out->exit_code = -1;
    snprintf(out->reason, sizeof(out->reason), "CANCELLED");
  } else if (state_in(state, failed_states)) {
    out->state = JOB_FAILED;
    state_with_reason(out->reason, sizeof(out->reason), state, reason);
  } else {
    /* A state newer than this code: nothing says the job ended, and a
     * final state cannot be taken back, so it stays where it was. */
    out->state = JOB_SUBMITTED;
    out->exit_code = -1;
    out->signal = 0;
    snprintf(out->reason, sizeof(out->reason), "unknown Slurm state %.64s",
             state);
  }
  if (!job_state_is_final(out->state)) {
    out->exit_code = -1;
    out->signal = 0;
  }
  /* Only a job given nodes ran: a pending job that was cancelled has a
   * start time too (its end's) but no nodes ("" from slurmctld, "None
   * assigned" from slurmdbd). */
  if ((out->state == JOB_RUNNING || job_state_is_final(out->state)) &&
      j->start_s > 0 && j->nodes != NULL && j->nodes[0] != '\0' &&
      strcmp(j->nodes, "None assigned") != 0)
    out->started_ms = j->start_s * 1000;
}

/* ---- errors ---- */

/* The site's number of an error object, under any of its three names. */
static int
error_number(const json_t *err, int64_t *num)
{
  static const char *const keys[] = {"error_number", "error_code", "errno"};

  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    const json_t *v = json_object_get(err, keys[i]);

    if (json_is_integer(v)) {
      *num = json_integer_value(v);
      return 1;
    }
  }
  return 0;
}

/* Append s to b with control characters made blanks. */
static void
add_clean(struct buf *b, const char *s, size_t len)
{
  for (size_t i = 0; i < len && b->len + 1 < b->max; i++) {
    char c = s[i];

    if ((unsigned char)c < 0x20 || c == 0x7f)
      c = ' ';
    if (buf_add(b, &c, 1) < 0)
      return;
  }
}

/* "error (description) [error N]; ..." of every error object. */
static void
describe_errors(const json_t *errors, struct buf *b)
{
  size_t i;
  const json_t *err;

  json_array_foreach(errors, i, err) {
    const char *what = json_string_value(json_object_get(err, "error"));
    const char *why =
        json_string_value(json_object_get(err, "description"));
    int64_t num;

    if (b->len > 0)
      add_clean(b, "; ", 2);
    if (what == NULL || what[0] == '\0')
      what = why != NULL ? why : "error";
    add_clean(b, what, strlen(what));
    if (why != NULL && why[0] != '\0' && strcmp(why, what) != 0) {
      add_clean(b, " (", 2);
      add_clean(b, why, strlen(why));
      add_clean(b, ")", 1);
    }
    if (error_number(err, &num)) {
      char n[32];

      snprintf(n, sizeof(n), " [error %" PRId64 "]", num);
      add_clean(b, n, strlen(n));
    }
  }
}

/* Does any error object carry number? */
static int
has_number(const json_t *errors, int64_t number)
{
  size_t i;
  const json_t *err;
  int64_t num;

  json_array_foreach(errors, i, err) {
    if (error_number(err, &num) && num == number)
      return 1;
  }
  return 0;
}

/*
 * The mapping.  2017 is ESLURM_INVALID_JOB_ID.  A token slurmctld
 * refuses comes back as HTTP 500 with error -1 (SLURM_ERROR: "slurmctld
 * config is unable to load", "Failed while looking for jobs", even
 * "Unable to find JobId=N" for a job that exists) or, on POST and
 * DELETE, 5005 ("Zero Bytes were transmitted or received": slurmctld
 * hung up on the request); seen on Slurm 22.05.  A -1 of another cause
 * is taken for a refusal too, which costs a new token and no more.
 */
int
slurm_answer_error(int status, const char *body, size_t len, struct err *e)
{
  json_t *answer = NULL;
  const json_t *errors = NULL;
  struct buf b;
  int code;

  buf_init(&b, ERR_MSG_SIZE);
  if (body != NULL && len > 0)
    answer = json_loadb(body, len, 0, NULL);
  if (answer != NULL)
    errors = json_object_get(answer, "errors");
  if (json_is_array(errors))
    describe_errors(errors, &b);
  else
    errors = NULL;
  if (b.len == 0 && body != NULL && len > 0 && answer == NULL) {
    /* Not JSON (the 401 is text/plain): the text itself. */
    add_clean(&b, body, len < 160 ? len : 160);
  }
  if (b.len == 0)
    add_clean(&b, "no error details", 16);
  if (status == 401)
    code = ERR_UNAUTHORIZED;
  else if (errors != NULL && has_number(errors, 2017))
    code = ERR_NOT_FOUND;
  else if (status >= 500 && errors != NULL &&
           (has_number(errors, -1) || has_number(errors, 5005)))
    code = ERR_UNAUTHORIZED;
  else if (errors != NULL && has_number(errors, 1007))
    code = ERR_UNAUTHORIZED; /* slurmdbd: "Protocol authentication error" */
  else if (status >= 400 && status < 500)
    code = ERR_INVALID;
  else
    code = ERR_SITE;
  err_set(e, code, "slurmrestd %d: %s", status, buf_str(&b));
  buf_release(&b);
  json_decref(answer);
  return code;
}

/* ---- output patterns ---- */

/* The first host of a hostlist ("a-[3-4],b" gives "a-3"), or 0. */
static int
first_host(const char *nodes, char *out, size_t outsz)
{
  const char *br = strchr(nodes, '[');
  const char *comma = strchr(nodes, ',');
  size_t n;

  if (nodes[0] == '\0')
    return 0;
  if (br == NULL || (comma != NULL && comma < br)) {
    n = comma != NULL ? (size_t)(comma - nodes) : strlen(nodes);
    snprintf(out, outsz, "%.*s", (int)n, nodes);
    return 1;
  }
  n = strspn(br + 1, "0123456789");
  if (n == 0)
    return 0;
  snprintf(out, outsz, "%.*s%.*s", (int)(br - nodes), nodes, (int)n,
           br + 1);
  return 1;
}

/*
 * Slurm's own rules (slurmd's fname.c): a pattern holding a backslash is
 * not expanded, the backslashes are dropped; "%5j" pads numbers with
 * zeros to 5 digits (one width digit); for a job that is not an array
 * task, %A is its id and %a is NO_VAL (4294967294).  The batch step is
 * %s "batch", node and task 0.  %N unknown (not started) stays as is.
 */
int
slurm_expand_path(const char *pattern, const struct slurm_job *j,
                  char *out, size_t outsz)
{
  struct buf b;
  const char *p;
  int rc = 0;

  buf_init(&b, outsz > 0 ? outsz - 1 : 0);
  if (strchr(pattern, '\\') != NULL) {
    for (p = pattern; *p != '\0' && rc == 0; p++) {
      if (*p != '\\')
        rc = buf_add(&b, p, 1);
    }
    goto out;
  }
  for (p = pattern; *p != '\0' && rc == 0; p++) {
    const char *start = p;
    int width = 0;
    char host[256];
    int is_array = j->array_job_id > 0;

    if (*p != '%') {
      rc = buf_add(&b, p, 1);
      continue;
    }
    if (p[1] >= '0' && p[1] <= '9') {
      width = p[1] - '0';
      p++;
    }
    switch (p[1]) {
    case '%':
      rc = buf_adds(&b, "%");
      break;
    case 'j':
      rc = buf_addf(&b, "%0*" PRId64, width, j->slurm_id);
      break;
    case 'A':
      rc = buf_addf(&b, "%0*" PRId64, width,
                    is_array ? j->array_job_id : j->slurm_id);
      break;
    case 'a':
      rc = buf_addf(&b, "%0*" PRId64, width,
                    is_array ? j->array_task_id : (int64_t)4294967294);
      break;
    case 'J':
      rc = buf_addf(&b, "%0*" PRId64 ".batch", width, j->slurm_id);
      break;
    case 's':
      rc = buf_adds(&b, "batch");
      break;
    case 'n':
    case 't':
      rc = buf_addf(&b, "%0*d", width, 0);
      break;
    case 'x':
      rc = buf_adds(&b, j->name != NULL ? j->name : "");
      break;
    case 'u':
      rc = buf_adds(&b, j->user != NULL ? j->user : "");
      break;
    case 'N':
      if (j->nodes != NULL && first_host(j->nodes, host, sizeof(host)))
        rc = buf_adds(&b, host);
      else
        rc = buf_add(&b, start, (size_t)(p + 2 - start));
      break;
    default:
      /* Unknown (or a lone '%' at the end): kept as written. */
      if (p[1] == '\0') {
        rc = buf_add(&b, start, (size_t)(p + 1 - start));
        continue;
      }
      rc = buf_add(&b, start, (size_t)(p + 2 - start));
      break;
    }
    p++;
  }
out:
  if (rc == 0 && outsz > 0)
    memcpy(out, buf_str(&b), b.len + 1);
  else if (outsz > 0)
    out[0] = '\0';
  buf_release(&b);
  return rc < 0 || outsz == 0 ? ERR_TOO_LARGE : 0;
}

/* ---- gres strings ---- */

/* The end of the entry at s: the next ',' or ';' outside parentheses. */
static const char *
entry_end(const char *s)
{
  int depth = 0;

  for (; *s != '\0'; s++) {
    if (*s == '(')
      depth++;
    else if (*s == ')' && depth > 0)
      depth--;
    else if (depth == 0 && (*s == ',' || *s == ';'))
      break;
  }
  return s;
}

static int
all_digits(const char *s, size_t n)
{
  if (n == 0 || n > 12)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return 0;
  }
  return 1;
}

static int64_t
to_int(const char *s, size_t n)
{
  int64_t v = 0;

  for (size_t i = 0; i < n; i++)
    v = v * 10 + (s[i] - '0');
  return v;
}

/*
 * One entry, [gres: | gres/]gpu[:type][:count | =count][(...)]: a count
 * left out is 1, as in a request.  The (...) part is "S:0-1" on nodes
 * and "IDX:0-1" or "IDX:N/A" in use and in a job's detail.
 */
static void
gres_entry(const char *s, size_t len, slurm_gres_fn fn, void *arg)
{
  char type[ADAPTER_GPU_TYPE_LEN] = "";
  char idx[1024];
  const char *stop = s + len;
  const char *paren = memchr(s, '(', len);
  const char *end = paren != NULL ? paren : s + len;
  const char *f1;
  const char *last;
  int64_t count = 1;
  const char *idxp = NULL;

  if (len > 5 && (strncmp(s, "gres:", 5) == 0 || strncmp(s, "gres/", 5) == 0))
    s += 5;
  if (end - s < 3 || strncmp(s, "gpu", 3) != 0)
    return;
  f1 = s + 3;
  if (f1 < end && *f1 != ':' && *f1 != '=')
    return; /* "gpus", "gpu_mem": another gres */
  if (f1 < end) {
    const char *eq = memchr(f1, '=', (size_t)(end - f1));
    const char *tend;

    /* The count: after '=' (TRES form) or after the last ':'. */
    if (eq != NULL) {
      last = eq + 1;
      tend = eq;
    } else {
      last = end;
      while (last > f1 && last[-1] != ':')
        last--;
      tend = last - 1;
      if (!all_digits(last, (size_t)(end - last))) {
        last = end; /* "gpu:h100": a type, count 1 */
        tend = end;
      }
    }
    if (last < end) {
      /* Nine digits at most: a sum of counts must not overflow. */
      if (!all_digits(last, (size_t)(end - last)) || end - last > 9)
        return;
      count = to_int(last, (size_t)(end - last));
    }
    if (tend > f1 + 1) {
      size_t tl = (size_t)(tend - (f1 + 1));

      if (tl >= sizeof(type) || memchr(f1 + 1, ':', tl) != NULL)
        return;
      for (size_t i = 0; i < tl; i++) {
        char c = f1[1 + i];

        type[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
      }
      type[tl] = '\0';
    }
  }
  if (paren != NULL) {
    const char *close = memchr(paren, ')', (size_t)(stop - paren));
    size_t il;

    if (close != NULL && close - paren > 5 &&
        strncmp(paren + 1, "IDX:", 4) == 0) {
      il = (size_t)(close - (paren + 5));
      if (il < sizeof(idx) &&
          !(il == 3 && strncmp(paren + 5, "N/A", 3) == 0)) {
        memcpy(idx, paren + 5, il);
        idx[il] = '\0';
        idxp = idx;
      }
    }
  }
  fn(arg, type, count, idxp);
}

void
slurm_gres_each(const char *list, slurm_gres_fn fn, void *arg)
{
  const char *s = list;

  if (s == NULL)
    return;
  while (*s != '\0') {
    const char *end = entry_end(s);

    if (end > s)
      gres_entry(s, (size_t)(end - s), fn, arg);
    s = *end != '\0' ? end + 1 : end;
  }
}

/* ---- a job's GPUs per node ---- */

struct idx_acc {
  struct buf *b;
  int any;
};

static void
add_idx(void *arg, const char *type, int64_t count, const char *idx)
{
  struct idx_acc *a = arg;

  (void)type;
  (void)count;
  if (idx == NULL)
    return;
  if (a->any && buf_adds(a->b, ",") < 0)
    return;
  if (buf_adds(a->b, idx) == 0)
    a->any = 1;
}

/* Expand hostlist into a new vector of at most max names; NULL when it
 * is not a form this reads (one bracket group per name) or too long. */
static char **
expand_hostlist(const char *list, size_t max)
{
  char **v = xcalloc(max + 1, sizeof(*v));
  size_t n = 0;
  const char *s = list;

  while (*s != '\0') {
    const char *br = NULL;
    const char *close = NULL;
    const char *e;

    /* One name: up to a ',' outside the brackets. */
    for (e = s; *e != '\0'; e++) {
      if (*e == ',' && (br == NULL || close != NULL))
        break;
      if (*e == '[' && br == NULL)
        br = e;
      else if (*e == '[' || (*e == ']' && (br == NULL || close != NULL)))
        goto fail; /* a second bracket group: not read here */
      else if (*e == ']')
        close = e;
    }
    if (br != NULL && close == NULL)
      goto fail;
    if (br == NULL) {
      if (n >= max || e == s)
        goto fail;
      v[n++] = xstrndup(s, (size_t)(e - s));
    } else {
      const char *r = br + 1;

      while (r < close) {
        const char *re = r;
        size_t wa;
        int64_t lo;
        int64_t hi;

        while (re < close && *re != ',')
          re++;
        wa = strspn(r, "0123456789");
        if (wa == 0 || wa > 9 || (r + wa != re && r[wa] != '-'))
          goto fail;
        lo = to_int(r, wa);
        hi = lo;
        if (r + wa != re) {
          size_t wb = strspn(r + wa + 1, "0123456789");

          if (wb == 0 || wb > 9 || r + wa + 1 + wb != re)
            goto fail;
          hi = to_int(r + wa + 1, wb);
        }
        if (hi < lo || (uint64_t)(hi - lo) >= max - n + 1)
          goto fail;
        for (int64_t k = lo; k <= hi; k++) {
          char name[512];

          if (n >= max)
            goto fail;
          /* Slurm keeps the zero padding of the lower bound. */
          snprintf(name, sizeof(name), "%.*s%0*" PRId64 "%.*s",
                   (int)(br - s), s, (int)wa, k, (int)(e - close - 1),
                   close + 1);
          v[n++] = xstrdup(name);
        }
        r = re < close ? re + 1 : re;
      }
    }
    s = *e != '\0' ? e + 1 : e;
  }
  return v;
fail:
  strv_free(v);
  return NULL;
}

char *
slurm_gres_alloc(const char *nodes, const char *const *detail, size_t n)
{
  struct buf b;
  struct buf one;
  char **hosts = NULL;
  size_t nh = 0;
  int pair;

  buf_init(&b, MAX_ALLOC);
  buf_init(&one, MAX_ALLOC);
  if (n == 0 || n > MAX_HOSTS)
    goto out;
  if (nodes != NULL && nodes[0] != '\0')
    hosts = expand_hostlist(nodes, n);
  nh = strv_len(hosts);
  /* gres_detail has one entry per node of the job, in node order. */
  pair = hosts != NULL && nh == n;
  for (size_t i = 0; i < n; i++) {
    struct idx_acc a = {&one, 0};

    buf_reset(&one);
    slurm_gres_each(detail[i], add_idx, &a);
    if (!a.any && pair)
      continue;
    if (b.len > 0 && buf_adds(&b, pair ? "," : ";") < 0)
      break;
    if (pair && buf_addf(&b, "%s:", hosts[i]) < 0)
      break;
    if (buf_adds(&b, buf_str(&one)) < 0)
      break;
  }
  /* Nothing at all assigned: "" rather than ";;". */
  if (strspn(buf_str(&b), ";") == b.len)
    buf_reset(&b);
out:
  strv_free(hosts);
  buf_release(&one);
  return buf_take(&b, NULL);
}
