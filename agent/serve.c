/*
 * The source side of replication: serving the manifests of versions
 * published here (publish.c), and answering batches of signatures with
 * deltas.
 *
 * A batch is validated on the loop (a walk over 16-byte headers) so that
 * a malformed one is a prompt 400, then computed on the thread pool: one
 * work item per batch, so a destination with several batches in flight
 * keeps every core busy.  Each segment read is checked against the
 * XXH3-128 recorded when the version was published; a file changed since
 * then is named in an ERROR frame and never sent.
 *
 * Versions being served are cached (manifest and checks, loaded on the
 * pool) and so are signatures sent by destinations, under the SHA-256 of
 * their bytes, so that the segments of one large file, spread over many
 * batches, carry its signature once.  Both caches are bounded.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync/agent_client.h"
#include "agent/agent_int.h"
#include "sync/delta.h"
#include "sync/path.h"
#include "sync/wire.h"
#include "util/alloc.h"
#include "util/fileio.h"
#include "util/grow.h"
#include "util/fault.h"
#include "util/hash.h"
#include "util/jsonx.h"
#include "util/log.h"

#define SERVED_MAX 8                      /* versions kept loaded */
/* Batches computed at once, whoever asks: with answers of at most
 * AGENT_ANSWER_MAX this bounds the source's batch memory; a destination
 * told 503 backs off and asks again. */
#define SERVE_BATCHES_MAX 8
#define SIGCACHE_MAX ((size_t)256 << 20) /* bytes of signatures kept */

/* A version loaded for serving; refs keep it while batches use it. */
struct served {
  char name[72];
  char v[MANIFEST_ID_HEX + 1];
  char rel[PATH_MAX];          /* its source directory under the root */
  struct manifest m;
  struct manifest_checks c;
  int refs;
  int loaded;                  /* 0 while the pool loads it */
  struct err load_err;
  uint64_t used;               /* LRU clock */
  struct served_waiter *waiters;
  struct served *next;
};

struct served_waiter {
  void (*cb)(struct agent *a, struct served *sv, const struct err *e,
             void *arg);
  void *arg;
  struct served_waiter *next;
};

/* A signature a destination sent, shared by the batches that use it,
 * with the basis' fingerprint table that came with it (or none). */
struct sigent {
  uint8_t sha[32];
  uint8_t *bytes;
  size_t len;
  uint8_t *fps;
  size_t fps_len;
  int refs;
  uint64_t used;
  struct sigent *next;
};

struct serve_state {
#ifdef TENBIN_FAULTS
  /* Test-only fault switch (TENBIN_FAULT): flip a byte in this many
   * answers (-1: all), to prove that destinations verify. */
  atomic_int corrupt_left;
  int corrupt_deltas;          /* and in every manifest delta */
  /* or in the first answer of each (file, segment), recorded here */
  int corrupt_each;
  pthread_mutex_t corrupt_mu;
  uint64_t *corrupted;
  size_t ncorrupted;
#endif
  atomic_ullong served_bytes;  /* DATA and DELTA payload answered */
  unsigned batches;            /* accepted and not answered yet */
  struct served *served;
  struct sigent *sigs;
  size_t sig_bytes;
  uint64_t clock;
};

void
serve_new(struct agent *a)
{
  a->serve = xcalloc(1, sizeof(*a->serve));
#ifdef TENBIN_FAULTS
  a->serve->corrupt_deltas = fault_armed("corrupt-manifest-deltas");
  a->serve->corrupt_each = fault_armed("corrupt-each-segment-once");
  pthread_mutex_init(&a->serve->corrupt_mu, NULL);
  if (fault_armed("corrupt-answers"))
    atomic_store(&a->serve->corrupt_left, 2);
  else if (fault_armed("corrupt-all-answers"))
    atomic_store(&a->serve->corrupt_left, -1);
#endif
}

uint64_t
serve_served_bytes(const struct agent *a)
{
  return atomic_load(&a->serve->served_bytes);
}

#ifdef TENBIN_FAULTS
/* The fault switch: 1 when this answer (segment seg of file) is to be
 * corrupted. */
static int
corrupt_this(struct serve_state *st, uint32_t file, uint32_t seg)
{
  int left = atomic_load(&st->corrupt_left);

  if (st->corrupt_each) {
    uint64_t key = (uint64_t)file << 32 | seg;
    int fresh = 1;

    pthread_mutex_lock(&st->corrupt_mu);
    for (size_t i = 0; fresh && i < st->ncorrupted; i++)
      fresh = st->corrupted[i] != key;
    if (fresh) {
      st->corrupted = xrealloc(st->corrupted, (st->ncorrupted + 1) *
                                                  sizeof(*st->corrupted));
      st->corrupted[st->ncorrupted++] = key;
    }
    pthread_mutex_unlock(&st->corrupt_mu);
    return fresh;
  }

  while (left != 0) {
    if (left < 0)
      return 1;
    if (atomic_compare_exchange_weak(&st->corrupt_left, &left, left - 1))
      return 1;
  }
  return 0;
}
#endif

static void
served_free(struct served *sv)
{
  manifest_release(&sv->m);
  manifest_checks_release(&sv->c);
  free(sv);
}

static void
sigent_free(struct sigent *s)
{
  free(s->bytes);
  free(s->fps);
  free(s);
}

void
serve_free(struct agent *a)
{
  struct serve_state *st = a->serve;

  if (st == NULL)
    return;
  while (st->served != NULL) {
    struct served *sv = st->served;

    st->served = sv->next;
    served_free(sv);
  }
  while (st->sigs != NULL) {
    struct sigent *s = st->sigs;

    st->sigs = s->next;
    sigent_free(s);
  }
#ifdef TENBIN_FAULTS
  free(st->corrupted);
  pthread_mutex_destroy(&st->corrupt_mu);
#endif
  free(st);
  a->serve = NULL;
}

void
serve_versions(struct agent *a, struct http_request *req, const char *name)
{
  struct store_version *all = NULL;
  size_t n = 0;
  json_t *list = json_array();
  struct err e = {0};

  if (store_versions(a->store, name, &all, &n, &e) < 0) {
    json_decref(list);
    agent_reply_err(req, &e);
    return;
  }
  for (size_t i = 0; i < n; i++)
    json_array_append_new(list, json_pack("{s:s, s:s, s:b}", "version",
                                          all[i].version, "path",
                                          all[i].path, "source",
                                          all[i].source));
  free(all);
  agent_reply_json(req, 200, json_pack("{s:o}", "versions", list));
}

/* The manifest's text as stored, whole. */
static void
manifest_whole(struct agent *a, struct http_request *req, const char *name,
               const char *v)
{
  char path[PATH_MAX];
  char *text = NULL;
  size_t len;
  struct err e = {0};

  store_manifest_path(a->store, name, v, path, sizeof(path));
  if (file_read(path, MANIFEST_MAX_TEXT, &text, &len, &e) < 0) {
    agent_reply_err(req, &e);
    return;
  }
  http_request_add_header(req, "ETag", v);
  http_respond(req, 200, "application/json", text, len);
}

/* A manifest as a delta against a base the destination holds: both are
 * taken from the served cache (so decoded once for the pulls of both),
 * and the delta is made on the pool. */
struct mdelta_work {
  uv_work_t w;
  struct agent *a;
  struct http_request *req;
  char name[72];
  char v[MANIFEST_ID_HEX + 1];
  char base[MANIFEST_ID_HEX + 1];
  struct served *sv, *bsv;
  char *out;
  size_t len;
  struct err e;
  int rc;
};

static void served_get(struct agent *a, const char *name, const char *v,
                       void (*cb)(struct agent *, struct served *,
                                  const struct err *, void *),
                       void *arg);
static void served_put(struct agent *a, struct served *sv);

#ifdef TENBIN_FAULTS
/* The test-only fault "corrupt-manifest-deltas": one hex digit of the
 * first file hash the delta carries changes, as damage on the way would;
 * the delta still applies, to text of another hash. */
static void
corrupt_delta(char *d, size_t len)
{
  static const char key[] = "\"sha256\":\"";
  char *p = memmem(d, len, key, sizeof(key) - 1);

  if (p != NULL && (size_t)(p - d) + sizeof(key) < len) {
    p += sizeof(key) - 1;
    *p = *p == '0' ? '1' : '0';
  }
}
#endif

/* Anything short of a delta answers the manifest whole. */
static void
mdelta_end(struct mdelta_work *mw)
{
  if (mw->out != NULL) {
#ifdef TENBIN_FAULTS
    if (mw->a->serve->corrupt_deltas)
      corrupt_delta(mw->out, mw->len);
#endif
    http_respond(mw->req, 200, "application/x-tenbin-manifest-delta",
                 mw->out, mw->len);
    mw->out = NULL;
  } else {
    manifest_whole(mw->a, mw->req, mw->name, mw->v);
  }
  if (mw->sv != NULL)
    served_put(mw->a, mw->sv);
  if (mw->bsv != NULL)
    served_put(mw->a, mw->bsv);
  free(mw);
}

static void
mdelta_run(uv_work_t *w)
{
  struct mdelta_work *mw = w->data;

  mw->rc = manifest_delta_make(&mw->bsv->m, mw->base, &mw->sv->m,
                               MANIFEST_MAX_TEXT, &mw->out, &mw->len,
                               &mw->e);
}

static void
mdelta_done(uv_work_t *w, int status)
{
  struct mdelta_work *mw = w->data;
  struct agent *a = mw->a;

  (void)status;
  if (mw->rc < 0)
    log_warn("manifest %s@%.12s against %.12s: %s; sending it whole",
             mw->name, mw->v, mw->base, err_msg(&mw->e));
  mdelta_end(mw);
  agent_work_done(a);
}

/* Each version loaded (with a reference), the version first: then the
 * delta is made on the pool. */
static void
mdelta_got(struct agent *a, struct served *sv, const struct err *e,
           void *arg)
{
  struct mdelta_work *mw = arg;

  if (mw->sv == NULL)
    mw->sv = sv;
  else
    mw->bsv = sv;
  if (e != NULL) {
    mdelta_end(mw);
    return;
  }
  if (mw->bsv == NULL) {
    served_get(a, mw->name, mw->base, mdelta_got, mw);
    return;
  }
  mw->w.data = mw;
  agent_queue(a, &mw->w, mdelta_run, mdelta_done);
}

void
serve_manifest(struct agent *a, struct http_request *req, const char *name,
               const char *v)
{
  const char *base = http_request_query(req, "base");
  struct store_version held, bheld;
  struct mdelta_work *mw;

  /* A manifest is served only for a version held complete here: a
   * replica's files exist, a source version's files are checked when
   * read. */
  if (!store_version_get(a->store, name, v, &held)) {
    agent_reply_errf(req, ERR_NOT_FOUND, "version %s@%.64s is not held "
                     "here", name, v);
    return;
  }
  if (base != NULL && !agentc_valid_version(base)) {
    agent_reply_errf(req, ERR_INVALID, "query 'base' must be a 64-digit "
                     "lowercase hex version id");
    return;
  }
  /* Deltas are made between versions published here (the served cache
   * holds those); any other base gets the manifest whole. */
  if (base == NULL || strcmp(base, v) == 0 || !held.source ||
      !store_version_get(a->store, name, base, &bheld) || !bheld.source) {
    manifest_whole(a, req, name, v);
    return;
  }
  mw = xcalloc(1, sizeof(*mw));
  mw->a = a;
  mw->req = req;
  snprintf(mw->name, sizeof(mw->name), "%s", name);
  snprintf(mw->v, sizeof(mw->v), "%s", v);
  snprintf(mw->base, sizeof(mw->base), "%s", base);
  served_get(a, name, v, mdelta_got, mw);
}

/* ---- the served-version cache ---- */

struct load_work {
  uv_work_t w;
  struct agent *a;
  struct served *sv;
};

static void
load_run(uv_work_t *w)
{
  struct load_work *lw = w->data;
  struct served *sv = lw->sv;
  struct store *s = lw->a->store;
  char path[PATH_MAX];
  char *text = NULL;
  char *rel = NULL;
  size_t len;

  store_manifest_path(s, sv->name, sv->v, path, sizeof(path));
  if (file_read(path, MANIFEST_MAX_TEXT, &text, &len,
                      &sv->load_err) < 0 ||
      manifest_decode(text, len, &sv->m, &sv->load_err) < 0)
    goto out;
  store_checks_path(s, sv->name, sv->v, path, sizeof(path));
  if (manifest_checks_load(path, &sv->m, &sv->c, &sv->load_err) < 0)
    goto out;
  snprintf(path, sizeof(path), "%s/.tenbin/published/%s/%s.src",
           store_root(s), sv->name, sv->v);
  if (file_read(path, PATH_MAX, &rel, &len, &sv->load_err) < 0)
    goto out;
  snprintf(sv->rel, sizeof(sv->rel), "%s", rel);

out:
  free(text);
  free(rel);
}

static void
load_done(uv_work_t *w, int status)
{
  struct load_work *lw = w->data;
  struct served *sv = lw->sv;
  struct agent *a = lw->a;
  struct served_waiter *wt = sv->waiters;

  (void)status;
  free(lw);
  sv->loaded = 1;
  sv->waiters = NULL;
  while (wt != NULL) {
    struct served_waiter *next = wt->next;

    wt->cb(a, sv, sv->load_err.code < 0 ? &sv->load_err : NULL, wt->arg);
    free(wt);
    wt = next;
  }
  agent_work_done(a);
}

/* Evict unused versions beyond SERVED_MAX, least recently used first. */
static void
served_trim(struct serve_state *st)
{
  for (;;) {
    size_t n = 0;
    struct served **victim = NULL;

    for (struct served **p = &st->served; *p != NULL; p = &(*p)->next) {
      n++;
      if ((*p)->refs == 0 && (*p)->loaded &&
          (victim == NULL || (*p)->used < (*victim)->used))
        victim = p;
    }
    if (n <= SERVED_MAX || victim == NULL)
      return;
    {
      struct served *sv = *victim;

      *victim = sv->next;
      served_free(sv);
    }
  }
}

/*
 * Get name@v loaded, then cb(a, sv, NULL, arg) with a reference taken
 * (served_put releases it), or cb(a, NULL, e, arg).  Only versions
 * published here from a source path are served.
 */
static void
served_get(struct agent *a, const char *name, const char *v,
           void (*cb)(struct agent *, struct served *, const struct err *,
                      void *),
           void *arg)
{
  struct serve_state *st = a->serve;
  struct served *sv;
  struct served_waiter *wt;
  struct load_work *lw;

  for (sv = st->served; sv != NULL; sv = sv->next) {
    if (strcmp(sv->name, name) == 0 && strcmp(sv->v, v) == 0)
      break;
  }
  if (sv != NULL && sv->loaded && sv->load_err.code < 0) {
    /* A failed load is not cached: the files may be back now. */
    for (struct served **p = &st->served; *p != NULL; p = &(*p)->next) {
      if (*p == sv && sv->refs == 0) {
        *p = sv->next;
        served_free(sv);
        break;
      }
    }
    sv = NULL;
  }
  if (sv == NULL) {
    sv = xcalloc(1, sizeof(*sv));
    snprintf(sv->name, sizeof(sv->name), "%s", name);
    snprintf(sv->v, sizeof(sv->v), "%s", v);
    manifest_init(&sv->m);
    manifest_checks_init(&sv->c);
    sv->next = st->served;
    st->served = sv;
    lw = xcalloc(1, sizeof(*lw));
    lw->a = a;
    lw->sv = sv;
    lw->w.data = lw;
    agent_queue(a, &lw->w, load_run, load_done);
  }
  sv->refs++;
  sv->used = ++st->clock;
  if (sv->loaded) {
    cb(a, sv, NULL, arg);
    return;
  }
  wt = xcalloc(1, sizeof(*wt));
  wt->cb = cb;
  wt->arg = arg;
  wt->next = sv->waiters;
  sv->waiters = wt;
}

static void
served_put(struct agent *a, struct served *sv)
{
  sv->refs--;
  served_trim(a->serve);
}

void
serve_forget(struct agent *a, const char *name, const char *v)
{
  struct serve_state *st = a->serve;

  for (struct served **p = &st->served; *p != NULL; p = &(*p)->next) {
    struct served *sv = *p;

    if (sv->refs == 0 && sv->loaded && strcmp(sv->name, name) == 0 &&
        strcmp(sv->v, v) == 0) {
      *p = sv->next;
      served_free(sv);
      return;
    }
  }
}

void
serve_seed(struct agent *a, const char *name, const char *v,
           const char *rel, struct manifest *m, struct manifest_checks *c)
{
  struct serve_state *st = a->serve;
  struct served *sv;

  for (sv = st->served; sv != NULL; sv = sv->next) {
    if (strcmp(sv->name, name) == 0 && strcmp(sv->v, v) == 0)
      return;
  }
  sv = xcalloc(1, sizeof(*sv));
  snprintf(sv->name, sizeof(sv->name), "%s", name);
  snprintf(sv->v, sizeof(sv->v), "%s", v);
  snprintf(sv->rel, sizeof(sv->rel), "%s", rel);
  sv->m = *m;
  sv->c = *c;
  manifest_init(m);
  manifest_checks_init(c);
  sv->loaded = 1;
  sv->used = ++st->clock;
  sv->next = st->served;
  st->served = sv;
  served_trim(st);
}

/* ---- the signature cache ---- */

static struct sigent *
sig_find(struct serve_state *st, const uint8_t sha[32])
{
  for (struct sigent *s = st->sigs; s != NULL; s = s->next) {
    if (memcmp(s->sha, sha, 32) == 0) {
      s->used = ++st->clock;
      return s;
    }
  }
  return NULL;
}

static void
sig_trim(struct serve_state *st)
{
  while (st->sig_bytes > SIGCACHE_MAX) {
    struct sigent **victim = NULL;

    for (struct sigent **p = &st->sigs; *p != NULL; p = &(*p)->next) {
      if ((*p)->refs == 0 && (victim == NULL || (*p)->used < (*victim)->used))
        victim = p;
    }
    if (victim == NULL)
      return;
    {
      struct sigent *s = *victim;

      *victim = s->next;
      st->sig_bytes -= s->len + s->fps_len;
      sigent_free(s);
    }
  }
}

/* ---- batches ---- */

/* What the loop resolved for one frame before the pool computes it. */
struct batch_item {
  struct wire_frame f;
  struct sigent *ref;          /* SIGREF found in the cache, or NULL */
};

struct batch_work {
  uv_work_t w;
  struct agent *a;
  struct http_request *req;
  struct served *sv;
  struct batch_item *items;
  size_t n;
  struct buf out;
  uint64_t asked;     /* bytes of the segments asked for */
  /* SIG frames seen, to cache after the work: index into items */
  uint8_t (*sig_sha)[32];
  struct err e;
  int rc;
};

static void
batch_free(struct batch_work *bw)
{
  for (size_t i = 0; i < bw->n; i++) {
    if (bw->items[i].ref != NULL)
      bw->items[i].ref->refs--;
  }
  free(bw->items);
  free(bw->sig_sha);
  buf_release(&bw->out);
  free(bw);
}

static int
put_error(struct buf *out, const struct wire_frame *f, int code,
          const char *msg)
{
  json_t *v = json_pack("{s:s, s:s}", "code", err_name(code), "message",
                        msg);
  char *text = jsonx_dump(v);
  int rc = wire_put(out, WIRE_ERROR, f->file, f->seg, text,
                    (uint32_t)strlen(text));

  free(text);
  json_decref(v);
  return rc;
}

/*
 * Open entry i of the served version, confined to the root.  The tree
 * is the site's, not ours: a file may have become a link (refused on the
 * way) or a fifo (opened without blocking, so that it cannot pin a pool
 * thread until someone writes to it).  Either is a change since publish,
 * ERR_CONFLICT naming it, which the destination reports as such instead
 * of retrying.
 */
static int
open_source(struct agent *a, const struct served *sv, size_t i,
            struct err *e)
{
  const char *path = sv->m.v[i].path;
  char rel[PATH_MAX * 2];
  struct stat st;
  int fd;

  if (strcmp(sv->rel, ".") == 0)
    snprintf(rel, sizeof(rel), "%s", path);
  else
    snprintf(rel, sizeof(rel), "%s/%s", sv->rel, path);
  fd = syncpath_openat(store_rootfd(a->store), rel,
                       O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0, e);
  if (fd == ERR_INVALID)
    return err_set(e, ERR_CONFLICT, "file '%s' changed since version "
                   "%.12s was published (a symlink now, or one on its "
                   "way)", path, sv->v);
  if (fd < 0)
    return fd;
  if (fstat(fd, &st) < 0) {
    close(fd);
    return err_set(e, ERR_IO, "file '%s': %s", path, strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return err_set(e, ERR_CONFLICT, "file '%s' changed since version "
                   "%.12s was published (not a regular file now)", path,
                   sv->v);
  }
  return fd;
}

/* Per-file state of one batch on the pool. */
struct batch_file {
  uint32_t file;
  int fd;
  const uint8_t *sig;
  size_t sig_len;
  struct delta_sig *loaded;
  const uint8_t *fptab;        /* the basis' fingerprint table, or NULL */
  size_t nfptab;               /* entries of WIRE_FP_ENTRY bytes */
  struct delta_sig *range;     /* the last SIGRANGE's signature, which
                                  stands until another signature frame */
  uint64_t range_off;          /* where its range starts in the basis */
  int failed;                  /* an ERROR was sent for this file */
};

static struct batch_file *
file_slot(struct batch_file **fs, size_t *n, size_t *cap, uint32_t file)
{
  for (size_t i = 0; i < *n; i++) {
    if ((*fs)[i].file == file)
      return &(*fs)[i];
  }
  GROW(*fs, *n + 1, *cap);
  memset(&(*fs)[*n], 0, sizeof(**fs));
  (*fs)[*n].file = file;
  (*fs)[*n].fd = -1;
  return &(*fs)[(*n)++];
}

static int
fp_cmp(const void *key, const void *entry)
{
  return memcmp(key, entry, 16);
}

static int
fp_table_sorted(const uint8_t *p, size_t len)
{
  for (size_t at = WIRE_FP_ENTRY; at < len; at += WIRE_FP_ENTRY)
    if (memcmp(p + at - WIRE_FP_ENTRY, p + at, 16) > 0)
      return 0;
  return 1;
}

/*
 * Where the destination's basis has each block of segment seg (at off),
 * found by its fingerprint recorded at publish in the basis' table
 * (anywhere: unchanged, moved, or shifted): from[i] is the basis
 * offset, or DELTA_READ.  The count found.
 */
static unsigned
blocks_from(const struct batch_file *bf, const struct manifest_entry *me,
            const struct manifest_check *ck, uint32_t seg, uint64_t len,
            uint64_t *from)
{
  uint64_t b0 = manifest_seg_fp(me, seg), nb = manifest_nfp(len);
  unsigned n = 0;

  for (uint64_t i = 0; i < nb; i++) {
    const uint8_t *hit = NULL;

    from[i] = DELTA_READ;
    if (bf->fptab != NULL && ck->fp != NULL && b0 + i < ck->nfp)
      hit = bsearch(ck->fp[b0 + i], bf->fptab, bf->nfptab, WIRE_FP_ENTRY,
                    fp_cmp);
    if (hit != NULL) {
      from[i] = wire_get_le64(hit + 16);
      n++;
    }
  }
  return n;
}

/* Whether the bytes read for segment seg (their sums) are those
 * published. */
static int
read_as_published(const struct manifest_entry *me,
                  const struct manifest_check *ck, uint32_t seg,
                  uint64_t len, const uint8_t xxh[16],
                  const uint8_t (*fp)[16])
{
  uint64_t b0 = manifest_seg_fp(me, seg), nb = manifest_nfp(len);

  if (fp != NULL)
    return b0 + nb <= ck->nfp &&
           memcmp(ck->fp[b0], fp, (size_t)nb * 16) == 0;
  return ck->xxh != NULL && seg < ck->nsegs &&
         memcmp(ck->xxh[seg], xxh, 16) == 0;
}

/* Answer one SEG frame into bw->out: DELTA, DATA or ERROR. */
static int
answer_seg(struct batch_work *bw, struct batch_file *bf,
           const struct wire_frame *f)
{
  const struct served *sv = bw->sv;
  const struct manifest_entry *me = &sv->m.v[f->file];
  const struct manifest_check *ck = &sv->c.v[f->file];
  uint64_t off, len, bad = 0;
  uint8_t xxh[16];
  uint8_t fp[MANIFEST_SEG_MAX / MANIFEST_FP_BLOCK][16];
  uint64_t from[MANIFEST_SEG_MAX / MANIFEST_FP_BLOCK];
  /* A large file's reads are checked per fingerprint block (what its
   * segment check is made of), a small one's as a whole. */
  uint8_t (*fpp)[16] = ck->fp != NULL ? fp : NULL;
  unsigned nfound = 0;
  int ranged, by_blocks;
  size_t at = bw->out.len;
  struct err e = {0};
  int rc;

  if (bf->failed)
    return 0;
  manifest_seg_range(me, f->seg, &off, &len);
  if (bf->fd < 0) {
    struct stat st;

    bf->fd = open_source(bw->a, sv, f->file, &e);
    if (bf->fd < 0)
      goto fail;
    if (fstat(bf->fd, &st) == 0 && (uint64_t)st.st_size != me->size) {
      err_set(&e, ERR_CONFLICT, "file '%s' changed since version %.12s "
              "was published (size %lld, published %llu)", me->path,
              sv->v, (long long)st.st_size,
              (unsigned long long)me->size);
      goto fail;
    }
  }
  ranged = bf->range != NULL;
  rc = wire_put_header(&bw->out, bf->sig != NULL || ranged ? WIRE_DELTA
                                                           : WIRE_DATA,
                       f->file, f->seg, 0);
  if (rc < 0)
    return err_set(&bw->e, rc, "batch answer too large");
  if (bf->sig != NULL && bf->loaded == NULL)
    rc = delta_sig_load(bf->sig, bf->sig_len, &bf->loaded, &e);
  if (bf->loaded != NULL && !ranged)
    nfound = blocks_from(bf, me, ck, f->seg, len, from);
  /* Block by block even with none found by fingerprint: those count
   * from the segment's start, and a rewrite that moved a cut moves the
   * start of the segments after it, whose bytes are still the old
   * file's at the same offsets.  Compared in place they need no
   * librsync search (several times slower where it matches at all). */
  by_blocks = !ranged &&
              (nfound > 0 || (bf->loaded != NULL && fpp != NULL));
  if (rc < 0) {
    /* failed: below */
  } else if (ranged) {
    /* Against the old range this segment replaces; its COPYs then
     * address the whole basis. */
    rc = delta_compute(bf->range, bf->fd, off, len, &bw->out, xxh, fpp, &e);
    if (rc == 0)
      rc = delta_rebase(&bw->out, at + WIRE_HDR_LEN, bf->range_off, &e);
  } else if (by_blocks)
    rc = delta_compute_blocks(bf->loaded, bf->fd, off, len, from,
                              (const uint8_t (*)[16])ck->fp +
                                  manifest_seg_fp(me, f->seg),
                              &bw->out, &bad, &e);
  else if (bf->loaded != NULL)
    rc = delta_compute(bf->loaded, bf->fd, off, len, &bw->out, xxh, fpp,
                       &e);
  else
    rc = delta_read(bf->fd, off, len, &bw->out, xxh, fpp, &e);
  if (rc == ERR_TOO_LARGE)
    return err_set(&bw->e, rc, "batch answer too large");
  if (rc == ERR_CONFLICT) {
    bw->out.len = at;
    err_set(&e, ERR_CONFLICT, "file '%s' changed since version %.12s was "
            "published (the MiB at byte %llu differs)", me->path, sv->v,
            (unsigned long long)(off + bad * MANIFEST_FP_BLOCK));
    goto fail;
  }
  if (rc < 0) {
    bw->out.len = at;
    goto fail;
  }
  /* Block by block, each block read was checked on its own. */
  if (!by_blocks && !read_as_published(me, ck, f->seg, len, xxh, fpp)) {
    bw->out.len = at;
    err_set(&e, ERR_CONFLICT, "file '%s' changed since version %.12s was "
            "published (segment %u differs)", me->path, sv->v, f->seg);
    goto fail;
  }
  {
    uint32_t plen = (uint32_t)(bw->out.len - at - WIRE_HDR_LEN);
    uint8_t *h = (uint8_t *)bw->out.data + at;

    /* the header's len, now that the payload is known */
    wire_put_le32(h + WIRE_HDR_LEN - 4, plen);
    atomic_fetch_add(&bw->a->serve->served_bytes, plen);
#ifdef TENBIN_FAULTS
    if (plen > 0 && corrupt_this(bw->a->serve, f->file, f->seg))
      h[WIRE_HDR_LEN + plen / 2] ^= 0x5a;
#endif
  }
  return 0;

fail:
  bf->failed = 1;
  if (e.code == ERR_NOT_FOUND)
    err_set(&e, ERR_CONFLICT, "file '%s' is gone since version %.12s was "
            "published", me->path, sv->v);
  log_warn("serving %s@%.12s: %s", sv->name, sv->v, err_msg(&e));
  rc = put_error(&bw->out, f, e.code, err_msg(&e));
  return rc < 0 ? err_set(&bw->e, rc, "batch answer too large") : 0;
}

static void
batch_run(uv_work_t *w)
{
  struct batch_work *bw = w->data;
  struct batch_file *fs = NULL;
  size_t nfs = 0, capfs = 0;
  int rc = 0;

  buf_init(&bw->out, AGENT_ANSWER_MAX);
  /* Room for the segments as data, the most an answer usually holds, in
   * one allocation. */
  if (bw->asked > 0) {
    uint64_t room = bw->asked + (uint64_t)bw->n * 2 * WIRE_HDR_LEN;

    rc = buf_grow(&bw->out, room < AGENT_ANSWER_MAX ? (size_t)room
                                                    : AGENT_ANSWER_MAX);
    if (rc < 0)
      err_set(&bw->e, rc, "batch answer too large");
  }
  for (size_t i = 0; rc == 0 && i < bw->n; i++) {
    const struct wire_frame *f = &bw->items[i].f;
    struct batch_file *bf = file_slot(&fs, &nfs, &capfs, f->file);

    switch (f->kind) {
    case WIRE_SIG:
      if (bw->sv->m.v[f->file].nsegs > 1) /* cached: batch_done */
        hash_sha256(f->payload, f->len, bw->sig_sha[i]);
      delta_sig_free(bf->range);
      bf->range = NULL;
      bf->sig = f->payload;
      bf->sig_len = f->len;
      bf->fptab = NULL;
      delta_sig_free(bf->loaded);
      bf->loaded = NULL;
      break;
    case WIRE_SIGREF:
      if (bw->items[i].ref == NULL) {
        bf->failed = 1;
        rc = put_error(&bw->out, f, ERR_NOT_FOUND, "signature not cached; "
                       "send it again");
        if (rc < 0)
          err_set(&bw->e, rc, "batch answer too large");
        break;
      }
      delta_sig_free(bf->range);
      bf->range = NULL;
      bf->sig = bw->items[i].ref->bytes;
      bf->sig_len = bw->items[i].ref->len;
      bf->fptab = bw->items[i].ref->fps;
      bf->nfptab = bw->items[i].ref->fps_len / WIRE_FP_ENTRY;
      delta_sig_free(bf->loaded);
      bf->loaded = NULL;
      break;
    case WIRE_BLOCKS:
      bf->fptab = f->payload;
      bf->nfptab = f->len / WIRE_FP_ENTRY;
      break;
    case WIRE_SIGRANGE: {
      struct err se = {0};

      delta_sig_free(bf->range);
      bf->range = NULL;
      bf->range_off = wire_get_le64(f->payload);
      if (delta_sig_load(f->payload + 8, f->len - 8, &bf->range, &se) < 0) {
        bf->failed = 1;
        rc = put_error(&bw->out, f, se.code, err_msg(&se));
        if (rc < 0)
          err_set(&bw->e, rc, "batch answer too large");
      }
      break;
    }
    default:
      rc = answer_seg(bw, bf, f);
      break;
    }
  }
  bw->rc = rc;
  for (size_t i = 0; i < nfs; i++) {
    if (fs[i].fd >= 0)
      close(fs[i].fd);
    delta_sig_free(fs[i].loaded);
    delta_sig_free(fs[i].range);
  }
  free(fs);
}

static void
batch_done(uv_work_t *w, int status)
{
  struct batch_work *bw = w->data;
  struct agent *a = bw->a;
  struct serve_state *st = a->serve;

  (void)status;
  /* Keep the signatures this batch brought for the batches after it:
   * those of files in several segments (SIGREF names them; a file of
   * one segment is asked for once). */
  for (size_t i = 0; i < bw->n; i++) {
    const struct wire_frame *f = &bw->items[i].f;
    struct sigent *s;

    if (f->kind != WIRE_SIG || bw->sv->m.v[f->file].nsegs == 1 ||
        sig_find(st, bw->sig_sha[i]) != NULL)
      continue;
    s = xcalloc(1, sizeof(*s));
    memcpy(s->sha, bw->sig_sha[i], 32);
    s->bytes = xmalloc(f->len > 0 ? f->len : 1);
    memcpy(s->bytes, f->payload, f->len);
    s->len = f->len;
    /* The basis' fingerprint table travels right behind its signature. */
    if (i + 1 < bw->n && bw->items[i + 1].f.kind == WIRE_BLOCKS &&
        bw->items[i + 1].f.file == f->file) {
      s->fps_len = bw->items[i + 1].f.len;
      s->fps = xmalloc(s->fps_len);
      memcpy(s->fps, bw->items[i + 1].f.payload, s->fps_len);
    }
    s->used = ++st->clock;
    s->next = st->sigs;
    st->sigs = s;
    st->sig_bytes += s->len + s->fps_len;
  }
  sig_trim(st);
  served_put(a, bw->sv);
  bw->sv = NULL;
  if (bw->rc < 0) {
    agent_reply_err(bw->req, &bw->e);
  } else {
    size_t len;
    char *body = buf_take(&bw->out, &len);

    http_respond(bw->req, 200, "application/x-tenbin-batch", body, len);
  }
  batch_free(bw);
  st->batches--;
  agent_work_done(a);
}

static void
batch_loaded(struct agent *a, struct served *sv, const struct err *e,
             void *arg)
{
  struct batch_work *bw = arg;
  struct err ve = {0};
  uint64_t asked = 0;

  bw->sv = sv;
  if (e != NULL) {
    agent_reply_err(bw->req, e);
    goto drop;
  }
  /* Validate every frame against the manifest before any work. */
  for (size_t i = 0; i < bw->n; i++) {
    const struct wire_frame *f = &bw->items[i].f;
    const struct manifest_entry *me;

    if (f->file >= sv->m.n || sv->m.v[f->file].type != MANIFEST_FILE) {
      err_set(&ve, ERR_INVALID, "frame %zu: file %u is not a file of "
              "version %.12s", i, f->file, sv->v);
      goto bad;
    }
    me = &sv->m.v[f->file];
    if (f->kind == WIRE_SEG || f->kind == WIRE_SIGRANGE) {
      uint64_t off, len;

      if (f->seg >= me->nsegs) {
        err_set(&ve, ERR_INVALID, "frame %zu: segment %u is past the end "
                "of '%s' (%u segments)", i, f->seg, me->path, me->nsegs);
        goto bad;
      }
      manifest_seg_range(me, f->seg, &off, &len);
      if (f->kind == WIRE_SEG)
        asked += len;
    }
  }
  if (asked > (uint64_t)64 << 20) {
    err_set(&ve, ERR_TOO_LARGE, "batch asks for %llu bytes of segments; "
            "at most 64 MiB", (unsigned long long)asked);
    goto bad;
  }
  bw->asked = asked;
  bw->w.data = bw;
  agent_queue(a, &bw->w, batch_run, batch_done);
  return;

bad:
  agent_reply_err(bw->req, &ve);
drop:
  if (bw->sv != NULL)
    served_put(a, bw->sv);
  batch_free(bw);
  a->serve->batches--;
}

int
serve_batch_parse(const void *body, size_t len, struct wire_frame **out,
                  size_t *n_out, struct err *e)
{
  struct wire_frame f, *v = NULL;
  size_t n = 0, cap = 0, pos = 0;
  int rc;

  while ((rc = wire_next(body, len, &pos, &f, e)) == 1) {
    if (n == AGENT_BATCH_FRAMES) {
      rc = err_set(e, ERR_INVALID, "more than %u frames in one batch",
                   AGENT_BATCH_FRAMES);
      goto out;
    }
    if (f.kind != WIRE_SIG && f.kind != WIRE_SIGREF && f.kind != WIRE_SEG &&
        f.kind != WIRE_BLOCKS && f.kind != WIRE_SIGRANGE) {
      rc = err_set(e, ERR_INVALID, "frame %zu: kind %u is not a request", n,
                   f.kind);
      goto out;
    }
    if ((f.kind == WIRE_SIGREF && f.len != 32) ||
        (f.kind == WIRE_SEG && f.len != 0) ||
        (f.kind == WIRE_SIGRANGE && f.len <= 8) ||
        (f.kind == WIRE_BLOCKS && (f.len == 0 || f.len % WIRE_FP_ENTRY != 0 ||
                                   f.seg != 0))) {
      rc = err_set(e, ERR_INVALID, "frame %zu: payload of %u bytes is wrong "
                   "for its kind", n, f.len);
      goto out;
    }
    if (f.kind == WIRE_BLOCKS && !fp_table_sorted(f.payload, f.len)) {
      rc = err_set(e, ERR_INVALID, "frame %zu: fingerprint table not sorted",
                   n);
      goto out;
    }
    GROW(v, n + 1, cap);
    v[n++] = f;
  }
  if (rc == 0 && n == 0)
    rc = err_set(e, ERR_INVALID, "empty batch");

out:
  if (rc < 0) {
    free(v);
    return rc;
  }
  *out = v;
  *n_out = n;
  return 0;
}

void
serve_batch(struct agent *a, struct http_request *req, const char *name,
            const char *v)
{
  struct batch_work *bw;
  struct wire_frame *frames = NULL;
  struct err e = {0};
  size_t len;
  const char *body = http_request_body(req, &len);
  struct store_version held;

  if (!store_version_get(a->store, name, v, &held) || !held.source) {
    agent_reply_errf(req, ERR_NOT_FOUND, "version %s@%.64s was not "
                     "published here", name, v);
    return;
  }
  bw = xcalloc(1, sizeof(*bw));
  bw->a = a;
  bw->req = req;
  if (serve_batch_parse(body, len, &frames, &bw->n, &e) < 0)
    goto bad;
  bw->items = xcalloc(bw->n, sizeof(*bw->items));
  for (size_t i = 0; i < bw->n; i++) {
    bw->items[i].f = frames[i];
    if (frames[i].kind == WIRE_SIGREF) {
      struct sigent *s = sig_find(a->serve, frames[i].payload);

      if (s != NULL) {
        s->refs++;
        bw->items[i].ref = s;
      }
    }
  }
  free(frames);
  if (a->serve->batches >= SERVE_BATCHES_MAX) {
    err_set(&e, ERR_UNAVAILABLE, "busy with %u batches; try again",
            a->serve->batches);
    goto bad;
  }
  a->serve->batches++;
  bw->sig_sha = xcalloc(bw->n, 32);
  served_get(a, name, v, batch_loaded, bw);
  return;

bad:
  agent_reply_err(req, &e);
  batch_free(bw);
}
