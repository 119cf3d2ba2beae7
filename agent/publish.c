/*
 * Publishing versions at their source (docs/SYNC.md "Publishing"): a
 * scan of the tree into a manifest and its checks, stored under the
 * manifest's hash, and the record that makes the version served here.
 *
 * The last publish of each path stays decoded so that a republish reads
 * only what changed; with --watch it also looks only where inotify saw
 * changes, and a draft of the next publish is made while the tree is
 * quiet.  The versions then go to serve.c's cache for the first pull.
 * Everything here is the loop's, except what a work item's run function
 * touches: its own publish_work or draft_work, and the last_publish it
 * holds busy.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "sync/path.h"
#include "agent/watch.h"
#include "util/alloc.h"
#include "util/fault.h"
#include "util/fileio.h"
#include "util/hash.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/parallel.h"

struct busy_name {
  char name[72];
  struct busy_name *next;
};

/*
 * The last publish of each (dataset, path), kept decoded: a republish
 * reuses its hashes without reading and decoding the stored manifest,
 * and one that finds the tree unchanged answers with its version
 * without encoding, hashing or writing anything but the source record.
 * A publish holds its entry (busy) while it runs on the pool; publishes
 * of one dataset never overlap, so nothing else touches it meanwhile.
 */
#define LAST_PUBLISH_MAX 8

/*
 * --watch: once a watched tree has been quiet a while (--draft-ms, or 3
 * times the last draft's run, whichever is more, so that a tree written
 * now and then costs at most a quarter of a core), a draft of its next
 * publish looks at what changed, on the pool.  The publish then reuses the
 * draft's hashes of every file unchanged since (by stat identity, as it
 * reuses the last publish's), and reads only what changed after the
 * draft.  A file is drafted only after a quiet period (at least 50 ms,
 * more than a coarse clock's tick), so a write after its draft gives it
 * a later mtime and ctime than the draft recorded.
 */
struct last_publish {
  char name[72];
  char rel[PATH_MAX];
  char v[MANIFEST_ID_HEX + 1];
  struct manifest m;
  struct manifest_checks c;
  struct watch *watch;         /* changes since m's scan, or NULL */
  int busy;                    /* a publish or a draft on the pool */
  uint64_t used;
  /* The draft: m with the changes the watch saw up to draft_seq looked
   * at (has_draft), and what happens around it.  Staged (a new
   * version): also its files under the name draft_tag, its version dv
   * and the copies for the served cache. */
  struct agent *a;
  struct manifest dm;
  struct manifest_checks dc;
  int has_draft;
  uint64_t draft_seq;
  int staged;
  char draft_tag[24];          /* ".draft-" and 16 hex digits of rel's hash */
  char dv[MANIFEST_ID_HEX + 1];
  struct manifest dsm;
  struct manifest_checks dsc;
  int drafting;
  int quiet_pending;           /* the tree went quiet while busy */
  struct publish_work *waiting; /* a publish waiting for the draft */
  struct last_publish *next;
};

static void last_free(struct last_publish *lp);
static void draft_drop(struct last_publish *lp);
static void draft_maybe(struct last_publish *lp);

struct publish_state {
  struct busy_name *publishing;
  struct last_publish *last;   /* the last publish of each path */
  uint64_t clock;              /* LRU clock of last */
#ifdef TENBIN_FAULTS
  int slow_drafts;             /* test-only: drafts sleep 2 s first */
#endif
};

/* Names being published now: a second publish of one waits its turn. */
static int
publish_claim(struct publish_state *st, const char *name)
{
  struct busy_name *b;

  for (b = st->publishing; b != NULL; b = b->next) {
    if (strcmp(b->name, name) == 0)
      return 0;
  }
  b = xcalloc(1, sizeof(*b));
  snprintf(b->name, sizeof(b->name), "%s", name);
  b->next = st->publishing;
  st->publishing = b;
  return 1;
}

static void
publish_release(struct publish_state *st, const char *name)
{
  for (struct busy_name **p = &st->publishing; *p != NULL;
       p = &(*p)->next) {
    if (strcmp((*p)->name, name) == 0) {
      struct busy_name *b = *p;

      *p = b->next;
      free(b);
      return;
    }
  }
}

void
publish_new(struct agent *a)
{
  a->publish = xcalloc(1, sizeof(*a->publish));
#ifdef TENBIN_FAULTS
  a->publish->slow_drafts = fault_armed("slow-drafts");
#endif
}

void
publish_free(struct agent *a)
{
  struct publish_state *st = a->publish;

  if (st == NULL)
    return;
  while (st->publishing != NULL)
    publish_release(st, st->publishing->name);
  while (st->last != NULL) {
    struct last_publish *lp = st->last;

    st->last = lp->next;
    last_free(lp);
  }
  free(st);
  a->publish = NULL;
}

/* ---- publishing ---- */

struct publish_work {
  uv_work_t w;
  struct agent *a;
  struct http_request *req;
  char name[72];
  char rel[PATH_MAX];
  char v[MANIFEST_ID_HEX + 1];
  int existed;
  struct last_publish *last;   /* borrowed, busy; may be NULL */
  struct manifest m;           /* a new manifest, for the cache */
  struct manifest_checks c;
  /* Copies of a new version's m and c for the served cache, so that
   * the first pull does not decode what was just encoded. */
  struct manifest sm;
  struct manifest_checks sc;
  int seed;
  /* --watch: what the scan adds its directories to (a new instance, or
   * extending last's watch), and the changes taken from last's watch. */
  struct watch_build *wb;
  int wb_extends;
  struct watch_changes changes;
  uint64_t taken_seq;          /* the watch's seq when they were taken */
  int by_changes;              /* the scan looked at changes alone */
  int unchanged;               /* none: last's manifest and checks hold */
  int from_draft;              /* none after last's staged draft */
  struct manifest_scan_stats stats;
  struct err e;
  int rc;
};

/* Whether two manifests list the same entries (so the same version). */
static int
manifest_same(const struct manifest *x, const struct manifest *y)
{
  if (x->n != y->n)
    return 0;
  for (size_t i = 0; i < x->n; i++)
    if (!manifest_entry_same(&x->v[i], &y->v[i]))
      return 0;
  return 1;
}

/* A manifest and its checks move from (sm, sc), left empty, to (dm, dc),
 * whose contents are released first. */
static void
move_pair(struct manifest *dm, struct manifest_checks *dc,
          struct manifest *sm, struct manifest_checks *sc)
{
  manifest_release(dm);
  manifest_checks_release(dc);
  *dm = *sm;
  *dc = *sc;
  manifest_init(sm);
  manifest_checks_init(sc);
}

/* The last publish from disk, when the cache does not have it. */
static int
load_last(struct store *s, const char *name, const char *rel,
          struct last_publish *out)
{
  char path[PATH_MAX];
  char *old = NULL;
  size_t olen;
  int ok = 0;

  if (!store_source_latest(s, name, rel, out->v))
    return 0;
  store_manifest_path(s, name, out->v, path, sizeof(path));
  if (file_read(path, MANIFEST_MAX_TEXT, &old, &olen, NULL) == 0 &&
      manifest_decode(old, olen, &out->m, NULL) == 0) {
    store_checks_path(s, name, out->v, path, sizeof(path));
    ok = manifest_checks_load(path, &out->m, &out->c, NULL) == 0;
  }
  free(old);
  return ok;
}

/* Save c as the checks of version v of name (a version id, or a
 * temporary name); the folder may be new. */
static int
save_checks(struct store *s, const char *name, const char *v,
            const struct manifest_checks *c, struct err *e)
{
  char path[PATH_MAX];
  int rc;

  store_checks_path(s, name, v, path, sizeof(path));
  *strrchr(path, '/') = '\0';
  rc = file_mkdirs(path, 0755, e);
  if (rc < 0)
    return rc;
  store_checks_path(s, name, v, path, sizeof(path));
  return manifest_checks_save(c, path, e);
}

/* The temporary name of a publish's files until they are committed (one
 * publish of a name at a time; a crash's leftovers are overwritten by
 * the next). */
#define PENDING ".pending"

/*
 * A new version's files, staged under the temporary name tag: its
 * manifest (hashed into v) and its checks, each synced, and copies of m
 * and c for the served cache (into sm, sc).  The checks and the copies
 * (task 1) are made beside the manifest's encoding, hashing and writing
 * (task 0): each has an fsync or 20,000 allocations to wait for, and
 * side by side they take a third of the time.
 */
struct stage_work {
  struct store *s;
  const char *name, *tag;
  const struct manifest *m;
  const struct manifest_checks *c;
  char *v;                       /* MANIFEST_ID_HEX + 1 bytes */
  struct manifest *sm;
  struct manifest_checks *sc;
  struct err e, side_e;
  int rc, side_rc;
};

static int
stage_manifest(struct stage_work *st)
{
  char path[PATH_MAX], dir[PATH_MAX];
  char *text = NULL;
  size_t len;
  int rc;

  rc = manifest_encode(st->m, &text, &len, st->v, &st->e);
  if (rc < 0)
    goto out;
  store_manifest_path(st->s, st->name, st->tag, path, sizeof(path));
  snprintf(dir, sizeof(dir), "%s", path);
  *strrchr(dir, '/') = '\0';
  rc = file_mkdirs(dir, 0755, &st->e);
  if (rc < 0)
    goto out;
  rc = store_write_file(path, text, len, &st->e);

out:
  free(text);
  return rc;
}

static void
stage_run(void *arg, size_t task)
{
  struct stage_work *st = arg;

  if (task == 0) {
    st->rc = stage_manifest(st);
    return;
  }
  st->side_rc = save_checks(st->s, st->name, st->tag, st->c, &st->side_e);
  manifest_copy(st->sm, st->m);
  manifest_checks_copy(st->sc, st->c);
}

static int
stage_version(struct store *s, const char *name, const char *tag,
              const struct manifest *m, const struct manifest_checks *c,
              char v[MANIFEST_ID_HEX + 1], struct manifest *sm,
              struct manifest_checks *sc, struct err *e)
{
  struct stage_work st = {.s = s, .name = name, .tag = tag, .m = m,
                          .c = c, .v = v, .sm = sm, .sc = sc};

  (void)parallel_run(2, stage_run, &st, NULL);
  if (st.rc < 0) {
    *e = st.e;
    return st.rc;
  }
  if (st.side_rc < 0) {
    *e = st.side_e;
    return st.side_rc;
  }
  return 0;
}

/* rename from to to, then sync to's directory. */
static int
rename_synced(const char *from, const char *to, struct err *e)
{
  char dir[PATH_MAX];

  if (rename(from, to) < 0)
    return err_set(e, ERR_IO, "cannot rename '%.200s': %s", from,
                   strerror(errno));
  snprintf(dir, sizeof(dir), "%s", to);
  *strrchr(dir, '/') = '\0';
  return file_sync_dir(dir, e);
}

/*
 * The files staged under tag become version v's, and v is published
 * from rel.  *existed: v's manifest was stored already (the staged one
 * is then dropped: the same bytes).  Checks replace any v had: the stat
 * identities may have changed (a touch), the content did not.  The
 * source record last: it is what makes the version served here.
 */
static int
commit_version(struct store *s, const char *name, const char *tag,
               const char *v, const char *rel, int *existed, struct err *e)
{
  char from[PATH_MAX], to[PATH_MAX];
  int rc;

  store_manifest_path(s, name, tag, from, sizeof(from));
  store_manifest_path(s, name, v, to, sizeof(to));
  *existed = access(to, F_OK) == 0;
  if (*existed)
    (void)unlink(from);
  else if ((rc = rename_synced(from, to, e)) < 0)
    return rc;
  store_checks_path(s, name, tag, from, sizeof(from));
  store_checks_path(s, name, v, to, sizeof(to));
  rc = rename_synced(from, to, e);
  if (rc < 0)
    return rc;
  return store_source_set(s, name, v, rel, e);
}

/*
 * A publish with nothing changed after its path's staged draft: the
 * draft is the version, committed as it is (the draft's structures move
 * into pw).
 */
static int
publish_draft(struct publish_work *pw)
{
  struct last_publish *lp = pw->last;
  int rc;

  memcpy(pw->v, lp->dv, sizeof(pw->v));
  rc = commit_version(pw->a->store, pw->name, lp->draft_tag, pw->v,
                      pw->rel, &pw->existed, &pw->e);
  if (rc < 0)
    return rc;
  move_pair(&pw->m, &pw->c, &lp->dm, &lp->dc);
  move_pair(&pw->sm, &pw->sc, &lp->dsm, &lp->dsc);
  lp->has_draft = 0;
  lp->staged = 0;
  pw->stats.files_reused = pw->m.files;
  pw->seed = 1;
  return 0;
}

static void
publish_run(uv_work_t *w)
{
  struct publish_work *pw = w->data;
  struct store *s = pw->a->store;
  struct last_publish disk;
  const struct last_publish *prev = pw->last;
  const struct manifest *base_m = NULL;
  const struct manifest_checks *base_c = NULL;
  const struct manifest_dir_hook *hook;
  int rc;

  memset(&disk, 0, sizeof(disk));
  manifest_init(&disk.m);
  manifest_checks_init(&disk.c);
  /* Reuse the hashes of the last version published from this path: a
   * republish then reads only the files whose stat identity changed. */
  if (prev == NULL && load_last(s, pw->name, pw->rel, &disk))
    prev = &disk;
  if (pw->by_changes && pw->changes.n == 0) {
    /* The watch saw nothing change: the last version again, its
     * manifest and checks as they are. */
    memcpy(pw->v, prev->v, sizeof(pw->v));
    pw->existed = 1;
    pw->unchanged = 1;
    pw->stats.files_reused = prev->m.files;
    rc = store_source_set(s, pw->name, pw->v, pw->rel, &pw->e);
    goto out;
  }
  if (pw->from_draft) {
    rc = publish_draft(pw);
    goto out;
  }
  hook = pw->wb != NULL ? watch_build_hook(pw->wb) : NULL;
  /* The hashes to reuse: the draft's, which has the last publish's for
   * every path it did not look at. */
  if (prev != NULL) {
    base_m = &prev->m;
    base_c = &prev->c;
    if (pw->last != NULL && pw->last->has_draft) {
      base_m = &pw->last->dm;
      base_c = &pw->last->dc;
    }
  }
  rc = 0;
  if (pw->by_changes) {
    rc = manifest_scan_changes(store_rootfd(s), pw->rel, base_m, base_c,
                               pw->changes.v, pw->changes.n, hook, &pw->m,
                               &pw->c, &pw->stats, &pw->e);
    if (rc == ERR_CONFLICT) {
      log_warn("publish %s from '%s': %s; scanning it whole", pw->name,
               pw->rel, err_msg(&pw->e));
      pw->by_changes = 0;
    }
  }
  if (!pw->by_changes)
    rc = manifest_scan(store_rootfd(s), pw->rel, base_m, base_c, hook,
                       &pw->m, &pw->c, &pw->stats, &pw->e);
  if (rc < 0)
    goto out;
  if (prev != NULL && manifest_same(&pw->m, &prev->m)) {
    /* Nothing changed: the same version, whose manifest and checks are
     * stored already (equal manifests come from equal stat identities
     * or equal hashes; the checks are rewritten in the second case). */
    memcpy(pw->v, prev->v, sizeof(pw->v));
    pw->existed = 1;
    if (pw->stats.files_hashed > 0) {
      rc = save_checks(s, pw->name, pw->v, &pw->c, &pw->e);
      if (rc < 0)
        goto out;
    }
    rc = store_source_set(s, pw->name, pw->v, pw->rel, &pw->e);
    goto out;
  }
  rc = stage_version(s, pw->name, PENDING, &pw->m, &pw->c, pw->v, &pw->sm,
                     &pw->sc, &pw->e);
  if (rc < 0)
    goto out;
  rc = commit_version(s, pw->name, PENDING, pw->v, pw->rel, &pw->existed,
                      &pw->e);
  pw->seed = rc == 0;

out:
  pw->rc = rc;
  manifest_release(&disk.m);
  manifest_checks_release(&disk.c);
}

/* The cache entry of (name, rel), or NULL. */
static struct last_publish *
last_find(struct publish_state *st, const char *name, const char *rel)
{
  for (struct last_publish *lp = st->last; lp != NULL; lp = lp->next) {
    if (strcmp(lp->name, name) == 0 && strcmp(lp->rel, rel) == 0)
      return lp;
  }
  return NULL;
}

static void
last_free(struct last_publish *lp)
{
  if (lp->watch != NULL)
    watch_close(lp->watch, NULL, NULL);
  manifest_release(&lp->m);
  manifest_checks_release(&lp->c);
  draft_drop(lp);
  free(lp);
}

/* The name lp's staged drafts have in the store: the same for a path
 * across restarts, so that each draft replaces the one before. */
static void
draft_tag(struct last_publish *lp)
{
  char hex[65];

  hash_sha256_hex(lp->rel, strlen(lp->rel), hex);
  snprintf(lp->draft_tag, sizeof(lp->draft_tag), ".draft-%.16s", hex);
}

/* Keep pw's new manifest as the last publish of its path (returned). */
static struct last_publish *
last_store(struct publish_state *st, struct publish_work *pw)
{
  struct last_publish *lp = pw->last, *kept;
  size_t n = 0;

  if (lp == NULL) {
    lp = xcalloc(1, sizeof(*lp));
    snprintf(lp->name, sizeof(lp->name), "%s", pw->name);
    snprintf(lp->rel, sizeof(lp->rel), "%s", pw->rel);
    draft_tag(lp);
    lp->next = st->last;
    st->last = lp;
  }
  if (!pw->unchanged) {
    move_pair(&lp->m, &lp->c, &pw->m, &pw->c);
    memcpy(lp->v, pw->v, sizeof(lp->v));
  }
  lp->used = ++st->clock;
  kept = lp;
  for (struct last_publish *x = st->last; x != NULL; x = x->next)
    n++;
  while (n-- > LAST_PUBLISH_MAX) {
    struct last_publish **victim = NULL;

    for (struct last_publish **q = &st->last; *q != NULL; q = &(*q)->next) {
      if (!(*q)->busy && (victim == NULL || (*q)->used < (*victim)->used))
        victim = q;
    }
    if (victim == NULL)
      break;
    lp = *victim;
    *victim = lp->next;
    last_free(lp);
  }
  return kept;
}

/*
 * --watch: take the changes seen since the last publish of the path,
 * when its watch saw them all, and have the scan add the directories it
 * lists to that watch; else a new watch, built by a full scan.
 */
static void
watch_prepare(struct publish_work *pw)
{
  struct last_publish *lp = pw->last;
  char label[sizeof(pw->name) + sizeof(pw->rel) + 16];

  if (lp != NULL && lp->watch != NULL &&
      watch_take(lp->watch, &pw->changes) == 0) {
    pw->taken_seq = watch_seq(lp->watch);
    pw->by_changes = 1;
    pw->wb = watch_extend(lp->watch);
    pw->wb_extends = 1;
    return;
  }
  snprintf(label, sizeof(label), "%s from '%s'", pw->name, pw->rel);
  pw->wb = watch_build_new(label, strcmp(pw->rel, ".") == 0);
}

/* After pw's publish, lp (its path's last publish) is watched from its
 * scan on: by the watch it extended, the one it built, or none. */
static void on_tree_quiet(void *arg);

static void
watch_finish(struct agent *a, struct last_publish *lp,
             struct publish_work *pw)
{
  /* The draft's changes were among those taken. */
  draft_drop(lp);
  lp->a = a;
  if (pw->wb_extends) {
    watch_extended(lp->watch, pw->wb);
    lp->draft_seq = pw->taken_seq;
  } else {
    if (lp->watch != NULL)
      watch_close(lp->watch, NULL, NULL);
    lp->watch = pw->wb != NULL ? watch_start(a->loop, pw->wb) : NULL;
    lp->draft_seq = 0;
    if (lp->watch != NULL && a->draft_ms > 0)
      watch_on_quiet(lp->watch, a->draft_ms, on_tree_quiet, lp);
  }
  pw->wb = NULL;
}

static void
publish_work_free(struct publish_work *pw)
{
  watch_changes_release(&pw->changes);
  manifest_release(&pw->m);
  manifest_checks_release(&pw->c);
  manifest_release(&pw->sm);
  manifest_checks_release(&pw->sc);
  free(pw);
}

static void
publish_done(uv_work_t *w, int status)
{
  struct publish_work *pw = w->data;
  struct agent *a = pw->a;
  struct last_publish *lp;
  char dir[PATH_MAX * 2];
  json_t *v;

  (void)status;
  publish_release(a->publish, pw->name);
  lp = pw->last;
  if (lp != NULL)
    lp->busy = 0;
  if (pw->rc < 0) {
    watch_build_free(pw->wb);
    if (lp != NULL)
      draft_drop(lp);
    log_warn("publish %s from '%s' failed: %s", pw->name, pw->rel,
             err_msg(&pw->e));
    agent_reply_err(pw->req, &pw->e);
    publish_work_free(pw);
    agent_work_done(a);
    return;
  }
  lp = last_store(a->publish, pw);
  watch_finish(a, lp, pw);
  if (!pw->unchanged)
    serve_forget(a, pw->name, pw->v);
  if (pw->seed)
    serve_seed(a, pw->name, pw->v, pw->rel, &pw->sm, &pw->sc);
  if (strcmp(pw->rel, ".") == 0)
    snprintf(dir, sizeof(dir), "%s", store_root(a->store));
  else
    snprintf(dir, sizeof(dir), "%s/%s", store_root(a->store), pw->rel);
  log_info("published %s@%.12s from '%s': %llu files, %llu bytes "
           "(%llu hashed, %llu reused; %s)", pw->name, pw->v, pw->rel,
           (unsigned long long)lp->m.files, (unsigned long long)lp->m.bytes,
           (unsigned long long)pw->stats.files_hashed,
           (unsigned long long)pw->stats.files_reused,
           pw->by_changes ? "the watched changes looked at" : "scanned whole");
  v = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:s, s:I}",
                "version", pw->v, "files", (json_int_t)lp->m.files, "dirs",
                (json_int_t)lp->m.dirs, "links", (json_int_t)lp->m.links,
                "bytes", (json_int_t)lp->m.bytes, "path", dir,
                "files_hashed", (json_int_t)pw->stats.files_hashed,
                "files_reused", (json_int_t)pw->stats.files_reused,
                "segments_reused",
                (json_int_t)pw->stats.segments_reused, "scan",
                pw->by_changes ? "changes" : "full", "changes",
                (json_int_t)(pw->by_changes ? pw->changes.n : 0));
  agent_reply_json(pw->req, pw->existed ? 200 : 201, v);
  publish_work_free(pw);
  if (lp->quiet_pending)
    draft_maybe(lp);
  agent_work_done(a);
}

static void
publish_start(struct publish_work *pw)
{
  if (pw->last != NULL)
    pw->last->busy = 1;
  if (pw->a->watch)
    watch_prepare(pw);
  /* Nothing seen after the staged draft: the draft is this version. */
  pw->from_draft = pw->by_changes && pw->last != NULL &&
                   pw->last->staged && pw->taken_seq == pw->last->draft_seq;
  pw->w.data = pw;
  agent_queue(pw->a, &pw->w, publish_run, publish_done);
}

/* ---- drafts of the next publish (--watch) ---- */

struct draft_work {
  uv_work_t w;
  struct agent *a;
  struct last_publish *lp;     /* busy while this runs */
  struct watch_changes changes;
  uint64_t upto;
  struct watch_build *wb;
  struct manifest m;
  struct manifest_checks c;
  struct manifest_scan_stats stats;
  int staged;                  /* a new version, staged: */
  char v[MANIFEST_ID_HEX + 1];
  struct manifest sm;
  struct manifest_checks sc;
  struct err stage_e;          /* or why it could not be */
  uint64_t t0;
#ifdef TENBIN_FAULTS
  int slow;                    /* test-only: wait 2 s first */
#endif
  struct err e;
  int rc;
};

static void
draft_drop(struct last_publish *lp)
{
  manifest_release(&lp->dm);
  manifest_checks_release(&lp->dc);
  manifest_release(&lp->dsm);
  manifest_checks_release(&lp->dsc);
  lp->has_draft = 0;
  lp->staged = 0;
}

static void
draft_run(uv_work_t *w)
{
  struct draft_work *dw = w->data;
  const struct last_publish *lp = dw->lp;

#ifdef TENBIN_FAULTS
  if (dw->slow)
    sleep(2);
#endif
  dw->rc = manifest_scan_changes(
      store_rootfd(dw->a->store), lp->rel, lp->has_draft ? &lp->dm : &lp->m,
      lp->has_draft ? &lp->dc : &lp->c, dw->changes.v, dw->changes.n,
      watch_build_hook(dw->wb), &dw->m, &dw->c, &dw->stats, &dw->e);
  if (dw->rc < 0 || manifest_same(&dw->m, &lp->m))
    return;
  /* A new version: staged now, so that its publish only renames. */
  dw->staged = stage_version(dw->a->store, lp->name, lp->draft_tag, &dw->m,
                             &dw->c, dw->v, &dw->sm, &dw->sc,
                             &dw->stage_e) == 0;
}

static void
draft_done(uv_work_t *w, int status)
{
  struct draft_work *dw = w->data;
  struct last_publish *lp = dw->lp;
  struct agent *a = dw->a;
  uint64_t ms = (uv_hrtime() - dw->t0) / 1000000;

  (void)status;
  a->background--;
  lp->busy = 0;
  lp->drafting = 0;
  /* Directories it found are watched from its listing on, whether or not
   * a file then failed it; the changes stay for the publish. */
  watch_extended(lp->watch, dw->wb);
  if (dw->rc == 0) {
    draft_drop(lp);
    move_pair(&lp->dm, &lp->dc, &dw->m, &dw->c);
    lp->has_draft = 1;
    lp->draft_seq = dw->upto;
    if (dw->staged) {
      lp->staged = 1;
      memcpy(lp->dv, dw->v, sizeof(lp->dv));
      move_pair(&lp->dsm, &lp->dsc, &dw->sm, &dw->sc);
    } else if (dw->stage_e.code < 0) {
      log_info("draft of %s from '%s' not staged: %s (its publish writes "
               "it)", lp->name, lp->rel, err_msg(&dw->stage_e));
    }
    a->drafts++;
    log_debug("draft of %s from '%s': %zu changes, %llu files hashed in "
              "%llu ms", lp->name, lp->rel, dw->changes.n,
              (unsigned long long)dw->stats.files_hashed,
              (unsigned long long)ms);
  } else {
    log_info("draft of the next publish of %s from '%s' stopped: %s (the "
             "publish looks again)", lp->name, lp->rel, err_msg(&dw->e));
  }
  watch_on_quiet(lp->watch, ms * 3 > a->draft_ms ? ms * 3 : a->draft_ms,
                 on_tree_quiet, lp);
  watch_changes_release(&dw->changes);
  manifest_release(&dw->m);
  manifest_checks_release(&dw->c);
  manifest_release(&dw->sm);
  manifest_checks_release(&dw->sc);
  free(dw);
  if (lp->waiting != NULL) {
    struct publish_work *pw = lp->waiting;

    lp->waiting = NULL;
    publish_start(pw);
  } else if (lp->quiet_pending) {
    draft_maybe(lp);
  }
  agent_work_done(a);
}

/* A draft of lp's next publish, when its tree changed since the last one
 * and nothing else runs for it. */
static void
draft_maybe(struct last_publish *lp)
{
  struct agent *a = lp->a;
  struct draft_work *dw;

  if (lp->busy) {
    lp->quiet_pending = 1;
    return;
  }
  lp->quiet_pending = 0;
  if (a->closing || lp->watch == NULL ||
      watch_seq(lp->watch) <= lp->draft_seq)
    return;
  dw = xcalloc(1, sizeof(*dw));
  if (watch_peek(lp->watch, lp->draft_seq, &dw->changes, &dw->upto) < 0 ||
      dw->changes.n == 0) {
    watch_changes_release(&dw->changes);
    free(dw);
    return;
  }
  dw->a = a;
  dw->lp = lp;
  dw->wb = watch_extend(lp->watch);
  manifest_init(&dw->m);
  manifest_checks_init(&dw->c);
  manifest_init(&dw->sm);
  manifest_checks_init(&dw->sc);
  dw->t0 = uv_hrtime();
#ifdef TENBIN_FAULTS
  /* Test-only fault switch: a draft still running when its publish
   * comes (t13). */
  dw->slow = a->publish->slow_drafts;
#endif
  dw->w.data = dw;
  lp->busy = 1;
  lp->drafting = 1;
  a->background++;
  agent_queue(a, &dw->w, draft_run, draft_done);
}

static void
on_tree_quiet(void *arg)
{
  draft_maybe(arg);
}

void
publish_post(struct agent *a, struct http_request *req, const char *name)
{
  static const struct jsonx_field fields[] = {{"path", JX_STRING},
                                              {NULL, 0}};
  struct publish_work *pw;
  struct err e = {0};
  json_t *body = NULL;
  const char *path;

  if (agent_body_json(req, &body, &e) < 0 ||
      jsonx_check(body, fields, "", &e) < 0)
    goto fail;
  path = jsonx_str(body, "path");
  if (path == NULL) {
    err_set(&e, ERR_INVALID, "field 'path': required (a directory "
            "relative to the agent's root, or \".\")");
    goto fail;
  }
  pw = xcalloc(1, sizeof(*pw));
  if (strcmp(path, ".") == 0) {
    snprintf(pw->rel, sizeof(pw->rel), ".");
  } else if (syncpath_normalize(path, pw->rel, sizeof(pw->rel), &e) < 0) {
    free(pw);
    err_prefix(&e, "field 'path'");
    goto fail;
  } else if (strcmp(pw->rel, SYNCPATH_STORE) == 0 ||
             strncmp(pw->rel, SYNCPATH_STORE "/",
                     strlen(SYNCPATH_STORE) + 1) == 0) {
    free(pw);
    err_set(&e, ERR_INVALID, "field 'path': '%s' is the agent's own "
            "store", path);
    goto fail;
  }
  if (!publish_claim(a->publish, name)) {
    free(pw);
    err_set(&e, ERR_BAD_STATE, "dataset '%s' is being published; try "
            "again when that ends", name);
    goto fail;
  }
  pw->a = a;
  pw->req = req;
  snprintf(pw->name, sizeof(pw->name), "%s", name);
  manifest_init(&pw->m);
  manifest_checks_init(&pw->c);
  pw->last = last_find(a->publish, name, pw->rel);
  json_decref(body);
  if (pw->last != NULL && pw->last->drafting) {
    /* Its draft's work is the publish's: wait for it. */
    pw->last->waiting = pw;
    return;
  }
  publish_start(pw);
  return;

fail:
  json_decref(body);
  agent_reply_err(req, &e);
}