/*
 * The block-delta engine (see delta.h): librsync jobs driven by hand
 * with rs_job_iter over pread/pwrite, so that memory per call is two
 * DELTA_IO_BUF buffers and calls on other threads may share the fds.
 *
 * The signatures use RS_MD4_SIG_MAGIC (MD4 strong sums, rollsum weak
 * sums), the fastest of librsync's four kinds by a measurement in
 * bench/README.md ("librsync signature kinds").
 *
 * MD4 is broken as a cryptographic hash, but the strong sum here only
 * has to make a false block match improbable: every segment the
 * destination writes is checked against the manifest's SHA-256, so a
 * collision costs a failed segment (to be sent again as literal data),
 * never bad data.  strong_len is librsync's minimum for
 * the file size and block length (rs_sig_args with -1): 5 bytes for
 * small files, 8 at 2 GiB, 12 at 2^50.
 */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librsync.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include "sync/delta.h"
#include "sync/manifest.h"
#include "util/alloc.h"
#include "util/fileio.h"

#define DELTA_MIN_BLOCK ((size_t)2 << 10)
#define DELTA_MAX_BLOCK ((size_t)1 << 20)
#define DELTA_SIG_MAGIC RS_MD4_SIG_MAGIC
/* librsync's signature header: magic, block length, strong length. */
#define DELTA_SIG_HDR 12
/* librsync's delta opcodes (prototab.h; not in its public header). */
#define DELTA_OP_END 0x00
#define DELTA_OP_LITERAL_N1 0x41
#define DELTA_OP_LITERAL_N4 0x43
#define DELTA_OP_COPY_N1_N1 0x45
#define DELTA_OP_COPY_N8_N4 0x53 /* 0x45 + 4 * (8-byte offset) + (4-byte len) */
static const uint8_t delta_magic[4] = {0x72, 0x73, 0x02, 0x36};
/* Windows of input with no matches that end a delta (delta_compute). */
#define DELTA_PROBE ((uint64_t)4 << 20)
#define DELTA_PROBE_AGAIN ((uint64_t)1 << 20)

_Static_assert(DELTA_MAX_BLOCK <= MANIFEST_SEG_MIN,
               "a delta's context is at most one block of a segment");

struct delta_sig {
  rs_signature_t *sig;
  uint32_t block_len;
  int missed; /* the last delta with it fell back to literal data */
  /* The strong sums (MD4, strong_len bytes) of the basis' blocks, in
   * order, for blocks_in_place; NULL for another kind of signature. */
  uint8_t *strong;
  uint32_t strong_len;
  uint64_t nblocks;
};

size_t
delta_block_len(uint64_t size)
{
  size_t bl = DELTA_MIN_BLOCK;

  /* The smallest power of two whose square covers size: librsync's
   * sqrt rule rounded up. */
  while (bl < DELTA_MAX_BLOCK && (uint64_t)bl * bl < size)
    bl <<= 1;
  return bl;
}

/* ---- file I/O ---- */

/* pread n bytes at off; fewer only at end of file.  -errno on error. */
static ssize_t
read_at(int fd, void *p, size_t n, uint64_t off)
{
  size_t got = 0;

  while (got < n) {
    ssize_t r = pread(fd, (char *)p + got, n - got, (off_t)(off + got));

    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -errno;
    if (r == 0)
      break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

/* Read exactly n bytes at off; a short file is ERR_IO. */
static int
delta_read_exact(int fd, void *p, size_t n, uint64_t off, struct err *e)
{
  ssize_t r = read_at(fd, p, n, off);

  if (r < 0)
    return err_set(e, ERR_IO, "read at offset %llu: %s",
                   (unsigned long long)off, strerror((int)-r));
  if ((size_t)r < n)
    return err_set(e, ERR_IO, "file ends at offset %llu, before the %zu "
                   "bytes asked at %llu", (unsigned long long)off +
                   (unsigned long long)r, n, (unsigned long long)off);
  return 0;
}

/* pwrite all n bytes at off, naming the two errors an operator can act
 * on (a full disk, a file size limit) in words. */
static int
write_exact(int fd, const void *p, size_t n, uint64_t off, struct err *e)
{
  size_t put = 0;

  while (put < n) {
    ssize_t w = pwrite(fd, (const char *)p + put, n - put,
                       (off_t)(off + put));

    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == ENOSPC)
      return err_set(e, ERR_IO, "no space left on device");
    if (w < 0 && errno == EFBIG)
      return err_set(e, ERR_IO, "file too large (file size limit)");
    if (w < 0)
      return err_set(e, ERR_IO, "write at offset %llu: %s",
                     (unsigned long long)(off + put), strerror(errno));
    if (w == 0)
      return err_set(e, ERR_IO, "write at offset %llu made no progress",
                     (unsigned long long)(off + put));
    put += (size_t)w;
  }
  return 0;
}

/*
 * Runs of zeros become holes, as with cp --sparse=auto: a 5 GB sparse
 * file would otherwise take 5 GB of disk at every replica.  Holes read
 * back as zeros, so the sums stay those of the bytes.  The unit is the
 * 4 KiB block of the file (the usual file system block), and a block
 * of data costs a look at its first word, seldom more.
 */
#define SPARSE_BLOCK ((size_t)4096)

/* Whether the n bytes at p are all zero: the first word, then p against
 * itself shifted by one byte, which stops at the first difference. */
static int
all_zero(const char *p, size_t n)
{
  uint64_t w = 0;
  size_t k = n < sizeof(w) ? n : sizeof(w);

  memcpy(&w, p, k);
  if (w != 0)
    return 0;
  return n <= k || memcmp(p, p + 1, n - 1) == 0;
}

/*
 * Make the n bytes at off of fd read as the n zeros at p: a hole is
 * punched (a part file of an earlier attempt may hold bytes there; past
 * the end of the file it changes nothing).  Where the file system cannot
 * punch, zeros are written, but only below the end of the file: beyond
 * it nothing was ever written, since the writers of one file write
 * disjoint ranges and the file only grows while it is written.
 */
static int
zero_run(int fd, const char *p, size_t n, uint64_t off, struct err *e)
{
  struct stat st;

  if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                (off_t)n) == 0)
    return 0;
  if (fstat(fd, &st) < 0)
    return err_set(e, ERR_IO, "write at offset %llu: %s",
                   (unsigned long long)off, strerror(errno));
  if (off >= (uint64_t)st.st_size)
    return 0;
  if (n > (uint64_t)st.st_size - off)
    n = (size_t)((uint64_t)st.st_size - off);
  return write_exact(fd, p, n, off, e);
}

/*
 * write_exact that leaves holes for the blocks of zeros.  A write that
 * ends in zeros still writes its last byte, so that the file is at least
 * that long; a size set with ftruncate could cut what another writer of
 * the file has just written further on.
 */
static int
write_sparse(int fd, const char *p, size_t n, uint64_t off, struct err *e)
{
  size_t at = 0, start = 0; /* the pending run is [start, at) */
  int zero = 0;             /* and is of zeros */
  int rc = 0;

  while (rc == 0 && at < n) {
    size_t len = SPARSE_BLOCK - (size_t)((off + at) % SPARSE_BLOCK);
    int z;

    if (len > n - at)
      len = n - at;
    z = all_zero(p + at, len);
    if (at > start && z != zero) {
      rc = zero ? zero_run(fd, p + start, at - start, off + start, e)
                : write_exact(fd, p + start, at - start, off + start, e);
      start = at;
    }
    zero = z;
    at += len;
  }
  if (rc == 0 && at > start)
    rc = zero ? zero_run(fd, p + start, at - start, off + start, e)
              : write_exact(fd, p + start, at - start, off + start, e);
  if (rc == 0 && zero && n > 0)
    rc = write_exact(fd, p + n - 1, 1, off + n - 1, e);
  return rc;
}

/* ---- hashes ---- */

static void
xxh_end(XXH3_state_t *st, uint8_t xxh[16])
{
  XXH128_canonical_t c;

  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
  memcpy(xxh, c.digest, 16);
}

/*
 * Sums of a range of bytes, in the pass that reads or writes them:
 * SHA-256 (what the manifest promises), and either the XXH3-128 of each
 * fingerprint block (the range starts at a block boundary; fp gets one
 * entry per block it touches) or, without fp, one XXH3-128 of the whole
 * range into whole.  Any output may be NULL to skip that sum.
 */
struct sums {
  EVP_MD_CTX *sha;
  XXH3_state_t *xxh;
  uint8_t (*fp)[16];
  uint8_t *whole;
  uint64_t in_block; /* bytes of the current block summed so far */
  uint64_t skip;     /* bytes still to pass over unsummed (context) */
  uint64_t left;     /* bytes still to sum after those */
};

static int
sums_begin(struct sums *s, const uint8_t *sha, uint8_t (*fp)[16],
           uint8_t *whole, struct err *e)
{
  memset(s, 0, sizeof(*s));
  s->left = UINT64_MAX;
  if (sha != NULL) {
    s->sha = EVP_MD_CTX_new();
    if (s->sha == NULL)
      return err_set(e, ERR_NOMEM, "sha-256: out of memory");
    if (EVP_DigestInit_ex(s->sha, EVP_sha256(), NULL) != 1)
      return err_set(e, ERR_INTERNAL, "sha-256: init failed");
  }
  if (fp != NULL || whole != NULL) {
    s->xxh = XXH3_createState();
    if (s->xxh == NULL)
      return err_set(e, ERR_NOMEM, "xxh3: out of memory");
    XXH3_128bits_reset(s->xxh);
    s->fp = fp;
    s->whole = fp == NULL ? whole : NULL;
  }
  return 0;
}

static int
sums_update(struct sums *s, const void *p, size_t n, struct err *e)
{
  const char *c = p;

  if (s->skip > 0) {
    size_t k = s->skip < n ? (size_t)s->skip : n;

    s->skip -= k;
    c += k;
    n -= k;
    p = c;
  }
  if (n > s->left)
    n = (size_t)s->left;
  s->left -= n;
  if (s->sha != NULL && n > 0 && EVP_DigestUpdate(s->sha, p, n) != 1)
    return err_set(e, ERR_INTERNAL, "sha-256: update failed");
  if (s->whole != NULL) {
    XXH3_128bits_update(s->xxh, p, n);
    return 0;
  }
  while (s->fp != NULL && n > 0) {
    size_t k = MANIFEST_FP_BLOCK - s->in_block < n
                   ? (size_t)(MANIFEST_FP_BLOCK - s->in_block) : n;

    XXH3_128bits_update(s->xxh, c, k);
    s->in_block += k;
    c += k;
    n -= k;
    if (s->in_block == MANIFEST_FP_BLOCK) {
      xxh_end(s->xxh, *s->fp++);
      XXH3_128bits_reset(s->xxh);
      s->in_block = 0;
    }
  }
  return 0;
}

static int
sums_end(struct sums *s, uint8_t *sha, struct err *e)
{
  unsigned int n = 0;

  if (s->sha != NULL &&
      (EVP_DigestFinal_ex(s->sha, sha, &n) != 1 || n != 32))
    return err_set(e, ERR_INTERNAL, "sha-256: final failed");
  if (s->fp != NULL && s->in_block > 0)
    xxh_end(s->xxh, *s->fp);
  if (s->whole != NULL)
    xxh_end(s->xxh, s->whole);
  return 0;
}

static void
sums_release(struct sums *s)
{
  EVP_MD_CTX_free(s->sha);
  if (s->xxh != NULL)
    XXH3_freeState(s->xxh);
}

/* A buffer for streaming n bytes: DELTA_IO_BUF, or less for less.  A
 * small file's calls then stay below malloc's mmap threshold (the
 * agent fixes it at 1 MiB), where a fresh mapping per call would cost a
 * page fault per 4 KiB touched and an munmap. */
static size_t
io_len(uint64_t n)
{
  return n < 4096 ? 4096 : n < DELTA_IO_BUF ? (size_t)n : DELTA_IO_BUF;
}

/* ---- driving a librsync job ---- */

/* librsync results other than our own callback's errors: a peer's bad
 * bytes are ERR_INVALID, anything else is a bug or memory. */
static int
rs_err(rs_result r, int bad_input, const char *what, struct err *e)
{
  if (r == RS_MEM_ERROR)
    return err_set(e, ERR_NOMEM, "%s: out of memory", what);
  if (bad_input)
    return err_set(e, ERR_INVALID, "%s: %s", what, rs_strerror(r));
  return err_set(e, ERR_INTERNAL, "%s: librsync: %s", what,
                 rs_strerror(r));
}

/*
 * Feed the len bytes of fd at off through job and append what it
 * writes to out, summing the bytes into sums (if not NULL) as they are
 * read.  The input buffer is refilled behind whatever librsync left in
 * it (it may stop early when its output is full), so the file is read
 * once, in order, in DELTA_IO_BUF pieces.
 *
 * With window > 0 (deltas), each window of input whose answer is
 * nearly all literal data ends the job early: *fed says how many bytes
 * it got (len when it ran to the end); see delta_compute.
 */
static int
drive_fd(rs_job_t *job, int fd, uint64_t off, uint64_t len,
         struct buf *out, struct sums *sums, uint64_t window,
         uint64_t *fed, const char *what, struct err *e)
{
  size_t inlen = io_len(len), oblen = io_len(len);
  char *in = xmalloc(inlen);
  char *ob = xmalloc(oblen);
  rs_buffers_t bufs = {0};
  uint64_t pos = off, left = len, win_in = 0;
  size_t win_out = out->len;
  /* Feed no more than a window at once, or a short range would reach
   * its end before the first window could be judged. */
  size_t feed = window > 0 && window < inlen ? (size_t)window : inlen;
  int rc = 0;

  bufs.next_in = in;
  for (;;) {
    rs_result r;
    size_t produced, in_before;

    if (!bufs.eof_in && bufs.avail_in < feed) {
      size_t want = feed - bufs.avail_in;

      if (want > left)
        want = (size_t)left;
      if (bufs.avail_in > 0 && bufs.next_in != in)
        memmove(in, bufs.next_in, bufs.avail_in);
      bufs.next_in = in;
      rc = delta_read_exact(fd, in + bufs.avail_in, want, pos, e);
      if (rc < 0)
        goto out;
      if (sums != NULL)
        (void)sums_update(sums, in + bufs.avail_in, want, NULL);
      bufs.avail_in += want;
      pos += want;
      left -= want;
      bufs.eof_in = left == 0;
    }
    bufs.next_out = ob;
    bufs.avail_out = oblen;
    in_before = bufs.avail_in;
    r = rs_job_iter(job, &bufs);
    produced = oblen - bufs.avail_out;
    if (produced > 0 && buf_add(out, ob, produced) < 0) {
      rc = err_set(e, ERR_TOO_LARGE, "%s: more than %zu bytes", what,
                   out->max);
      goto out;
    }
    if (r == RS_DONE)
      break;
    if (r != RS_BLOCKED) {
      rc = rs_err(r, 0, what, e);
      goto out;
    }
    /* Blocked with nothing taken, nothing made and nothing more to give
     * would loop forever (librsync only checks this with input left). */
    if (produced == 0 && bufs.avail_in == in_before &&
        (bufs.eof_in || in_before == inlen)) {
      rc = err_set(e, ERR_INTERNAL, "%s: librsync made no progress",
                   what);
      goto out;
    }
    if (window > 0 && !bufs.eof_in) {
      uint64_t taken = pos - off - bufs.avail_in;

      /* Literal output lags the input by what librsync holds (a block
       * and a 64 KiB miss), hence 7/8 rather than all of it. */
      if (taken - win_in >= window) {
        uint64_t grew = out->len - win_out;

        if (grew >= (taken - win_in) - (taken - win_in) / 8)
          bufs.eof_in = 1; /* finish with what it has */
        win_in = taken;
        win_out = out->len;
      }
    }
  }
  if (fed != NULL)
    *fed = pos - off;

out:
  free(in);
  free(ob);
  return rc;
}

/* The error for a full output buffer. */
static int
too_large(const struct buf *out, struct err *e)
{
  return err_set(e, ERR_TOO_LARGE, "delta: more than %zu bytes", out->max);
}

/* Give out back its old length after a failed append. */
static void
buf_truncate(struct buf *out, size_t len)
{
  out->len = len;
  if (out->data != NULL)
    out->data[len] = '\0';
}

int
delta_signature(int fd, uint64_t size, struct buf *out, struct err *e)
{
  return delta_signature_range(fd, 0, size, out, e);
}

int
delta_signature_range(int fd, uint64_t off, uint64_t size, struct buf *out,
                      struct err *e)
{
  rs_magic_number magic = DELTA_SIG_MAGIC;
  size_t block_len = delta_block_len(size);
  size_t strong_len = (size_t)-1;
  size_t at = out->len;
  rs_job_t *job;
  rs_result r;
  int rc;

  r = rs_sig_args((rs_long_t)size, &magic, &block_len, &strong_len);
  if (r != RS_DONE)
    return rs_err(r, 0, "signature", e);
  job = rs_sig_begin(block_len, strong_len, magic);
  if (job == NULL)
    return err_set(e, ERR_NOMEM, "signature: out of memory");
  rc = drive_fd(job, fd, off, size, out, NULL, 0, NULL, "signature", e);
  rs_job_free(job);
  if (rc < 0)
    buf_truncate(out, at);
  return rc;
}

/* ---- signatures ---- */

static uint32_t
be32(const uint8_t *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
         (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/*
 * librsync asserts (aborts) on header values it does not like, and a
 * signature comes from a peer, so the header is checked here first:
 * a known magic, a block length we could have chosen (at most 1 MiB,
 * which also bounds librsync's per-delta buffers), a strong length the
 * magic allows, and whole blocks after it.
 */
static int
sig_check(const uint8_t *p, size_t len, struct err *e)
{
  uint32_t magic, block_len, strong_len, max_strong;

  if (len < DELTA_SIG_HDR)
    return err_set(e, ERR_INVALID, "signature of %zu bytes is shorter "
                   "than its header", len);
  magic = be32(p);
  block_len = be32(p + 4);
  strong_len = be32(p + 8);
  switch (magic) {
  case RS_MD4_SIG_MAGIC:
  case RS_RK_MD4_SIG_MAGIC:
    max_strong = 16;
    break;
  case RS_BLAKE2_SIG_MAGIC:
  case RS_RK_BLAKE2_SIG_MAGIC:
    max_strong = 32;
    break;
  default:
    return err_set(e, ERR_INVALID, "signature has a bad magic number "
                   "%#x", magic);
  }
  if (block_len < 1 || block_len > DELTA_MAX_BLOCK)
    return err_set(e, ERR_INVALID, "signature block length %u is not in "
                   "[1, %zu]", block_len, DELTA_MAX_BLOCK);
  if (strong_len < 1 || strong_len > max_strong)
    return err_set(e, ERR_INVALID, "signature strong sum length %u is "
                   "not in [1, %u]", strong_len, max_strong);
  if ((len - DELTA_SIG_HDR) % (4 + strong_len) != 0)
    return err_set(e, ERR_INVALID, "signature of %zu bytes ends inside "
                   "a block", len);
  if ((len - DELTA_SIG_HDR) / (4 + strong_len) > INT32_MAX)
    return err_set(e, ERR_INVALID, "signature has too many blocks");
  return 0;
}

int
delta_sig_load(const void *sig, size_t len, struct delta_sig **out,
               struct err *e)
{
  struct delta_sig *s = NULL;
  rs_signature_t *rs = NULL;
  rs_buffers_t bufs = {0};
  rs_job_t *job = NULL;
  rs_result r;
  int rc;

  *out = NULL;
  rc = sig_check(sig, len, e);
  if (rc < 0)
    return rc;
  job = rs_loadsig_begin(&rs);
  if (job == NULL)
    return err_set(e, ERR_NOMEM, "signature: out of memory");
  bufs.next_in = (char *)sig; /* librsync never writes its input */
  bufs.avail_in = len;
  bufs.eof_in = 1;
  do {
    size_t before = bufs.avail_in;

    r = rs_job_iter(job, &bufs);
    if (r == RS_BLOCKED && bufs.avail_in == before) {
      rc = err_set(e, ERR_INVALID, "signature: truncated");
      goto out;
    }
  } while (r == RS_BLOCKED);
  if (r != RS_DONE) {
    rc = rs_err(r, 1, "signature", e);
    goto out;
  }
  r = rs_build_hash_table(rs);
  if (r != RS_DONE) {
    rc = rs_err(r, 0, "signature index", e);
    goto out;
  }
  s = xcalloc(1, sizeof(*s));
  s->sig = rs;
  s->block_len = be32((const uint8_t *)sig + 4);
  if (be32(sig) == RS_MD4_SIG_MAGIC) {
    const uint8_t *p = (const uint8_t *)sig + DELTA_SIG_HDR;

    s->strong_len = be32((const uint8_t *)sig + 8);
    s->nblocks = (len - DELTA_SIG_HDR) / (4 + s->strong_len);
    s->strong = xmalloc(s->nblocks > 0 ? s->nblocks * s->strong_len : 1);
    for (uint64_t k = 0; k < s->nblocks; k++)
      memcpy(s->strong + k * s->strong_len,
             p + k * (4 + s->strong_len) + 4, s->strong_len);
  }
  rs = NULL;
  *out = s;

out:
  rs_job_free(job);
  if (rs != NULL)
    rs_free_sumset(rs);
  return rc;
}

void
delta_sig_free(struct delta_sig *s)
{
  if (s == NULL)
    return;
  rs_free_sumset(s->sig);
  free(s->strong);
  free(s);
}

/* ---- source side: deltas and literal reads ---- */

/* Append literal commands for the len bytes of fd at off (librsync's
 * RS_OP_LITERAL_N4: the opcode, then a big-endian 32-bit length). */
static int
append_literal(int fd, uint64_t off, uint64_t len, struct buf *out,
               struct sums *sums, struct err *e)
{
  size_t cap = io_len(len);
  char *p = xmalloc(cap);
  int rc = 0;

  while (len > 0) {
    size_t n = len < cap ? (size_t)len : cap;
    uint8_t cmd[5] = {DELTA_OP_LITERAL_N4, (uint8_t)(n >> 24),
                      (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};

    rc = delta_read_exact(fd, p, n, off, e);
    if (rc < 0)
      break;
    (void)sums_update(sums, p, n, NULL);
    if (buf_add(out, cmd, sizeof(cmd)) < 0 || buf_add(out, p, n) < 0) {
      rc = too_large(out, e);
      break;
    }
    off += n;
    len -= n;
  }
  free(p);
  return rc;
}

/*
 * Where nothing matches, librsync tries every byte offset against the
 * signature: ~50 MB/s on this machine against ~500 MB/s where blocks
 * match, for an answer no smaller than the data.  So the answer is
 * watched per window of input; once a whole window came out as literal
 * data, the job is finished there and the rest of the range goes as
 * literal commands (read at memory speed), the same delta format.  A
 * window of 4 MiB never fires on scattered changes or an inserted
 * MiB; after a range that fell back, the next one with the same
 * signature (the next segment of the same file, most likely) probes
 * only 1 MiB, so a rewritten large file costs little more than a read.
 * The price: a range with a window of new data before data that would
 * have matched sends the rest as literal.
 */
/* Read a big-endian integer of w bytes at p. */
static uint64_t
get_be(const uint8_t *p, unsigned w)
{
  uint64_t v = 0;

  for (unsigned i = 0; i < w; i++)
    v = v << 8 | p[i];
  return v;
}

/* A COPY of len (< 2^32) bytes at pos of the basis, into cmd. */
#define COPY_CMD_LEN 13
static void
copy_cmd(uint8_t cmd[COPY_CMD_LEN], uint64_t pos, uint64_t len)
{
  cmd[0] = DELTA_OP_COPY_N8_N4;
  for (int i = 0; i < 8; i++)
    cmd[1 + i] = (uint8_t)(pos >> (56 - 8 * i));
  for (int i = 0; i < 4; i++)
    cmd[9 + i] = (uint8_t)(len >> (24 - 8 * i));
}

/* The shortest literal header for n bytes into h; its length. */
static size_t
literal_header(uint8_t h[9], uint64_t n)
{
  unsigned w = n <= 0xff ? 1 : n <= 0xffff ? 2 : n <= 0xffffffffu ? 4 : 8;

  if (n <= 64) {
    h[0] = (uint8_t)n;
    return 1;
  }
  h[0] = (uint8_t)(DELTA_OP_LITERAL_N1 + (w == 1 ? 0 : w == 2 ? 1
                                          : w == 4 ? 2 : 3));
  for (unsigned i = 0; i < w; i++)
    h[1 + i] = (uint8_t)(n >> (8 * (w - 1 - i)));
  return 1 + w;
}

/* One command of a librsync delta, as trim_context reads it. */
struct cmd {
  int copy;           /* COPY, else LITERAL */
  unsigned w1, w2;    /* widths of its two (or one) integer fields */
  uint64_t n;         /* bytes it makes */
  uint64_t cpos;      /* COPY: where in the basis */
  size_t hdr;         /* opcode and fields */
};

/* The command at d[p] (before len): 1 read, 0 END, -1 not a command. */
static int
read_cmd(const uint8_t *d, size_t p, size_t len, struct cmd *c)
{
  unsigned op;

  memset(c, 0, sizeof(*c));
  if (p >= len)
    return -1;
  op = d[p];
  if (op == DELTA_OP_END)
    return 0;
  if (op <= 0x40) {
    c->n = op;
  } else if (op < DELTA_OP_COPY_N1_N1) {
    c->w1 = 1u << (op - DELTA_OP_LITERAL_N1);
    if (len - p < 1 + c->w1)
      return -1;
    c->n = get_be(d + p + 1, c->w1);
  } else if (op <= DELTA_OP_COPY_N1_N1 + 15) {
    c->copy = 1;
    c->w1 = 1u << ((op - DELTA_OP_COPY_N1_N1) / 4);
    c->w2 = 1u << ((op - DELTA_OP_COPY_N1_N1) % 4);
    if (len - p < 1 + c->w1 + c->w2)
      return -1;
    c->cpos = get_be(d + p + 1, c->w1);
    c->n = get_be(d + p + 1 + c->w1, c->w2);
  } else {
    return -1;
  }
  c->hdr = 1 + c->w1 + c->w2;
  if (!c->copy && len - p - c->hdr < c->n)
    return -1;
  return 1;
}

/*
 * The delta at out[at..] makes head bytes of context, then the keep bytes
 * of the range it is for, then maybe more context: keep only the commands
 * for the range, cutting the two that cross its ends (a literal keeps its
 * bytes in place under a new header, a COPY starts later in the basis or
 * makes less).
 */
static int
trim_context(struct buf *out, size_t at, uint64_t head, uint64_t keep,
             struct err *e)
{
  uint8_t *d = (uint8_t *)out->data;
  size_t p = at + sizeof(delta_magic), len = out->len;
  uint8_t rep[COPY_CMD_LEN]; /* a COPY or a literal header (<= 9) */
  size_t replen = 0;
  uint64_t pos = 0;
  struct cmd c;

  while (pos < head) {
    uint64_t cut;

    if (read_cmd(d, p, len, &c) != 1)
      goto bad;
    if (pos + c.n <= head) {
      pos += c.n;
      p += c.hdr + (c.copy ? 0 : c.n);
      continue;
    }
    cut = head - pos;
    if (c.copy) {
      copy_cmd(rep, c.cpos + cut, c.n - cut);
      replen = COPY_CMD_LEN;
      p += c.hdr;
    } else {
      replen = literal_header(rep, c.n - cut);
      p += c.hdr + cut; /* the literal's tail stays where it is */
    }
    pos = head;
  }
  /* out[at+4 .. p) goes, rep goes in its place. */
  if (at + sizeof(delta_magic) + replen > p) {
    size_t grow = at + sizeof(delta_magic) + replen - p;

    if (buf_add(out, rep, grow) < 0) /* room only; overwritten below */
      return too_large(out, e);
    d = (uint8_t *)out->data;
  }
  memmove(d + at + sizeof(delta_magic) + replen, d + p, len - p);
  memcpy(d + at + sizeof(delta_magic), rep, replen);
  len = at + sizeof(delta_magic) + replen + (len - p);
  out->len = len;

  /* Then everything past keep goes; the command across it makes less. */
  p = at + sizeof(delta_magic);
  pos = 0;
  for (;;) {
    int r = read_cmd(d, p, len, &c);

    if (r < 0 || (r == 0 && pos != keep))
      goto bad;
    if (r == 0 || pos == keep)
      break;
    if (pos + c.n > keep) {
      uint64_t n = keep - pos;

      if (c.copy) {
        for (unsigned i = 0; i < c.w2; i++)
          d[p + 1 + c.w1 + i] = (uint8_t)(n >> (8 * (c.w2 - 1 - i)));
      } else if (c.w1 == 0) {
        d[p] = (uint8_t)n;
      } else {
        for (unsigned i = 0; i < c.w1; i++)
          d[p + 1 + i] = (uint8_t)(n >> (8 * (c.w1 - 1 - i)));
      }
      p += c.hdr + (c.copy ? 0 : n);
      pos = keep;
      break;
    }
    pos += c.n;
    p += c.hdr + (c.copy ? 0 : c.n);
  }
  d[p] = DELTA_OP_END;
  out->len = p + 1;
  return 0;

bad:
  return err_set(e, ERR_INTERNAL, "delta: cannot cut the context from "
                 "librsync's answer");
}

/*
 * The delta of [off, off+len), computed from one signature block before
 * off to one after its end: librsync matches only whole blocks of its
 * input, so a range that begins or ends inside a shifted copy of a basis
 * block would otherwise send up to a block of it literally at each end.
 * The context's commands are cut off again (trim_context); the sums
 * cover the range only.
 */
static int
compute(struct delta_sig *sig, int fd, uint64_t off, uint64_t len,
        struct buf *out, uint8_t xxh[16], uint8_t (*fp)[16],
        uint64_t window, struct err *e)
{
  struct sums st;
  size_t at = out->len;
  uint64_t ctx = off < sig->block_len ? off : sig->block_len, after = 0;
  uint64_t fed = 0, keep = len;
  rs_job_t *job = NULL;
  struct stat fst;
  int rc;

  /* and one block after it, for the block that crosses its end */
  if (fstat(fd, &fst) == 0 && (uint64_t)fst.st_size > off + len)
    after = (uint64_t)fst.st_size - (off + len) < sig->block_len
                ? (uint64_t)fst.st_size - (off + len) : sig->block_len;
  rc = sums_begin(&st, NULL, fp, xxh, e);
  if (rc < 0)
    goto out;
  st.skip = ctx;
  st.left = len;
  job = rs_delta_begin(sig->sig);
  if (job == NULL) {
    rc = err_set(e, ERR_NOMEM, "delta: out of memory");
    goto out;
  }
  /* The first window judges the context too: widen it by as much. */
  rc = drive_fd(job, fd, off - ctx, ctx + len + after, out, &st,
                window > 0 ? window + ctx : 0, &fed, "delta", e);
  if (rc < 0)
    goto out;
  off -= ctx;
  len += ctx + after;
  sig->missed = fed < len;
  if (fed < len) {
    /* Replace the job's END command by the literal rest and an END. */
    if (out->len == at || out->data[out->len - 1] != DELTA_OP_END) {
      rc = err_set(e, ERR_INTERNAL, "delta: librsync's answer does not "
                   "end with END");
      goto out;
    }
    buf_truncate(out, out->len - 1);
    rc = append_literal(fd, off + fed, len - fed, out, &st, e);
    if (rc == 0 && buf_add(out, "", 1) < 0)
      rc = too_large(out, e);
    if (rc < 0)
      goto out;
  }
  if (ctx > 0 || after > 0)
    rc = trim_context(out, at, ctx, keep, e);
  if (rc == 0)
    rc = sums_end(&st, NULL, e);

out:
  if (job != NULL)
    rs_job_free(job);
  sums_release(&st);
  if (rc < 0)
    buf_truncate(out, at);
  return rc;
}

int
delta_rebase(struct buf *out, size_t at, uint64_t add, struct err *e)
{
  const uint8_t *d = (const uint8_t *)out->data;
  size_t p = at + sizeof(delta_magic), len = out->len;
  struct buf nb;
  struct cmd c;
  int r, rc = 0;

  if (len - at < sizeof(delta_magic) ||
      memcmp(d + at, delta_magic, sizeof(delta_magic)) != 0)
    return err_set(e, ERR_INTERNAL, "delta: no magic to rebase");
  buf_init(&nb, out->max);
  if (buf_add(&nb, delta_magic, sizeof(delta_magic)) < 0)
    rc = ERR_TOO_LARGE;
  while (rc == 0 && (r = read_cmd(d, p, len, &c)) == 1) {
    if (c.copy) {
      uint8_t cmd[COPY_CMD_LEN];

      copy_cmd(cmd, c.cpos + add, c.n);
      if (buf_add(&nb, cmd, sizeof(cmd)) < 0)
        rc = ERR_TOO_LARGE;
      p += c.hdr;
    } else {
      if (buf_add(&nb, d + p, c.hdr + c.n) < 0)
        rc = ERR_TOO_LARGE;
      p += c.hdr + c.n;
    }
  }
  if (rc == 0 && (r != 0 || p + 1 != len))
    rc = err_set(e, ERR_INTERNAL, "delta: cannot read it to rebase");
  else if (rc == 0 && buf_add(&nb, "", 1) < 0)
    rc = ERR_TOO_LARGE;
  if (rc == ERR_TOO_LARGE)
    (void)too_large(out, e);
  if (rc == 0) {
    buf_truncate(out, at);
    if (buf_add(out, nb.data, nb.len) < 0)
      rc = too_large(out, e);
  }
  buf_release(&nb);
  return rc;
}

int
delta_compute(struct delta_sig *sig, int fd, uint64_t off, uint64_t len,
              struct buf *out, uint8_t xxh[16], uint8_t (*fp)[16],
              struct err *e)
{
  uint64_t window = sig->missed ? DELTA_PROBE_AGAIN : DELTA_PROBE;

  if (window < 8 * (uint64_t)sig->block_len)
    window = 8 * (uint64_t)sig->block_len;
  return compute(sig, fd, off, len, out, xxh, fp, window, e);
}

/* A delta is the magic, commands, and an END byte; each writer appends
 * to out and returns ERR_TOO_LARGE, e set and out unchanged by that call,
 * past out's cap. */
static int
delta_put_magic(struct buf *out, struct err *e)
{
  return buf_add(out, delta_magic, sizeof(delta_magic)) < 0
             ? too_large(out, e) : 0;
}

/* A COPY of len (< 2^32) bytes at pos of the basis. */
static int
delta_put_copy(struct buf *out, uint64_t pos, uint64_t len, struct err *e)
{
  uint8_t cmd[COPY_CMD_LEN];

  copy_cmd(cmd, pos, len);
  return buf_add(out, cmd, sizeof(cmd)) < 0 ? too_large(out, e) : 0;
}

/* A LITERAL of the n bytes at p. */
static int
delta_put_literal(struct buf *out, const void *p, size_t n, struct err *e)
{
  uint8_t h[9];
  size_t hl = literal_header(h, n), at = out->len;

  if (buf_add(out, h, hl) < 0 || buf_add(out, p, n) < 0) {
    buf_truncate(out, at);
    return too_large(out, e);
  }
  return 0;
}

static int
delta_put_end(struct buf *out, struct err *e)
{
  return buf_add(out, "", 1) < 0 ? too_large(out, e) : 0;
}

/* compute() of [off, off+len) with its commands appended to out
 * without the magic and END, so they continue a delta being built; the
 * XXH3-128 of the range into x. */
static int
compute_spliced(struct delta_sig *sig, int fd, uint64_t off, uint64_t len,
                struct buf *out, uint8_t x[16], struct err *e)
{
  size_t mark = out->len;
  int rc = compute(sig, fd, off, len, out, x, NULL, 0, e);

  if (rc < 0)
    return rc;
  if (out->len < mark + sizeof(delta_magic) + 1 ||
      memcmp(out->data + mark, delta_magic, sizeof(delta_magic)) != 0 ||
      out->data[out->len - 1] != DELTA_OP_END) {
    buf_truncate(out, mark);
    return err_set(e, ERR_INTERNAL, "delta: librsync's answer is not "
                   "magic, commands, END");
  }
  memmove(out->data + mark, out->data + mark + sizeof(delta_magic),
          out->len - mark - sizeof(delta_magic) - 1);
  out->len -= sizeof(delta_magic) + 1;
  return 0;
}

/*
 * The command of a delta being built that may still grow: a COPY while
 * the next one follows it in the basis, a LITERAL while the next bytes
 * follow it in the same buffer, or bytes to delta with librsync while
 * they follow each other (with the XXH3-128 of them as read and checked
 * here: librsync reads them again, and must read the same).
 */
enum pend_kind { PEND_NONE, PEND_COPY, PEND_LITERAL, PEND_SEARCH };

struct pending {
  enum pend_kind kind;
  uint64_t off, len; /* COPY: in the basis; else in the new file */
  const uint8_t *lit;
  XXH3_state_t *xs;  /* PEND_SEARCH's sum */
};

static int
pend_flush(struct delta_sig *sig, int fd, struct pending *pd,
           struct buf *out, struct err *e)
{
  XXH128_canonical_t c;
  uint8_t x[16];
  int rc = 0;

  switch (pd->kind) {
  case PEND_NONE:
    break;
  case PEND_COPY:
    rc = delta_put_copy(out, pd->off, pd->len, e);
    break;
  case PEND_LITERAL:
    rc = delta_put_literal(out, pd->lit, (size_t)pd->len, e);
    break;
  case PEND_SEARCH:
    rc = compute_spliced(sig, fd, pd->off, pd->len, out, x, e);
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(pd->xs));
    if (rc == 0 && memcmp(x, c.digest, 16) != 0)
      rc = err_set(e, ERR_CONFLICT, "bytes at %llu changed while read",
                   (unsigned long long)pd->off);
    break;
  }
  pd->kind = PEND_NONE;
  return rc;
}

/* Add n bytes at off (p: their bytes, for LITERAL and SEARCH). */
static int
pend_add(struct delta_sig *sig, int fd, struct pending *pd,
         enum pend_kind kind, uint64_t off, const uint8_t *p, uint64_t n,
         struct buf *out, struct err *e)
{
  int rc = 0;

  if (pd->kind != kind || pd->off + pd->len != off) {
    rc = pend_flush(sig, fd, pd, out, e);
    pd->kind = kind;
    pd->off = off;
    pd->len = 0;
    pd->lit = p;
    if (kind == PEND_SEARCH)
      XXH3_128bits_reset(pd->xs);
  }
  if (kind == PEND_SEARCH)
    XXH3_128bits_update(pd->xs, p, (size_t)n);
  pd->len += n;
  return rc;
}

/* The length of fingerprint block k of a range of len bytes. */
static uint64_t
fp_len(uint64_t len, uint64_t k)
{
  uint64_t rest = len - k * MANIFEST_FP_BLOCK;

  return rest < MANIFEST_FP_BLOCK ? rest : MANIFEST_FP_BLOCK;
}

/* Bytes read at once while comparing in place: a multiple of every
 * block length (powers of two up to DELTA_MAX_BLOCK). */
#define IN_PLACE_READ DELTA_MAX_BLOCK

/*
 * A run of fingerprint blocks [roff, roff+rlen) that the table could not
 * place is, in the common case, mostly the basis' bytes at the same
 * offsets: a segment rewritten in place, or one whose start moved
 * because a rewrite moved a cut (its blocks count from its start, so
 * none matches; inserts and deletes go with range signatures).  librsync
 * would search it at ~50-200 MB/s, and a search per fingerprint block
 * pays a block of context at each end.  Instead each block of the
 * signature's grid that overlaps the run is read whole (also past the
 * run's ends) and compared with the basis block at its offset by the
 * signature's own strong sum (MD4): an equal one is a COPY of its part
 * in the run; a different one inside the run is sent literally; a part
 * at either end of the run, or past the basis' whole blocks, goes
 * through librsync (with a block of context: it may be shifted data).
 * Every byte of the run is checked against its block's published
 * fingerprint fp[k] as it is read (ERR_CONFLICT, *bad = k: the file
 * changed since it was published).  Commands go through *pd, left
 * pending only as a COPY.  1 done, 0 when no block was equal (out and
 * *pd as they were: moved data, librsync's case), negative on errors.
 */
static int
run_in_place(struct delta_sig *sig, int fd, uint64_t roff, uint64_t rlen,
             const uint8_t (*fp)[16], struct pending *pd, struct buf *out,
             uint64_t *bad, struct err *e)
{
  uint64_t bl = sig->block_len, end = roff + rlen;
  uint64_t whole = (sig->nblocks - 1) * bl; /* before the short last one */
  uint64_t fpend = roff, k = 0, size, c0 = roff / bl * bl;
  struct pending was = *pd;
  XXH3_state_t *xs = NULL;
  size_t at = out->len, found = 0;
  uint8_t *p = NULL;
  struct stat st;
  int rc = 0;

  if (sig->strong == NULL || sig->nblocks < 2)
    return 0;
  if (fstat(fd, &st) < 0)
    return err_set(e, ERR_IO, "delta: fstat: %s", strerror(errno));
  size = (uint64_t)st.st_size;
  if (size < end)
    return err_set(e, ERR_CONFLICT, "file shorter than published");
  p = xmalloc(IN_PLACE_READ);
  xs = XXH3_createState();
  if (xs == NULL)
    abort(); /* the alloc.h policy for small allocations */
  for (uint64_t c = c0; rc == 0 && c < end; c += IN_PLACE_READ) {
    uint64_t cz = end - c < IN_PLACE_READ ? end : c + IN_PLACE_READ;
    /* the grid blocks over [c, cz), the last short at the file's end */
    uint64_t cl = (cz - c + bl - 1) / bl * bl;

    if (cl > size - c)
      cl = size - c;
    rc = delta_read_exact(fd, p, (size_t)cl, c, e);
    /* the part in the run, against each fingerprint block it is in */
    for (uint64_t q = c > roff ? c : roff; rc == 0 && q < cz;) {
      uint64_t stop;

      if (q == fpend) {
        XXH3_128bits_reset(xs);
        fpend = end - q < MANIFEST_FP_BLOCK ? end : q + MANIFEST_FP_BLOCK;
      }
      stop = cz < fpend ? cz : fpend;
      XXH3_128bits_update(xs, p + (q - c), (size_t)(stop - q));
      q = stop;
      if (q == fpend) {
        XXH128_canonical_t h;

        XXH128_canonicalFromHash(&h, XXH3_128bits_digest(xs));
        if (memcmp(h.digest, fp[k], 16) != 0) {
          *bad = k;
          rc = err_set(e, ERR_CONFLICT, "block at %llu differs",
                       (unsigned long long)(roff + k * MANIFEST_FP_BLOCK));
        }
        k++;
      }
    }
    for (uint64_t g = c; rc == 0 && g < cz; g += bl) {
      uint64_t gl = c + cl - g < bl ? c + cl - g : bl;
      uint64_t a = g > roff ? g : roff, z = g + gl < end ? g + gl : end;
      const uint8_t *gp = p + (g - c);
      enum pend_kind kind = PEND_SEARCH;
      unsigned char md[16];

      if (gl == bl && g + bl <= whole) {
        rs_mdfour(md, gp, (size_t)bl);
        if (memcmp(md, sig->strong + (g / bl) * sig->strong_len,
                   sig->strong_len) == 0)
          kind = PEND_COPY;
        else if (a == g && z == g + bl)
          kind = PEND_LITERAL;
      }
      found += kind == PEND_COPY;
      rc = pend_add(sig, fd, pd, kind, a, gp + (a - g), z - a, out, e);
    }
    /* the buffer is read again */
    if (rc == 0 && pd->kind == PEND_LITERAL)
      rc = pend_flush(sig, fd, pd, out, e);
  }
  if (rc == 0 && pd->kind != PEND_COPY)
    rc = pend_flush(sig, fd, pd, out, e);
  if (rc == 0)
    rc = found > 0 ? 1 : 0;
  if (rc <= 0) {
    buf_truncate(out, at);
    *pd = was;
  }
  XXH3_freeState(xs);
  free(p);
  return rc;
}

int
delta_compute_blocks(struct delta_sig *sig, int fd, uint64_t off,
                     uint64_t len, const uint64_t *from,
                     const uint8_t (*fp)[16], struct buf *out,
                     uint64_t *bad, struct err *e)
{
  uint64_t nb = manifest_nfp(len);
  struct pending pd = {PEND_NONE, 0, 0, NULL, XXH3_createState()};
  size_t at = out->len;
  int rc = 0;

  if (pd.xs == NULL)
    abort(); /* the alloc.h policy for small allocations */
  if (len > UINT32_MAX) {
    rc = err_set(e, ERR_INTERNAL, "delta: range of %llu bytes",
                 (unsigned long long)len);
    goto out;
  }
  rc = delta_put_magic(out, e);
  for (uint64_t i = 0, j; rc == 0 && i < nb; i = j) {
    int unread = from[i] != DELTA_READ;
    uint64_t rbad = 0;

    /* [i, j): a run of blocks found, or of blocks to read */
    for (j = i + 1; j < nb && (from[j] != DELTA_READ) == unread; j++)
      ;
    if (unread) {
      /* blocks found by fingerprint: COPYs, unread */
      for (uint64_t k = i; rc == 0 && k < j; k++)
        rc = pend_add(sig, fd, &pd, PEND_COPY, from[k], NULL,
                      fp_len(len, k), out, e);
      continue;
    }
    rc = run_in_place(sig, fd, off + i * MANIFEST_FP_BLOCK,
                      (j < nb ? j * MANIFEST_FP_BLOCK : len) -
                          i * MANIFEST_FP_BLOCK,
                      fp + i, &pd, out, &rbad, e);
    if (rc == ERR_CONFLICT)
      *bad = i + rbad;
    if (rc == 1) {
      rc = 0;
      continue;
    }
    if (rc == 0)
      rc = pend_flush(sig, fd, &pd, out, e);
    /* Nothing in place: delta'd block by block, as librsync finds it. */
    for (uint64_t k = i; rc == 0 && k < j; k++) {
      uint8_t x[16];

      rc = compute_spliced(sig, fd, off + k * MANIFEST_FP_BLOCK,
                           fp_len(len, k), out, x, e);
      if (rc == 0 && memcmp(x, fp[k], 16) != 0) {
        *bad = k;
        rc = err_set(e, ERR_CONFLICT, "block %llu differs",
                     (unsigned long long)k);
      }
    }
  }
  if (rc == 0)
    rc = pend_flush(sig, fd, &pd, out, e);
  if (rc == 0)
    rc = delta_put_end(out, e);

out:
  if (rc < 0)
    buf_truncate(out, at);
  XXH3_freeState(pd.xs);
  return rc;
}

int
delta_read(int fd, uint64_t off, uint64_t len, struct buf *out,
           uint8_t xxh[16], uint8_t (*fp)[16], struct err *e)
{
  struct sums st;
  char *p = NULL;
  size_t at = out->len, cap;
  int rc;

  rc = sums_begin(&st, NULL, fp, xxh, e);
  if (rc < 0)
    goto out;
  /* Fail before reading anything that could never fit. */
  if (len > out->max - out->len) {
    rc = err_set(e, ERR_TOO_LARGE, "read: %llu bytes do not fit in %zu",
                 (unsigned long long)len, out->max - out->len);
    goto out;
  }
  cap = io_len(len);
  p = xmalloc(cap);
  while (len > 0) {
    size_t n = len < cap ? (size_t)len : cap;

    rc = delta_read_exact(fd, p, n, off, e);
    if (rc < 0)
      goto out;
    (void)sums_update(&st, p, n, NULL);
    if (buf_add(out, p, n) < 0) {
      rc = err_set(e, ERR_TOO_LARGE, "read: more than %zu bytes",
                   out->max);
      goto out;
    }
    off += n;
    len -= n;
  }
  rc = sums_end(&st, NULL, e);

out:
  free(p);
  sums_release(&st);
  if (rc < 0)
    buf_truncate(out, at);
  return rc;
}

/* ---- destination side: patches and writes ---- */

struct patch_ctx {
  int basis_fd;
  uint64_t basis_size;
  struct err *e;
  int rc; /* the callback's own error, which librsync cannot carry */
};

/* librsync's COPY: read the basis straight into its output buffer
 * (*buf has room for *len bytes), refusing ranges past the basis. */
static rs_result
patch_copy(void *opaque, rs_long_t pos, size_t *len, void **buf)
{
  struct patch_ctx *c = opaque;
  uint64_t p = (uint64_t)pos;

  if (c->basis_fd < 0) {
    c->rc = err_set(c->e, ERR_INVALID, "corrupt delta: it copies from a "
                    "basis but there is none");
    return RS_CORRUPT;
  }
  if (pos < 0 || p > c->basis_size || *len > c->basis_size - p) {
    c->rc = err_set(c->e, ERR_INVALID, "corrupt delta: it copies %zu "
                    "bytes at %lld, past the basis' %llu bytes", *len,
                    (long long)pos, (unsigned long long)c->basis_size);
    return RS_CORRUPT;
  }
  c->rc = delta_read_exact(c->basis_fd, *buf, *len, p, c->e);
  if (c->rc < 0) {
    err_prefix(c->e, "basis");
    return RS_IO_ERROR;
  }
  return RS_DONE;
}

int
delta_patch(int basis_fd, const void *delta, size_t len, int out_fd,
            uint64_t out_off, uint64_t expect_len, uint8_t sha[32],
            uint8_t (*fp)[16], struct err *e)
{
  struct patch_ctx c = {basis_fd, 0, e, 0};
  struct sums sums = {0};
  rs_buffers_t bufs = {0};
  rs_job_t *job = NULL;
  char *ob = NULL;
  size_t oblen;
  uint64_t written = 0;
  int rc;

  if (basis_fd >= 0) {
    struct stat st;

    if (fstat(basis_fd, &st) < 0)
      return err_set(e, ERR_IO, "basis: %s", strerror(errno));
    c.basis_size = (uint64_t)st.st_size;
  }
  rc = sums_begin(&sums, sha, fp, NULL, e);
  if (rc < 0)
    goto out;
  job = rs_patch_begin(patch_copy, &c);
  if (job == NULL) {
    rc = err_set(e, ERR_NOMEM, "patch: out of memory");
    goto out;
  }
  /* A byte more than expected fits, so that a small file's excess is
   * refused before anything is written. */
  oblen = io_len(expect_len + 1);
  ob = xmalloc(oblen);
  bufs.next_in = (char *)delta; /* librsync never writes its input */
  bufs.avail_in = len;
  bufs.eof_in = 1;
  for (;;) {
    size_t in_before = bufs.avail_in, produced;
    rs_result r;

    bufs.next_out = ob;
    bufs.avail_out = oblen;
    r = rs_job_iter(job, &bufs);
    produced = oblen - bufs.avail_out;
    /* Stop a delta that makes more than it should before writing it:
     * COPY commands can repeat, so output is not bounded by len. */
    if (produced > expect_len - written) {
      rc = err_set(e, ERR_INVALID, "corrupt delta: it makes more than "
                   "the expected %llu bytes",
                   (unsigned long long)expect_len);
      goto out;
    }
    if (produced > 0) {
      rc = sums_update(&sums, ob, produced, e);
      if (rc < 0)
        goto out;
      rc = write_sparse(out_fd, ob, produced, out_off + written, e);
      if (rc < 0)
        goto out;
      written += produced;
    }
    if (r == RS_DONE)
      break;
    if (r != RS_BLOCKED) {
      rc = c.rc < 0 ? c.rc : rs_err(r, 1, "corrupt delta", e);
      goto out;
    }
    if (produced == 0 && bufs.avail_in == in_before) {
      rc = err_set(e, ERR_INVALID, "corrupt delta: truncated");
      goto out;
    }
  }
  if (bufs.avail_in > 0) {
    rc = err_set(e, ERR_INVALID, "corrupt delta: %zu bytes after its end",
                 bufs.avail_in);
    goto out;
  }
  if (written != expect_len) {
    rc = err_set(e, ERR_INVALID, "delta makes %llu bytes, expected %llu",
                 (unsigned long long)written,
                 (unsigned long long)expect_len);
    goto out;
  }
  rc = sums_end(&sums, sha, e);

out:
  free(ob);
  if (job != NULL)
    rs_job_free(job);
  sums_release(&sums);
  return rc;
}

int
delta_write(int out_fd, uint64_t out_off, const void *data, size_t len,
            uint8_t sha[32], uint8_t (*fp)[16], struct err *e)
{
  struct sums sums;
  int rc;

  rc = sums_begin(&sums, sha, fp, NULL, e);
  if (rc == 0)
    rc = sums_update(&sums, data, len, e);
  if (rc == 0)
    rc = write_sparse(out_fd, data, len, out_off, e);
  if (rc == 0)
    rc = sums_end(&sums, sha, e);
  sums_release(&sums);
  return rc;
}

struct sum_copy {
  struct sums *sums;
  int out;          /* -1: sums only */
  uint64_t out_off; /* where the next bytes go in out */
  struct err *e;
};

static int
sum_copy_chunk(void *arg, const uint8_t *p, size_t n)
{
  struct sum_copy *sc = arg;
  int rc = sums_update(sc->sums, p, n, sc->e);

  if (rc == 0 && sc->out >= 0)
    rc = write_sparse(sc->out, (const char *)p, n, sc->out_off, sc->e);
  sc->out_off += n;
  return rc;
}

/* Sums of [off, off+len) of in, written to out at out_off too unless
 * out < 0. */
static int
sum_range(int in, int out, uint64_t off, uint64_t out_off, uint64_t len,
          uint8_t *sha, uint8_t (*fp)[16], struct err *e)
{
  struct sums sums;
  struct sum_copy sc = {&sums, out, out_off, e};
  size_t bl = io_len(len);
  uint8_t *buf = xmalloc(bl);
  int rc;

  rc = sums_begin(&sums, sha, fp, NULL, e);
  if (rc == 0)
    rc = file_read_chunks(in, off, len, buf, bl, sum_copy_chunk, &sc, e);
  if (rc == 0)
    rc = sums_end(&sums, sha, e);
  sums_release(&sums);
  free(buf);
  return rc;
}

int
delta_hash_range(int fd, uint64_t off, uint64_t len, uint8_t sha[32],
                 uint8_t (*fp)[16], struct err *e)
{
  int rc = sum_range(fd, -1, off, off, len, sha, fp, e);

  if (rc == ERR_CONFLICT)
    rc = e->code = ERR_IO; /* short, as for every read here */
  return rc;
}

int
delta_copy(int in, uint64_t in_off, int out, uint64_t out_off,
           uint64_t len, uint8_t sha[32], uint8_t (*fp)[16], struct err *e)
{
  struct stat st;
  int rc;

  /* A short old file is a failed verification, not a write error. */
  if (fstat(in, &st) < 0)
    return err_set(e, ERR_IO, "old file: %s", strerror(errno));
  if ((uint64_t)st.st_size < in_off + len)
    return err_set(e, ERR_INVALID, "old file has %llu bytes, fewer than "
                   "the %llu expected", (unsigned long long)st.st_size,
                   (unsigned long long)(in_off + len));
  rc = sum_range(in, out, in_off, out_off, len, sha, fp, e);
  /* shrank while read: a failed verification too */
  if (rc == ERR_CONFLICT)
    rc = e->code = ERR_INVALID;
  return rc;
}
