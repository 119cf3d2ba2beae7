/*
 * GROW(v, n, cap): make the array v (of *v elements, cap of them
 * allocated) hold at least n, like git's ALLOC_GROW.  Growing an array
 * by hand with realloc() is error prone and boring: every copy must
 * double, pick a first size and check the multiplication.
 *
 *   struct row *rows = NULL;
 *   size_t n = 0, cap = 0;
 *   GROW(rows, n + 1, cap);
 *   rows[n++] = r;
 *   ...
 *   free(rows);
 *
 * v is an lvalue pointer (NULL with cap 0 at first), cap a size_t lvalue;
 * both are updated, and v may move.  The capacity at least doubles, from
 * GROW_MIN elements, so n appends cost O(n).  New elements are not
 * initialised.  Allocation follows alloc.h: out of memory, or a byte
 * count that does not fit in size_t, aborts; GROW never fails.
 */
#ifndef TENBIN_UTIL_GROW_H
#define TENBIN_UTIL_GROW_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/alloc.h"

#define GROW_MIN 8

#define GROW(v, n, cap) \
  ((v) = grow__array((v), (n), &(cap), sizeof(*(v))))

/* GROW's body: v (steals) resized for at least need elements of elem
 * bytes; *cap is updated. */
static inline void *
grow__array(void *v, size_t need, size_t *cap, size_t elem)
{
  /* Checked here because xrealloc takes a byte count, which would wrap. */
  size_t max = SIZE_MAX / elem;
  size_t c = *cap;

  if (need <= c)
    return v;
  if (need > max) {
    fprintf(stderr, "fatal: array of %zu elements of %zu bytes is too "
            "large\n", need, elem);
    abort();
  }
  c = c < GROW_MIN ? GROW_MIN : c;
  while (c < need)
    c = c > max / 2 ? max : c * 2;
  if (c > max)
    c = max;
  v = xrealloc(v, c * elem);
  *cap = c;
  return v;
}

#endif
