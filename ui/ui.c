/*
 * Looking up the embedded dashboard files.  A handful of them: a linear
 * search is as fast as anything else.
 */
#include <string.h>

#include "ui/ui_internal.h"

const struct ui_asset *
ui_asset_find(const char *name)
{
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < ui__asset_count; i++) {
    if (strcmp(ui__assets[i].name, name) == 0)
      return &ui__assets[i];
  }
  return NULL;
}
