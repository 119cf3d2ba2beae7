/*
 * Publishing a large file: cut it into segments by content and hash them
 * (docs/SYNC.md "Segments" and "Publishing again").
 *
 * With the previous publish of the path at hand, most segments are found
 * again: at each boundary the first MiB's fingerprint names the previous
 * segment that may start there (wherever it sat before), the rest of its
 * fingerprints confirm it, and it keeps its SHA-256.  Only where no
 * previous segment fits is the gear hash run to cut a new one, and only
 * new segments are SHA-256'd.  An insert in the middle of a 2 GiB file so
 * costs one read of the file for fingerprints and SHA-256 of one or two
 * segments, where fixed segments would rehash the shifted half.
 *
 * A file with no previous publish is cut in regions on every core, the
 * regions' cut chains joined where the chain from the file's start meets
 * them (see "a file with no previous publish" below).
 *
 * The work is in rounds, so that reads run on one thread per core:
 * follow the chain of previous segments from the current boundary by
 * their first fingerprints alone (one MiB read per step), verify the
 * chain's segments in parallel, keep the verified ones up to the first
 * that failed, cut there, and go on from the cut with a new chain.  A
 * new chain that reaches an offset of the last one takes that chain's
 * links (and what was verified of them) from there on, so nothing is
 * verified twice; the first round starts from the previous layout at
 * the same offsets, all of it verified at once.
 */
#include "manifest_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include "sync/chunk.h"
#include "util/alloc.h"
#include "util/fileio.h"
#include "util/parallel.h"

#define READ_CHUNK ((size_t)MANIFEST_FP_BLOCK)
#define LARGE_THREADS_MAX 8
#define SEG_FP_MAX (MANIFEST_SEG_MAX / MANIFEST_FP_BLOCK)

_Static_assert(MANIFEST_SEG_MAX % MANIFEST_FP_BLOCK == 0,
               "a segment holds whole fingerprint blocks");

/* A link of a chain: the previous segment `from` may start at off; or,
 * with from == CUT, no previous segment starts there. */
#define CUT UINT32_MAX
enum { UNTRIED = 0, GOOD, BAD };

struct link {
  uint64_t off;
  uint32_t from;
  int state;
  uint64_t cut;  /* where a segment cut at off ends, when worked out */
};

struct chain {
  struct link *v;
  size_t n, cap;
};

/* The previous segments, sorted by their first fingerprint. */
struct first {
  const uint8_t *fp;
  uint32_t seg;
};

/* A segment of the new file: from a previous one, or cut here. */
struct newseg {
  uint64_t off, len;
  uint32_t from;     /* previous segment, or CUT (to be hashed) */
  int err;           /* errno of a failed read, -1 a short one */
};

/* A stretch of a file cut on its own, from its start as if a segment
 * began there, until a cut reaches end (the next region's start). */
struct region {
  uint64_t start, end;
  uint64_t *points;    /* start, then every cut: ascending */
  size_t n, cap;
  uint64_t read;       /* bytes the cuts read */
  int err;             /* of a failed read (-1 short) */
};

struct large {
  int fd;
  struct manifest_entry *me;
  struct manifest_check *ck;
  const struct manifest_entry *pe; /* NULL without a usable previous */
  const struct manifest_check *pc;
  struct first *firsts;
  size_t nfirsts;
  struct chain chain, last;
  struct newseg *segs;
  size_t nsegs, segcap;
  uint8_t *buf;                    /* READ_CHUNK, the calling thread's */
  uint64_t bytes_read;
  struct region *regions;          /* a first publish: cut ahead */
  size_t nregions;
  uint64_t cut_ahead;              /* segments whose cut a region found */
};

struct block_sums {
  uint8_t (*fp)[16];
  EVP_MD_CTX *ctx;
};

/* One fingerprint block's bytes (READ_CHUNK is one). */
static int
sum_block(void *arg, const uint8_t *p, size_t n)
{
  struct block_sums *b = arg;
  XXH128_canonical_t c;

  if (b->ctx != NULL)
    EVP_DigestUpdate(b->ctx, p, n);
  XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
  memcpy(*b->fp++, c.digest, 16);
  return 0;
}

/*
 * Read [off, off+len) through buf (READ_CHUNK bytes) and put the
 * XXH3-128 of each fingerprint block (from off) into fp and, with ctx,
 * the SHA-256 of it all into ctx.  0, EIO when a read failed, or -1
 * when the file is shorter or shrank while read.
 */
static int
read_blocks(int fd, uint64_t off, uint64_t len, uint8_t *buf,
            uint8_t (*fp)[16], EVP_MD_CTX *ctx)
{
  struct block_sums b = {fp, ctx};
  struct err e = {0};
  int rc = file_read_chunks(fd, off, len, buf, READ_CHUNK, sum_block, &b,
                            &e);

  return rc == 0 ? 0 : rc == ERR_CONFLICT ? -1 : EIO;
}

/* ---- running items on one thread per core ---- */

struct pool {
  atomic_size_t next;
  size_t n;
  void (*fn)(struct large *lg, size_t i, uint8_t *buf, EVP_MD_CTX *ctx);
  struct large *lg;
};

/* One task's share: items taken one at a time, with its own buffer and
 * hash context. */
static void
pool_run(void *arg, size_t task)
{
  struct pool *p = arg;
  uint8_t *buf = xmalloc(READ_CHUNK);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  size_t i;

  (void)task;
  if (ctx == NULL)
    abort(); /* the alloc.h policy for small allocations */
  while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
    p->fn(p->lg, i, buf, ctx);
  EVP_MD_CTX_free(ctx);
  free(buf);
}

/* One per core, at most LARGE_THREADS_MAX. */
static size_t
threads(void)
{
  return parallel_cores(LARGE_THREADS_MAX);
}

static void
pool_for(struct large *lg, size_t n,
         void (*fn)(struct large *, size_t, uint8_t *, EVP_MD_CTX *))
{
  struct pool p = {.n = n, .fn = fn, .lg = lg};
  size_t nt = threads();

  atomic_init(&p.next, 0);
  if (nt > n)
    nt = n;
  (void)parallel_run(nt, pool_run, &p, NULL);
}

/* ---- following the previous segments ---- */

static int
first_cmp(const void *a, const void *b)
{
  return memcmp(((const struct first *)a)->fp, ((const struct first *)b)->fp,
                16);
}

static void
index_firsts(struct large *lg)
{
  lg->firsts = xmalloc(lg->pe->nsegs * sizeof(*lg->firsts));
  for (uint32_t k = 0; k < lg->pe->nsegs; k++) {
    lg->firsts[k].fp = lg->pc->fp[lg->pe->segfp[k]];
    lg->firsts[k].seg = k;
  }
  lg->nfirsts = lg->pe->nsegs;
  qsort(lg->firsts, lg->nfirsts, sizeof(*lg->firsts), first_cmp);
}

/*
 * A previous segment that may start at off: its first fingerprint is
 * that of the block at off, and it fits where it would sit (the last
 * previous segment was cut by the end of its file, so it stands only as
 * the last one here too).  CUT when none does.
 */
static int
candidate(struct large *lg, uint64_t off, uint32_t *from)
{
  uint64_t size = lg->me->size;
  uint64_t want = size - off < READ_CHUNK ? size - off : READ_CHUNK;
  uint8_t fp[1][16];
  struct first key = {fp[0], 0}, *hit;
  int rc = read_blocks(lg->fd, off, want, lg->buf, fp, NULL);

  *from = CUT;
  if (rc != 0)
    return rc;
  lg->bytes_read += want;
  hit = bsearch(&key, lg->firsts, lg->nfirsts, sizeof(key), first_cmp);
  if (hit == NULL)
    return 0;
  while (hit > lg->firsts && first_cmp(hit - 1, &key) == 0)
    hit--;
  for (; hit < lg->firsts + lg->nfirsts && first_cmp(hit, &key) == 0;
       hit++) {
    uint32_t j = hit->seg;
    uint64_t len = lg->pe->segoff[j + 1] - lg->pe->segoff[j];
    int last = j + 1 == lg->pe->nsegs;

    if (last ? off + len == size : off + len <= size) {
      *from = j;
      return 0;
    }
  }
  return 0;
}

static struct link *
chain_add(struct chain *c, uint64_t off, uint32_t from, int state)
{
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 64;
    c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
  }
  c->v[c->n] = (struct link){off, from, state, 0};
  return &c->v[c->n++];
}

static const struct link *
chain_find(const struct chain *c, uint64_t off)
{
  size_t lo = 0, hi = c->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;

    if (c->v[mid].off == off)
      return &c->v[mid];
    if (c->v[mid].off < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* The chain from off into lg->chain: up to a CUT link, or the file's end
 * (no link), or where it joins the last chain (whose rest it copies). */
static int
follow(struct large *lg, uint64_t off)
{
  uint64_t size = lg->me->size;

  lg->chain.n = 0;
  while (off < size) {
    const struct link *seen = chain_find(&lg->last, off);
    uint32_t from;
    int rc;

    if (seen != NULL) {
      struct link *l = NULL;

      for (; seen < lg->last.v + lg->last.n; seen++) {
        l = chain_add(&lg->chain, seen->off, seen->from, seen->state);
        l->cut = seen->cut;
      }
      /* A chain seeded from the last layout may end before the file;
       * past a link that did not hold, the walk never goes. */
      if (l->state != GOOD)
        return 0;
      off = l->off + lg->pe->segoff[l->from + 1] - lg->pe->segoff[l->from];
      continue;
    }
    rc = candidate(lg, off, &from);
    if (rc != 0)
      return rc;
    chain_add(&lg->chain, off, from, UNTRIED);
    if (from == CUT)
      return 0;
    off += lg->pe->segoff[from + 1] - lg->pe->segoff[from];
  }
  return 0;
}

/* Pool item: whether link i's bytes are the previous segment's. */
static void
verify_link(struct large *lg, size_t i, uint8_t *buf, EVP_MD_CTX *ctx)
{
  struct link *l = lg->chain.v + i;
  uint8_t fp[SEG_FP_MAX][16];
  uint64_t len;
  uint32_t j = l->from;

  (void)ctx;
  if (l->state != UNTRIED || j == CUT)
    return;
  len = lg->pe->segoff[j + 1] - lg->pe->segoff[j];
  l->state = read_blocks(lg->fd, l->off, len, buf, fp, NULL) == 0 &&
                     memcmp(fp, lg->pc->fp[lg->pe->segfp[j]],
                            (size_t)manifest_nfp(len) * 16) == 0
                 ? GOOD : BAD;
}

/* ---- the new segments ---- */

static void
seg_add(struct large *lg, uint64_t off, uint64_t len, uint32_t from)
{
  if (lg->nsegs == lg->segcap) {
    lg->segcap = lg->segcap ? 2 * lg->segcap : 64;
    lg->segs = xrealloc(lg->segs, lg->segcap * sizeof(*lg->segs));
  }
  lg->segs[lg->nsegs++] = (struct newseg){off, len, from, 0};
}

/* A link where the walk, if it gets there, must cut: it failed (or had
 * no candidate) right after one that held, or first in its chain. */
static int
cut_ahead(const struct large *lg, size_t i)
{
  const struct link *l = &lg->chain.v[i];

  return l->cut == 0 && (l->state == BAD || l->from == CUT) &&
         (i == 0 || lg->chain.v[i - 1].state == GOOD);
}

/* Pool item: the cut at such a link, worked out ahead on its own core
 * (a cut depends only on the bytes from where it starts). */
static void
cut_link(struct large *lg, size_t i, uint8_t *buf, EVP_MD_CTX *ctx)
{
  struct link *l = &lg->chain.v[i];
  uint64_t end;

  (void)ctx;
  if (cut_ahead(lg, i) &&
      chunk_cut(lg->fd, l->off, lg->me->size, buf, READ_CHUNK, &end) == 0)
    l->cut = end;
}

/* Verify the untried links of lg->chain on one thread per core, then
 * work out the cuts the walk will need. */
static void
verify_chain(struct large *lg)
{
  size_t untried = 0, cuts = 0;

  for (size_t i = 0; i < lg->chain.n; i++) {
    const struct link *l = &lg->chain.v[i];

    if (l->state == UNTRIED && l->from != CUT) {
      lg->bytes_read += lg->pe->segoff[l->from + 1] - lg->pe->segoff[l->from];
      untried++;
    }
  }
  if (untried > 0)
    pool_for(lg, lg->chain.n, verify_link);
  for (size_t i = 0; i < lg->chain.n; i++)
    cuts += cut_ahead(lg, i);
  if (cuts > 1)
    pool_for(lg, lg->chain.n, cut_link);
}

/*
 * The chain just walked becomes the one later chains join, with the
 * links of the one before past its end: a short chain (a cut where no
 * previous segment fit) must not forget what was verified beyond it.
 */
static void
keep_chain(struct large *lg)
{
  struct chain t;

  if (lg->chain.n > 0) {
    uint64_t top = lg->chain.v[lg->chain.n - 1].off;

    for (size_t i = 0; i < lg->last.n; i++) {
      const struct link *l = &lg->last.v[i];

      if (l->off > top)
        chain_add(&lg->chain, l->off, l->from, l->state)->cut = l->cut;
    }
  }
  t = lg->last;
  lg->last = lg->chain;
  lg->chain = t;
}

/*
 * The first guess, and the right one wherever nothing moved: the last
 * layout at the same offsets (its last segment only if the file did not
 * grow or shrink), verified at once on every core, as the chain the
 * first round joins.
 */
static void
seed_last_layout(struct large *lg)
{
  const struct manifest_entry *pe = lg->pe;

  lg->chain.n = 0;
  for (uint32_t j = 0; j < pe->nsegs; j++) {
    if (pe->segoff[j + 1] > lg->me->size ||
        (j + 1 == pe->nsegs && pe->size != lg->me->size))
      break;
    chain_add(&lg->chain, pe->segoff[j], j, UNTRIED);
  }
  verify_chain(lg);
  keep_chain(lg);
}

/* Bytes chunk_cut reads to cut [off, end): none of the first MIN but
 * the hash's window. */
static uint64_t
cut_read(uint64_t off, uint64_t end)
{
  return end - off > MANIFEST_SEG_MIN
             ? end - off - MANIFEST_SEG_MIN + CHUNK_WINDOW : 0;
}

/* A segment cut here, [off, end), with what its cut read. */
static void
seg_cut(struct large *lg, uint64_t off, uint64_t end)
{
  lg->bytes_read += cut_read(off, end);
  seg_add(lg, off, end - off, CUT);
}

/* ---- a file with no previous publish ---- */

/*
 * Cutting is a chain (each cut starts the next segment), so a first
 * publish would cut on one core while the others wait to hash.  Instead
 * regions of the file are cut on every core, each from its own start as
 * if a segment began there.  A cut depends only on the bytes from the
 * segment's start, so where the true chain, walked from the file's
 * start, meets a point of a region's chain, the rest of that chain is
 * the true one: the walk cuts on its own only until they meet (a cut or
 * two, as both stop at the first candidate past MIN; every cut where
 * nothing cuts but MAX, in data with no candidates at all).
 */
#define REGION_MIN (2 * CHUNK_MAX)  /* a join costs a cut or two */
#define REGIONS_PER_THREAD 4         /* for cores that finish early */

static void
region_add(struct region *r, uint64_t point)
{
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    r->points = xrealloc(r->points, r->cap * sizeof(*r->points));
  }
  r->points[r->n++] = point;
}

/* Pool item: the chain of region i. */
static void
cut_region(struct large *lg, size_t i, uint8_t *buf, EVP_MD_CTX *ctx)
{
  struct region *r = &lg->regions[i];
  uint64_t off = r->start, end;

  (void)ctx;
  region_add(r, off);
  while (off < r->end) {
    r->err = chunk_cut(lg->fd, off, lg->me->size, buf, READ_CHUNK, &end);
    if (r->err != 0)
      return;
    r->read += cut_read(off, end);
    region_add(r, end);
    off = end;
  }
}

/* Where off is among r's points, or -1. */
static ssize_t
region_find(const struct region *r, uint64_t off)
{
  size_t lo = 0, hi = r->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;

    if (r->points[mid] == off)
      return (ssize_t)mid;
    if (r->points[mid] < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

static int
cut_fresh(struct large *lg)
{
  uint64_t size = lg->me->size, off = 0, end;
  size_t nr = (size_t)(size / REGION_MIN), r = 0;
  int rc;

  if (nr > REGIONS_PER_THREAD * threads())
    nr = REGIONS_PER_THREAD * threads();
  if (nr >= 2) {
    lg->regions = xcalloc(nr, sizeof(*lg->regions));
    lg->nregions = nr;
    for (size_t i = 0; i < nr; i++) {
      lg->regions[i].start = size * i / nr;
      lg->regions[i].end = size * (i + 1) / nr;
    }
    pool_for(lg, nr, cut_region);
    for (size_t i = 0; i < nr; i++) {
      lg->bytes_read += lg->regions[i].read;
      if (lg->regions[i].err != 0)
        return lg->regions[i].err;
    }
  }
  while (off < size) {
    ssize_t at = -1;

    while (r < lg->nregions && lg->regions[r].end <= off)
      r++;
    if (r < lg->nregions)
      at = region_find(&lg->regions[r], off);
    if (at >= 0) {
      /* Met: off < end <= the last point, so there is one after it. */
      const struct region *rg = &lg->regions[r];

      for (size_t j = (size_t)at + 1; j < rg->n; j++) {
        seg_add(lg, off, rg->points[j] - off, CUT);
        off = rg->points[j];
        lg->cut_ahead++;
      }
      continue;
    }
    rc = chunk_cut(lg->fd, off, size, lg->buf, READ_CHUNK, &end);
    if (rc != 0)
      return rc;
    seg_cut(lg, off, end);
    off = end;
  }
  return 0;
}

/* The segments of the whole file into lg->segs. */
static int
cut_file(struct large *lg)
{
  uint64_t size = lg->me->size, off = 0;
  int rc;

  if (lg->pe == NULL)
    return cut_fresh(lg);
  seed_last_layout(lg);
  while (off < size) {
    const struct link *ahead;
    size_t i;
    uint64_t end;

    rc = follow(lg, off);
    if (rc != 0)
      return rc;
    verify_chain(lg);
    for (i = 0; i < lg->chain.n && lg->chain.v[i].state == GOOD; i++) {
      const struct link *l = &lg->chain.v[i];
      uint32_t j = l->from;

      seg_add(lg, l->off, lg->pe->segoff[j + 1] - lg->pe->segoff[j], j);
      off = l->off + lg->segs[lg->nsegs - 1].len;
    }
    keep_chain(lg);
    if (off == size)
      break;
    ahead = chain_find(&lg->last, off);
    if (ahead != NULL && ahead->cut != 0) {
      end = ahead->cut;
    } else {
      rc = chunk_cut(lg->fd, off, size, lg->buf, READ_CHUNK, &end);
      if (rc != 0)
        return rc;
    }
    seg_cut(lg, off, end);
    off = end;
  }
  return 0;
}

/* Pool item: SHA-256, fingerprints and check of a segment cut here. */
static void
hash_seg(struct large *lg, size_t k, uint8_t *buf, EVP_MD_CTX *ctx)
{
  struct newseg *s = &lg->segs[k];
  uint8_t (*fp)[16] = lg->ck->fp + lg->me->segfp[k];
  XXH128_canonical_t canon;
  unsigned int mdlen = 0;

  if (s->from != CUT)
    return;
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  s->err = read_blocks(lg->fd, s->off, s->len, buf, fp, ctx);
  if (s->err != 0)
    return;
  EVP_DigestFinal_ex(ctx, lg->me->segs[k], &mdlen);
  /* The segment's check is the XXH3-128 of its blocks' (one pass of
   * XXH3 over the data, which serving checks block by block). */
  XXH128_canonicalFromHash(&canon, XXH3_128bits(fp, manifest_nfp(s->len) *
                                                        16));
  memcpy(lg->ck->xxh[k], canon.digest, 16);
}

/* Lay out the entry and its checks from lg->segs and fill them: copied
 * from the previous publish, or hashed. */
static int
hash_file(struct large *lg, struct manifest_scan_stats *st, struct err *e)
{
  struct manifest_entry *me = lg->me;
  struct manifest_check *ck = lg->ck;
  uint64_t *lens = xmalloc(lg->nsegs * sizeof(*lens));
  unsigned char root[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  int rc = 0;

  for (size_t k = 0; k < lg->nsegs; k++)
    lens[k] = lg->segs[k].len;
  manifest_set_segments(me, lens, (uint32_t)lg->nsegs);
  free(lens);
  me->segs = xcalloc(me->nsegs, 32);
  ck->nsegs = me->nsegs;
  ck->xxh = xcalloc(me->nsegs, 16);
  ck->nfp = (uint32_t)me->segfp[me->nsegs];
  ck->fp = xcalloc(ck->nfp, 16);
  for (uint32_t k = 0; k < me->nsegs; k++) {
    uint32_t j = lg->segs[k].from;

    if (j == CUT)
      continue;
    memcpy(me->segs[k], lg->pe->segs[j], 32);
    memcpy(ck->xxh[k], lg->pc->xxh[j], 16);
    memcpy(ck->fp[me->segfp[k]], lg->pc->fp[lg->pe->segfp[j]],
           (size_t)(me->segfp[k + 1] - me->segfp[k]) * 16);
    st->segments_reused++;
  }
  pool_for(lg, lg->nsegs, hash_seg);
  for (uint32_t k = 0; k < me->nsegs; k++) {
    const struct newseg *s = &lg->segs[k];

    if (s->from == CUT)
      st->bytes_hashed += s->len;
    if (rc == 0 && s->err > 0)
      rc = err_set(e, ERR_IO, "cannot read '%.200s': %s", me->path,
                   strerror(s->err));
    else if (rc == 0 && s->err < 0)
      rc = err_set(e, ERR_IO, "file '%.200s' shrank while being read",
                   me->path);
  }
  if (rc < 0)
    return rc;
  EVP_Digest(me->segs, (size_t)me->nsegs * 32, root, &mdlen, EVP_sha256(),
             NULL);
  memcpy(me->sha256, root, 32);
  return 0;
}

int
manifest_scan_large(int fd, struct manifest_entry *me,
                    struct manifest_check *ck,
                    const struct manifest_entry *pe,
                    const struct manifest_check *pc,
                    struct manifest_scan_stats *st, struct err *e)
{
  struct large lg = {.fd = fd, .me = me, .ck = ck};
  uint8_t probe;
  int rc;

  if (pe != NULL && pe->type == MANIFEST_FILE && pe->nsegs > 1 &&
      pc != NULL && pc->fp != NULL && pc->xxh != NULL &&
      pc->nsegs == pe->nsegs && pc->nfp == pe->segfp[pe->nsegs]) {
    lg.pe = pe;
    lg.pc = pc;
    index_firsts(&lg);
  }
  lg.buf = xmalloc(READ_CHUNK);
  rc = cut_file(&lg);
  if (rc > 0) {
    rc = err_set(e, ERR_IO, "cannot read '%.200s': %s", me->path,
                 strerror(rc));
    goto out;
  }
  if (rc < 0) {
    rc = err_set(e, ERR_IO, "file '%.200s' shrank while being read",
                 me->path);
    goto out;
  }
  if (lg.nsegs < 2) {
    rc = 1; /* one segment: hashed as a small file, counted there */
    goto out;
  }
  st->bytes_hashed += lg.bytes_read;
  st->segments_cut_ahead += lg.cut_ahead;
  rc = hash_file(&lg, st, e);
  if (rc == 0 && pread(fd, &probe, 1, (off_t)me->size) != 0)
    rc = err_set(e, ERR_IO, "file '%.200s' grew while being read",
                 me->path);

out:
  for (size_t i = 0; i < lg.nregions; i++)
    free(lg.regions[i].points);
  free(lg.regions);
  free(lg.buf);
  free(lg.firsts);
  free(lg.chain.v);
  free(lg.last.v);
  free(lg.segs);
  return rc;
}
