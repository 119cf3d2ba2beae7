/*
 * The web dashboard's files, compiled into the binary (ui/embed.cmake):
 * the pages of ui/src and the chart library's script and style.  All of
 * it is static and read-only; nothing here is freed.
 */
#ifndef TENBIN_UI_H
#define TENBIN_UI_H

#include <stddef.h>

struct ui_asset {
  const char *name;          /* "app.js": the file's name, no folder */
  const char *type;          /* its Content-Type */
  const unsigned char *data; /* len bytes (a NUL follows, not counted) */
  size_t len;
};

/* The asset called name, or NULL when there is none (name is compared
 * whole, so "../x" or "a/b" never finds one). */
const struct ui_asset *ui_asset_find(const char *name);

#endif
