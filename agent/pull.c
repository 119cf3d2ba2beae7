/*
 * The destination side of replication on the loop: one struct pull per
 * version being pulled, driven by HTTP answers and done callbacks.
 *
 *   PUT  -> GET the manifest -> plan (pool) -> batches: prep (pool) ->
 *   POST to the source -> apply (pool) ... -> finish (pool): one rename
 *   -> complete; then signatures of the received files (pool, background)
 *
 * The plan's links (pool) run beside the batches, and finish waits for
 * them too.
 *
 * At most `parallel` batches are in flight per pull.  A multi-segment
 * file's signature goes once, in the batch of its first segment; its
 * other segments wait for that answer and then name the signature by
 * hash, so the signature crosses the link once however many segments.
 * A source that cannot be reached is retried with backoff (it may be
 * restarting); answers that do not verify are retried per file.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/router.h"
#include "agent/pull_int.h"
#include "sync/agent_client.h"
#include "sync/path.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#define BACKOFF_FIRST_MS 200
#define BACKOFF_MAX_MS 5000
#define WAIT_MAX_MS 600000
#define BATCH_TIMEOUT_MS 600000u

static void pump(struct pull *p);
static void fetch_manifest(struct pull *p);
static void append(struct pull *p, const struct pull_seg *segs, size_t n);

/* ---- status and waiters ---- */

static json_t *
status_json(const struct pull *p)
{
  const char *state = p->state == PULL_COMPLETE ? "complete"
                      : p->state == PULL_FAILED ? "failed"
                                                : "running";
  uint64_t saved = p->bytes_total > p->bytes_literal
                       ? p->bytes_total - p->bytes_literal
                       : 0;
  json_t *v = json_pack(
      "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
      "state", state, "dataset", p->name, "version", p->v, "files_total",
      (json_int_t)p->files_total, "files_done", (json_int_t)p->files_done,
      "files_resumed", (json_int_t)p->files_resumed, "bytes_total",
      (json_int_t)p->bytes_total, "bytes_done", (json_int_t)p->bytes_done,
      "bytes_wire", (json_int_t)p->bytes_wire, "bytes_saved",
      (json_int_t)saved, "bytes_linked", (json_int_t)p->bytes_linked,
      "retries", (json_int_t)p->retries, "elapsed_ms",
      (json_int_t)((p->ended_ms > 0 ? p->ended_ms : time_mono_ms()) -
                   p->started_ms));

  jsonx_set_str(v, "path", p->state == PULL_COMPLETE ? p->data : NULL);
  jsonx_set_str(v, "error", p->state == PULL_FAILED ? p->error : NULL);
  return v;
}

static void
waiter_closed(uv_handle_t *h)
{
  free(h->data);
}

/* An in-process waiter's answer (agent_pull): how p ended, or that it
 * was stopped. */
static void
waiter_call(struct pull_waiter *w, const struct pull *p)
{
  struct agent_pull_end end = {
      .complete = p->state == PULL_COMPLETE,
      .path = p->state == PULL_COMPLETE ? p->data : NULL,
      .bytes_total = p->bytes_total,
      .bytes_wire = p->bytes_wire,
      .error = p->state == PULL_FAILED ? p->error : NULL};

  if (p->state == PULL_RUNNING)
    end.error = "the agent is closing";
  w->cb(w->cb_arg, &end);
}

static void
waiter_answer(struct pull_waiter *w)
{
  struct pull *p = w->p;

  for (struct pull_waiter **q = &p->waiters; *q != NULL; q = &(*q)->next) {
    if (*q == w) {
      *q = w->next;
      break;
    }
  }
  if (w->req != NULL)
    agent_reply_json(w->req, 200, status_json(p));
  else
    waiter_call(w, p);
  uv_timer_stop(&w->timer);
  w->timer.data = w;
  uv_close((uv_handle_t *)&w->timer, waiter_closed);
}

static void
waiter_timeout(uv_timer_t *t)
{
  waiter_answer(t->data);
}

static void
answer_waiters(struct pull *p)
{
  while (p->waiters != NULL)
    waiter_answer(p->waiters);
}

/* ---- decoded manifests kept for the next plans ---- */

/* The newest completed pulls of the same dataset, whose decoded
 * manifests the plan can use instead of decoding them from disk. */
static void
known_manifests(const struct pull *p, struct plan_work *pw)
{
  for (struct pull *q = p->a->pulls; q != NULL; q = q->next) {
    size_t i;

    if (q == p || q->state != PULL_COMPLETE || q->m.v == NULL ||
        strcmp(q->name, p->name) != 0)
      continue;
    /* Insert newest first; on a full list the oldest falls off. */
    i = pw->nknown;
    if (pw->nknown < PLAN_KNOWN_MAX)
      pw->nknown++;
    for (; i > 0 && pw->known[i - 1].ended_ms < q->ended_ms; i--) {
      if (i < PLAN_KNOWN_MAX)
        pw->known[i] = pw->known[i - 1];
    }
    if (i < PLAN_KNOWN_MAX)
      pw->known[i] = (struct plan_known){q->v, &q->m, q->ended_ms, q};
  }
  for (size_t i = 0; i < pw->nknown; i++)
    pw->known[i].owner->borrowed++;
}

/*
 * A completed pull keeps its decoded manifest only while it is among the
 * PLAN_KNOWN_MAX newest of its dataset (what the next plans borrow) or
 * borrowed, so an agent that pulls version after version does not keep
 * every manifest it ever decoded.
 */
static void
trim_known(struct agent *a, const char *name)
{
  for (struct pull *q = a->pulls; q != NULL; q = q->next) {
    unsigned newer = 0;

    if (q->state != PULL_COMPLETE || q->m.v == NULL || q->borrowed > 0 ||
        strcmp(q->name, name) != 0)
      continue;
    for (const struct pull *r = a->pulls; r != NULL; r = r->next)
      if (r != q && r->state == PULL_COMPLETE && r->m.v != NULL &&
          r->ended_ms >= q->ended_ms && strcmp(r->name, name) == 0)
        newer++;
    if (newer >= PLAN_KNOWN_MAX)
      manifest_release(&q->m);
  }
}

/* ---- ending ---- */

static void
sigs_done(uv_work_t *w, int status)
{
  struct sig_work *sw = w->data;
  struct agent *a = sw->a;

  (void)status;
  for (size_t i = 0; i < sw->n; i++) {
    free(sw->items[i].path);
    free(sw->items[i].fp);
  }
  free(sw->items);
  free(sw);
  a->background--;
  agent_work_done(a);
}

static int
fp_complete(const struct pull_file *f, uint64_t nfp)
{
  static const uint8_t zero[16];

  if (f->fp == NULL)
    return 0;
  for (uint64_t k = 0; k < nfp; k++)
    if (memcmp(f->fp[k], zero, 16) == 0)
      return 0;
  return 1;
}

/* ---- the queues of segments ---- */

static void
segq_release(struct segq *q)
{
  free(q->v);
  memset(q, 0, sizeof(*q));
}

/* Room for n more at the front, or at the back.  Moved, the queue goes
 * in the middle of an array at least twice its size: room at both ends,
 * so that segments put back one at a time cost no move each. */
static void
segq_room(struct segq *q, size_t n, int front)
{
  size_t at;

  if (front ? q->head >= n : q->head + q->len + n <= q->cap)
    return;
  if (q->len + n > q->cap / 2) {
    q->cap = 2 * (q->len + n) + 16;
    q->v = xrealloc(q->v, q->cap * sizeof(*q->v));
  }
  at = (q->cap - q->len) / 2;
  memmove(q->v + at, q->v + q->head, q->len * sizeof(*q->v));
  q->head = at;
}

static void
segq_push_front(struct segq *q, const struct pull_seg *s)
{
  segq_room(q, 1, 1);
  q->v[--q->head] = *s;
  q->len++;
}

static void
segq_push_back(struct segq *q, const struct pull_seg *s)
{
  segq_room(q, 1, 0);
  q->v[q->head + q->len++] = *s;
}

/* Sign what crossed the network, so the next version's deltas need no
 * signature work at transfer time, and record its fingerprints so that
 * its local copies need no SHA-256 and its deltas skip equal blocks. */
static void
queue_signatures(struct pull *p)
{
  struct sig_work *sw;

  if (p->nfiles == 0 || p->a->closing)
    return;
  sw = xcalloc(1, sizeof(*sw));
  sw->a = p->a;
  snprintf(sw->dir, sizeof(sw->dir), "%s", p->data);
  sw->items = xcalloc(p->nfiles, sizeof(*sw->items));
  for (size_t i = 0; i < p->nfiles; i++) {
    const struct manifest_entry *e = &p->m.v[p->files[i].entry];

    if (e->size < PULL_DELTA_MIN)
      continue;
    sw->items[sw->n].path = xstrdup(e->path);
    memcpy(sw->items[sw->n].sha, e->sha256, 32);
    sw->items[sw->n].size = e->size;
    if (fp_complete(&p->files[i], manifest_seg_fp(e, e->nsegs))) {
      sw->items[sw->n].fp = p->files[i].fp;
      sw->items[sw->n].nfp = manifest_seg_fp(e, e->nsegs);
      p->files[i].fp = NULL;
    }
    sw->n++;
  }
  sw->w.data = sw;
  p->a->background++;
  agent_queue(p->a, &sw->w, pull_sigs_run, sigs_done);
}

static void
pull_fail(struct pull *p, const char *fmt, ...) PRINTF_LIKE(2, 3);

static void
pull_fail(struct pull *p, const char *fmt, ...)
{
  va_list ap;

  if (p->state != PULL_RUNNING)
    return;
  va_start(ap, fmt);
  vsnprintf(p->error, sizeof(p->error), fmt, ap);
  va_end(ap);
  utf8_repair(p->error); /* paths cut at a byte count; it goes to JSON */
  p->state = PULL_FAILED;
  p->ended_ms = time_mono_ms();
  uv_timer_stop(&p->retry);
  log_warn("pull %s@%.12s failed: %s", p->name, p->v, p->error);
  answer_waiters(p);
}

static void
finish_done(uv_work_t *w, int status)
{
  struct finish_work *fw = w->data;
  struct pull *p = fw->p;
  struct agent *a = p->a;

  (void)status;
  p->work--;
  if (p->cancelled) {
    /* the agent is closing; staging or the replica stays as it is */
  } else if (fw->rc < 0) {
    pull_fail(p, "%s", err_msg(&fw->e));
  } else {
    p->state = PULL_COMPLETE;
    p->ended_ms = time_mono_ms();
    log_info("pull %s@%.12s complete: %llu files, %llu bytes, %llu on "
             "the wire, %llu linked, %lld ms", p->name, p->v,
             (unsigned long long)p->files_total,
             (unsigned long long)p->bytes_total,
             (unsigned long long)p->bytes_wire,
             (unsigned long long)p->bytes_linked,
             (long long)(time_mono_ms() - p->started_ms));
    answer_waiters(p);
    queue_signatures(p);
    pull_prestage_queue(p);
    /* What only the transfer needed. */
    free(p->mtext);
    p->mtext = NULL;
    pull_files_free(p->files, p->nfiles);
    p->files = NULL;
    p->nfiles = 0;
    segq_release(&p->fetch);
    segq_release(&p->copy);
    trim_known(a, p->name);
  }
  free(fw);
  agent_work_done(a);
}

static void
maybe_finish(struct pull *p)
{
  struct finish_work *fw;

  if (p->state != PULL_RUNNING || p->cancelled || !p->planned ||
      p->fetch.len > 0 || p->copy.len > 0 || p->batches > 0 ||
      p->work > 0)
    return;
  fw = xcalloc(1, sizeof(*fw));
  fw->p = p;
  fw->w.data = fw;
  p->work++;
  agent_queue(p->a, &fw->w, pull_finish_run, finish_done);
}

/* ---- the source is away: back off and try again ---- */

static void
retry_cb(uv_timer_t *t)
{
  struct pull *p = t->data;

  if (p->state != PULL_RUNNING || p->cancelled)
    return;
  if (!p->planned && p->work == 0)
    fetch_manifest(p);
  else
    pump(p);
}

/* 1 when the caller should retry later, 0 when the pull failed. */
static int
source_away(struct pull *p, const char *what, const struct err *e)
{
  int64_t now = time_mono_ms();

  if (p->failing_since == 0)
    p->failing_since = now;
  if (now - p->failing_since > PULL_GIVE_UP_MS) {
    pull_fail(p, "source unreachable for %lld s (%s): %s",
              (long long)((now - p->failing_since) / 1000), what,
              err_msg(e));
    return 0;
  }
  p->backoff_ms = p->backoff_ms == 0 ? BACKOFF_FIRST_MS
                  : p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                       : p->backoff_ms * 2;
  log_info("pull %s@%.12s: source unreachable (%s: %s); again in %u ms",
           p->name, p->v, what, err_msg(e), p->backoff_ms);
  if (!uv_is_active((uv_handle_t *)&p->retry))
    uv_timer_start(&p->retry, retry_cb, p->backoff_ms, 0);
  return 1;
}

static void
source_back(struct pull *p)
{
  p->failing_since = 0;
  p->backoff_ms = 0;
}

/* The source's error message from an answer body, into out. */
static void
answer_error(const struct http_client_response *r, char *out, size_t len)
{
  struct err got;

  if (http_error_parse(r->body, r->len, &got) == 0)
    snprintf(got.msg, sizeof(got.msg), "(no message)");
  snprintf(out, len, "source answered %d: %.220s", r->status, got.msg);
  /* The message may be cut inside a character: out ends up in JSON. */
  utf8_repair(out);
}

static void
add_auth(const struct pull *p, char *hdr, size_t len)
{
  snprintf(hdr, len, "Authorization: Bearer %s", p->src_token);
}

/* ---- the manifest and the plan ---- */

/* Give the borrowed manifests back and free the plan. */
static void
plan_end(struct plan_work *pw)
{
  struct agent *a = pw->p->a;

  for (size_t i = 0; i < pw->nknown; i++)
    pw->known[i].owner->borrowed--;
  trim_known(a, pw->p->name);
  pull_plan_release(pw);
  free(pw);
  agent_work_done(a);
}

static void
links_done(uv_work_t *w, int status)
{
  struct plan_work *pw = w->data;
  struct pull *p = pw->p;

  (void)status;
  p->work--;
  if (!p->cancelled && p->state == PULL_RUNNING && pw->rc < 0) {
    pull_fail(p, "%s", err_msg(&pw->e));
  } else if (!p->cancelled && p->state == PULL_RUNNING) {
    size_t first = p->nfiles;

    p->files_done += pw->files_done;
    p->bytes_done += pw->bytes_done;
    p->bytes_linked += pw->bytes_linked;
    p->mstored = pw->stored;
    /* Files that could be neither linked nor copied: fetched after all,
     * into the room plan_done kept, so no batch sees the table move. */
    if (pw->nfiles > 0) {
      if (first + pw->nfiles > p->files_cap)
        abort();
      memcpy(p->files + first, pw->files, pw->nfiles * sizeof(*p->files));
      free(pw->files);
      pw->files = NULL;
      pw->capfiles = 0;
      p->nfiles += pw->nfiles;
      pw->nfiles = 0;
      for (size_t i = 0; i < pw->qlen; i++)
        pw->queue[i].file += (uint32_t)first;
      append(p, pw->queue, pw->qlen);
    }
    pump(p);
    maybe_finish(p);
  }
  plan_end(pw);
}

static void
plan_done(uv_work_t *w, int status)
{
  struct plan_work *pw = w->data;
  struct pull *p = pw->p;

  (void)status;
  p->work--;
  if (pw->refetch && !p->cancelled && p->state == PULL_RUNNING) {
    log_warn("pull %s@%.12s: the manifest delta against %.12s did not "
             "apply (%s); fetching it whole", p->name, p->v, p->delta_base,
             err_msg(&pw->e));
    p->whole = 1;
    plan_end(pw);
    fetch_manifest(p);
    return;
  }
  if (p->cancelled || p->state != PULL_RUNNING || pw->rc < 0) {
    if (!p->cancelled && p->state == PULL_RUNNING)
      pull_fail(p, "%s", err_msg(&pw->e));
    plan_end(pw);
    return;
  }
  p->m = pw->m;
  manifest_init(&pw->m);
  pw->man = &p->m;
  p->mtext = pw->text;
  p->mlen = pw->len;
  p->mstored = 0;
  pw->text = NULL;
  p->files_cap = pw->nfiles + pw->nlinks;
  p->files = p->files_cap > 0
                 ? xrealloc(pw->files, p->files_cap * sizeof(*p->files))
                 : NULL;
  p->nfiles = pw->nfiles;
  pw->files = NULL;
  pw->nfiles = 0;
  pw->capfiles = 0;
  append(p, pw->queue, pw->qlen);
  free(pw->queue);
  pw->queue = NULL;
  pw->qlen = 0;
  pw->capqueue = 0;
  p->files_total = p->m.files;
  p->bytes_total = p->m.bytes;
  p->files_done = pw->files_done;
  p->files_resumed = pw->files_resumed;
  p->bytes_done = pw->bytes_done;
  p->bytes_linked = pw->bytes_linked; /* kept from a prestaged tree */
  pw->files_done = pw->bytes_done = pw->bytes_linked = 0;
  p->planned = 1;
  log_info("pull %s@%.12s: %zu files to fetch (%zu segments), %zu to link, "
           "%zu kept from the prestaged tree, %llu files resumed; manifest "
           "%zu bytes%s%.12s", p->name, p->v, p->nfiles,
           p->fetch.len + p->copy.len,
           pw->nlinks, pw->kept, (unsigned long long)p->files_resumed,
           pw->fetched, pw->delta ? ", a delta against " : "",
           pw->delta ? p->delta_base : "");
  pump(p);
  if (pw->nlinks == 0) {
    maybe_finish(p);
    plan_end(pw);
    return;
  }
  /* The same work item again: the links, while the batches run. */
  p->work++;
  agent_queue(p->a, &pw->w, pull_links_run, links_done);
  agent_work_done(p->a);
}

static void
manifest_cb(void *arg, int rc, const struct http_client_response *r,
            const struct err *e)
{
  struct pull *p = arg;
  struct plan_work *pw;

  p->work--;
  if (p->cancelled || p->state != PULL_RUNNING)
    return;
  if (rc < 0) {
    (void)source_away(p, "fetching the manifest", e);
    return;
  }
  if (r->status >= 500) {
    struct err se;

    se.code = ERR_SITE;
    answer_error(r, se.msg, sizeof(se.msg));
    (void)source_away(p, "fetching the manifest", &se);
    return;
  }
  if (r->status != 200) {
    char msg[ERR_MSG_SIZE];

    answer_error(r, msg, sizeof(msg));
    pull_fail(p, "manifest: %s", msg);
    return;
  }
  source_back(p);
  p->bytes_wire += r->len;
  pw = xcalloc(1, sizeof(*pw));
  pw->p = p;
  pw->text = xmalloc(r->len + 1);
  memcpy(pw->text, r->body, r->len);
  pw->text[r->len] = '\0';
  pw->len = r->len;
  pw->fetched = r->len;
  pw->delta = p->delta_base[0] != '\0' &&
              r->len >= strlen(MANIFEST_DELTA_MAGIC) &&
              memcmp(r->body, MANIFEST_DELTA_MAGIC,
                     strlen(MANIFEST_DELTA_MAGIC)) == 0;
  manifest_init(&pw->m);
  known_manifests(p, pw);
  pw->w.data = pw;
  p->work++;
  agent_queue(p->a, &pw->w, pull_plan_run, plan_done);
}

static void
fetch_manifest(struct pull *p)
{
  struct http_client_request r;
  struct err e = {0};
  char url[2048], auth[4200];
  const char *headers[2] = {auth, NULL};
  int64_t base_ended = 0;

  /* Against the newest replica still decoded here, the manifest comes
   * as the change from it (docs/SYNC.md "Manifest deltas"). */
  p->delta_base[0] = '\0';
  for (const struct pull *q = p->a->pulls; q != NULL && !p->whole;
       q = q->next) {
    if (q != p && q->state == PULL_COMPLETE && q->m.v != NULL &&
        strcmp(q->name, p->name) == 0 &&
        (p->delta_base[0] == '\0' || q->ended_ms > base_ended)) {
      snprintf(p->delta_base, sizeof(p->delta_base), "%s", q->v);
      base_ended = q->ended_ms;
    }
  }
  snprintf(url, sizeof(url), "%s/v1/datasets/%s/versions/%s/manifest%s%s",
           p->src_url, p->name, p->v, p->delta_base[0] ? "?base=" : "",
           p->delta_base);
  add_auth(p, auth, sizeof(auth));
  memset(&r, 0, sizeof(r));
  r.method = "GET";
  r.url = url;
  r.headers = headers;
  r.max_response = MANIFEST_MAX_TEXT;
  r.timeout_ms = BATCH_TIMEOUT_MS;
  p->work++;
  if (http_client_send(p->a->client, &r, manifest_cb, p, &e) < 0) {
    p->work--;
    pull_fail(p, "source url '%s': %s", p->src_url, err_msg(&e));
  }
}

/* ---- batches ---- */

static void
batch_free(struct batch_req *br)
{
  buf_release(&br->body);
  free(br->answer);
  free(br->segs);
  free(br->sigmode);
  free(br->sigref);
  free(br->result);
  free(br);
}

static struct segq *
queue_of(struct pull *p, const struct pull_seg *s)
{
  return s->local ? &p->copy : &p->fetch;
}

/* Put a batch's segments back at the front of their queues, in order. */
static void
requeue(struct pull *p, const struct pull_seg *segs, size_t n)
{
  size_t copies = 0;

  for (size_t i = 0; i < n; i++)
    copies += segs[i].local != 0;
  segq_room(&p->copy, copies, 1);
  segq_room(&p->fetch, n - copies, 1);
  for (size_t i = n; i > 0; i--)
    segq_push_front(queue_of(p, &segs[i - 1]), &segs[i - 1]);
}

/* Put segments at the back of their queues. */
static void
append(struct pull *p, const struct pull_seg *segs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    segq_push_back(queue_of(p, &segs[i]), &segs[i]);
}

static void
batch_end(struct pull *p, struct batch_req *br)
{
  struct agent *a = p->a;

  p->batches--;
  p->copying -= br->local;
  batch_free(br);
  if (!p->cancelled && p->state == PULL_RUNNING) {
    pump(p);
    maybe_finish(p);
  }
  agent_work_done(a);
}

static void
apply_done(uv_work_t *w, int status)
{
  struct batch_req *br = w->data;
  struct pull *p = br->p;

  (void)status;
  p->work--;
  p->bytes_literal += br->literal;
  if (p->cancelled || p->state != PULL_RUNNING)
    goto out;
  if (br->fatal < 0) {
    pull_fail(p, "%s", br->msg);
    goto out;
  }
  for (size_t i = 0; i < br->nsegs; i++) {
    struct pull_file *f = &p->files[br->segs[i].file];
    const struct manifest_entry *e = &p->m.v[f->entry];
    uint64_t off, len;

    manifest_seg_range(e, br->segs[i].seg, &off, &len);
    switch (br->result[i]) {
    case SEG_OK:
      if (br->sigmode[i] == WIRE_SIG && f->sig == SIG_SENDING)
        f->sig = SIG_ACKED;
      p->bytes_done += len;
      if (--f->segs_left == 0) {
        struct err fe = {0};

        if (e->nsegs > 1 && pull_file_finish(p, f, &fe) < 0) {
          pull_fail(p, "%s", err_msg(&fe));
          goto out;
        }
        p->files_done++;
      }
      break;
    case SEG_CONFLICT:
      pull_fail(p, "%s", br->msg);
      goto out;
    case SEG_SIG_MISSING:
      f->sig = SIG_NONE;
      requeue(p, &br->segs[i], 1);
      break;
    case SEG_CORRUPT: {
      /* Counted per segment: a large file on a flaky link may see many
       * damaged answers, each of another segment. */
      uint8_t *tries = &f->attempts;

      if (e->nsegs > 1) {
        if (f->seg_attempts == NULL)
          f->seg_attempts = xcalloc(e->nsegs, 1);
        tries = &f->seg_attempts[br->segs[i].seg];
      }
      p->retries++;
      if (++*tries >= PULL_MAX_ATTEMPTS) {
        if (e->nsegs > 1)
          pull_fail(p, "file '%s' segment %u did not verify after %d "
                    "attempts", e->path, br->segs[i].seg, PULL_MAX_ATTEMPTS);
        else
          pull_fail(p, "file '%s' did not verify after %d attempts",
                    e->path, PULL_MAX_ATTEMPTS);
        goto out;
      }
      /* The last attempt goes without delta: a bad basis cannot spoil
       * it. */
      if (*tries == PULL_MAX_ATTEMPTS - 1)
        f->full = 1;
      if (br->sigmode[i] == WIRE_SIG && f->sig == SIG_SENDING)
        f->sig = SIG_NONE;
      br->segs[i].local = 0;
      requeue(p, &br->segs[i], 1);
      break;
    }
    default: /* no answer frame for it */
      if (br->sigmode[i] == WIRE_SIG && f->sig == SIG_SENDING)
        f->sig = SIG_NONE;
      requeue(p, &br->segs[i], 1);
      break;
    }
  }

out:
  batch_end(p, br);
}

static void
send_cb(void *arg, int rc, const struct http_client_response *r,
        const struct err *e)
{
  struct batch_req *br = arg;
  struct pull *p = br->p;
  struct err se;

  p->work--;
  if (p->cancelled || p->state != PULL_RUNNING) {
    p->batches--;
    batch_free(br);
    maybe_finish(p);
    return;
  }
  if (rc < 0 || r->status >= 500) {
    if (rc >= 0) {
      se.code = ERR_SITE;
      answer_error(r, se.msg, sizeof(se.msg));
      e = &se;
    }
    for (size_t i = 0; i < br->nsegs; i++) {
      struct pull_file *f = &p->files[br->segs[i].file];

      if (br->sigmode[i] == WIRE_SIG && f->sig == SIG_SENDING)
        f->sig = SIG_NONE;
    }
    requeue(p, br->segs, br->nsegs);
    p->batches--;
    batch_free(br);
    (void)source_away(p, "sending a batch", e);
    return;
  }
  if (r->status != 200) {
    char msg[ERR_MSG_SIZE];

    answer_error(r, msg, sizeof(msg));
    p->batches--;
    batch_free(br);
    pull_fail(p, "batch: %s", msg);
    return;
  }
  source_back(p);
  p->bytes_wire += br->body.len + r->len;
  br->answer = http_client_response_take(r, &br->answer_len);
  buf_release(&br->body);
  br->result = xcalloc(br->nsegs, 1);
  br->w.data = br;
  p->work++;
  agent_queue(p->a, &br->w, pull_apply_run, apply_done);
}

static void
prep_done(uv_work_t *w, int status)
{
  struct batch_req *br = w->data;
  struct pull *p = br->p;
  struct agent *a = p->a;
  struct http_client_request r;
  struct err e = {0};
  char url[2048], auth[4200];
  const char *headers[3] = {auth,
                            "Content-Type: application/x-tenbin-batch",
                            NULL};

  (void)status;
  p->work--;
  if (p->cancelled || p->state != PULL_RUNNING) {
    p->batches--;
    batch_free(br);
    agent_work_done(a);
    return;
  }
  if (br->rc < 0) {
    p->batches--;
    pull_fail(p, "%s", err_msg(&br->e));
    batch_free(br);
    agent_work_done(a);
    return;
  }
  for (size_t i = 0; i < br->nsegs; i++) {
    struct pull_file *f = &p->files[br->segs[i].file];

    if (br->sigmode[i] == WIRE_SIG && p->m.v[f->entry].nsegs > 1)
      memcpy(f->sig_sha, br->carrier_sha, 32);
  }
  snprintf(url, sizeof(url), "%s/v1/datasets/%s/versions/%s/batch",
           p->src_url, p->name, p->v);
  add_auth(p, auth, sizeof(auth));
  memset(&r, 0, sizeof(r));
  r.method = "POST";
  r.url = url;
  r.headers = headers;
  r.body = br->body.data;
  r.body_len = br->body.len;
  r.max_response = AGENT_ANSWER_MAX;
  r.timeout_ms = BATCH_TIMEOUT_MS;
  r.max_recv_speed = p->bwlimit / a->parallel;
  p->work++;
  if (http_client_send(a->client, &r, send_cb, br, &e) < 0) {
    p->work--;
    p->batches--;
    pull_fail(p, "source url '%s': %s", p->src_url, err_msg(&e));
    batch_free(br);
  }
  agent_work_done(a);
}

/*
 * Take segments off the queue into one batch: up to batch_bytes of
 * segment data, and an even share of the queue's segments among the
 * batch slots free now (between PULL_MIN_FRAMES and PULL_MAX_FRAMES).
 * The source answers a batch on one thread: many small files in a few
 * big batches would leave a core idle at the source and the
 * destination's writing to wait for whole batches.  Each batch costs a
 * round trip, and its answer starts where TCP's window is, so fewer
 * rounds matter on a long path.  A share of the free slots, not a
 * parallel'th of the queue, because the latter leaves a tail: the
 * slots taking 1/4, 1/4 of the rest, ... of 600 small files sent ~190 of
 * them in later rounds, each after a batch before it was applied.  A
 * segment of a file whose signature is on its way waits (the batch
 * stops there).  NULL when none can go now.
 */
static struct batch_req *
take_fetches(struct pull *p)
{
  struct batch_req *br = NULL;
  uint64_t bytes = 0;
  size_t cap = 0;
  struct segq *q = &p->fetch;
  unsigned slots = p->batches < p->a->parallel
                       ? p->a->parallel - p->batches
                       : 1;
  size_t frames = (q->len + slots - 1) / slots;

  frames = frames < PULL_MIN_FRAMES   ? PULL_MIN_FRAMES
           : frames > PULL_MAX_FRAMES ? PULL_MAX_FRAMES
                                      : frames;

  while (q->len > 0) {
    struct pull_seg s = q->v[q->head];
    struct pull_file *f = &p->files[s.file];
    const struct manifest_entry *e = &p->m.v[f->entry];
    int multi = e->nsegs > 1;
    uint64_t off, len;
    uint8_t mode = 0;

    manifest_seg_range(e, s.seg, &off, &len);
    if (br != NULL &&
        (bytes + len > p->a->batch_bytes || br->nsegs == frames))
      break;
    if (multi && f->sig == SIG_SENDING && f->basis != NULL && !f->full)
      break;
    if (br == NULL) {
      br = xcalloc(1, sizeof(*br));
      br->p = p;
    }
    if (br->nsegs == cap) {
      cap = cap == 0 ? 16 : cap * 2;
      br->segs = xrealloc(br->segs, cap * sizeof(*br->segs));
      br->sigmode = xrealloc(br->sigmode, cap);
      br->sigref = xrealloc(br->sigref, cap * 32);
    }
    if (f->basis != NULL && !f->full) {
      if (s.rfrom != UINT32_MAX) {
        mode = WIRE_SIGRANGE;
      } else if (!multi) {
        mode = WIRE_SIG;
      } else if (f->sig == SIG_ACKED) {
        mode = WIRE_SIGREF;
        memcpy(br->sigref[br->nsegs], f->sig_sha, 32);
      } else {
        mode = WIRE_SIG;
        f->sig = SIG_SENDING;
      }
    }
    br->segs[br->nsegs] = s;
    br->sigmode[br->nsegs] = mode;
    br->nsegs++;
    bytes += len;
    q->head++;
    q->len--;
    /* The carrier of a signature goes alone: its answer acks it. */
    if (mode == WIRE_SIG && multi)
      break;
  }
  if (q->len == 0)
    q->head = 0;
  return br;
}

/* One local copy off its queue (each goes alone, so that copies run in
 * parallel). */
static struct batch_req *
take_copy(struct pull *p)
{
  struct segq *q = &p->copy;
  struct batch_req *br = xcalloc(1, sizeof(*br));

  br->p = p;
  br->local = 1;
  br->segs = xmalloc(sizeof(*br->segs));
  br->sigmode = xcalloc(1, 1);
  br->sigref = xmalloc(32);
  br->segs[0] = q->v[q->head++];
  br->nsegs = 1;
  if (--q->len == 0)
    q->head = 0;
  return br;
}

static void
pump(struct pull *p)
{
  while (p->state == PULL_RUNNING && !p->cancelled && p->planned &&
         !uv_is_active((uv_handle_t *)&p->retry)) {
    struct batch_req *br = NULL;

    /* Fetches first (they wait on the network), copies in the slots
     * they leave: --parallel in all. */
    if (p->batches >= p->a->parallel)
      break;
    br = take_fetches(p);
    if (br == NULL && p->copy.len > 0)
      br = take_copy(p);
    if (br == NULL)
      break;
    p->batches++;
    p->copying += br->local;
    p->work++;
    br->w.data = br;
    if (br->local) {
      br->result = xcalloc(br->nsegs, 1);
      agent_queue(p->a, &br->w, pull_local_run, apply_done);
    } else {
      agent_queue(p->a, &br->w, pull_prep_run, prep_done);
    }
  }
}

/* ---- routes ---- */

static struct pull *
pull_find(struct agent *a, const char *name, const char *v)
{
  for (struct pull *p = a->pulls; p != NULL; p = p->next) {
    if (strcmp(p->name, name) == 0 && strcmp(p->v, v) == 0)
      return p;
  }
  return NULL;
}

static void
pull_reset(struct pull *p)
{
  manifest_release(&p->m);
  manifest_init(&p->m);
  free(p->mtext);
  p->mtext = NULL;
  pull_files_free(p->files, p->nfiles);
  p->files = NULL;
  p->nfiles = 0;
  segq_release(&p->fetch);
  segq_release(&p->copy);
  p->planned = 0;
  p->state = PULL_RUNNING;
  p->error[0] = '\0';
  p->files_total = p->files_done = p->files_resumed = 0;
  p->bytes_total = p->bytes_done = p->bytes_wire = p->bytes_literal = 0;
  p->bytes_linked = p->retries = 0;
  p->failing_since = 0;
  p->backoff_ms = 0;
  p->started_ms = time_mono_ms();
  p->ended_ms = 0;
}

/* The query's wait_ms into *out (0 when absent); -1 after answering
 * req with 400. */
static int
wait_param(struct http_request *req, long *out)
{
  const char *wait = http_request_query(req, "wait_ms");
  char *end;

  *out = 0;
  if (wait == NULL)
    return 0;
  *out = strtol(wait, &end, 10);
  if (*wait == '\0' || *end != '\0' || *out < 0 || *out > WAIT_MAX_MS) {
    agent_reply_errf(req, ERR_INVALID, "query parameter 'wait_ms': must "
                     "be an integer between 0 and %d", WAIT_MAX_MS);
    return -1;
  }
  return 0;
}

/* Answer req with p's status: now (with status), or, while p runs and
 * wait_ms > 0, with 200 once p ends or wait_ms have passed. */
static void
reply_status(struct pull *p, struct http_request *req, int status,
             long wait_ms)
{
  struct pull_waiter *w;

  if (p->state != PULL_RUNNING || wait_ms <= 0) {
    agent_reply_json(req, status, status_json(p));
    return;
  }
  w = xcalloc(1, sizeof(*w));

  w->req = req;
  w->p = p;
  uv_timer_init(p->a->loop, &w->timer);
  w->timer.data = w;
  uv_timer_start(&w->timer, waiter_timeout, (uint64_t)wait_ms, 0);
  w->next = p->waiters;
  p->waiters = w;
}

static void
complete_json(struct http_request *req, const char *name,
              const struct store_version *sv)
{
  json_t *v = json_pack("{s:s, s:s, s:s, s:s, s:n}", "state", "complete",
                        "dataset", name, "version", sv->version, "path",
                        sv->path, "error");

  agent_reply_json(req, 200, v);
}

/* Where a pull comes from, checked for PUT's body and agent_pull alike;
 * ERR_INVALID naming the field. */
static int
check_source(const char *url, const char *token, struct err *e)
{
  if (url == NULL || (strncmp(url, "http://", 7) != 0 &&
                      strncmp(url, "https://", 8) != 0) ||
      strlen(url) > 1024)
    return err_set(e, ERR_INVALID, "field 'source.url': an http(s) URL of "
                   "at most 1024 bytes is required");
  if (token == NULL || strlen(token) > 4096 || strchr(token, '\n') ||
      strchr(token, '\r'))
    return err_set(e, ERR_INVALID, "field 'source.token': required, one "
                   "line of at most 4096 bytes");
  return 0;
}

/*
 * Start (or restart, after a failure) the pull of v of name from url, or
 * find it running: *out is the pull, 1 when it was running already, 0
 * when it starts now.  ERR_UNAVAILABLE while a failed attempt winds
 * down.  The version must not be held here (the caller looked).
 */
static int
pull_start(struct agent *a, const char *name, const char *v,
           const char *url, const char *token, uint64_t bwlimit,
           struct pull **out, struct err *e)
{
  struct pull *p = pull_find(a, name, v);
  size_t n;

  *out = p;
  if (p != NULL && p->state == PULL_RUNNING)
    return 1;
  if (p == NULL) {
    p = xcalloc(1, sizeof(*p));
    p->a = a;
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->v, sizeof(p->v), "%s", v);
    manifest_init(&p->m);
    store_staging_dir(a->store, name, v, p->staging, sizeof(p->staging));
    store_data_dir(a->store, name, v, p->data, sizeof(p->data));
    uv_timer_init(a->loop, &p->retry);
    p->retry.data = p;
    p->next = a->pulls;
    a->pulls = p;
    *out = p;
  } else if (p->work > 0) {
    /* A failed pull still finishing its last work: ask again soon. */
    return err_set(e, ERR_UNAVAILABLE, "the previous attempt is still "
                   "winding down; try again in a moment");
  }
  free(p->src_url);
  free(p->src_token);
  p->src_url = xstrdup(url);
  n = strlen(p->src_url);
  while (n > 0 && p->src_url[n - 1] == '/')
    p->src_url[--n] = '\0';
  p->src_token = xstrdup(token);
  p->bwlimit = bwlimit;
  pull_reset(p);
  log_info("pull %s@%.12s from %s started", name, v, p->src_url);
  fetch_manifest(p);
  return 0;
}

int
agent_pull(struct agent *a, const struct agent_pull_req *r, char *path,
           size_t pathlen, struct err *e)
{
  struct store_version held;
  struct pull_waiter *w;
  struct pull *p;
  int rc;

  if (r->name == NULL || !syncpath_valid_name(r->name))
    return err_set(e, ERR_INVALID, "dataset name '%.64s' must match "
                   "[A-Za-z0-9][A-Za-z0-9._-]{0,63}",
                   r->name != NULL ? r->name : "");
  if (r->version == NULL || !agentc_valid_version(r->version))
    return err_set(e, ERR_INVALID, "version '%.70s' is not a 64-digit "
                   "lowercase hex id", r->version != NULL ? r->version : "");
  rc = check_source(r->src_url, r->src_token, e);
  if (rc < 0)
    return rc;
  if (r->cb == NULL)
    return err_set(e, ERR_INVALID, "agent_pull: no callback");
  if (a->closing)
    return err_set(e, ERR_UNAVAILABLE, "the agent is stopping");
  if (store_version_get(a->store, r->name, r->version, &held)) {
    snprintf(path, pathlen, "%s", held.path);
    return AGENT_PULL_HELD;
  }
  rc = pull_start(a, r->name, r->version, r->src_url, r->src_token,
                  r->bwlimit, &p, e);
  if (rc < 0)
    return rc;
  /* Failed at once (the request could not even be sent): say so now,
   * rather than call back from inside this call. */
  if (p->state == PULL_FAILED)
    return err_set(e, ERR_UNAVAILABLE, "%s", p->error);
  w = xcalloc(1, sizeof(*w));
  w->cb = r->cb;
  w->cb_arg = r->arg;
  w->p = p;
  uv_timer_init(a->loop, &w->timer);
  w->timer.data = w;
  w->next = p->waiters;
  p->waiters = w;
  return rc == 1 ? AGENT_PULL_JOINED : AGENT_PULL_STARTED;
}

void
pull_put(struct agent *a, struct http_request *req, const char *name,
         const char *v)
{
  static const struct jsonx_field fields[] = {
      {"source", JX_OBJECT}, {"bwlimit", JX_INT}, {NULL, 0}};
  static const struct jsonx_field src_fields[] = {
      {"url", JX_STRING}, {"token", JX_STRING}, {NULL, 0}};
  struct store_version held;
  struct pull *p;
  struct err e = {0};
  json_t *body = NULL;
  const json_t *src;
  const char *url, *token;
  int64_t bwlimit;
  long wait_ms;
  int rc;

  if (wait_param(req, &wait_ms) < 0)
    return;
  if (agent_body_json(req, &body, &e) < 0 ||
      jsonx_check(body, fields, "", &e) < 0)
    goto fail;
  src = json_object_get(body, "source");
  if (src == NULL || json_is_null(src)) {
    err_set(&e, ERR_INVALID, "field 'source': required ({\"url\", "
            "\"token\"})");
    goto fail;
  }
  if (jsonx_check(src, src_fields, "source.", &e) < 0)
    goto fail;
  url = jsonx_str(src, "url");
  token = jsonx_str(src, "token");
  if (check_source(url, token, &e) < 0)
    goto fail;
  if (jsonx_int(body, "bwlimit", 0, (int64_t)1 << 40, 0, &bwlimit, "",
                &e) < 0)
    goto fail;

  if (store_version_get(a->store, name, v, &held)) {
    json_decref(body);
    complete_json(req, name, &held);
    return;
  }
  rc = pull_start(a, name, v, url, token, (uint64_t)bwlimit, &p, &e);
  json_decref(body);
  if (rc < 0) {
    agent_reply_err(req, &e);
    return;
  }
  /* Running already: its status, as a GET would give it. */
  reply_status(p, req, rc == 1 ? 200 : 202, wait_ms);
  return;

fail:
  json_decref(body);
  agent_reply_err(req, &e);
}

void
pull_get(struct agent *a, struct http_request *req, const char *name,
         const char *v)
{
  struct store_version held;
  struct pull *p = pull_find(a, name, v);
  long wait_ms;

  if (wait_param(req, &wait_ms) < 0)
    return;
  if (p == NULL) {
    if (store_version_get(a->store, name, v, &held)) {
      complete_json(req, name, &held);
      return;
    }
    agent_reply_errf(req, ERR_NOT_FOUND, "no pull of %s@%.64s here, and "
                     "the version is not held here", name, v);
    return;
  }
  reply_status(p, req, 200, wait_ms);
}

void
pull_cancel_all(struct agent *a)
{
  for (struct pull *p = a->pulls; p != NULL; p = p->next) {
    p->cancelled = 1;
    answer_waiters(p);
    uv_close((uv_handle_t *)&p->retry, NULL);
  }
  pull_prestage_cancel(a);
}

void
pull_free_all(struct agent *a)
{
  while (a->pulls != NULL) {
    struct pull *p = a->pulls;

    a->pulls = p->next;
    pull_reset(p);
    manifest_release(&p->m);
    free(p->src_url);
    free(p->src_token);
    free(p);
  }
}
