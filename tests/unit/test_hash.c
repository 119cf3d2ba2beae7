/*
 * Tests for util/hash.c: SHA-256 against the FIPS 180-2 vector, and the
 * hex form that version ids, content hashes and tokens share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "util/hash.h"

#define ABC_SHA256 \
  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static void
test_sha256_of_abc_is_the_fips_vector(void **state)
{
  unsigned char bin[32];
  char hex[65];

  (void)state;
  hash_sha256("abc", 3, bin);
  hash_hex(bin, sizeof(bin), hex);
  assert_string_equal(hex, ABC_SHA256);
  hash_sha256_hex("abc", 3, hex);
  assert_string_equal(hex, ABC_SHA256);
}

static void
test_unhex_round_trips_lowercase_hex(void **state)
{
  unsigned char bin[32], back[32];
  char hex[65];

  (void)state;
  for (size_t i = 0; i < sizeof(bin); i++)
    bin[i] = (unsigned char)(i * 37 + 5);
  hash_hex(bin, sizeof(bin), hex);
  assert_int_equal(hash_unhex(hex, back, sizeof(back)), 0);
  assert_memory_equal(bin, back, sizeof(bin));
}

static void
test_unhex_refuses_anything_but_exact_lowercase_hex(void **state)
{
  static const char *const bad[] = {
      "", "ab", "abc", "ABCD", "abcg", "ab cd", "abcdef", "0x12",
  };
  unsigned char out[2];

  (void)state;
  assert_int_equal(hash_unhex(NULL, out, 2), ERR_INVALID);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (hash_unhex(bad[i], out, 2) != ERR_INVALID)
      fail_msg("'%s' was accepted", bad[i]);
  }
  assert_int_equal(hash_unhex("a0ff", out, 2), 0);
  assert_int_equal(out[0], 0xa0);
  assert_int_equal(out[1], 0xff);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_of_abc_is_the_fips_vector),
      cmocka_unit_test(test_unhex_round_trips_lowercase_hex),
      cmocka_unit_test(test_unhex_refuses_anything_but_exact_lowercase_hex),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
