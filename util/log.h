/*
 * Logging to stderr: one line per event, "2026-11-21T14:00:00.123Z level
 * message".  The level is process-wide configuration, set once in main.
 */
#ifndef TENBIN_UTIL_LOG_H
#define TENBIN_UTIL_LOG_H

#include "err.h"

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level level);
/* Parse "debug", "info", "warn" or "error"; ERR_INVALID otherwise. */
int log_parse_level(const char *s, enum log_level *out);
void log_msg(enum log_level level, const char *fmt, ...) PRINTF_LIKE(2, 3);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
