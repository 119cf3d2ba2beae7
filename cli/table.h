/*
 * Column-aligned text tables for the CLI's listings (ps/squeue style):
 * a header row, then one line per row, columns two spaces apart, no
 * trailing blanks.  Widths count UTF-8 characters, not bytes; a column
 * may have a maximum width, and longer cells are cut and end in "...".
 * Control characters in cells (a job name is user input) print as '?',
 * so a name cannot move the cursor or rewrite the terminal.
 *
 *   struct cli_table t;
 *   static const char *const head[] = {"ID", "NAME"};
 *   cli_table_init(&t, head, 2);
 *   cli_table_set_max(&t, 1, 24);
 *   cli_table_add(&t, (const char *[]){"42", "train"});
 *   cli_table_print(&t, stdout);
 *   cli_table_release(&t);
 */
#ifndef TENBIN_CLI_TABLE_H
#define TENBIN_CLI_TABLE_H

#include <stddef.h>
#include <stdio.h>

#include "util/buf.h"
#include "util/err.h"

struct cli_table {
  size_t ncols;
  char **head;      /* ncols copied header strings, or NULL */
  size_t *max;      /* per column: maximum width, 0 = unlimited */
  int *right;       /* per column: right-aligned */
  char **cells;     /* nrows * ncols sanitized copies */
  size_t nrows;
  size_t cap;       /* cells allocated */
};

/*
 * Set up a table with ncols columns; copies the header strings.  head
 * NULL gives a table without a header row (key: value listings).
 */
void cli_table_init(struct cli_table *t, const char *const *head,
                    size_t ncols);
/* Free everything (NULL-safe); t must be init'ed again before reuse. */
void cli_table_release(struct cli_table *t);
/* Cut cells of column col to at most width characters (>= 4). */
void cli_table_set_max(struct cli_table *t, size_t col, size_t width);
/* Align column col to the right (numbers). */
void cli_table_set_right(struct cli_table *t, size_t col);
/* Append a row of ncols cells (copies; a NULL cell prints as ""). */
void cli_table_add(struct cli_table *t, const char *const *cells);
/*
 * For a 2-column headless table: append the row "key:" value (copies);
 * a NULL or empty value adds nothing, so optional fields need no if.
 */
void cli_table_add_kv(struct cli_table *t, const char *key,
                      const char *value);
/* Append the rendered table to out. */
int cli_table_render(const struct cli_table *t, struct buf *out)
    WARN_UNUSED;
/* Render and write to f; ERR_IO when the write fails. */
int cli_table_print(const struct cli_table *t, FILE *f) WARN_UNUSED;

#endif
