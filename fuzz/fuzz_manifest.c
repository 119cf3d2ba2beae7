/*
 * Manifests as a destination fetches them from a peer: manifest_decode
 * (the streaming reader of manifest_text.c and the checks of
 * manifest.c).  One it accepts must encode again and decode to the same
 * entries: its version id is the hash of that encoding.
 */
#include "fuzz/fuzz.h"
#include "sync/manifest.h"

/* A small bound keeps each run fast; the limit itself is tested by
 * test_sync_manifest. */
#define FUZZ_MAX_ENTRIES 512

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct manifest m, again;
  struct err e = {0};
  char id[MANIFEST_ID_HEX + 1], id2[MANIFEST_ID_HEX + 1];
  char *text = NULL, *text2 = NULL;
  size_t len = 0, len2 = 0;

  manifest_init(&m);
  manifest_init(&again);
  if (manifest_decode_max((const char *)data, size, FUZZ_MAX_ENTRIES, &m,
                          &e) < 0)
    goto out;
  FUZZ_CHECK(manifest_encode(&m, &text, &len, id, &e) == 0);
  FUZZ_CHECK(manifest_decode(text, len, &again, &e) == 0);
  FUZZ_CHECK(again.n == m.n);
  for (size_t i = 0; i < m.n; i++) {
    FUZZ_CHECK(manifest_entry_same(&m.v[i], &again.v[i]));
    FUZZ_CHECK(manifest_find(&m, m.v[i].path) == (ssize_t)i);
  }
  FUZZ_CHECK(manifest_encode(&again, &text2, &len2, id2, &e) == 0);
  FUZZ_CHECK(len == len2 && memcmp(text, text2, len) == 0);
  FUZZ_CHECK(strcmp(id, id2) == 0);

out:
  free(text2);
  free(text);
  manifest_release(&again);
  manifest_release(&m);
  return 0;
}
