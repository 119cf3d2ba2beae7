/*
 * Microsoft Entra's client-credentials flow, the way the azure site gets
 * the bearer token it calls Azure Resource Manager with: the token URL of
 * a tenant and the request's form body.  The answer is read by
 * oauth_token_parse (oauth.h).  No I/O.
 */
#ifndef TENBIN_ADAPTERS_AZURE_AUTH_H
#define TENBIN_ADAPTERS_AZURE_AUTH_H

#include "util/buf.h"
#include "util/err.h"

#define AZURE_LOGIN "https://login.microsoftonline.com"
#define AZURE_ARM_SCOPE "https://management.azure.com/.default"

/* login (AZURE_LOGIN, or a test's endpoint) + "/TENANT/oauth2/v2.0/token"
 * appended to out; ERR_INVALID naming field 'tenant' for a tenant that is
 * not a GUID or a domain name. */
int azure_token_url(const char *login, const char *tenant, struct buf *out,
                    struct err *e) WARN_UNUSED;
/* The form body asking for a token of scope with a client secret,
 * appended to out. */
int azure_token_request(const char *client_id, const char *secret,
                        const char *scope, struct buf *out) WARN_UNUSED;

#endif
