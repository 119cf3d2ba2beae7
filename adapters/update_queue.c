/*
 * The adapter-to-broker update queue (see update_queue.h).
 */
#include "adapters/update_queue.h"

#include <stdlib.h>

#include "util/alloc.h"

/* One queued update; owns its strings. */
struct adapter_queued {
  struct adapter_update u;
  char *strs[4];
  struct list link;
};

/* Free every update of h, leaving it empty. */
static void
queued_free_all(struct list *h)
{
  struct list *q;
  struct list *tmp;

  LIST_FOREACH_SAFE(q, tmp, h) {
    struct adapter_queued *u = LIST_ENTRY(q, struct adapter_queued, link);

    list_remove(q);
    for (int i = 0; i < 4; i++)
      free(u->strs[i]);
    free(u);
  }
}

static void
on_timer(uv_timer_t *t)
{
  struct adapter_queue *q = (struct adapter_queue *)t;
  struct adapter_update *batch;
  struct list taken;
  struct list *p;
  size_t n = q->n;
  size_t i = 0;

  if (list_empty(&q->queued) || q->closing)
    return;
  /* Detach first: the broker may submit or cancel from inside fn, which
   * queues updates for the next turn. */
  list_init(&taken);
  list_move(&q->queued, &taken);
  q->n = 0;
  batch = xmalloc(n * sizeof(*batch));
  LIST_FOREACH(p, &taken)
    batch[i++] = LIST_ENTRY(p, struct adapter_queued, link)->u;
  q->fn(q->fn_arg, batch, n);
  free(batch);
  queued_free_all(&taken);
}

void
adapter_queue_init(struct adapter_queue *q, uv_loop_t *loop,
                   adapter_update_fn fn, void *fn_arg)
{
  uv_timer_init(loop, &q->timer);
  q->fn = fn;
  q->fn_arg = fn_arg;
  list_init(&q->queued);
  q->n = 0;
  q->closing = 0;
}

void
adapter_queue_push(struct adapter_queue *q, const struct adapter_update *u)
{
  struct adapter_queued *e;

  if (q->closing)
    return;
  e = xcalloc(1, sizeof(*e));
  e->u = *u;
  e->strs[0] = xstrdup(u->remote_id);
  e->strs[1] = xstrdup(u->alloc);
  e->strs[2] = xstrdup(u->log_path);
  e->strs[3] = xstrdup(u->reason);
  e->u.remote_id = e->strs[0];
  e->u.alloc = e->strs[1];
  e->u.log_path = e->strs[2];
  e->u.reason = e->strs[3];
  list_insert_tail(&q->queued, &e->link);
  q->n++;
  /* Answers from a site arrive one by one; waiting a little lets the
   * broker record many of them with one commit (one fsync) instead of
   * one each.  A full batch goes at once. */
  if (q->n == 1)
    uv_timer_start(&q->timer, on_timer, ADAPTER_QUEUE_DELAY_MS, 0);
  else if (q->n == ADAPTER_QUEUE_BATCH)
    uv_timer_start(&q->timer, on_timer, 0, 0);
}

void
adapter_queue_close(struct adapter_queue *q, uv_close_cb close_cb)
{
  q->closing = 1;
  queued_free_all(&q->queued);
  q->n = 0;
  uv_close((uv_handle_t *)&q->timer, close_cb);
}
