/*
 * SHA-256 (OpenSSL) and random tokens.
 */
#ifndef TENBIN_UTIL_HASH_H
#define TENBIN_UTIL_HASH_H

#include <stddef.h>

#include "err.h"

#define HASH_SHA256_HEX_LEN 64

/* SHA-256 of data into out. */
void hash_sha256(const void *data, size_t len, unsigned char out[32]);
/* Hex SHA-256 of data into out (at least 65 bytes, NUL-terminated). */
void hash_sha256_hex(const void *data, size_t len, char out[65]);
/* n bytes as 2n lowercase hex digits into out (2n + 1 bytes, NUL-ended). */
void hash_hex(const unsigned char *in, size_t n, char *out);
/* Exactly 2n lowercase hex digits (then the NUL) into n bytes; ERR_INVALID
 * for anything else (NULL, uppercase, a wrong length). */
int hash_unhex(const char *hex, unsigned char *out, size_t n) WARN_UNUSED;
/*
 * Fill out with prefix + 43 url-safe random characters (256 bits from the
 * OS CSPRNG); outlen must hold them and the NUL.  ERR_IO if the kernel
 * gives no randomness.
 */
int hash_random_token(const char *prefix, char *out, size_t outlen)
    WARN_UNUSED;
/* Constant-time equality of two n-byte strings. */
int hash_equal(const void *a, const void *b, size_t n);

#endif
