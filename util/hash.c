/*
 * Hashing and tokens.  OpenSSL's one-shot SHA256 is deprecated in 3.0, so
 * the EVP digest API is used.
 */
#include "hash.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>

void
hash_sha256(const void *data, size_t len, unsigned char out[32])
{
  unsigned int mdlen = 0;

  EVP_Digest(data, len, out, &mdlen, EVP_sha256(), NULL);
}

void
hash_sha256_hex(const void *data, size_t len, char out[65])
{
  unsigned char md[32];

  hash_sha256(data, len, md);
  hash_hex(md, sizeof(md), out);
}

void
hash_hex(const unsigned char *in, size_t n, char *out)
{
  static const char digits[] = "0123456789abcdef";

  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

/* A digit's value plus one, 0 for anything else (uppercase too: ids are
 * written lowercase).  A table: a manifest holds a million digits, and
 * random ones defeat a branch predictor. */
static const unsigned char hex_value[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
    ['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
    ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

int
hash_unhex(const char *hex, unsigned char *out, size_t n)
{
  unsigned bad = 0;

  if (hex == NULL || strlen(hex) != 2 * n)
    return ERR_INVALID;
  for (size_t i = 0; i < n; i++) {
    unsigned hi = hex_value[(unsigned char)hex[2 * i]];
    unsigned lo = hex_value[(unsigned char)hex[2 * i + 1]];

    bad |= (hi == 0) | (lo == 0);
    out[i] = (unsigned char)((hi - 1) << 4 | (lo - 1));
  }
  return bad ? ERR_INVALID : 0;
}

int
hash_random_token(const char *prefix, char *out, size_t outlen)
{
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  unsigned char raw[43];
  size_t plen = strlen(prefix);

  if (outlen < plen + sizeof(raw) + 1)
    return ERR_INTERNAL;
  if (RAND_bytes(raw, (int)sizeof(raw)) != 1)
    return ERR_IO;
  memcpy(out, prefix, plen);
  for (size_t i = 0; i < sizeof(raw); i++)
    out[plen + i] = alphabet[raw[i] & 63];
  out[plen + sizeof(raw)] = '\0';
  return 0;
}

int
hash_equal(const void *a, const void *b, size_t n)
{
  return CRYPTO_memcmp(a, b, n) == 0;
}
