/*
 * The client-credentials token request (azure_auth.h), as Microsoft
 * documents it: POST {login}/{tenant}/oauth2/v2.0/token with
 * client_id, scope, client_secret and grant_type=client_credentials.
 */
#include "adapters/azure_auth.h"

#include <ctype.h>
#include <string.h>

#include "adapters/form.h"

/* A tenant is a GUID or a domain: letters, digits, '-' and '.', which a
 * URL path carries as they are. */
static int
tenant_ok(const char *t)
{
  size_t n = strlen(t);

  if (n == 0 || n > 253 || t[0] == '.' || t[0] == '-')
    return 0;
  for (; *t; t++) {
    if (!isalnum((unsigned char)*t) && *t != '-' && *t != '.')
      return 0;
  }
  return 1;
}

int
azure_token_url(const char *login, const char *tenant, struct buf *out,
                struct err *e)
{
  if (!tenant_ok(tenant))
    return err_set(e, ERR_INVALID, "field 'tenant': '%.64s' is not a "
                   "tenant id or domain", tenant);
  if (buf_addf(out, "%s/%s/oauth2/v2.0/token", login, tenant) < 0)
    return err_set(e, ERR_TOO_LARGE, "token URL too long");
  return 0;
}

int
azure_token_request(const char *client_id, const char *secret,
                    const char *scope, struct buf *out)
{
  int rc = form_add(out, "client_id", client_id);

  if (rc == 0)
    rc = form_add(out, "scope", scope);
  if (rc == 0)
    rc = form_add(out, "client_secret", secret);
  if (rc == 0)
    rc = form_add(out, "grant_type", "client_credentials");
  return rc;
}
