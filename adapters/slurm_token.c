/*
 * A Slurm site's JWT, from a file or a command (see slurm_token.h).
 */
#include "adapters/slurm_token.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/log.h"
#include "util/secret.h"
#include "util/timeutil.h"

/* A file is looked at no more than once a second. */
#define FILE_CHECK_MS 1000
/* A minted token is replaced this long before it expires. */
#define EXPIRY_MARGIN_S 60
/* Without an exp claim, a minted token is replaced this often. */
#define DEFAULT_LIFE_S 1800
/* Least time between two reactions to a refused token. */
#define REFUSED_GAP_MS 5000

struct slurm_token {
  uv_loop_t *loop;
  char *file;
  char *command;
  char *token;            /* current, or NULL */
  char why[ERR_MSG_SIZE]; /* why there is none */
  int64_t expires_s;      /* epoch seconds; 0 unknown */
  /* file */
  int64_t checked_ms;
  struct stat seen;       /* identity of the file last read */
  /* command */
  uv_process_t proc;
  uv_pipe_t out;
  int running;            /* proc and out are open */
  int open_handles;
  char buf[SLURM_TOKEN_MAX + 1];
  size_t len;
  int64_t exit_status;
  int64_t refused_ms;
  int closing;
  void (*close_cb)(void *arg);
  void *close_arg;
};

static void
set_token(struct slurm_token *t, const char *text, size_t len)
{
  /* The token is the first line, without surrounding blanks. */
  while (len > 0 && (*text == ' ' || *text == '\t' || *text == '\n' ||
                     *text == '\r')) {
    text++;
    len--;
  }
  for (size_t i = 0; i < len; i++) {
    if (text[i] == '\n' || text[i] == '\r' || text[i] == ' ') {
      len = i;
      break;
    }
  }
  /* `scontrol token` prints SLURM_JWT=...; take what follows. */
  if (len > 10 && memcmp(text, "SLURM_JWT=", 10) == 0) {
    text += 10;
    len -= 10;
  }
  free(t->token);
  t->token = NULL;
  if (len == 0) {
    snprintf(t->why, sizeof(t->why), "the token is empty");
    return;
  }
  t->token = xmalloc(len + 1);
  memcpy(t->token, text, len);
  t->token[len] = '\0';
  t->why[0] = '\0';
}

static int
b64url_value(int c)
{
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '-' || c == '+')
    return 62;
  if (c == '_' || c == '/')
    return 63;
  return -1;
}

/* The exp claim of a JWT, or 0 when it has none we can read.  Only used
 * to know when to mint again: the site checks the signature. */
static int64_t
jwt_expiry(const char *jwt)
{
  const char *p = strchr(jwt, '.');
  const char *end;
  char payload[2048];
  size_t n = 0;
  uint32_t acc = 0;
  int bits = 0;
  json_t *claims;
  json_t *exp;
  int64_t v = 0;

  if (p == NULL)
    return 0;
  p++;
  end = strchr(p, '.');
  if (end == NULL)
    return 0;
  for (; p < end; p++) {
    int d = b64url_value((unsigned char)*p);

    if (d < 0)
      break;
    acc = (acc << 6) | (uint32_t)d;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n == sizeof(payload))
        return 0;
      payload[n++] = (char)((acc >> bits) & 0xff);
    }
  }
  claims = json_loadb(payload, n, 0, NULL);
  exp = json_object_get(claims, "exp");
  if (json_is_integer(exp))
    v = json_integer_value(exp);
  json_decref(claims);
  return v;
}

/* ---- file ---- */

static int
same_file(const struct stat *a, const struct stat *b)
{
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev &&
         a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
         a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static int
read_file(struct slurm_token *t, int force, struct err *e)
{
  struct stat st;
  struct err se = {0};
  char *text = NULL;
  size_t n;

  t->checked_ms = time_mono_ms();
  if (stat(t->file, &st) < 0) {
    snprintf(t->why, sizeof(t->why), "token_file '%s': %s", t->file,
             strerror(errno));
    goto fail;
  }
  if (!force && t->token != NULL && same_file(&st, &t->seen))
    return 0;
  /* The one reader of token files: it refuses one that others may read
   * (util/secret.h). */
  if (secret_read_file(t->file, 0, &text, &n, &se) < 0) {
    snprintf(t->why, sizeof(t->why), "token_file: %.200s", se.msg);
    goto fail;
  }
  if (n > SLURM_TOKEN_MAX) {
    secret_free(text);
    snprintf(t->why, sizeof(t->why), "token_file '%s': larger than 8 KiB",
             t->file);
    goto fail;
  }
  set_token(t, text, n);
  secret_free(text);
  if (t->token == NULL) {
    snprintf(t->why, sizeof(t->why), "token_file '%s' is empty", t->file);
    goto fail;
  }
  t->seen = st;
  t->expires_s = jwt_expiry(t->token);
  log_debug("read the token in %s", t->file);
  return 0;

fail:
  free(t->token);
  t->token = NULL;
  return err_set(e, ERR_CONFIG, "%s", t->why);
}

/* ---- command ---- */

static void
maybe_finish_close(struct slurm_token *t)
{
  void (*cb)(void *arg) = t->close_cb;
  void *arg = t->close_arg;

  if (!t->closing || t->open_handles > 0)
    return;
  free(t->token);
  free(t->file);
  free(t->command);
  free(t);
  if (cb != NULL)
    cb(arg);
}

static void
on_handle_closed(uv_handle_t *h)
{
  struct slurm_token *t = h->data;

  t->open_handles--;
  if (t->open_handles == 0)
    t->running = 0;
  maybe_finish_close(t);
}

/* Both the process and its output are done: take the token. */
static void
command_done(struct slurm_token *t)
{
  if (t->exit_status != 0) {
    snprintf(t->why, sizeof(t->why),
             "token_command failed (exit status %lld)",
             (long long)t->exit_status);
    log_warn("%s", t->why);
  } else {
    set_token(t, t->buf, t->len);
    if (t->token != NULL) {
      t->expires_s = jwt_expiry(t->token);
      if (t->expires_s == 0)
        t->expires_s = time_now_ms() / 1000 + DEFAULT_LIFE_S;
      log_debug("token_command gave a token valid until %lld",
                (long long)t->expires_s);
    } else {
      snprintf(t->why, sizeof(t->why), "token_command printed no token");
    }
  }
  uv_close((uv_handle_t *)&t->proc, on_handle_closed);
  uv_close((uv_handle_t *)&t->out, on_handle_closed);
}

static void
on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
  struct slurm_token *t = h->data;

  (void)hint;
  buf->base = t->buf + t->len;
  buf->len = SLURM_TOKEN_MAX - t->len;
}

static void
on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct slurm_token *t = s->data;

  (void)buf;
  if (n > 0) {
    t->len += (size_t)n;
    if (t->len < SLURM_TOKEN_MAX)
      return;
  } else if (n == 0) {
    return;
  }
  /* EOF, an error or a full buffer: the output is complete. */
  uv_read_stop(s);
  t->buf[t->len] = '\0';
  if (t->exit_status != INT64_MIN)
    command_done(t);
}

static void
on_command_exit(uv_process_t *p, int64_t status, int term_signal)
{
  struct slurm_token *t = p->data;

  t->exit_status = term_signal != 0 ? 128 + term_signal : status;
  /* Done once the output is read too. */
  if (!uv_is_active((uv_handle_t *)&t->out))
    command_done(t);
}

static void
start_command(struct slurm_token *t)
{
  char *argv[] = {"/bin/sh", "-c", t->command, NULL};
  uv_stdio_container_t stdio[3];
  uv_process_options_t opt;
  int rc;

  if (t->running || t->closing)
    return;
  memset(&opt, 0, sizeof(opt));
  uv_pipe_init(t->loop, &t->out, 0);
  t->out.data = t;
  t->proc.data = t;
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&t->out;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  opt.file = argv[0];
  opt.args = argv;
  opt.stdio = stdio;
  opt.stdio_count = 3;
  opt.exit_cb = on_command_exit;
  t->len = 0;
  t->exit_status = INT64_MIN;
  t->running = 1;
  t->open_handles += 2;
  rc = uv_spawn(t->loop, &t->proc, &opt);
  if (rc < 0) {
    snprintf(t->why, sizeof(t->why), "token_command: %s", uv_strerror(rc));
    log_warn("%s", t->why);
    /* A failed uv_spawn still initialised the handle: close both. */
    uv_close((uv_handle_t *)&t->proc, on_handle_closed);
    uv_close((uv_handle_t *)&t->out, on_handle_closed);
    return;
  }
  uv_read_start((uv_stream_t *)&t->out, on_alloc, on_read);
}

/* ---- API ---- */

int
slurm_token_new(uv_loop_t *loop, const char *file, const char *command,
                struct slurm_token **out, struct err *e)
{
  struct slurm_token *t;
  int rc;

  *out = NULL;
  if ((file == NULL) == (command == NULL))
    return err_set(e, ERR_CONFIG,
                   "exactly one of 'token_file' and 'token_command'");
  t = xcalloc(1, sizeof(*t));
  t->loop = loop;
  t->file = xstrdup(file);
  t->command = xstrdup(command);
  if (file != NULL) {
    rc = read_file(t, 1, e);
    if (rc < 0) {
      free(t->file);
      free(t);
      return rc;
    }
  } else {
    snprintf(t->why, sizeof(t->why), "token_command has not answered yet");
    start_command(t);
  }
  *out = t;
  return 0;
}

const char *
slurm_token_get(struct slurm_token *t, struct err *why)
{
  if (t->file != NULL) {
    if (time_mono_ms() - t->checked_ms >= FILE_CHECK_MS)
      (void)read_file(t, 0, NULL);
  } else if (t->token == NULL ||
             time_now_ms() / 1000 + EXPIRY_MARGIN_S >= t->expires_s) {
    /* Keep using a token that is about to expire while a new one is
     * minted; an expired one is still tried (the site says no). */
    start_command(t);
  }
  if (t->token == NULL)
    err_set(why, ERR_UNAVAILABLE, "%s", t->why);
  return t->token;
}

void
slurm_token_refused(struct slurm_token *t)
{
  int64_t now = time_mono_ms();

  if (t->refused_ms != 0 && now - t->refused_ms < REFUSED_GAP_MS)
    return;
  t->refused_ms = now;
  if (t->file != NULL)
    (void)read_file(t, 1, NULL);
  else
    start_command(t);
}

void
slurm_token_close(struct slurm_token *t, void (*cb)(void *arg), void *arg)
{
  t->closing = 1;
  t->close_cb = cb;
  t->close_arg = arg;
  /* A command still running would hold the loop open: end it. */
  if (t->running && !uv_is_closing((uv_handle_t *)&t->proc)) {
    (void)uv_process_kill(&t->proc, SIGKILL);
    uv_close((uv_handle_t *)&t->proc, on_handle_closed);
    uv_close((uv_handle_t *)&t->out, on_handle_closed);
  }
  maybe_finish_close(t);
}
