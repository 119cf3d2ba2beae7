/*
 * The fixture of the unit tests that run in one libuv loop: a watchdog
 * that turns a hang into a failure (a bound, never a measurement), and
 * an http/server peer on 127.0.0.1 that the test answers for (a fake
 * slurmrestd, agent or API).  Include after <cmocka.h>.
 */
#ifndef TENBIN_TESTS_LOOP_PEER_H
#define TENBIN_TESTS_LOOP_PEER_H

#include <stdio.h>
#include <uv.h>

#include "http/server.h"

static inline void
loop_peer_on_watchdog(uv_timer_t *t)
{
  (void)t;
  fail_msg("watchdog: the test hung");
}

/* Arm t on loop for ms; unref'd, so it keeps no loop alive.  The
 * teardown closes it. */
static inline void
loop_peer_watchdog(uv_loop_t *loop, uv_timer_t *t, uint64_t ms)
{
  uv_timer_init(loop, t);
  uv_timer_start(t, loop_peer_on_watchdog, ms, 0);
  uv_unref((uv_handle_t *)t);
}

/* A server on loop answering with handler(req, arg), at most max_conns
 * connections at once, bodies up to 1 MiB; its URL
 * ("http://127.0.0.1:PORT" and suffix) into url. */
static inline struct http_server *
loop_peer_server(uv_loop_t *loop, http_handler_fn handler, void *arg,
                 unsigned max_conns, const char *suffix, char *url,
                 size_t urllen)
{
  struct http_server_config sc = {
      .host = "127.0.0.1",
      .max_body = 1 << 20,
      .max_connections = max_conns,
      .conn_timeout_s = 10,
      .handler = handler,
      .handler_arg = arg,
  };
  struct http_server *srv = NULL;
  struct err e = {0};

  if (http_server_start(loop, &sc, &srv, &e) < 0)
    fail_msg("server: %s", e.msg);
  snprintf(url, urllen, "http://127.0.0.1:%u%s",
           (unsigned)http_server_port(srv), suffix);
  return srv;
}

#endif
