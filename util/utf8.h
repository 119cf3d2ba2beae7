/*
 * UTF-8 as JSON needs it (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF).  Pure functions.
 */
#ifndef TENBIN_UTIL_UTF8_H
#define TENBIN_UTIL_UTF8_H

#include <stddef.h>

/* The length of the UTF-8 character at p (before end), or 0 when the
 * bytes there are not one. */
size_t utf8_char(const unsigned char *p, const unsigned char *end);
/* 1 when the n bytes at s are valid UTF-8. */
int utf8_valid(const char *s, size_t n);
/* Replace, in the C string s, every byte that does not start a whole
 * character by '?': text cut at a byte count ("%.100s", a full buffer)
 * becomes valid again. */
void utf8_repair(char *s);

#endif
