/*
 * A batch answer as a destination reads it (pull_work.c): frames by
 * wire_next; ERROR payloads as JSON; DELTA payloads applied with
 * delta_patch to a fixed basis; DATA payloads written.  The file field of
 * a DELTA frame stands for the segment's expected length (at most
 * 64 KiB).  Basis and output are memfds: nothing reaches a disk.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fixtures.h"
#include "fuzz/fuzz.h"
#include "sync/delta.h"
#include "sync/wire.h"
#include "util/jsonx.h"

#include <librsync.h>

static int basis_fd = -1, out_fd = -1;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  static uint8_t basis[FX_BASIS_LEN];

  fx_basis(basis);
  /* librsync logs every corrupt delta; the fuzzer makes millions. */
  rs_trace_set_level(RS_LOG_EMERG);
  basis_fd = memfd_create("tenbin-fuzz-basis", MFD_CLOEXEC);
  out_fd = memfd_create("tenbin-fuzz-out", MFD_CLOEXEC);
  if (basis_fd < 0 || out_fd < 0 ||
      pwrite(basis_fd, basis, sizeof(basis), 0) != (ssize_t)sizeof(basis))
    abort();
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct wire_frame f;
  struct err e = {0};
  size_t pos = 0, last = 0;
  uint8_t sha[32];
  int rc;

  while ((rc = wire_next(data, size, &pos, &f, &e)) == 1) {
    FUZZ_CHECK(pos > last && pos <= size);
    FUZZ_CHECK(pos - last == WIRE_HDR_LEN + (size_t)f.len);
    last = pos;
    if (f.kind == WIRE_ERROR) {
      json_t *v = NULL;

      if (jsonx_parse_object((const char *)f.payload, f.len, &v, &e) == 0)
        (void)jsonx_str(v, "code");
      json_decref(v);
    } else if (f.kind == WIRE_DELTA) {
      (void)delta_patch(basis_fd, f.payload, f.len, out_fd, 0,
                        f.file % (FX_BASIS_LEN + 1), sha, NULL, &e);
    } else if (f.kind == WIRE_DATA && f.len <= FX_BASIS_LEN) {
      (void)delta_write(out_fd, 0, f.payload, f.len, sha, NULL, &e);
    }
  }
  FUZZ_CHECK(rc == 0 || rc == ERR_INVALID);
  if (ftruncate(out_fd, 0) < 0)
    abort();
  return 0;
}
