/*
 * Tests that docs/CONFIG.md, the configuration reference, says what the
 * parsers take (daemon/config_fields.h): every field of every block's
 * table is documented under its block with its type, the reference
 * documents no block and no field the tables lack, and the complete
 * example at its top loads.
 *
 * The reference's format, which these tests read:
 *
 *   ### `sites[kind=slurm].elastic`
 *   | Field | Type | Default | Example | Meaning |
 *   |---|---|---|---|---|
 *   | `boot_s` | integer | ... |
 *
 * A block is a level-3 heading whose text is its path in backquotes; a
 * field is a table row that starts with its name in backquotes, its
 * type in the next cell.  The first ```json fence is the example.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/config_fields.h"
#include "util/fileio.h"

#define DOC_PATH TENBIN_SOURCE_DIR "/docs/CONFIG.md"
#define DOC_MAX (1024 * 1024)
#define MAX_ROWS 2048
#define MAX_BLOCKS 256

/* One documented field: its block, its name and its type's words. */
struct row {
  char block[128];
  char field[64];
  char type[32];
};

struct doc {
  char *text;
  struct row rows[MAX_ROWS];
  size_t nrows;
  char blocks[MAX_BLOCKS][128];
  size_t nblocks;
};

/* The text between the first pair of backquotes of s (within len),
 * into out; 0 when there is none or it does not fit. */
static int
quoted(const char *s, size_t len, char *out, size_t outlen)
{
  const char *a = memchr(s, '`', len);
  const char *b;

  if (a == NULL)
    return 0;
  b = memchr(a + 1, '`', len - (size_t)(a + 1 - s));
  if (b == NULL || (size_t)(b - a - 1) >= outlen)
    return 0;
  memcpy(out, a + 1, (size_t)(b - a - 1));
  out[b - a - 1] = '\0';
  return 1;
}

/* A row's second cell, trimmed, into out. */
static int
second_cell(const char *line, size_t len, char *out, size_t outlen)
{
  const char *end = line + len;
  const char *c1 = memchr(line + 1, '|', len - 1);
  const char *c2;

  if (c1 == NULL)
    return 0;
  c2 = memchr(c1 + 1, '|', (size_t)(end - c1 - 1));
  if (c2 == NULL)
    return 0;
  c1++;
  while (c1 < c2 && *c1 == ' ')
    c1++;
  while (c2 > c1 && c2[-1] == ' ')
    c2--;
  if ((size_t)(c2 - c1) >= outlen)
    return 0;
  memcpy(out, c1, (size_t)(c2 - c1));
  out[c2 - c1] = '\0';
  return 1;
}

static void
parse_doc(struct doc *d)
{
  const char *line;
  size_t len;
  char block[128] = "";
  int in_block = 0;
  int in_fence = 0;

  assert_int_equal(file_read(DOC_PATH, DOC_MAX, &d->text, &len, NULL), 0);
  for (line = d->text; *line != '\0';) {
    const char *nl = strchr(line, '\n');
    size_t n = nl != NULL ? (size_t)(nl - line) : strlen(line);

    if (n >= 3 && strncmp(line, "```", 3) == 0)
      in_fence = !in_fence;
    if (!in_fence && n > 4 && strncmp(line, "### `", 5) == 0) {
      assert_int_equal(quoted(line, n, block, sizeof(block)), 1);
      assert_true(d->nblocks < MAX_BLOCKS);
      snprintf(d->blocks[d->nblocks++], sizeof(d->blocks[0]), "%s", block);
      in_block = 1;
    } else if (!in_fence && n > 0 && line[0] == '#') {
      /* Any other heading ends the block: its tables are not fields. */
      in_block = 0;
    } else if (!in_fence && in_block && n > 3 &&
               strncmp(line, "| `", 3) == 0) {
      struct row *r;

      assert_true(d->nrows < MAX_ROWS);
      r = &d->rows[d->nrows];
      snprintf(r->block, sizeof(r->block), "%s", block);
      if (!quoted(line, n, r->field, sizeof(r->field)) ||
          !second_cell(line, n, r->type, sizeof(r->type)))
        fail_msg("docs/CONFIG.md: unreadable row in `%s`: %.*s", block,
                 (int)n, line);
      d->nrows++;
    }
    line = nl != NULL ? nl + 1 : line + n;
  }
}

static int
setup(void **state)
{
  struct doc *d = calloc(1, sizeof(*d));

  assert_non_null(d);
  parse_doc(d);
  *state = d;
  return 0;
}

static int
teardown(void **state)
{
  struct doc *d = *state;

  free(d->text);
  free(d);
  return 0;
}

static const struct row *
find_row(const struct doc *d, const char *block, const char *field)
{
  for (size_t i = 0; i < d->nrows; i++) {
    if (strcmp(d->rows[i].block, block) == 0 &&
        strcmp(d->rows[i].field, field) == 0)
      return &d->rows[i];
  }
  return NULL;
}

static const struct config_block *
find_block(const char *path)
{
  size_t n;
  const struct config_block *b = config_blocks(&n);

  for (size_t i = 0; i < n; i++) {
    if (strcmp(b[i].path, path) == 0)
      return &b[i];
  }
  return NULL;
}

static void
every_registered_field_is_documented_with_its_type(void **state)
{
  const struct doc *d = *state;
  size_t n;
  const struct config_block *b = config_blocks(&n);
  int bad = 0;

  assert_true(n > 20);
  for (size_t i = 0; i < n; i++) {
    for (const struct jsonx_field *f = b[i].fields; f->name != NULL; f++) {
      const struct row *r = find_row(d, b[i].path, f->name);
      const char *want = config_type_name(f->type);

      if (r == NULL) {
        print_error("docs/CONFIG.md: `%s` lacks field `%s` (%s)\n",
                    b[i].path, f->name, want);
        bad++;
      } else if (strcmp(r->type, want) != 0) {
        print_error("docs/CONFIG.md: `%s` field `%s` is '%s', the parser "
                    "takes %s\n", b[i].path, f->name, r->type, want);
        bad++;
      }
    }
  }
  assert_int_equal(bad, 0);
}

static void
doc_documents_no_field_the_parsers_lack(void **state)
{
  const struct doc *d = *state;
  int bad = 0;

  assert_true(d->nrows > 100);
  for (size_t i = 0; i < d->nrows; i++) {
    const struct config_block *b = find_block(d->rows[i].block);
    const struct jsonx_field *f;

    if (b == NULL)
      continue; /* the next test names the block */
    for (f = b->fields; f->name != NULL; f++) {
      if (strcmp(f->name, d->rows[i].field) == 0)
        break;
    }
    if (f->name == NULL) {
      print_error("docs/CONFIG.md: `%s` documents `%s`, which its parser "
                  "does not take\n", d->rows[i].block, d->rows[i].field);
      bad++;
    }
    /* Twice in one block would let the two rows disagree. */
    if (find_row(d, d->rows[i].block, d->rows[i].field) != &d->rows[i]) {
      print_error("docs/CONFIG.md: `%s` documents `%s` twice\n",
                  d->rows[i].block, d->rows[i].field);
      bad++;
    }
  }
  assert_int_equal(bad, 0);
}

static void
every_documented_block_is_a_parsers_block_once(void **state)
{
  const struct doc *d = *state;
  int bad = 0;

  for (size_t i = 0; i < d->nblocks; i++) {
    if (find_block(d->blocks[i]) == NULL) {
      print_error("docs/CONFIG.md: block `%s` is no parser's\n",
                  d->blocks[i]);
      bad++;
    }
    for (size_t k = 0; k < i; k++) {
      if (strcmp(d->blocks[k], d->blocks[i]) == 0) {
        print_error("docs/CONFIG.md: block `%s` twice\n", d->blocks[i]);
        bad++;
      }
    }
  }
  assert_int_equal(bad, 0);
}

static void
registry_names_each_block_once(void **state)
{
  size_t n;
  const struct config_block *b = config_blocks(&n);

  (void)state;
  for (size_t i = 0; i < n; i++) {
    assert_non_null(b[i].fields);
    assert_non_null(b[i].about);
    for (size_t k = 0; k < i; k++)
      assert_string_not_equal(b[k].path, b[i].path);
  }
}

/* The example a reader copies first must load as it stands. */
static void
the_complete_example_loads(void **state)
{
  const struct doc *d = *state;
  const char *start = strstr(d->text, "```json\n");
  const char *end;
  char dir[] = "/tmp/tenbin-confdoc-XXXXXX";
  char path[64];
  struct daemon_config cfg;
  struct err e = {0};
  FILE *fp;
  int rc;

  assert_non_null(start);
  start += strlen("```json\n");
  end = strstr(start, "\n```");
  assert_non_null(end);
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/tenbind.json", dir);
  fp = fopen(path, "w");
  assert_non_null(fp);
  assert_int_equal(fwrite(start, 1, (size_t)(end - start), fp),
                   (size_t)(end - start));
  assert_int_equal(fclose(fp), 0);
  rc = config_load(path, NULL, &cfg, &e);
  unlink(path);
  rmdir(dir);
  if (rc < 0)
    fail_msg("the example in docs/CONFIG.md: %s", e.msg);
  assert_true(json_array_size(cfg.sites) >= 3);
  config_release(&cfg);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_registered_field_is_documented_with_its_type),
      cmocka_unit_test(doc_documents_no_field_the_parsers_lack),
      cmocka_unit_test(every_documented_block_is_a_parsers_block_once),
      cmocka_unit_test(registry_names_each_block_once),
      cmocka_unit_test(the_complete_example_loads),
  };

  return cmocka_run_group_tests(tests, setup, teardown);
}
