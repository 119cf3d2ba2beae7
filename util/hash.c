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
hash_sha256_hex(const void *data, size_t len, char out[65])
{
  static const char hex[] = "0123456789abcdef";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;

  EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
  for (unsigned int i = 0; i < mdlen && i < 32; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[64] = '\0';
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
