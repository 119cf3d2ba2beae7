/*
 * /v1/jobs handlers.
 */
#define _GNU_SOURCE /* O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "sync/path.h"
#include "util/fileio.h"
#include "util/hash.h"
#include "util/jsonx.h"

/* One log response carries at most this much; follow by offset. */
#define LOG_CHUNK_MAX (1024 * 1024)
#define LIST_LIMIT_MAX 1000
#define LIST_LIMIT_DEFAULT 100

static void
submitted_cb(void *arg, int rc, const struct job_view *job,
             char *const *warnings, int replayed, const struct err *e)
{
  struct api_call *call = arg;
  json_t *extra = NULL;
  json_t *list;

  if (rc < 0) {
    api__reply_err(call, e);
    return;
  }
  if (warnings != NULL) {
    list = json_array();
    for (size_t i = 0; warnings[i] != NULL; i++)
      json_array_append_new(list, json_string(warnings[i]));
    extra = json_pack("{s:o}", "warnings", list);
  }
  if (replayed)
    http_request_add_header(call->req, "Idempotent-Replayed", "true");
  api__reply_job(call, 201, job, extra);
  json_decref(extra);
}

void
api__jobs_create(struct api_call *call)
{
  const char *key = http_request_header(call->req, "Idempotency-Key");
  json_t *body = NULL;
  struct err e = {0};
  char hash[65];
  size_t len;
  const char *raw = http_request_body(call->req, &len);

  if (api__body_json(call, &body, &e) < 0) {
    api__reply_err(call, &e);
    return;
  }
  hash_sha256_hex(raw, len, hash);
  if (broker_submit(call->api->broker, &call->who, body, key, hash,
                    submitted_cb, call, &e) < 0)
    api__reply_err(call, &e);
  /* else: answered by submitted_cb after the group commit */
  json_decref(body);
}

/* A list page is written as text, job by job (see api__job_text). */
struct list_ctx {
  struct buf out;
  int64_t last_id;
  int64_t n;
};

static int
list_cb(const struct job_view *j, void *arg)
{
  struct list_ctx *l = arg;

  if ((l->n > 0 && buf_add(&l->out, ",", 1) < 0) ||
      api__job_text(j, NULL, &l->out) < 0)
    return ERR_TOO_LARGE;
  l->last_id = j->id;
  l->n++;
  return 0;
}

void
api__jobs_list(struct api_call *call)
{
  struct job_filter f = {0};
  struct list_ctx l = {0};
  struct err e = {0};
  enum job_state st;
  int64_t limit;
  int64_t cursor;
  size_t len;
  char *body;
  int rc;

  f.state = http_request_query(call->req, "state");
  f.project = http_request_query(call->req, "project");
  f.site = http_request_query(call->req, "site");
  if (f.state != NULL && job_state_parse(f.state, &st) < 0) {
    api__reply_errf(call, ERR_INVALID, "query parameter 'state': unknown "
                    "state '%.32s'", f.state);
    return;
  }
  if (api__query_int(call, "limit", 1, LIST_LIMIT_MAX, LIST_LIMIT_DEFAULT,
                     &limit, &e) < 0 ||
      api__query_int(call, "cursor", 1, INT64_MAX, 0, &cursor, &e) < 0) {
    api__reply_err(call, &e);
    return;
  }
  f.limit = (int)limit;
  f.before_id = cursor;
  buf_init(&l.out, (size_t)512 * 1024 * 1024);
  rc = buf_adds(&l.out, "{\"jobs\":[");
  if (rc == 0)
    rc = broker_job_list(call->api->broker, &call->who, &f, list_cb, &l,
                         &e);
  if (rc == ERR_TOO_LARGE)
    err_set(&e, rc, "the page is too large; ask for a smaller 'limit'");
  /* next_cursor: the last id of a full page (ids are the cursor). */
  if (rc == 0 && l.n == limit && l.last_id > 1)
    rc = buf_addf(&l.out, "],\"next_cursor\":\"%lld\"}\n",
                  (long long)l.last_id);
  else if (rc == 0)
    rc = buf_adds(&l.out, "],\"next_cursor\":null}\n");
  if (rc < 0) {
    buf_release(&l.out);
    if (e.code == 0)
      err_set(&e, rc, "cannot list jobs");
    api__reply_err(call, &e);
    return;
  }
  body = buf_take(&l.out, &len);
  api__reply_body(call, 200, "application/json", body, len);
}

/* The shape of get, cancel and release: id in, job out. */
static void
job_action(struct api_call *call,
           int (*fn)(struct broker *b, const struct principal *p,
                     int64_t id, struct job_view *out, struct err *e))
{
  struct job_view j;
  struct err e = {0};
  int64_t id;

  job_view_init(&j);
  if (api__param_id(call, 0, &id, &e) < 0 ||
      fn(call->api->broker, &call->who, id, &j, &e) < 0) {
    job_view_release(&j);
    api__reply_err(call, &e);
    return;
  }
  api__reply_job(call, 200, &j, NULL);
  job_view_release(&j);
}

void
api__jobs_get(struct api_call *call)
{
  job_action(call, broker_job_get);
}

void
api__jobs_cancel(struct api_call *call)
{
  job_action(call, broker_job_cancel);
}

void
api__jobs_release(struct api_call *call)
{
  job_action(call, broker_job_release);
}

static int
event_cb(const struct event_view *ev, void *arg)
{
  json_t *v = json_object();

  json_object_set_new(v, "id", json_integer(ev->id));
  jsonx_set_time(v, "at", ev->at_ms);
  jsonx_set_str(v, "from", ev->from_state);
  jsonx_set_str(v, "to", ev->to_state);
  jsonx_set_str(v, "detail", ev->detail);
  json_array_append_new(arg, v);
  return 0;
}

void
api__jobs_events(struct api_call *call)
{
  json_t *events = json_array();
  struct err e = {0};
  int64_t id;

  if (api__param_id(call, 0, &id, &e) < 0 ||
      broker_job_events(call->api->broker, &call->who, id, event_cb, events,
                        &e) < 0) {
    json_decref(events);
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, json_pack("{s:o}", "events", events));
}

void
api__jobs_placement(struct api_call *call)
{
  struct placement_view v;
  struct err e = {0};
  json_t *cands, *o;
  int64_t id;

  memset(&v, 0, sizeof(v));
  if (api__param_id(call, 0, &id, &e) < 0 ||
      broker_job_placement(call->api->broker, &call->who, id, &v, &e) < 0) {
    placement_view_release(&v);
    api__reply_err(call, &e);
    return;
  }
  cands = json_loads(v.candidates, 0, NULL);
  o = json_pack("{s:I, s:s, s:o}", "job", (json_int_t)id, "verdict",
                v.verdict, "candidates", cands != NULL ? cands : json_array());
  jsonx_set_time(o, "at", v.at_ms);
  jsonx_set_str(o, "site", v.site);
  jsonx_set_time(o, "predicted_start", v.start_ms);
  jsonx_set_str(o, "reason", v.reason);
  placement_view_release(&v);
  api__reply_json(call, 200, o);
}

static void
add_header_i64(struct http_request *req, const char *name, int64_t v)
{
  char s[24];

  snprintf(s, sizeof(s), "%lld", (long long)v);
  http_request_add_header(req, name, s);
}

/* Bytes of a path to quote in a message, which has room for two. */
#define LOG_PATH_SHOWN 96

/*
 * Open the log of job j, only where its site says its logs are written:
 * the job chose log_path (its --output), so the path is a claim, not a
 * permission.  It must lie beneath the site's log directory, is opened
 * there without following any link (sync/path.h), without blocking (a
 * fifo would stall the loop until someone writes to it), and must be a
 * regular file with one link (a hard link could name any file).
 *
 * 0 with *fd_out open and *size set, or *fd_out = -1 when the file does
 * not exist (yet); negative with e naming the path and the site.
 */
static int
log_open(struct api *api, const struct job_view *j, int *fd_out,
         int64_t *size, struct err *e)
{
  const char *site = j->site != NULL ? j->site : "?";
  const char *path = j->log_path;
  char rel[SYNCPATH_MAX + 1];
  char *dir = NULL;
  size_t dlen;
  struct stat st;
  struct err pe = {0};
  int dirfd = -1;
  int fd = -1;
  int rc = 0;

  *fd_out = -1;
  *size = 0;
  dir = broker_job_log_dir(api->broker, j);
  if (dir == NULL) {
    rc = err_set(e, ERR_FORBIDDEN, "the log of job %lld is '%.*s'; site "
                 "'%.64s' serves no logs from the broker host: read it "
                 "there", (long long)j->id, LOG_PATH_SHOWN, path, site);
    goto out;
  }
  dlen = strlen(dir);
  while (dlen > 1 && dir[dlen - 1] == '/')
    dir[--dlen] = '\0';
  /* Lexically beneath dir; the open below makes sure that no link on
   * the way leads elsewhere. */
  if (strncmp(path, dir, dlen) != 0 || path[dlen] != '/' ||
      syncpath_normalize(path + dlen + 1, rel, sizeof(rel), &pe) < 0) {
    rc = err_set(e, ERR_FORBIDDEN, "the log of job %lld is '%.*s', "
                 "outside '%.*s' where site '%.64s' writes logs: read it "
                 "there", (long long)j->id, LOG_PATH_SHOWN, path,
                 LOG_PATH_SHOWN, dir, site);
    goto out;
  }
  dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0 && errno == ENOENT)
    goto out; /* not visible from here (yet) */
  if (dirfd < 0) {
    rc = err_set(e, ERR_IO, "cannot open '%.*s', the log directory of "
                 "site '%.64s': %s", LOG_PATH_SHOWN, dir, site,
                 strerror(errno));
    goto out;
  }
  fd = syncpath_openat(dirfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0,
                       &pe);
  if (fd == ERR_NOT_FOUND) {
    fd = -1;
    goto out;
  }
  if (fd == ERR_INVALID) {
    rc = err_set(e, ERR_FORBIDDEN, "the log of job %lld, '%.*s', is "
                 "reached through a symlink; site '%.64s' serves only "
                 "files its jobs wrote", (long long)j->id, LOG_PATH_SHOWN,
                 path, site);
    goto out;
  }
  if (fd < 0) {
    rc = err_set(e, ERR_IO, "cannot open the log of job %lld: %s",
                 (long long)j->id, err_msg(&pe));
    goto out;
  }
  if (fstat(fd, &st) < 0) {
    rc = err_set(e, ERR_IO, "cannot stat the log of job %lld: %s",
                 (long long)j->id, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = err_set(e, ERR_UNPROCESSABLE, "the log of job %lld, '%.*s', is "
                 "%s, not a regular file", (long long)j->id,
                 LOG_PATH_SHOWN, path, file_kind(st.st_mode));
    goto out;
  }
  if (st.st_nlink > 1) {
    rc = err_set(e, ERR_FORBIDDEN, "the log of job %lld, '%.*s', has "
                 "%lu links; site '%.64s' serves only files its jobs "
                 "wrote", (long long)j->id, LOG_PATH_SHOWN, path,
                 (unsigned long)st.st_nlink, site);
    goto out;
  }
  *size = st.st_size;
  *fd_out = fd;
  fd = -1;
out:
  if (fd >= 0)
    close(fd);
  if (dirfd >= 0)
    close(dirfd);
  free(dir);
  return rc;
}

void
api__jobs_log(struct api_call *call)
{
  struct job_view j;
  struct err e = {0};
  int64_t id;
  int64_t offset;
  int64_t limit;
  int64_t size = 0;
  int64_t len = 0;
  int fd = -1;

  job_view_init(&j);
  if (api__param_id(call, 0, &id, &e) < 0 ||
      api__query_int(call, "offset", 0, INT64_MAX, 0, &offset, &e) < 0 ||
      api__query_int(call, "limit", 1, LOG_CHUNK_MAX, LOG_CHUNK_MAX, &limit,
                     &e) < 0 ||
      broker_job_get(call->api->broker, &call->who, id, &j, &e) < 0)
    goto fail;
  if (j.log_path != NULL) {
    if (log_open(call->api, &j, &fd, &size, &e) < 0)
      goto fail;
    if (fd < 0 && job_state_is_final(j.state) &&
        (j.started_ms > 0 || j.exit_code >= 0 || j.signal > 0)) {
      /* It ran (it may have ended before a poll saw it running) and
       * ended, so its output exists somewhere: on a site
       * whose filesystem this host does not share.  Say so rather than
       * show an empty log.  (A running job's file may not exist yet.) */
      err_set(&e, ERR_NOT_FOUND, "the log of job %lld is %s on site "
              "'%s', which is not readable from the broker host; read it "
              "there", (long long)id, j.log_path,
              j.site != NULL ? j.site : "?");
      goto fail;
    }
  }
  /* An offset at or past the end (the file was replaced, or the
   * follower is ahead) answers nothing and is echoed, as openapi.yaml
   * says: a follower's "next offset >= size" test still terminates. */
  if (offset < size)
    len = size - offset < limit ? size - offset : limit;
  http_request_add_header(call->req, "X-Job-State",
                          job_state_name(j.state));
  add_header_i64(call->req, "X-Log-Offset", offset);
  add_header_i64(call->req, "X-Log-Next-Offset", offset + len);
  add_header_i64(call->req, "X-Log-Size", size);
  job_view_release(&j);
  if (len == 0) {
    if (fd >= 0)
      close(fd);
    api__reply_body(call, 200, "text/plain; charset=utf-8", NULL, 0);
    return;
  }
  api__reply_fd(call, 200, "text/plain; charset=utf-8", fd, offset,
                (size_t)len);
  return;

fail:
  job_view_release(&j);
  if (fd >= 0)
    close(fd);
  api__reply_err(call, &e);
}
