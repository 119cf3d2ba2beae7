/*
 * The destination side of replication, shared by pull.c (the state
 * machine on the loop: HTTP, batching, progress) and pull_work.c (what
 * runs on the thread pool: planning, preparing batches, patching and
 * verifying, publishing).
 *
 * Ownership: a struct pull belongs to the agent's list and to the loop.
 * Work on the pool reads the pull's immutable parts (name, version, the
 * manifest, the file table's fixed fields) and writes only into its own
 * work struct; the loop merges results in the done callbacks.
 */
#ifndef TENBIN_SYNC_PULL_INT_H
#define TENBIN_SYNC_PULL_INT_H

#include <limits.h>
#include <stdint.h>
#include <uv.h>

#include "agent/agent_int.h"
#include "sync/manifest.h"
#include "sync/wire.h"

#define PULL_MAX_ATTEMPTS 3      /* per file: delta, delta, whole file */
#define PULL_MAX_FRAMES 256      /* SEG frames per batch */
#define PULL_MIN_FRAMES 16       /* ... unless the queue has fewer */
#define PULL_GIVE_UP_MS (300 * 1000) /* source unreachable this long */
#define PULL_DELTA_MIN 4096      /* smaller files always go whole */

enum pull_state { PULL_RUNNING = 0, PULL_COMPLETE, PULL_FAILED };

/* How the signature of a multi-segment file's basis reached the source. */
enum sig_state { SIG_NONE = 0, SIG_SENDING, SIG_ACKED };

/* A file of the version that has to cross the network. */
struct pull_file {
  uint32_t entry;          /* index in the manifest */
  uint32_t segs_left;      /* segments not yet verified */
  uint8_t attempts;        /* failed verifications so far (one segment) */
  uint8_t full;            /* send literally, without a delta */
  uint8_t sig;             /* enum sig_state */
  uint8_t sig_sha[32];     /* SHA-256 of the signature bytes sent */
  char *basis;             /* absolute path of the old file, or NULL */
  uint8_t basis_sha[32];
  uint64_t basis_size;
  /* Multi-segment files only, each NULL otherwise; all-zero entries are
   * unknown.  fp: the XXH3-128 of each fingerprint block as verified
   * here (written by the pool item that verified its segment).
   * basis_fp: the same, recorded when the basis was received
   * (basis_segfp[basis_nsegs] entries), with the basis' segments. */
  uint8_t (*fp)[16];
  uint8_t (*basis_fp)[16];
  uint8_t *seg_attempts;   /* per segment, once one failed, or NULL */
  uint32_t basis_nsegs;
  uint64_t *basis_segoff;  /* basis_nsegs + 1 each, as in its manifest */
  uint64_t *basis_segfp;
};

/* Free a file table's arrays and the table. */
void pull_files_free(struct pull_file *v, size_t n);

/* One segment to make: files[file], segment seg.  A local one is equal
 * (by the manifests' segment hashes) to segment `from` of the old file
 * here (the same one, or one that moved with an insert or a delete
 * before it), so it is copied from there and verified, and never crosses
 * the network: against the fingerprints recorded when the old file's
 * segment was verified, or by its SHA-256 when none were recorded. */
struct pull_seg {
  uint32_t file;
  uint32_t seg;
  uint32_t local;
  uint32_t from;
  /* A segment between two that are local: the old file's segments
   * [rfrom, rto) hold what it replaced, and a signature of that range
   * alone goes with it (UINT32_MAX: none, the whole file's). */
  uint32_t rfrom, rto;
};

/* A FIFO of segments: taken at the front, retried ones put back there. */
struct segq {
  struct pull_seg *v;
  size_t head, len, cap;
};

/* Whoever waits for a pull's end: an HTTP request (answered with the
 * status), or an in-process caller of agent_pull (req NULL, cb). */
struct pull_waiter {
  struct http_request *req;
  agent_pull_cb cb;
  void *cb_arg;
  struct pull *p;
  uv_timer_t timer;
  struct pull_waiter *next;
};

struct pull {
  struct agent *a;
  struct pull *next;
  char name[72];
  char v[MANIFEST_ID_HEX + 1];
  char *src_url;
  char *src_token;
  uint64_t bwlimit;        /* bytes/s, 0: none */
  enum pull_state state;
  char error[ERR_MSG_SIZE];
  int cancelled;
  int planned;             /* the plan ran and the file table is set */
  char staging[PATH_MAX];
  char data[PATH_MAX];

  struct manifest m;
  char *mtext;             /* the manifest's text, to store */
  /* The version whose decoded manifest the manifest was asked as a
   * delta against ("" for the whole text); after a delta that did not
   * apply, whole is set and the manifest is fetched whole. */
  char delta_base[MANIFEST_ID_HEX + 1];
  int whole;
  int mstored;             /* mtext is in the store already */
  size_t mlen;
  struct pull_file *files; /* room for files_cap: the link stage may */
  size_t nfiles, files_cap; /* add files while batches read these */
  /* Segments to fetch from the source, and to copy from the old file
   * here: apart, so that the fetches go out in full batches at once
   * (each costs a round trip) while the copies use the cores, instead
   * of taking turns in file order. */
  struct segq fetch, copy;
  unsigned batches;        /* batches being prepared, sent or applied */
  unsigned copying;        /* of them, local copies */
  unsigned work;           /* this pull's items on the pool */

  uint64_t files_total, files_done, files_resumed;
  uint64_t bytes_total, bytes_done, bytes_wire, bytes_literal;
  uint64_t bytes_linked, retries;
  unsigned borrowed;       /* plans using m (struct plan_known) */
  int64_t started_ms;      /* mono ms of the PUT that started it */
  int64_t ended_ms;        /* mono ms it completed or failed, or 0 */

  uv_timer_t retry;        /* backoff while the source is unreachable */
  unsigned backoff_ms;
  int64_t failing_since;   /* mono ms of the first failure in a row */
  struct pull_waiter *waiters;
};

/* ---- pull_work.c ---- */

/* A replica's manifest still decoded in memory (one of the newest
 * completed pulls of the dataset), borrowed by a plan: its owner keeps
 * it while borrowed counts the plan (loop side only). */
struct plan_known {
  const char *v;
  const struct manifest *m;
  int64_t ended_ms;
  struct pull *owner;
};

#define PLAN_KNOWN_MAX 4

struct plan_link;
struct plan_local;

/*
 * The plan: what the version needs, from what is here already.  It runs
 * in two stages on the pool.  pull_plan_run decodes the manifest, makes
 * the directories and sorts every file into resumed, here already (a
 * link) or to fetch; the loop then starts the fetches at once, and
 * pull_links_run makes the links meanwhile (tens of thousands of linkat
 * calls in a small-file version, which the source's work overlaps).  A
 * file that can be neither linked nor copied is fetched after all: the
 * link stage plans it into files and queue again, indexed from 0, for
 * the loop to append.  The local index, the staging directory and the
 * borrowed manifests are kept from the first stage to the second.
 * With a prestaged tree of the basis (pull_prestage.c), the staging
 * directory starts as that tree and most files are kept in place.
 */
struct plan_work {
  uv_work_t w;
  struct pull *p;
  char *text;              /* the manifest as fetched (owned), then its */
  size_t len;              /* whole text when it came as a delta */
  size_t fetched;          /* bytes of manifest or delta fetched */
  int delta;               /* text is a delta against p->delta_base */
  int refetch;             /* the delta did not apply: fetch it whole */
  char hex[MANIFEST_ID_HEX + 1]; /* the text's SHA-256 */
  int stored;              /* the link stage stored the manifest */
  uint32_t *from;          /* after a delta: base index per entry of m, or
                              UINT32_MAX (manifest_delta_apply) */
  struct plan_known known[PLAN_KNOWN_MAX]; /* spares their decoding */
  size_t nknown;
  int fresh;               /* staging was made now: nothing to resume */
  int dirfd;               /* the staging directory, or -1 */
  struct plan_local *local; /* the index of what is here (owned) */
  struct plan_link *links; /* files to link or copy from here, by the */
  size_t nlinks, caplinks; /* link stage once every dir exists */
  struct manifest m;       /* out */
  const struct manifest *man; /* &m, then the pull's once it has m */
  struct pull_file *files; /* out */
  size_t nfiles, capfiles;
  struct pull_seg *queue;  /* out */
  size_t qlen, capqueue;
  uint64_t files_done, files_resumed, bytes_done, bytes_linked;
  size_t kept;             /* files kept from a prestaged tree */
  struct err e;
  int rc;
};
void pull_plan_run(uv_work_t *w);
void pull_links_run(uv_work_t *w);
/* Free what either stage left (not pw itself, nor the borrows). */
void pull_plan_release(struct plan_work *pw);

/* One batch: its request and, once answered, its answer. */
struct batch_req {
  uv_work_t w;
  struct pull *p;
  struct pull_seg *segs;   /* the SEG frames, in order */
  size_t nsegs;
  uint8_t *sigmode;        /* per seg: 0 none, WIRE_SIG, WIRE_SIGREF */
  uint8_t (*sigref)[32];   /* per seg, for WIRE_SIGREF */
  uint8_t carrier_sha[32]; /* out: SHA-256 of a multi-segment file's SIG */
  struct buf body;         /* request body (prep fills it) */
  char *answer;            /* answer body (owned) */
  size_t answer_len;
  /* apply results, one per seg */
  int8_t *result;          /* enum seg_result */
  int local;               /* local copies, not a request */
  char msg[ERR_MSG_SIZE];  /* the first CONFLICT or fatal message */
  int fatal;               /* ERR_* of a write error that stops the pull */
  uint64_t literal;        /* DATA and DELTA payload bytes */
  struct err e;
  int rc;
};

enum seg_result {
  SEG_PENDING = 0,   /* no answer frame for it: fetch it again */
  SEG_OK,
  SEG_CORRUPT,       /* did not verify: retry the file */
  SEG_SIG_MISSING,   /* the source lost our signature: send it again */
  SEG_CONFLICT,      /* the source file changed: the pull fails */
};

void pull_prep_run(uv_work_t *w);
void pull_apply_run(uv_work_t *w);
/* A batch of local segments: copy from the old file, verify. */
void pull_local_run(uv_work_t *w);

/* Finish a file all of whose segments are verified: mode, mtime, its
 * final name.  Runs on the loop (a few metadata syscalls). */
int pull_file_finish(const struct pull *p, const struct pull_file *f,
                     struct err *e) WARN_UNUSED;

struct finish_work {
  uv_work_t w;
  struct pull *p;
  struct err e;
  int rc;
};
void pull_finish_run(uv_work_t *w);

/* Signatures of received files, for the next version's deltas. */
struct sig_item {
  char *path;              /* relative to dir (owned) */
  uint8_t sha[32];
  uint64_t size;
  uint8_t (*fp)[16];       /* nfp entries, all known, or NULL (owned) */
  uint64_t nfp;
};

struct sig_work {
  uv_work_t w;
  struct agent *a;
  char dir[PATH_MAX];
  struct sig_item *items;
  size_t n;
};
void pull_sigs_run(uv_work_t *w);

/* ---- pull_prestage.c ---- */
/* Loop: prestage p's version (complete) for the next pull of its name. */
void pull_prestage_queue(struct pull *p);
/* Loop: stop the running prestage job soon (the agent is closing). */
void pull_prestage_cancel(struct agent *a);
/* Plan (pool), for a fresh staging directory: take the prestaged tree of
 * basis_v (whose manifest is basis) as p's staging directory, keeping
 * what the new manifest pw->m has as it is: 1 taken, keep[i] set for
 * each file of pw->m already in place; 0 not (keep all zero, no staging
 * directory made).  from: pw->from when pw->m came as a delta against
 * basis, else NULL. */
int pull_prestage_take(struct plan_work *pw, const char *basis_v,
                       const struct manifest *basis, const uint32_t *from,
                       uint8_t *keep);

#endif
