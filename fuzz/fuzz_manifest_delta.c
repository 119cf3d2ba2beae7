/*
 * Manifest deltas as a destination applies them (manifest_delta_apply)
 * against a fixed base version, fx_base_manifest (fixtures.h): the
 * seeds, made by make_seeds.c, name its id in their header.  A delta that applies must give a text that decodes to the same
 * entries, and each entry it says was kept must be the base's.
 */
#include "fuzz/fixtures.h"
#include "fuzz/fuzz.h"
#include "sync/manifest.h"

#define FUZZ_MAX_ENTRIES 512

static struct manifest base;
static char base_id[MANIFEST_ID_HEX + 1];

static void
release_base(void)
{
  manifest_release(&base);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct err e = {0};
  char *text = NULL;
  size_t len;

  manifest_init(&base);
  if (manifest_decode(fx_base_manifest, sizeof(fx_base_manifest) - 1, &base, &e) < 0 ||
      manifest_encode(&base, &text, &len, base_id, &e) < 0) {
    fprintf(stderr, "fuzz_manifest_delta: base: %s\n", e.msg);
    abort();
  }
  free(text);
  atexit(release_base);
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct manifest m, again;
  struct err e = {0};
  char *text = NULL;
  size_t len = 0;
  uint32_t *from = NULL;

  manifest_init(&m);
  manifest_init(&again);
  if (manifest_delta_apply(&base, base_id, fx_base_manifest, sizeof(fx_base_manifest) - 1,
                           (const char *)data, size, FUZZ_MAX_ENTRIES,
                           &text, &len, &m, &from, &e) < 0)
    goto out;
  FUZZ_CHECK(manifest_decode(text, len, &again, &e) == 0);
  FUZZ_CHECK(again.n == m.n);
  for (size_t i = 0; i < m.n; i++) {
    FUZZ_CHECK(manifest_entry_same(&m.v[i], &again.v[i]));
    if (from[i] != UINT32_MAX) {
      FUZZ_CHECK(from[i] < base.n);
      FUZZ_CHECK(manifest_entry_same(&m.v[i], &base.v[from[i]]));
    }
  }

out:
  free(from);
  free(text);
  manifest_release(&again);
  manifest_release(&m);
  return 0;
}
