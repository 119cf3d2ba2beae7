/*
 * UTF-8 checks (utf8.h).
 */
#include "utf8.h"

#include <string.h>

size_t
utf8_char(const unsigned char *p, const unsigned char *end)
{
  unsigned c = p[0], v, min;
  size_t len;

  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, v = c & 0x1f, min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, v = c & 0x0f, min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if ((size_t)(end - p) < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    v = v << 6 | (p[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
    return 0;
  return len;
}

int
utf8_valid(const char *s, size_t n)
{
  const unsigned char *p = (const unsigned char *)s;
  const unsigned char *end = p + n;

  while (p < end) {
    size_t len = utf8_char(p, end);

    if (len == 0)
      return 0;
    p += len;
  }
  return 1;
}

void
utf8_repair(char *s)
{
  unsigned char *p = (unsigned char *)s;
  unsigned char *end = p + strlen(s);

  while (p < end) {
    size_t len = utf8_char(p, end);

    if (len == 0) {
      *p = '?';
      len = 1;
    }
    p += len;
  }
}
