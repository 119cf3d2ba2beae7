/*
 * What every libFuzzer target in fuzz/ shares.
 *
 * A target is one file, fuzz_<parser>.c, with LLVMFuzzerTestOneInput.
 * It must free everything it allocates (LeakSanitizer runs at exit and
 * on every crash report), keep no state between inputs that changes
 * what the parser sees, and touch neither the network nor the file
 * system outside a temporary directory of its own.  A property the
 * parser promises (a round trip, a result that passed its own checks)
 * is checked with FUZZ_CHECK: a violation is a finding, like a crash.
 */
#ifndef TENBIN_FUZZ_FUZZ_H
#define TENBIN_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Abort with the condition's text: libFuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                      \
      abort();                                                             \
    }                                                                      \
  } while (0)

/* A NUL-terminated copy of the input (new; free with free()); inputs
 * holding a NUL are cut there, as C strings are. */
static inline char *
fuzz_cstr(const uint8_t *data, size_t size)
{
  char *s = malloc(size + 1);

  if (s == NULL)
    abort();
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

#endif
