/*
 * Generated accessors of the ERR_MAP table, and the struct err helpers.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

const char *
err_name(int code)
{
  switch (code) {
  case ERR_OK:
    return "OK";
#define ERR_NAME_GEN(name, c, status, msg) \
  case c:                                  \
    return #name;
    ERR_MAP(ERR_NAME_GEN)
#undef ERR_NAME_GEN
  }
  return "UNKNOWN";
}

const char *
err_str(int code)
{
  switch (code) {
  case ERR_OK:
    return "ok";
#define ERR_STR_GEN(name, c, status, msg) \
  case c:                                 \
    return msg;
    ERR_MAP(ERR_STR_GEN)
#undef ERR_STR_GEN
  }
  return "unknown error";
}

int
err_http_status(int code)
{
  switch (code) {
  case ERR_OK:
    return 200;
#define ERR_STATUS_GEN(name, c, status, msg) \
  case c:                                    \
    return status;
    ERR_MAP(ERR_STATUS_GEN)
#undef ERR_STATUS_GEN
  }
  return 500;
}

int
err_from_name(const char *name)
{
#define ERR_FROM_NAME_GEN(n, c, status, msg) \
  if (strcmp(name, #n) == 0)                 \
    return c;
  ERR_MAP(ERR_FROM_NAME_GEN)
#undef ERR_FROM_NAME_GEN
  return 0;
}

int
err_vset(struct err *e, int code, const char *fmt, va_list ap)
{
  if (e == NULL)
    return code;
  e->code = code;
  vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
  utf8_repair(e->msg);
  return code;
}

int
err_set(struct err *e, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  code = err_vset(e, code, fmt, ap);
  va_end(ap);
  return code;
}

int
err_prefix(struct err *e, const char *fmt, ...)
{
  char prefix[ERR_MSG_SIZE];
  char old[ERR_MSG_SIZE];
  va_list ap;

  if (e == NULL)
    return ERR_INTERNAL;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof(prefix), fmt, ap);
  va_end(ap);
  memcpy(old, e->msg, sizeof(old));
  /* Bounded precisions keep the result within ERR_MSG_SIZE. */
  snprintf(e->msg, sizeof(e->msg), "%.96s: %.157s", prefix, old);
  utf8_repair(e->msg);
  return e->code;
}

int
err_recode(struct err *e, int code)
{
  if (e != NULL)
    e->code = code;
  return code;
}

void
err_clear(struct err *e)
{
  if (e == NULL)
    return;
  e->code = 0;
  e->msg[0] = '\0';
}

const char *
err_msg(const struct err *e)
{
  if (e == NULL)
    return "";
  if (e->msg[0] != '\0')
    return e->msg;
  return err_str(e->code);
}
