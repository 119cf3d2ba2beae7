/*
 * The service-account JWT bearer flow (gcp_auth.h), as Google documents
 * it: JWT = b64url(header) "." b64url(claims) "." b64url(RS256 of the
 * first two), b64url without padding; header {"alg":"RS256","typ":"JWT",
 * "kid":KEY_ID}, claims {"iss":EMAIL,"scope":SCOPE,"aud":TOKEN_URI,
 * "iat":NOW,"exp":NOW+3600}; the body grant_type=jwt-bearer and the
 * assertion.
 */
#include "adapters/gcp_auth.h"

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <string.h>

#include "adapters/form.h"
#include "util/alloc.h"
#include "util/jsonx.h"

/* A key file is a few KiB; more is not one. */
#define GCP_KEY_MAX (64 * 1024)

struct gcp_key {
  char *email;
  char *key_id;
  char *token_uri;
  char *project;
  EVP_PKEY *pkey;
};

void
gcp_key_free(struct gcp_key *k)
{
  if (k == NULL)
    return;
  free(k->email);
  free(k->key_id);
  free(k->token_uri);
  free(k->project);
  EVP_PKEY_free(k->pkey);
  free(k);
}

const char *
gcp_key_token_uri(const struct gcp_key *k)
{
  return k->token_uri;
}

const char *
gcp_key_project(const struct gcp_key *k)
{
  return k->project;
}

/* obj[name], a non-empty string, copied into *out. */
static int
field(const json_t *obj, const char *name, char **out, struct err *e)
{
  const char *v = jsonx_str(obj, name);

  if (v == NULL || v[0] == '\0')
    return err_set(e, ERR_INVALID, "service-account key: field '%s': "
                   "required, a string", name);
  *out = xstrdup(v);
  return 0;
}

int
gcp_key_load(const char *json, size_t len, struct gcp_key **out,
             struct err *e)
{
  struct gcp_key *k = xcalloc(1, sizeof(*k));
  json_t *obj = NULL;
  const char *type, *pem;
  BIO *bio = NULL;
  int rc;

  *out = NULL;
  if (len > GCP_KEY_MAX) {
    rc = err_set(e, ERR_INVALID, "service-account key: larger than %d "
                 "bytes", GCP_KEY_MAX);
    goto out;
  }
  rc = jsonx_parse_object(json, len, &obj, e);
  if (rc < 0) {
    err_prefix(e, "service-account key");
    goto out;
  }
  type = jsonx_str(obj, "type");
  if (type == NULL || strcmp(type, "service_account") != 0) {
    rc = err_set(e, ERR_INVALID, "service-account key: field 'type': "
                 "must be \"service_account\"");
    goto out;
  }
  rc = field(obj, "client_email", &k->email, e);
  if (rc == 0)
    rc = field(obj, "private_key_id", &k->key_id, e);
  if (rc == 0)
    rc = field(obj, "token_uri", &k->token_uri, e);
  if (rc == 0)
    rc = field(obj, "project_id", &k->project, e);
  if (rc < 0)
    goto out;
  if (strncmp(k->token_uri, "https://", 8) != 0 &&
      strncmp(k->token_uri, "http://", 7) != 0) {
    rc = err_set(e, ERR_INVALID, "service-account key: field 'token_uri': "
                 "must be an http or https URL");
    goto out;
  }
  pem = jsonx_str(obj, "private_key");
  if (pem != NULL)
    bio = BIO_new_mem_buf(pem, -1);
  if (bio != NULL)
    k->pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
  if (k->pkey == NULL || EVP_PKEY_get_base_id(k->pkey) != EVP_PKEY_RSA) {
    rc = err_set(e, ERR_INVALID, "service-account key: field "
                 "'private_key': not an RSA private key in PEM");
    goto out;
  }
  *out = k;
  k = NULL;
out:
  BIO_free(bio);
  json_decref(obj);
  gcp_key_free(k);
  return rc;
}

/* base64url of data without padding, appended to out. */
static int
b64url(struct buf *out, const unsigned char *data, size_t len)
{
  static const char abc[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  int rc = 0;

  for (size_t i = 0; rc == 0 && i < len; i += 3) {
    uint32_t v = (uint32_t)data[i] << 16;
    char q[4];
    size_t n = len - i >= 3 ? 4 : len - i + 1;

    if (i + 1 < len)
      v |= (uint32_t)data[i + 1] << 8;
    if (i + 2 < len)
      v |= data[i + 2];
    q[0] = abc[v >> 18 & 63];
    q[1] = abc[v >> 12 & 63];
    q[2] = abc[v >> 6 & 63];
    q[3] = abc[v & 63];
    rc = buf_add(out, q, n);
  }
  return rc;
}

/* The compact JSON of obj (stolen), base64url-encoded, appended. */
static int
b64url_json(struct buf *out, json_t *obj)
{
  char *text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
  int rc = text != NULL ? b64url(out, (unsigned char *)text, strlen(text))
                        : ERR_NOMEM;

  free(text);
  json_decref(obj);
  return rc;
}

int
gcp_jwt(const struct gcp_key *k, int64_t now_s, const char *scope,
        struct buf *out, struct err *e)
{
  size_t start = out->len, siglen = 0;
  unsigned char *sig = NULL;
  EVP_MD_CTX *md = NULL;
  int rc;

  rc = b64url_json(out, json_pack("{s:s, s:s, s:s}", "alg", "RS256", "typ",
                                  "JWT", "kid", k->key_id));
  if (rc == 0)
    rc = buf_adds(out, ".");
  if (rc == 0)
    rc = b64url_json(out, json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss",
                                    k->email, "scope", scope, "aud",
                                    k->token_uri, "iat", (json_int_t)now_s,
                                    "exp",
                                    (json_int_t)(now_s + GCP_JWT_TTL_S)));
  if (rc < 0) {
    rc = err_set(e, ERR_TOO_LARGE, "service-account JWT too large");
    goto out;
  }
  md = EVP_MD_CTX_new();
  if (md == NULL ||
      EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k->pkey) != 1 ||
      EVP_DigestSign(md, NULL, &siglen, (unsigned char *)out->data + start,
                     out->len - start) != 1) {
    rc = err_set(e, ERR_INTERNAL, "cannot sign the service-account JWT");
    goto out;
  }
  sig = xmalloc(siglen);
  if (EVP_DigestSign(md, sig, &siglen, (unsigned char *)out->data + start,
                     out->len - start) != 1) {
    rc = err_set(e, ERR_INTERNAL, "cannot sign the service-account JWT");
    goto out;
  }
  rc = buf_adds(out, ".");
  if (rc == 0)
    rc = b64url(out, sig, siglen);
  if (rc < 0)
    rc = err_set(e, ERR_TOO_LARGE, "service-account JWT too large");
out:
  EVP_MD_CTX_free(md);
  free(sig);
  return rc;
}

int
gcp_token_request(const struct gcp_key *k, int64_t now_s, const char *scope,
                  struct buf *out, struct err *e)
{
  int rc = form_add(out, "grant_type",
                    "urn:ietf:params:oauth:grant-type:jwt-bearer");

  if (rc == 0)
    rc = buf_adds(out, "&assertion=");
  if (rc < 0)
    return err_set(e, ERR_TOO_LARGE, "token request too large");
  /* a JWT is base64url and dots: nothing in it needs encoding */
  return gcp_jwt(k, now_s, scope, out, e);
}
