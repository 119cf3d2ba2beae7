/*
 * Column-aligned tables.  Cells are stored sanitized and whole; cutting
 * to a column's maximum happens when rendering, so set_max may be called
 * at any time before printing.
 */
#include "cli/table.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/grow.h"

#define ELLIPSIS "..."
#define ELLIPSIS_LEN 3
#define GAP "  "

/* Width in characters: bytes that do not continue a UTF-8 sequence. */
static size_t
text_width(const char *s)
{
  size_t w = 0;

  for (; *s != '\0'; s++)
    if (((unsigned char)*s & 0xC0) != 0x80)
      w++;
  return w;
}

/* Bytes of s that hold its first n characters. */
static size_t
prefix_bytes(const char *s, size_t n)
{
  size_t i = 0;
  size_t w = 0;

  while (s[i] != '\0') {
    if (((unsigned char)s[i] & 0xC0) != 0x80) {
      if (w == n)
        break;
      w++;
    }
    i++;
  }
  return i;
}

/* New copy of s with control characters replaced by '?'. */
static char *
sanitize(const char *s)
{
  char *copy = xstrdup(s != NULL ? s : "");

  for (char *p = copy; *p != '\0'; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
      *p = '?';
  return copy;
}

void
cli_table_init(struct cli_table *t, const char *const *head, size_t ncols)
{
  t->ncols = ncols;
  t->head = NULL;
  if (head != NULL) {
    t->head = xcalloc(ncols, sizeof(*t->head));
    for (size_t i = 0; i < ncols; i++)
      t->head[i] = sanitize(head[i]);
  }
  t->max = xcalloc(ncols, sizeof(*t->max));
  t->right = xcalloc(ncols, sizeof(*t->right));
  t->cells = NULL;
  t->nrows = 0;
  t->cap = 0;
}

void
cli_table_release(struct cli_table *t)
{
  if (t == NULL)
    return;
  if (t->head != NULL)
    for (size_t i = 0; i < t->ncols; i++)
      free(t->head[i]);
  for (size_t i = 0; i < t->nrows * t->ncols; i++)
    free(t->cells[i]);
  free(t->head);
  free(t->max);
  free(t->right);
  free(t->cells);
  memset(t, 0, sizeof(*t));
}

void
cli_table_set_max(struct cli_table *t, size_t col, size_t width)
{
  /* Below 4 the ellipsis would leave no character of the cell. */
  if (col < t->ncols)
    t->max[col] = width < ELLIPSIS_LEN + 1 ? ELLIPSIS_LEN + 1 : width;
}

void
cli_table_set_right(struct cli_table *t, size_t col)
{
  if (col < t->ncols)
    t->right[col] = 1;
}

void
cli_table_add(struct cli_table *t, const char *const *cells)
{
  GROW(t->cells, (t->nrows + 1) * t->ncols, t->cap);
  for (size_t i = 0; i < t->ncols; i++)
    t->cells[t->nrows * t->ncols + i] = sanitize(cells[i]);
  t->nrows++;
}

void
cli_table_add_kv(struct cli_table *t, const char *key, const char *value)
{
  char label[128];
  const char *row[2];

  if (value == NULL || value[0] == '\0' || t->ncols != 2)
    return;
  snprintf(label, sizeof(label), "%s:", key);
  row[0] = label;
  row[1] = value;
  cli_table_add(t, row);
}

/* Width the cell takes in a column cut at max (0 = uncut). */
static size_t
cell_width(const char *s, size_t max)
{
  size_t w = text_width(s);

  return max != 0 && w > max ? max : w;
}

/* Append cell s to out, cut to max, padded with blanks to width. */
static int
add_cell(struct buf *out, const char *s, size_t max, size_t width,
         int right)
{
  size_t w = text_width(s);
  size_t n = strlen(s);
  int rc = 0;
  int cut = 0;

  if (max != 0 && w > max) {
    n = prefix_bytes(s, max - ELLIPSIS_LEN);
    w = max;
    cut = 1;
  }
  for (size_t i = w; right && i < width && rc == 0; i++)
    rc = buf_add(out, " ", 1);
  if (rc == 0)
    rc = buf_add(out, s, n);
  if (rc == 0 && cut)
    rc = buf_add(out, ELLIPSIS, ELLIPSIS_LEN);
  for (size_t i = w; !right && i < width && rc == 0; i++)
    rc = buf_add(out, " ", 1);
  return rc;
}

/* Append one line of cells, without trailing blanks. */
static int
add_line(struct buf *out, char *const *cells, const struct cli_table *t,
         const size_t *widths)
{
  int rc = 0;

  for (size_t i = 0; i < t->ncols && rc == 0; i++) {
    if (i > 0)
      rc = buf_add(out, GAP, strlen(GAP));
    if (rc == 0)
      rc = add_cell(out, cells[i], t->max[i], widths[i], t->right[i]);
  }
  while (rc == 0 && out->len > 0 && out->data[out->len - 1] == ' ')
    out->data[--out->len] = '\0';
  if (rc == 0)
    rc = buf_add(out, "\n", 1);
  return rc;
}

int
cli_table_render(const struct cli_table *t, struct buf *out)
{
  size_t *widths = xcalloc(t->ncols ? t->ncols : 1, sizeof(*widths));
  int rc = 0;

  for (size_t i = 0; i < t->ncols; i++) {
    if (t->head != NULL)
      widths[i] = cell_width(t->head[i], t->max[i]);
    for (size_t r = 0; r < t->nrows; r++) {
      size_t w = cell_width(t->cells[r * t->ncols + i], t->max[i]);

      if (w > widths[i])
        widths[i] = w;
    }
  }
  if (t->head != NULL)
    rc = add_line(out, t->head, t, widths);
  for (size_t r = 0; r < t->nrows && rc == 0; r++)
    rc = add_line(out, t->cells + r * t->ncols, t, widths);
  free(widths);
  return rc;
}

int
cli_table_print(const struct cli_table *t, FILE *f)
{
  struct buf b;
  int rc;

  /* A table is what the server sent, reformatted: bounded by its cap. */
  buf_init(&b, (size_t)256 << 20);
  rc = cli_table_render(t, &b);
  if (rc == 0 && b.len > 0 && fwrite(b.data, 1, b.len, f) != b.len)
    rc = ERR_IO;
  buf_release(&b);
  return rc;
}
