/*
 * Tests for the agent's serve, publish and pull (agent/agent.h): two real
 * agents, a source A and a destination B, each on its own temporary
 * root, listen on 127.0.0.1 and run on the test's loop; the test talks to
 * them over HTTP as tenbind does (docs/SYNC.md "Agent REST API").  What
 * t13/t14 prove with processes and shell is proved here in one process,
 * so a failure points at the agent and ASan sees both sides.  A watchdog
 * turns a hang into a failure (a bound, never a measurement).  The batch
 * request parser, a pure function, is tested on its own.
 */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/client.h"
#include "agent/agent.h"
#include "agent/agent_int.h"
#include "loop_peer.h"
#include "seeded_bytes.h"
#include "util/alloc.h"
#include "util/fileio.h"

#define WATCHDOG_MS 100000u
#define TOKEN_A "token-of-agent-a-0123"
#define TOKEN_B "token-of-agent-b-0123"
#define TOKEN_BAD "not-the-token-of-any-agent"
#define MIB (1024 * 1024)
/* A pull waited for with ?wait_ms= answers within this. */
#define WAIT_MS 60000

enum { A = 0, B = 1 };

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  uv_timer_t nap;
  int napped;
  struct http_client *hc;
  char tmp[64];
  char root[2][128];
  char src[160];                /* A's dataset directory: ROOT/ds */
  struct agent *ag[2];
  uint16_t port[2];
  char url[2][64];
  int closed;
};

/* ---- fixture ---- */

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed++;
}

static void
start_agent(struct fx *fx, int who, unsigned parallel, size_t batch_bytes)
{
  struct agent_config c = {
      .root = fx->root[who],
      .host = "127.0.0.1",
      .port = fx->port[who], /* 0 the first time, the same one after */
      .token = who == A ? TOKEN_A : TOKEN_B,
      .parallel = parallel,
      .batch_bytes = batch_bytes,
      .draft_ms = -1,
  };
  struct err e = {0};

  if (agent_start(&fx->loop, &c, &fx->ag[who], &e) < 0)
    fail_msg("agent_start: %s", e.msg);
  fx->port[who] = agent_port(fx->ag[who]);
  snprintf(fx->url[who], sizeof(fx->url[who]), "http://127.0.0.1:%u",
           (unsigned)fx->port[who]);
}

/* Close an agent and run the loop until it has let go of everything. */
static void
stop_agent(struct fx *fx, int who)
{
  int want = fx->closed + 1;

  agent_close(fx->ag[who], on_closed, fx);
  fx->ag[who] = NULL;
  while (fx->closed < want)
    uv_run(&fx->loop, UV_RUN_ONCE);
}

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));
  struct err e = {0};

  snprintf(fx->tmp, sizeof(fx->tmp), "/tmp/test_agent.XXXXXX");
  assert_non_null(mkdtemp(fx->tmp));
  snprintf(fx->root[A], sizeof(fx->root[A]), "%s/a", fx->tmp);
  snprintf(fx->root[B], sizeof(fx->root[B]), "%s/b", fx->tmp);
  snprintf(fx->src, sizeof(fx->src), "%s/ds", fx->root[A]);
  assert_int_equal(mkdir(fx->root[A], 0755), 0);
  assert_int_equal(mkdir(fx->root[B], 0755), 0);
  assert_int_equal(mkdir(fx->src, 0755), 0);
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  uv_timer_init(&fx->loop, &fx->nap);
  if (http_client_new(&fx->loop, NULL, &fx->hc, &e) < 0)
    fail_msg("client: %s", e.msg);
  *state = fx;
  return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static int
teardown(void **state)
{
  struct fx *fx = *state;
  int want = 1;

  for (int i = 0; i < 2; i++)
    if (fx->ag[i] != NULL) {
      agent_close(fx->ag[i], on_closed, fx);
      want++;
    }
  http_client_close(fx->hc, on_closed, fx);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_close((uv_handle_t *)&fx->nap, NULL);
  while (fx->closed < want)
    uv_run(&fx->loop, UV_RUN_ONCE);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  nftw(fx->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(fx);
  return 0;
}

static void
on_nap(uv_timer_t *t)
{
  ((struct fx *)t->data)->napped = 1;
}

/* Let the agents run for ms. */
static void
nap(struct fx *fx, unsigned ms)
{
  fx->napped = 0;
  fx->nap.data = fx;
  uv_timer_start(&fx->nap, on_nap, ms, 0);
  while (!fx->napped)
    uv_run(&fx->loop, UV_RUN_ONCE);
}

/* ---- requests ---- */

struct answer {
  int done;
  int status;
  json_t *body;
};

static void
on_answer(void *arg, int rc, const struct http_client_response *resp,
          const struct err *e)
{
  struct answer *an = arg;

  if (rc < 0)
    fail_msg("no answer: %s", e->msg);
  an->status = resp->status;
  an->body = json_loadb(resp->body, resp->len, 0, NULL);
  an->done = 1;
}

/*
 * method path at agent `who` with token (NULL: that agent's) and body;
 * runs the loop until it answers.  Returns the status; *out is new (the
 * JSON answer, NULL when it is none).
 */
static int
call(struct fx *fx, int who, const char *method, const char *path,
     const char *token, const char *body, json_t **out)
{
  char url[512], auth[128];
  const char *headers[] = {auth, "Content-Type: application/json", NULL};
  struct http_client_request r = {
      .method = method,
      .url = url,
      .headers = headers,
      .body = body,
      .body_len = body != NULL ? strlen(body) : 0,
      .timeout_ms = WAIT_MS + 10000,
  };
  struct answer an = {0};
  struct err e = {0};

  snprintf(url, sizeof(url), "%s%s", fx->url[who], path);
  snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
           token != NULL ? token : who == A ? TOKEN_A : TOKEN_B);
  if (http_client_send(fx->hc, &r, on_answer, &an, &e) < 0)
    fail_msg("send: %s", e.msg);
  while (!an.done)
    uv_run(&fx->loop, UV_RUN_ONCE);
  if (out != NULL)
    *out = an.body;
  else
    json_decref(an.body);
  return an.status;
}

static const char *
str_of(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));

  if (s == NULL)
    fail_msg("no string '%s' in the answer", key);
  return s;
}

static json_int_t
int_of(json_t *o, const char *key)
{
  return json_integer_value(json_object_get(o, key));
}

/* Publish A's "ds"; the version id into v (65 bytes); returns the
 * status. */
static int
publish(struct fx *fx, char *v)
{
  json_t *o = NULL;
  int status = call(fx, A, "POST", "/v1/datasets/ds/versions", NULL,
                    "{\"path\":\"ds\"}", &o);

  assert_non_null(o);
  snprintf(v, 65, "%s", str_of(o, "version"));
  json_decref(o);
  return status;
}

/* Start B's pull of v from A (source token src_token); returns the
 * status, *out the pull status (new). */
static int
put_pull(struct fx *fx, const char *v, const char *src_token,
         const char *extra, json_t **out)
{
  char path[256], body[512];

  snprintf(path, sizeof(path), "/v1/datasets/ds/pulls/%s", v);
  snprintf(body, sizeof(body),
           "{\"source\":{\"url\":\"%s\",\"token\":\"%s\"}%s}", fx->url[A],
           src_token, extra != NULL ? extra : "");
  return call(fx, B, "PUT", path, NULL, body, out);
}

/* B's pull status of v once the pull is no longer running (new). */
static json_t *
pull_wait(struct fx *fx, const char *v)
{
  char path[256];
  json_t *o = NULL;

  snprintf(path, sizeof(path), "/v1/datasets/ds/pulls/%s?wait_ms=%d", v,
           WAIT_MS);
  assert_int_equal(call(fx, B, "GET", path, NULL, NULL, &o), 200);
  assert_non_null(o);
  return o;
}

/* Pull v into B and wait for the end; the final status (new). */
static json_t *
pull(struct fx *fx, const char *v)
{
  int status = put_pull(fx, v, TOKEN_A, NULL, NULL);

  assert_true(status == 200 || status == 202);
  return pull_wait(fx, v);
}

/* Whether B lists v as a complete version. */
static int
b_holds(struct fx *fx, const char *v)
{
  json_t *o = NULL, *vs, *it;
  size_t i;
  int found = 0;

  assert_int_equal(call(fx, B, "GET", "/v1/datasets/ds/versions", NULL,
                        NULL, &o), 200);
  vs = json_object_get(o, "versions");
  json_array_foreach(vs, i, it)
    if (strcmp(str_of(it, "version"), v) == 0)
      found = 1;
  json_decref(o);
  return found;
}

/* ---- trees ---- */

static void
put_file(struct fx *fx, const char *rel, size_t size, uint64_t seed,
         mode_t mode, time_t mtime)
{
  char path[512];
  uint8_t *data = xmalloc(size);
  struct timespec ts[2] = {{mtime, 123456789}, {mtime, 123456789}};
  int fd;

  snprintf(path, sizeof(path), "%s/%s", fx->src, rel);
  fill_random(data, size, seed);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, size), (ssize_t)size);
  assert_int_equal(close(fd), 0);
  assert_int_equal(chmod(path, mode), 0);
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
  free(data);
}

/* Overwrite n bytes at off of the source file rel, keeping its size. */
static void
edit_file(struct fx *fx, const char *rel, off_t off, const char *bytes)
{
  char path[512];
  int fd;

  snprintf(path, sizeof(path), "%s/%s", fx->src, rel);
  fd = open(path, O_WRONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, bytes, strlen(bytes), off),
                   (ssize_t)strlen(bytes));
  assert_int_equal(close(fd), 0);
}

static void
make_dir(struct fx *fx, const char *rel, mode_t mode)
{
  char path[512];

  snprintf(path, sizeof(path), "%s/%s", fx->src, rel);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(chmod(path, mode), 0);
}

/* A tree with files of several modes and mtimes, a file of several
 * segments, a symlink and an empty directory. */
static void
make_tree(struct fx *fx)
{
  char path[512];

  make_dir(fx, "sub", 0750);
  make_dir(fx, "sub/empty", 0700);
  put_file(fx, "big.bin", 20 * MIB, 1, 0640, 1600000000);
  put_file(fx, "run.sh", 3000, 2, 0755, 1500000000);
  put_file(fx, "sub/small.txt", 10, 3, 0600, 1700000000);
  put_file(fx, "sub/zero", 0, 4, 0444, 1400000000);
  snprintf(path, sizeof(path), "%s/link", fx->src);
  assert_int_equal(symlink("sub/small.txt", path), 0);
}

static int
read_whole(const char *path, char **out, size_t *len)
{
  struct err e = {0};

  return file_read(path, 64 * MIB, out, len, &e);
}

/* Fail unless b holds exactly what a holds: names, types, modes,
 * files' mtimes and bytes, links' targets. */
static void
same_tree(const char *a, const char *b)
{
  DIR *d = opendir(a);
  struct dirent *de;
  size_t na = 0, nb = 0;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    char pa[1024], pb[1024];
    struct stat sa, sb;

    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    na++;
    snprintf(pa, sizeof(pa), "%s/%s", a, de->d_name);
    snprintf(pb, sizeof(pb), "%s/%s", b, de->d_name);
    assert_int_equal(lstat(pa, &sa), 0);
    if (lstat(pb, &sb) < 0)
      fail_msg("'%s' is missing at the destination", pb);
    assert_int_equal(sa.st_mode & S_IFMT, sb.st_mode & S_IFMT);
    if (S_ISLNK(sa.st_mode)) {
      char ta[256] = {0}, tb[256] = {0};

      assert_true(readlink(pa, ta, sizeof(ta) - 1) > 0);
      assert_true(readlink(pb, tb, sizeof(tb) - 1) > 0);
      assert_string_equal(ta, tb);
      continue;
    }
    if ((sa.st_mode & 07777) != (sb.st_mode & 07777))
      fail_msg("'%s' has mode %o, not %o", pb, sb.st_mode & 07777,
               sa.st_mode & 07777);
    if (S_ISDIR(sa.st_mode)) {
      same_tree(pa, pb);
    } else {
      char *ca = NULL, *cb = NULL;
      size_t la = 0, lb = 0;

      assert_int_equal(sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
      assert_int_equal(sa.st_mtim.tv_nsec, sb.st_mtim.tv_nsec);
      assert_int_equal(read_whole(pa, &ca, &la), 0);
      assert_int_equal(read_whole(pb, &cb, &lb), 0);
      assert_int_equal(la, lb);
      if (memcmp(ca, cb, la) != 0)
        fail_msg("'%s' differs from its source", pb);
      free(ca);
      free(cb);
    }
  }
  closedir(d);
  d = opendir(b);
  assert_non_null(d);
  while ((de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      nb++;
  closedir(d);
  if (na != nb)
    fail_msg("'%s' holds %zu entries, its source %zu", b, nb, na);
}

/* A sparse source file rel of size bytes: holes but for 1 MiB of data
 * at each of off[0..n), an unaligned one among them. */
static void
put_sparse(struct fx *fx, const char *rel, off_t size, const off_t *off,
           size_t n, uint64_t seed, time_t mtime)
{
  char path[512];
  uint8_t *data = xmalloc(MIB);
  struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
  int fd;

  snprintf(path, sizeof(path), "%s/%s", fx->src, rel);
  fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, size), 0);
  for (size_t i = 0; i < n; i++) {
    fill_random(data, MIB, seed + i);
    assert_int_equal(pwrite(fd, data, MIB, off[i]), MIB);
  }
  assert_int_equal(close(fd), 0);
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
  free(data);
}

/* Fail unless the replica b of the source file a has its size and bytes
 * and takes on disk about what a does (its data), not its size. */
static void
same_sparse(const char *a, const char *b)
{
  struct stat sa, sb;
  char *ba = xmalloc(MIB), *bb = xmalloc(MIB);
  int fa = open(a, O_RDONLY | O_CLOEXEC), fb = open(b, O_RDONLY | O_CLOEXEC);

  assert_true(fa >= 0 && fb >= 0);
  assert_int_equal(fstat(fa, &sa), 0);
  assert_int_equal(fstat(fb, &sb), 0);
  assert_int_equal(sa.st_size, sb.st_size);
  if ((uint64_t)sb.st_blocks * 512 > (uint64_t)sa.st_blocks * 512 + MIB)
    fail_msg("'%s' takes %llu bytes on disk, its source %llu", b,
             (unsigned long long)sb.st_blocks * 512,
             (unsigned long long)sa.st_blocks * 512);
  for (off_t at = 0; at < sa.st_size; at += MIB) {
    ssize_t na = pread(fa, ba, MIB, at), nb = pread(fb, bb, MIB, at);

    assert_true(na > 0);
    assert_int_equal(na, nb);
    if (memcmp(ba, bb, (size_t)na) != 0)
      fail_msg("'%s' differs from its source at %lld", b, (long long)at);
  }
  close(fa);
  close(fb);
  free(ba);
  free(bb);
}

static json_int_t
served_bytes(struct fx *fx)
{
  json_t *o = NULL;
  json_int_t n;

  assert_int_equal(call(fx, A, "GET", "/healthz", NULL, NULL, &o), 200);
  n = int_of(o, "served_bytes");
  json_decref(o);
  return n;
}

/* ---- tests ---- */

static void
test_a_publish_gives_the_version_a_fresh_agent_finds_again(void **state)
{
  struct fx *fx = *state;
  char v1[65], v2[65], v3[65];

  make_tree(fx);
  start_agent(fx, A, 0, 0);
  assert_int_equal(publish(fx, v1), 201);
  /* The same tree again, from the decoded manifest and from a rescan by
   * an agent that kept nothing but its store. */
  assert_int_equal(publish(fx, v2), 200);
  stop_agent(fx, A);
  start_agent(fx, A, 0, 0);
  assert_int_equal(publish(fx, v3), 200);
  assert_string_equal(v1, v2);
  assert_string_equal(v1, v3);
  /* A change of content is a new version. */
  edit_file(fx, "run.sh", 10, "x");
  assert_int_equal(publish(fx, v3), 201);
  assert_string_not_equal(v1, v3);
}

static void
test_a_pull_replicates_files_modes_mtimes_a_link_and_an_empty_dir(
    void **state)
{
  struct fx *fx = *state;
  char v[65];
  json_t *st;

  make_tree(fx);
  start_agent(fx, A, 0, 0);
  start_agent(fx, B, 0, 0);
  assert_int_equal(publish(fx, v), 201);
  st = pull(fx, v);
  assert_string_equal(str_of(st, "state"), "complete");
  assert_int_equal(int_of(st, "bytes_done"), int_of(st, "bytes_total"));
  assert_int_equal(int_of(st, "bytes_total"), 20 * MIB + 3000 + 10);
  same_tree(fx->src, str_of(st, "path"));
  assert_true(b_holds(fx, v));
  json_decref(st);
}

static void
test_a_second_pull_after_a_small_edit_moves_only_a_delta(void **state)
{
  struct fx *fx = *state;
  char v1[65], v2[65];
  json_t *st;

  make_tree(fx);
  start_agent(fx, A, 0, 0);
  start_agent(fx, B, 0, 0);
  assert_int_equal(publish(fx, v1), 201);
  st = pull(fx, v1);
  assert_string_equal(str_of(st, "state"), "complete");
  json_decref(st);
  /* 64 bytes rewritten in the middle of 20 MiB. */
  edit_file(fx, "big.bin", 9 * MIB + 12345,
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  assert_int_equal(publish(fx, v2), 201);
  st = pull(fx, v2);
  assert_string_equal(str_of(st, "state"), "complete");
  same_tree(fx->src, str_of(st, "path"));
  /* A segment's signature and a delta cross, not the file: far below
   * the 20 MiB (a literal segment alone is 4 MiB or more). */
  if (int_of(st, "bytes_wire") >= MIB)
    fail_msg("%lld bytes crossed for a 64-byte edit",
             (long long)int_of(st, "bytes_wire"));
  assert_true(int_of(st, "bytes_saved") > 19 * MIB);
  json_decref(st);
}

/*
 * A sparse file stays sparse at the replica: 256 MiB with 3 MiB of data
 * takes about 3 MiB there, and so does its next version (new data in a
 * hole: patched and locally copied segments), as does a sparse file
 * whose mtime alone changed (copied, not linked).
 */
static void
test_a_sparse_file_stays_sparse_at_the_replica_and_its_next_version(
    void **state)
{
  struct fx *fx = *state;
  const off_t off[] = {0, 100 * (off_t)MIB + 12345, 200 * (off_t)MIB};
  const off_t more[] = {150 * (off_t)MIB};
  char v1[65], v2[65], a[512], b[512];
  json_t *st;

  put_sparse(fx, "sparse.bin", 256 * (off_t)MIB, off, 3, 10, 1600000000);
  put_sparse(fx, "touched.bin", 64 * (off_t)MIB, off, 1, 20, 1600000000);
  start_agent(fx, A, 0, 0);
  start_agent(fx, B, 0, 0);
  assert_int_equal(publish(fx, v1), 201);
  st = pull(fx, v1);
  assert_string_equal(str_of(st, "state"), "complete");
  snprintf(a, sizeof(a), "%s/sparse.bin", fx->src);
  snprintf(b, sizeof(b), "%s/sparse.bin", str_of(st, "path"));
  same_sparse(a, b);
  json_decref(st);
  put_sparse(fx, "sparse.bin", 256 * (off_t)MIB, more, 1, 30, 1600000000);
  put_sparse(fx, "touched.bin", 64 * (off_t)MIB, off, 1, 20, 1700000000);
  assert_int_equal(publish(fx, v2), 201);
  st = pull(fx, v2);
  assert_string_equal(str_of(st, "state"), "complete");
  snprintf(b, sizeof(b), "%s/sparse.bin", str_of(st, "path"));
  same_sparse(a, b);
  snprintf(a, sizeof(a), "%s/touched.bin", fx->src);
  snprintf(b, sizeof(b), "%s/touched.bin", str_of(st, "path"));
  same_sparse(a, b);
  json_decref(st);
}

static void
test_a_file_changed_after_publish_is_named_and_never_published(
    void **state)
{
  struct fx *fx = *state;
  char v[65];
  json_t *st;

  make_tree(fx);
  start_agent(fx, A, 0, 0);
  start_agent(fx, B, 0, 0);
  assert_int_equal(publish(fx, v), 201);
  /* Same size, other bytes: only the content tells. */
  edit_file(fx, "run.sh", 100, "changed behind the agent's back");
  st = pull(fx, v);
  assert_string_equal(str_of(st, "state"), "failed");
  /* The source's reason, not the destination's failed verification of
   * bytes it was sent. */
  if (strstr(str_of(st, "error"), "'run.sh' changed since") == NULL)
    fail_msg("the source did not name the file: %s", str_of(st, "error"));
  json_decref(st);
  assert_false(b_holds(fx, v));
}

static void
test_a_pull_cut_by_the_source_stopping_resumes_without_resending(
    void **state)
{
  struct fx *fx = *state;
  char v[65], path[256];
  json_t *st = NULL;
  json_int_t done_at_cut = 0, served;
  const json_int_t total = 16 * MIB;

  for (int i = 0; i < 16; i++) {
    char rel[32];

    snprintf(rel, sizeof(rel), "f%02d.bin", i);
    put_file(fx, rel, MIB, 100 + (uint64_t)i, 0644, 1600000000);
  }
  start_agent(fx, A, 0, 0);
  /* One batch of 1 MiB at a time, so the cut falls in the middle
   * (checked: the pull still runs) and loses at most one batch. */
  start_agent(fx, B, 1, MIB);
  assert_int_equal(publish(fx, v), 201);
  assert_int_equal(put_pull(fx, v, TOKEN_A, NULL, NULL), 202);
  snprintf(path, sizeof(path), "/v1/datasets/ds/pulls/%s", v);
  while (done_at_cut < 2 * MIB) {
    nap(fx, 2);
    assert_int_equal(call(fx, B, "GET", path, NULL, NULL, &st), 200);
    assert_string_equal(str_of(st, "state"), "running");
    done_at_cut = int_of(st, "bytes_done");
    json_decref(st);
  }
  stop_agent(fx, A);
  nap(fx, 300);
  /* The destination waits for its source rather than failing. */
  snprintf(path, sizeof(path), "/v1/datasets/ds/pulls/%s", v);
  assert_int_equal(call(fx, B, "GET", path, NULL, NULL, &st), 200);
  assert_string_equal(str_of(st, "state"), "running");
  json_decref(st);
  start_agent(fx, A, 0, 0);
  st = pull_wait(fx, v);
  assert_string_equal(str_of(st, "state"), "complete");
  same_tree(fx->src, str_of(st, "path"));
  json_decref(st);
  served = served_bytes(fx);
  /* The restarted source sent what was not verified before the cut,
   * and at most the batch in flight again. */
  if (served > total - done_at_cut + MIB)
    fail_msg("the restarted source sent %lld bytes; %lld were verified "
             "before the cut",
             (long long)served, (long long)done_at_cut);
  assert_true(served > 0);
}

static void
test_a_wrong_token_is_refused_at_the_agent_and_at_its_source(void **state)
{
  struct fx *fx = *state;
  char v[65], path[256];
  json_t *st = NULL;

  make_tree(fx);
  start_agent(fx, A, 0, 0);
  start_agent(fx, B, 0, 0);
  assert_int_equal(call(fx, A, "POST", "/v1/datasets/ds/versions",
                        TOKEN_BAD, "{\"path\":\"ds\"}", NULL),
                   401);
  assert_int_equal(publish(fx, v), 201);
  snprintf(path, sizeof(path), "/v1/datasets/ds/versions/%s/manifest", v);
  assert_int_equal(call(fx, A, "GET", path, TOKEN_B, NULL, NULL), 401);
  assert_int_equal(call(fx, A, "GET", path, NULL, NULL, NULL), 200);
  /* B presents a token A does not know: the pull fails, nothing is
   * published. */
  assert_int_equal(put_pull(fx, v, TOKEN_BAD, NULL, NULL), 202);
  st = pull_wait(fx, v);
  assert_string_equal(str_of(st, "state"), "failed");
  if (strstr(str_of(st, "error"), "401") == NULL)
    fail_msg("the failure does not say the source refused: %s",
             str_of(st, "error"));
  json_decref(st);
  assert_false(b_holds(fx, v));
  assert_int_equal(served_bytes(fx), 0);
}

/* A batch body of the given frames (kind, file, seg, payload). */
static void
frame(struct buf *b, uint32_t kind, uint32_t file, const void *p,
      uint32_t len)
{
  assert_int_equal(wire_put(b, kind, file, 0, p, len), 0);
}

static void
test_batch_parse_keeps_request_frames_and_names_a_bad_one(void **state)
{
  uint8_t ref[32] = {1}, tab[2 * WIRE_FP_ENTRY] = {0};
  struct wire_frame *f = NULL;
  struct buf b;
  struct err e = {0};
  size_t n = 0;

  (void)state;
  buf_init(&b, 1 << 20);
  frame(&b, WIRE_SIGREF, 3, ref, sizeof(ref));
  frame(&b, WIRE_SEG, 3, NULL, 0);
  tab[WIRE_FP_ENTRY] = 1; /* sorted: 00.. then 01.. */
  frame(&b, WIRE_BLOCKS, 3, tab, sizeof(tab));
  assert_int_equal(serve_batch_parse(b.data, b.len, &f, &n, &e), 0);
  assert_int_equal(n, 3);
  assert_int_equal(f[0].kind, WIRE_SIGREF);
  assert_int_equal(f[2].len, sizeof(tab));
  free(f);

  /* the table unsorted: refused, naming the frame */
  tab[0] = 2;
  buf_reset(&b);
  frame(&b, WIRE_SEG, 0, NULL, 0);
  frame(&b, WIRE_BLOCKS, 0, tab, sizeof(tab));
  f = NULL;
  assert_int_equal(serve_batch_parse(b.data, b.len, &f, &n, &e),
                   ERR_INVALID);
  assert_null(f);
  assert_string_equal(e.msg, "frame 1: fingerprint table not sorted");

  /* an answer kind, a SEG with a payload, nothing at all */
  buf_reset(&b);
  frame(&b, WIRE_DATA, 0, "x", 1);
  assert_int_equal(serve_batch_parse(b.data, b.len, &f, &n, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "frame 0: kind 17 is not a request");
  buf_reset(&b);
  frame(&b, WIRE_SEG, 0, "x", 1);
  assert_int_equal(serve_batch_parse(b.data, b.len, &f, &n, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "frame 0: payload of 1 bytes"));
  assert_int_equal(serve_batch_parse("", 0, &f, &n, &e), ERR_INVALID);
  assert_string_equal(e.msg, "empty batch");
  buf_release(&b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_a_publish_gives_the_version_a_fresh_agent_finds_again,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_pull_replicates_files_modes_mtimes_a_link_and_an_empty_dir,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_second_pull_after_a_small_edit_moves_only_a_delta, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_sparse_file_stays_sparse_at_the_replica_and_its_next_version,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_file_changed_after_publish_is_named_and_never_published,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_pull_cut_by_the_source_stopping_resumes_without_resending,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_wrong_token_is_refused_at_the_agent_and_at_its_source,
          setup, teardown),
      cmocka_unit_test(
          test_batch_parse_keeps_request_frames_and_names_a_bad_one),
  };
  int rc;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
