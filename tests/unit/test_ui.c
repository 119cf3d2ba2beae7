/*
 * Tests for ui/: the dashboard's files are in the binary byte for byte,
 * with the Content-Type of their extension, and only whole names find
 * one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/ui.h"

/* The file at TENBIN_SOURCE_DIR/rel, read whole (malloc'd; *len set). */
static unsigned char *
slurp(const char *rel, size_t *len)
{
  char path[512];
  FILE *f;
  unsigned char *data;
  long size;

  snprintf(path, sizeof(path), "%s/%s", TENBIN_SOURCE_DIR, rel);
  f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  size = ftell(f);
  assert_true(size >= 0 && size < 16 * 1024 * 1024);
  rewind(f);
  data = malloc((size_t)size + 1);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *len = (size_t)size;
  return data;
}

static void
assert_embedded(const char *name, const char *rel, const char *type)
{
  const struct ui_asset *a = ui_asset_find(name);
  size_t len;
  unsigned char *want = slurp(rel, &len);

  assert_non_null(a);
  assert_string_equal(a->name, name);
  assert_string_equal(a->type, type);
  assert_int_equal(a->len, len);
  assert_memory_equal(a->data, want, len);
  assert_int_equal(a->data[a->len], 0); /* the NUL after, not counted */
  free(want);
}

static void
test_ui_assets_are_the_files_byte_for_byte(void **state)
{
  (void)state;
  assert_embedded("index.html", "ui/src/index.html",
                  "text/html; charset=utf-8");
  assert_embedded("app.js", "ui/src/app.js",
                  "text/javascript; charset=utf-8");
  assert_embedded("style.css", "ui/src/style.css", "text/css; charset=utf-8");
  assert_embedded("uPlot.iife.min.js",
                  "ui/node_modules/uplot/dist/uPlot.iife.min.js",
                  "text/javascript; charset=utf-8");
  assert_embedded("uPlot.min.css", "ui/node_modules/uplot/dist/uPlot.min.css",
                  "text/css; charset=utf-8");
}

static void
test_ui_only_whole_names_find_an_asset(void **state)
{
  static const char *const misses[] = {
      "", "app", "app.js ", "APP.JS", "/app.js", "src/app.js",
      "../src/app.js", "app.js/", "index.html\n", "package.json",
      "ui.c"};

  (void)state;
  assert_null(ui_asset_find(NULL));
  for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++)
    assert_null(ui_asset_find(misses[i]));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ui_assets_are_the_files_byte_for_byte),
      cmocka_unit_test(test_ui_only_whole_names_find_an_asset),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
