/*
 * An intrusive, circular, doubly linked list, like libuv's queue and the
 * Linux kernel's list_head.  The links live inside the element, so
 * adding and removing allocate nothing, removal is O(1) without a walk,
 * and one element can sit in several lists through several links.
 *
 *   struct job {
 *     int id;
 *     struct list link;           // in struct site's jobs
 *   };
 *   struct site {
 *     struct list jobs;           // of struct job, by link
 *   };
 *
 *   list_init(&site->jobs);
 *   list_insert_tail(&site->jobs, &job->link);
 *   LIST_FOREACH(q, &site->jobs) {
 *     struct job *j = LIST_ENTRY(q, struct job, link);
 *     ...
 *   }
 *   list_remove(&job->link);
 *
 * A head is a struct list whose element is never read; an empty list is
 * a head linked to itself.  Heads and links must not move in memory
 * while linked (the neighbours point at them).  The list owns nothing:
 * freeing elements is the caller's, usually by taking each one off with
 * list_remove() first.  Not thread-safe.
 */
#ifndef TENBIN_UTIL_LIST_H
#define TENBIN_UTIL_LIST_H

#include <stddef.h>

struct list {
  struct list *next;
  struct list *prev;
};

/* The element holding link q: type is the element's struct, member the
 * name of q in it. */
#define LIST_ENTRY(q, type, member) \
  ((type *)(void *)((char *)(q) - offsetof(type, member)))

/* Walk h front to back with q (a struct list *); the body must not
 * remove q. */
#define LIST_FOREACH(q, h) for ((q) = (h)->next; (q) != (h); (q) = (q)->next)

/* The same, and the body may remove (and free) q: tmp holds the next. */
#define LIST_FOREACH_SAFE(q, tmp, h)                        \
  for ((q) = (h)->next, (tmp) = (q)->next; (q) != (h);      \
       (q) = (tmp), (tmp) = (q)->next)

/* An empty list (or an unlinked element, see list_remove). */
static inline void
list_init(struct list *h)
{
  h->next = h;
  h->prev = h;
}

/* Whether h holds no element (for a link: whether it is unlinked). */
static inline int
list_empty(const struct list *h)
{
  return h->next == h;
}

/* The first element's link, or NULL when h is empty. */
static inline struct list *
list_first(const struct list *h)
{
  return list_empty(h) ? NULL : h->next;
}

/* Link n (not in a list) at the back of h. */
static inline void
list_insert_tail(struct list *h, struct list *n)
{
  n->next = h;
  n->prev = h->prev;
  h->prev->next = n;
  h->prev = n;
}

/* Link n (not in a list) at the front of h. */
static inline void
list_insert_head(struct list *h, struct list *n)
{
  n->next = h->next;
  n->prev = h;
  h->next->prev = n;
  h->next = n;
}

/* Unlink n from its list and leave it empty, so that removing it again,
 * or asking list_empty(n), is safe. */
static inline void
list_remove(struct list *n)
{
  n->prev->next = n->next;
  n->next->prev = n->prev;
  list_init(n);
}

/* Move every element of from, in order, to the back of to; from is left
 * empty.  It lets a consumer take a whole batch before running code that
 * may add to the list again. */
static inline void
list_move(struct list *from, struct list *to)
{
  if (list_empty(from))
    return;
  from->next->prev = to->prev;
  to->prev->next = from->next;
  from->prev->next = to;
  to->prev = from->prev;
  list_init(from);
}

#endif
