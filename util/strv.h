/*
 * NULL-terminated string vectors (char **, like argv and environ): the
 * shape a job's command, environment and extra directives take, and
 * what execve() wants.  Generic, so they live in util and not with the
 * job model that uses them most.
 *
 * Ownership: a vector these functions build owns its strings and its
 * array; strv_free() frees both.  A NULL vector is an empty one.
 */
#ifndef TENBIN_UTIL_STRV_H
#define TENBIN_UTIL_STRV_H

#include <stddef.h>

/* The number of strings before the NULL (0 for a NULL v). */
size_t strv_len(char *const *v);
/* Free every string and the array (NULL-safe). */
void strv_free(char **v);
/* New deep copy (NULL gives NULL); the caller frees with strv_free(). */
char **strv_dup(char *const *v);
/* Append a copy of s to *v (grows it; *v may be NULL). */
void strv_push(char ***v, const char *s);
/* 1 when v (may be NULL) holds a string equal to s. */
int strv_contains(char *const *v, const char *s);

#endif
