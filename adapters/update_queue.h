/*
 * Updates on their way from an adapter to the broker.
 *
 * An adapter never calls the broker back from inside a call the broker
 * made (submit, cancel, ...): it pushes the update here and the queue
 * delivers it from the loop, after that call has returned, at most
 * ADAPTER_QUEUE_DELAY_MS later.  Everything queued by then goes out in
 * one call of the update function, so the broker records a whole poll's
 * worth of changes, or a burst of submit answers, in one transaction.
 *
 * The struct is embedded in the adapter's own (libuv's caller-allocates
 * rule); its timer is one uv handle the adapter closes with
 * adapter_queue_close().
 */
#ifndef TENBIN_ADAPTERS_UPDATE_QUEUE_H
#define TENBIN_ADAPTERS_UPDATE_QUEUE_H

#include <stddef.h>
#include <uv.h>

#include "adapters/adapter.h"
#include "util/list.h"

/* An update waits at most this long for others to share its commit. */
#define ADAPTER_QUEUE_DELAY_MS 10
/* ... and no longer once this many are waiting. */
#define ADAPTER_QUEUE_BATCH 256

struct adapter_queued;

struct adapter_queue {
  /* private */
  uv_timer_t timer;
  adapter_update_fn fn;
  void *fn_arg;
  struct list queued; /* of struct adapter_queued, oldest first */
  size_t n;
  int closing;
};

/* Set q up to deliver to fn(fn_arg, ...) on loop.  timer.data is free
 * for the adapter's use. */
void adapter_queue_init(struct adapter_queue *q, uv_loop_t *loop,
                        adapter_update_fn fn, void *fn_arg);
/* Queue a copy of u (its strings are copied).  Ignored once closing. */
void adapter_queue_push(struct adapter_queue *q,
                        const struct adapter_update *u);
/* Drop anything not delivered and close the timer; close_cb as for
 * uv_close() on &q->timer. */
void adapter_queue_close(struct adapter_queue *q, uv_close_cb close_cb);

#endif
