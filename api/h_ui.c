/*
 * The dashboard's files (ui/), served without a token: the page itself
 * holds nothing, and every API call it makes carries the user's token,
 * so roles and project scopes apply exactly as on the API.
 *
 * Every answer carries a Content-Security-Policy that allows scripts,
 * styles and connections from tenbind only and no inline script: even a
 * bug that put a job's name into the page as markup could not run it.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "ui/ui.h"
#include "util/alloc.h"

static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

static void
add_headers(struct api_call *call)
{
  http_request_add_header(call->req, "Content-Security-Policy", csp);
  http_request_add_header(call->req, "X-Content-Type-Options", "nosniff");
  http_request_add_header(call->req, "Referrer-Policy", "no-referrer");
  /* A new tenbind may bring new files: the browser asks each time. */
  http_request_add_header(call->req, "Cache-Control", "no-cache");
}

static void
reply_asset(struct api_call *call, const char *name)
{
  const struct ui_asset *a = ui_asset_find(name);
  char *body;

  add_headers(call);
  if (a == NULL) {
    api__reply_errf(call, ERR_NOT_FOUND, "no dashboard file '%.100s'",
                    name);
    return;
  }
  /* http_respond() takes a malloc'd body; the assets are static. */
  body = xmalloc(a->len + 1);
  memcpy(body, a->data, a->len);
  api__reply_body(call, 200, a->type, body, a->len);
}

void
api__ui_redirect(struct api_call *call)
{
  add_headers(call);
  /* 308 keeps the method; relative pages resolve against "/ui/". */
  http_request_add_header(call->req, "Location", "/ui/");
  api__reply_body(call, 308, "text/plain; charset=utf-8", NULL, 0);
}

void
api__ui_index(struct api_call *call)
{
  reply_asset(call, "index.html");
}

void
api__ui_file(struct api_call *call)
{
  reply_asset(call, call->params[0]);
}
