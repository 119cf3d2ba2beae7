/*
 * Writes the binary seeds of fuzz/corpus (manifests of a scanned tree,
 * manifest deltas against fx_base_manifest, batch answers and batch
 * requests made by the real encoders), so they can be made again when a
 * format changes:
 *   build-fuzz/bin/fuzz_make_seeds fuzz/corpus
 * Only the seeds listed here are written; the others are text kept by
 * hand.  The tree it scans lives in a temporary directory, removed at
 * the end.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fixtures.h"
#include "sync/delta.h"
#include "sync/manifest.h"
#include "sync/wire.h"
#include "util/buf.h"

static const char *top;

static void __attribute__((noreturn))
die(const char *what, const struct err *e)
{
  fprintf(stderr, "make_seeds: %s: %s\n", what, e ? e->msg : "failed");
  exit(1);
}

static void
put(const char *target, const char *name, const void *data, size_t len,
    const uint8_t *prefix)
{
  char path[1024];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", top, target);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/%s/%s", top, target, name);
  f = fopen(path, "we");
  if (f == NULL || (prefix != NULL && fwrite(prefix, 1, 1, f) != 1) ||
      fwrite(data, 1, len, f) != len || fclose(f) != 0)
    die(path, NULL);
}

static void
write_file(int dirfd, const char *name, const uint8_t *data, size_t len)
{
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0644);

  if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd) < 0)
    die(name, NULL);
}

/* A tree with a directory, small files, a link and a file of several
 * segments; its manifest is a seed of fuzz_manifest. */
static void
manifest_seeds(void)
{
  char tmpl[] = "/tmp/tenbin-fuzz-seeds-XXXXXX";
  size_t big_len = (size_t)13 << 20;
  uint8_t *big = malloc(big_len);
  struct manifest m;
  struct manifest_checks c;
  struct err e = {0};
  char id[MANIFEST_ID_HEX + 1];
  char *text;
  size_t len;
  int rootfd;
  uint64_t x = 88172645463325252ull;
  char cmd[128];

  if (big == NULL || mkdtemp(tmpl) == NULL)
    die("tree", NULL);
  for (size_t i = 0; i < big_len; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    big[i] = (uint8_t)x;
  }
  rootfd = open(tmpl, O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0 || mkdirat(rootfd, "d", 0750) < 0 ||
      symlinkat("../small", rootfd, "d/up") < 0)
    die("tree", NULL);
  write_file(rootfd, "small", (const uint8_t *)"hello\n", 6);
  write_file(rootfd, "d/empty", (const uint8_t *)"", 0);
  write_file(rootfd, "d/big.bin", big, big_len);
  manifest_init(&m);
  manifest_checks_init(&c);
  if (manifest_scan(rootfd, ".", NULL, NULL, NULL, &m, &c, NULL, &e) < 0 ||
      manifest_encode(&m, &text, &len, id, &e) < 0)
    die("scan", &e);
  if (m.v[manifest_find(&m, "d/big.bin")].nsegs < 2)
    die("big.bin has one segment", NULL);
  put("fuzz_manifest", "tree.json", text, len, NULL);
  put("fuzz_manifest", "base.json", fx_base_manifest,
      sizeof(fx_base_manifest) - 1, NULL);
  free(text);
  manifest_checks_release(&c);
  manifest_release(&m);
  close(rootfd);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
  if (system(cmd) != 0)
    die(cmd, NULL);
  free(big);
}

/* Deltas of versions made from fx_base_manifest by a remove, an add and
 * a change, against it. */
static void
delta_seeds(void)
{
  static const char *const versions[][2] = {
    {"remove_add.txt",
     FX_DOC(FX_DIR("a", 493) "," FX_FILE("a/f1", 3, FX_H1) ","
            FX_FILE("a/f3", 5, FX_H2) "," FX_LINK("a/l", "f1") ","
            FX_DIR("b", 448) "," FX_FILE("b/x", 0, FX_H1) ","
            FX_FILE("c", 4096, FX_H2))},
    {"change_last.txt",
     FX_DOC(FX_DIR("a", 493) "," FX_FILE("a/f1", 3, FX_H1) ","
            FX_FILE("a/f2", 10, FX_H2) "," FX_LINK("a/l", "f1") ","
            FX_DIR("b", 448) "," FX_FILE("b/x", 0, FX_H1) ","
            FX_FILE("c", 8192, FX_H1))},
    {"drop_dir.txt",
     FX_DOC(FX_DIR("a", 493) "," FX_FILE("a/f1", 3, FX_H1) ","
            FX_FILE("a/f2", 10, FX_H2) "," FX_LINK("a/l", "f1") ","
            FX_FILE("c", 4096, FX_H2) "," FX_DIR("d", 493))},
  };
  struct manifest base, v;
  struct err e = {0};
  char base_id[MANIFEST_ID_HEX + 1];
  char *text, *delta;
  size_t len;

  manifest_init(&base);
  if (manifest_decode(fx_base_manifest, sizeof(fx_base_manifest) - 1,
                      &base, &e) < 0 ||
      manifest_encode(&base, &text, &len, base_id, &e) < 0)
    die("base", &e);
  free(text);
  for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
    manifest_init(&v);
    if (manifest_decode(versions[i][1], strlen(versions[i][1]), &v,
                        &e) < 0 ||
        manifest_delta_make(&base, base_id, &v, 1 << 20, &delta, &len,
                            &e) < 0)
      die(versions[i][0], &e);
    put("fuzz_manifest_delta", versions[i][0], delta, len, NULL);
    free(delta);
    manifest_release(&v);
  }
  manifest_release(&base);
}

static int
memfd_with(const uint8_t *data, size_t len)
{
  int fd = memfd_create("seed", MFD_CLOEXEC);

  if (fd < 0 || pwrite(fd, data, len, 0) != (ssize_t)len)
    die("memfd", NULL);
  return fd;
}

/* A batch answer (a delta against the basis of fuzz_wire, literal data
 * and an error) and a batch request (signatures, an in-place
 * description, segment and block asks). */
static void
wire_seeds(void)
{
  static uint8_t basis[FX_BASIS_LEN], edited[FX_BASIS_LEN];
  static const uint8_t err_json[] =
      "{\"code\":\"CONFLICT\",\"message\":\"'a' changed\"}";
  static const uint8_t request_kind = 0;
  uint8_t sigref[32] = {1}, blocks[WIRE_FP_ENTRY] = {2};
  struct buf sig, range, dl, out;
  struct delta_sig *loaded = NULL;
  struct err e = {0};
  uint8_t xxh[16];
  int bfd, efd;

  fx_basis(basis);
  memcpy(edited, basis, sizeof(edited));
  memset(edited + 1000, 'x', 3000);
  bfd = memfd_with(basis, sizeof(basis));
  efd = memfd_with(edited, sizeof(edited));
  buf_init(&sig, 1 << 20);
  buf_init(&range, 1 << 20);
  buf_init(&dl, 1 << 20);
  buf_init(&out, 1 << 22);
  if (delta_signature(bfd, sizeof(basis), &sig, &e) < 0 ||
      buf_add(&range, "\0\0\0\0\0\0\0\0", 8) < 0 ||
      delta_signature_range(bfd, 0, 8192, &range, &e) < 0 ||
      delta_sig_load(sig.data, sig.len, &loaded, &e) < 0 ||
      delta_compute(loaded, efd, 0, sizeof(edited), &dl, xxh, NULL, &e) < 0)
    die("delta", &e);
  /* The answer: file is the expected length for fuzz_wire. */
  if (wire_put(&out, WIRE_DELTA, sizeof(edited), 0, dl.data,
               (uint32_t)dl.len) < 0 ||
      wire_put(&out, WIRE_DATA, 1, 0, "hello\n", 6) < 0 ||
      wire_put(&out, WIRE_ERROR, 2, 0, err_json, sizeof(err_json) - 1) < 0)
    die("answer", NULL);
  put("fuzz_wire", "answer.bin", out.data, out.len, NULL);
  buf_reset(&out);
  if (wire_put(&out, WIRE_SIG, 0, 0, sig.data, (uint32_t)sig.len) < 0 ||
      wire_put(&out, WIRE_SIGREF, 1, 0, sigref, sizeof(sigref)) < 0 ||
      wire_put(&out, WIRE_SEG, 1, 0, NULL, 0) < 0 ||
      wire_put(&out, WIRE_BLOCKS, 1, 0, blocks, sizeof(blocks)) < 0 ||
      wire_put(&out, WIRE_SIGRANGE, 2, 1, range.data,
               (uint32_t)range.len) < 0)
    die("request", NULL);
  put("fuzz_agent_request", "batch.bin", out.data, out.len, &request_kind);
  delta_sig_free(loaded);
  buf_release(&sig);
  buf_release(&range);
  buf_release(&dl);
  buf_release(&out);
  close(bfd);
  close(efd);
}

int
main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  top = argv[1];
  manifest_seeds();
  delta_seeds();
  wire_seeds();
  return 0;
}
