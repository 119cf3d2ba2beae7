/*
 * Tests for util/list.h: elements come back in the order they were
 * linked, removal is O(1) from anywhere and safe twice, a whole list
 * moves at once, and the safe walk survives freeing as it goes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "util/list.h"

struct item {
  int id;
  struct list link;
};

/* The ids of h, front to back, into out (at most max); their count. */
static size_t
ids(const struct list *h, int *out, size_t max)
{
  const struct list *q;
  size_t n = 0;
  size_t k;

  LIST_FOREACH(q, h) {
    assert_true(n < max);
    out[n++] = LIST_ENTRY(q, const struct item, link)->id;
  }
  /* The back links agree with the front ones. */
  k = n;
  for (q = h->prev; q != h; q = q->prev) {
    assert_true(k > 0);
    assert_int_equal(LIST_ENTRY(q, const struct item, link)->id, out[--k]);
  }
  assert_int_equal(k, 0);
  return n;
}

static void
test_a_new_list_is_empty_and_has_no_first(void **state)
{
  struct list h;

  (void)state;
  list_init(&h);
  assert_true(list_empty(&h));
  assert_null(list_first(&h));
}

static void
test_tail_and_head_inserts_keep_their_order(void **state)
{
  struct item it[4] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}};
  int got[4];
  struct list h;

  (void)state;
  list_init(&h);
  list_insert_tail(&h, &it[1].link);
  list_insert_tail(&h, &it[2].link);
  list_insert_head(&h, &it[0].link);
  list_insert_tail(&h, &it[3].link);
  assert_false(list_empty(&h));
  assert_int_equal(ids(&h, got, 4), 4);
  assert_int_equal(got[0], 0);
  assert_int_equal(got[1], 1);
  assert_int_equal(got[2], 2);
  assert_int_equal(got[3], 3);
  assert_ptr_equal(list_first(&h), &it[0].link);
}

static void
test_remove_unlinks_from_anywhere_and_is_safe_twice(void **state)
{
  struct item it[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
  int got[3];
  struct list h;
  int i;

  (void)state;
  list_init(&h);
  for (i = 0; i < 3; i++)
    list_insert_tail(&h, &it[i].link);
  list_remove(&it[1].link);
  assert_true(list_empty(&it[1].link));
  list_remove(&it[1].link);
  assert_int_equal(ids(&h, got, 3), 2);
  assert_int_equal(got[0], 0);
  assert_int_equal(got[1], 2);
  list_remove(&it[0].link);
  list_remove(&it[2].link);
  assert_true(list_empty(&h));
  /* A removed element can be linked again. */
  list_insert_head(&h, &it[1].link);
  assert_int_equal(ids(&h, got, 3), 1);
  assert_int_equal(got[0], 1);
}

static void
test_move_appends_a_whole_list_and_empties_the_source(void **state)
{
  struct item it[5] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3},
                       {.id = 4}};
  struct list from;
  struct list to;
  int got[5];
  int i;

  (void)state;
  list_init(&from);
  list_init(&to);
  list_move(&from, &to);
  assert_true(list_empty(&to));
  list_insert_tail(&to, &it[0].link);
  for (i = 1; i < 5; i++)
    list_insert_tail(&from, &it[i].link);
  list_move(&from, &to);
  assert_true(list_empty(&from));
  assert_int_equal(ids(&to, got, 5), 5);
  for (i = 0; i < 5; i++)
    assert_int_equal(got[i], i);
  /* The emptied source works as a list again. */
  list_remove(&it[4].link);
  list_insert_tail(&from, &it[4].link);
  assert_int_equal(ids(&from, got, 5), 1);
  assert_int_equal(ids(&to, got, 5), 4);
}

static void
test_safe_walk_may_free_each_element(void **state)
{
  struct list *q;
  struct list *tmp;
  struct list h;
  int seen = 0;
  int i;

  (void)state;
  list_init(&h);
  for (i = 0; i < 10; i++) {
    struct item *it = calloc(1, sizeof(*it));

    assert_non_null(it);
    it->id = i;
    list_insert_tail(&h, &it->link);
  }
  LIST_FOREACH_SAFE(q, tmp, &h) {
    struct item *it = LIST_ENTRY(q, struct item, link);

    assert_int_equal(it->id, seen++);
    list_remove(q);
    free(it);
  }
  assert_int_equal(seen, 10);
  assert_true(list_empty(&h));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_a_new_list_is_empty_and_has_no_first),
    cmocka_unit_test(test_tail_and_head_inserts_keep_their_order),
    cmocka_unit_test(test_remove_unlinks_from_anywhere_and_is_safe_twice),
    cmocka_unit_test(
        test_move_appends_a_whole_list_and_empties_the_source),
    cmocka_unit_test(test_safe_walk_may_free_each_element),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
