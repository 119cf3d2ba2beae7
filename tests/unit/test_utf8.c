/*
 * Tests for util/utf8.c: what JSON accepts as UTF-8, and repairing text
 * cut at a byte count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "util/utf8.h"

static int
valid(const char *s)
{
  return utf8_valid(s, strlen(s));
}

static void
test_ascii_and_whole_characters_are_valid(void **state)
{
  (void)state;
  assert_true(valid(""));
  assert_true(valid("plain/path.txt"));
  assert_true(valid("caf\xc3\xa9"));              /* U+00E9 */
  assert_true(valid("\xe6\x97\xa5\xe6\x9c\xac")); /* U+65E5 U+672C */
  assert_true(valid("\xf0\x9f\x99\x82"));         /* U+1F642 */
  assert_true(valid("\xf4\x8f\xbf\xbf"));         /* U+10FFFF */
  assert_int_equal(utf8_char((const unsigned char *)"\xe6\x97\xa5x",
                             (const unsigned char *)"\xe6\x97\xa5x" + 4),
                   3);
}

static void
test_overlong_surrogate_out_of_range_and_cut_forms_are_invalid(void **state)
{
  (void)state;
  assert_false(valid("\xc0\xaf"));         /* overlong '/' */
  assert_false(valid("\xe0\x80\xaf"));     /* overlong, 3 bytes */
  assert_false(valid("\xed\xa0\x80"));     /* U+D800, a surrogate */
  assert_false(valid("\xf4\x90\x80\x80")); /* past U+10FFFF */
  assert_false(valid("\xff"));
  assert_false(valid("\x80"));             /* a lone continuation */
  assert_false(valid("ab\xe6\x97"));       /* cut at the end */
  assert_false(utf8_valid("\xe6\x97\xa5", 2)); /* n cuts it */
}

static void
test_repair_replaces_each_stray_byte_and_keeps_whole_characters(void **state)
{
  char s[64];

  (void)state;
  snprintf(s, sizeof(s), "%s", "cannot open 'caf\xc3\xa9/\xe6\x97");
  utf8_repair(s);
  assert_string_equal(s, "cannot open 'caf\xc3\xa9/??");
  assert_true(valid(s));
  snprintf(s, sizeof(s), "%s", "\x80x\xed\xa0\x80y");
  utf8_repair(s);
  assert_string_equal(s, "?x???y");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ascii_and_whole_characters_are_valid),
      cmocka_unit_test(
          test_overlong_surrogate_out_of_range_and_cut_forms_are_invalid),
      cmocka_unit_test(
          test_repair_replaces_each_stray_byte_and_keeps_whole_characters),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
