/*
 * The cache of large freed blocks (spare.h): a few slots under a mutex.
 */
#include "spare.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "alloc.h"

/* An agent has a handful of batches in flight: more slots than that
 * would only hold memory. */
#define SPARE_SLOTS 8

struct slot {
  void *p;
  size_t size;
  uint64_t since_ms;
  uint64_t seq;     /* order of the frees: the higher, the newer */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot slots[SPARE_SLOTS];
static size_t nslots, kept, max_kept;
static uint64_t frees;

static uint64_t
now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Slot i out of the table (mu held); its block is the caller's. */
static void *
slot_take(size_t i)
{
  void *p = slots[i].p;

  kept -= slots[i].size;
  slots[i] = slots[--nslots];
  return p;
}

void
spare_enable(size_t max_bytes)
{
  pthread_mutex_lock(&mu);
  max_kept = max_bytes;
  pthread_mutex_unlock(&mu);
  if (max_bytes == 0)
    spare_trim(0, 0);
}

/* Whether a block of size serves a need without pinning much more. */
static int
fits(size_t size, size_t need)
{
  return size >= need && size <= 2 * need + SPARE_MIN;
}

void *
spare_alloc(size_t need, size_t *got)
{
  void *p = NULL;
  size_t size = 0;

  if (need >= SPARE_MIN) {
    size_t pick = SIZE_MAX;

    pthread_mutex_lock(&mu);
    /* The smallest block that fits; else the largest, which realloc
     * resizes in place or moves by remapping: its pages, already
     * faulted in, come along either way.  So the cache never holds
     * blocks of a size no longer asked for. */
    for (size_t i = 0; i < nslots; i++) {
      if (pick == SIZE_MAX)
        pick = i;
      else if (fits(slots[i].size, need)
                   ? !fits(slots[pick].size, need) ||
                         slots[i].size < slots[pick].size
                   : !fits(slots[pick].size, need) &&
                         slots[i].size > slots[pick].size)
        pick = i;
    }
    if (pick != SIZE_MAX) {
      size = slots[pick].size;
      p = slot_take(pick);
    }
    pthread_mutex_unlock(&mu);
  }
  if (p == NULL)
    p = xmalloc(need);
  else if (!fits(size, need))
    p = xrealloc(p, need);
  if (got != NULL)
    *got = malloc_usable_size(p);
  return p;
}

void
spare_free(void *p)
{
  size_t size;

  if (p == NULL)
    return;
  size = malloc_usable_size(p);
  if (size >= SPARE_MIN) {
    pthread_mutex_lock(&mu);
    if (nslots < SPARE_SLOTS && kept <= max_kept &&
        size <= max_kept - kept) {
      slots[nslots].p = p;
      slots[nslots].size = size;
      slots[nslots].since_ms = now_ms();
      slots[nslots].seq = ++frees;
      nslots++;
      kept += size;
      p = NULL;
    }
    pthread_mutex_unlock(&mu);
  }
  free(p);
}

/* Whether slot i is among the newest blocks that fit in keep_bytes
 * (mu held). */
static int
among_newest(size_t i, size_t keep_bytes)
{
  size_t newer = slots[i].size;

  for (size_t j = 0; j < nslots; j++)
    if (slots[j].seq > slots[i].seq)
      newer += slots[j].size;
  return newer <= keep_bytes;
}

void
spare_trim(unsigned idle_ms, size_t keep_bytes)
{
  void *gone[SPARE_SLOTS];
  int drop[SPARE_SLOTS];
  size_t ngone = 0;
  uint64_t now = now_ms();

  pthread_mutex_lock(&mu);
  /* Decided before any slot moves: slot_take reorders the table. */
  for (size_t i = 0; i < nslots; i++)
    drop[i] = now - slots[i].since_ms >= idle_ms &&
              !among_newest(i, keep_bytes);
  for (size_t i = nslots; i-- > 0;)
    if (drop[i])
      gone[ngone++] = slot_take(i);
  pthread_mutex_unlock(&mu);
  for (size_t i = 0; i < ngone; i++)
    free(gone[i]);
}

size_t
spare_bytes(void)
{
  size_t n;

  pthread_mutex_lock(&mu);
  n = kept;
  pthread_mutex_unlock(&mu);
  return n;
}
