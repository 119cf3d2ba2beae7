/*
 * The one error table of tenbin (STYLE.md rule 3).
 *
 * Every fallible function returns 0 on success or a negative code from
 * ERR_MAP.  The table gives each code its name, its HTTP status and a
 * default message, so the REST layer never invents a mapping of its own.
 * Codes are append-only: never renumber or remove one.
 *
 * Details travel in a caller-owned struct err (curl's CURL_ERROR_SIZE
 * buffer): the code plus a message such as "field 'gpus': must be >= 0".
 * Every function that takes a struct err * accepts NULL there.
 */
#ifndef TENBIN_UTIL_ERR_H
#define TENBIN_UTIL_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define WARN_UNUSED __attribute__((warn_unused_result))
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

/* XX(name, code, http status, default message) */
#define ERR_MAP(XX)                                                         \
  XX(NOMEM, -1, 500, "out of memory")                                       \
  XX(INVALID, -2, 400, "invalid request")                                   \
  XX(NOT_FOUND, -3, 404, "not found")                                       \
  XX(CONFLICT, -4, 409, "conflict")                                         \
  XX(UNPROCESSABLE, -5, 422, "request cannot be satisfied")                 \
  XX(TOO_LARGE, -6, 413, "too large")                                       \
  XX(UNAUTHORIZED, -7, 401, "missing or invalid token")                     \
  XX(FORBIDDEN, -8, 403, "not allowed")                                     \
  XX(IO, -9, 500, "i/o error")                                              \
  XX(DB, -10, 500, "database error")                                        \
  XX(UNAVAILABLE, -11, 503, "unavailable")                                  \
  XX(INTERNAL, -12, 500, "internal error")                                  \
  XX(METHOD, -13, 405, "method not allowed")                                \
  XX(TIMEOUT, -14, 504, "timed out")                                        \
  XX(CONFIG, -15, 500, "bad configuration")                                 \
  XX(SITE, -16, 502, "site error")                                          \
  XX(BAD_STATE, -17, 409, "not allowed in the current state")              \
  XX(OVER_BUDGET, -18, 402, "over budget")

enum err_code {
  ERR_OK = 0,
#define ERR_ENUM_GEN(name, code, status, msg) ERR_##name = (code),
  ERR_MAP(ERR_ENUM_GEN)
#undef ERR_ENUM_GEN
};

#define ERR_MSG_SIZE 256

struct err {
  int code;               /* 0 or an ERR_* code */
  char msg[ERR_MSG_SIZE]; /* lowercase, no full stop, subject quoted */
};

/* Name of a code ("NOT_FOUND"); "UNKNOWN" for a code not in the table. */
const char *err_name(int code);
/* Default message of a code. */
const char *err_str(int code);
/* HTTP status for a code; 500 for one not in the table, 200 for 0. */
int err_http_status(int code);
/* The code whose name (err_name) is name, or 0 when none is ("OK" too):
 * how a peer's error object is read back. */
int err_from_name(const char *name);

/*
 * Record code and a formatted message into e (which may be NULL) and return
 * code, so callers can write: return err_set(e, ERR_INVALID, "...", ...).
 * Messages end up in JSON: a character cut by the message's size or by a
 * precision ("%.100s") leaves '?' bytes, never invalid UTF-8 (the same
 * for err_prefix).
 */
int err_set(struct err *e, int code, const char *fmt, ...) PRINTF_LIKE(3, 4);
/* err_set with a va_list, for functions that take a format themselves;
 * ap is consumed. */
int err_vset(struct err *e, int code, const char *fmt, va_list ap)
    PRINTF_LIKE(3, 0);
/* Prefix e->msg with "prefix: " (for nested field names); returns e->code. */
int err_prefix(struct err *e, const char *fmt, ...) PRINTF_LIKE(2, 3);
/* Give e (which may be NULL) code, keeping its message, and return code:
 * a field helper's ERR_INVALID becomes the ERR_CONFIG of the config file
 * it was reading. */
int err_recode(struct err *e, int code);
/* Reset e to OK with an empty message. */
void err_clear(struct err *e);
/* e->msg, or the code's default message when e->msg is empty. */
const char *err_msg(const struct err *e);

#endif
