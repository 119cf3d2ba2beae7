/*
 * Tests for adapters/slurm_token.c: the JWT of a Slurm site from a file
 * (re-read when it changes) or from a command run on the loop (run again
 * when the token nears its exp claim or the site refuses it).  Commands
 * are real /bin/sh command lines; files live in a temp dir.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/slurm_token.h"
#include "util/alloc.h"

/* JWT payloads {"exp":4102444800} (year 2100) and {"exp":1000} (1970). */
#define JWT_LATE "hdr.eyJleHAiOjQxMDI0NDQ4MDB9.sig"
#define JWT_EXPIRED "hdr.eyJleHAiOjEwMDB9.sig"

struct fx {
  uv_loop_t loop;
  char dir[64];
  char path[128];
  struct slurm_token *t;
  int closed;
};

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));

  assert_int_equal(uv_loop_init(&f->loop), 0);
  snprintf(f->dir, sizeof(f->dir), "/tmp/tenbin-token.XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->path, sizeof(f->path), "%s/jwt", f->dir);
  *state = f;
  return 0;
}

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed = 1;
}

static int
teardown(void **state)
{
  struct fx *f = *state;
  char cmd[160];

  if (f->t != NULL)
    slurm_token_close(f->t, on_closed, f);
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  if (f->t != NULL)
    assert_true(f->closed);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
  assert_int_equal(system(cmd), 0);
  free(f);
  return 0;
}

static void
write_file(const char *path, const char *text)
{
  FILE *fp = fopen(path, "w");

  assert_non_null(fp);
  fputs(text, fp);
  assert_int_equal(fclose(fp), 0);
  assert_int_equal(chmod(path, 0600), 0);
}

/* Run the loop until the token is there or the command has failed. */
static const char *
wait_token(struct fx *f, struct err *why)
{
  const char *tok = NULL;

  for (int i = 0; i < 10000; i++) {
    memset(why, 0, sizeof(*why));
    tok = slurm_token_get(f->t, why);
    if (tok != NULL || strstr(err_msg(why), "not answered") == NULL)
      break;
    uv_run(&f->loop, UV_RUN_ONCE);
  }
  return tok;
}

static void
test_file_token_is_its_first_line_without_prefix(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  write_file(f->path, "SLURM_JWT=" JWT_LATE "\nsecond line\n");
  assert_int_equal(slurm_token_new(&f->loop, f->path, NULL, &f->t, &e), 0);
  assert_string_equal(slurm_token_get(f->t, &e), JWT_LATE);
}

static void
test_changed_file_is_read_again_when_the_site_refuses(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  write_file(f->path, "old-token\n");
  assert_int_equal(slurm_token_new(&f->loop, f->path, NULL, &f->t, &e), 0);
  assert_string_equal(slurm_token_get(f->t, &e), "old-token");
  write_file(f->path, "new-token-longer\n");
  slurm_token_refused(f->t);
  assert_string_equal(slurm_token_get(f->t, &e), "new-token-longer");
}

static void
test_missing_file_is_a_config_error_naming_it(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  assert_int_equal(slurm_token_new(&f->loop, f->path, NULL, &f->t, &e),
                   ERR_CONFIG);
  assert_null(f->t);
  assert_non_null(strstr(err_msg(&e), f->path));
}

static void
test_empty_file_is_refused(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  write_file(f->path, "\n\n");
  assert_int_equal(slurm_token_new(&f->loop, f->path, NULL, &f->t, &e),
                   ERR_CONFIG);
  assert_non_null(strstr(err_msg(&e), "empty"));
}

static void
test_file_others_may_read_is_refused(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  write_file(f->path, "tok\n");
  assert_int_equal(chmod(f->path, 0644), 0);
  assert_int_equal(slurm_token_new(&f->loop, f->path, NULL, &f->t, &e),
                   ERR_CONFIG);
  assert_non_null(strstr(err_msg(&e), "chmod 600"));
}

static void
test_file_and_command_together_are_refused(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  write_file(f->path, "x\n");
  assert_int_equal(slurm_token_new(&f->loop, f->path, "echo y", &f->t, &e),
                   ERR_CONFIG);
  assert_int_equal(slurm_token_new(&f->loop, NULL, NULL, &f->t, &e),
                   ERR_CONFIG);
}

static void
test_command_output_becomes_the_token(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  assert_int_equal(slurm_token_new(&f->loop, NULL,
                                   "printf 'SLURM_JWT=" JWT_LATE "\\n'",
                                   &f->t, &e),
                   0);
  assert_string_equal(wait_token(f, &e), JWT_LATE);
}

static void
test_failing_command_gives_no_token_and_says_why(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  assert_int_equal(
      slurm_token_new(&f->loop, NULL, "echo partial; exit 3", &f->t, &e), 0);
  assert_null(wait_token(f, &e));
  assert_int_equal(e.code, ERR_UNAVAILABLE);
  assert_non_null(strstr(err_msg(&e), "exit status 3"));
}

/* The command appends to a file per run, so runs can be counted. */
static int
runs(struct fx *f)
{
  char p[160];
  FILE *fp;
  int n = 0;
  int c;

  snprintf(p, sizeof(p), "%s/runs", f->dir);
  fp = fopen(p, "r");
  if (fp == NULL)
    return 0;
  while ((c = fgetc(fp)) != EOF)
    n += c == '\n';
  fclose(fp);
  return n;
}

static void
counting_command(struct fx *f, const char *jwt, char *out, size_t outsz)
{
  snprintf(out, outsz, "echo run >> '%s/runs'; echo '%s'", f->dir, jwt);
}

static void
test_fresh_minted_token_is_reused(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  char cmd[256];

  counting_command(f, JWT_LATE, cmd, sizeof(cmd));
  assert_int_equal(slurm_token_new(&f->loop, NULL, cmd, &f->t, &e), 0);
  assert_string_equal(wait_token(f, &e), JWT_LATE);
  for (int i = 0; i < 5; i++)
    assert_string_equal(slurm_token_get(f->t, &e), JWT_LATE);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(runs(f), 1);
}

static void
test_expiring_token_is_minted_again(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  char cmd[256];

  counting_command(f, JWT_EXPIRED, cmd, sizeof(cmd));
  assert_int_equal(slurm_token_new(&f->loop, NULL, cmd, &f->t, &e), 0);
  assert_string_equal(wait_token(f, &e), JWT_EXPIRED);
  /* Still handed out while the next one is minted. */
  assert_string_equal(slurm_token_get(f->t, &e), JWT_EXPIRED);
  while (runs(f) < 2) {
    (void)slurm_token_get(f->t, &e);
    uv_run(&f->loop, UV_RUN_ONCE);
  }
  assert_int_equal(runs(f), 2);
}

static void
test_close_ends_a_command_that_hangs(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  assert_int_equal(slurm_token_new(&f->loop, NULL, "exec sleep 600", &f->t,
                                   &e),
                   0);
  assert_null(slurm_token_get(f->t, &e));
  /* teardown closes it; uv_run returning proves nothing is left. */
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_file_token_is_its_first_line_without_prefix, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_changed_file_is_read_again_when_the_site_refuses, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_missing_file_is_a_config_error_naming_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_file_others_may_read_is_refused,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_empty_file_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          test_file_and_command_together_are_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_command_output_becomes_the_token,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_failing_command_gives_no_token_and_says_why, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fresh_minted_token_is_reused,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_expiring_token_is_minted_again,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_ends_a_command_that_hangs,
                                      setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
