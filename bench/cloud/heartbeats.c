/*
 * Many node agents heart-beating at once, for bench/cloud/run (issue 24:
 * 1,000 nodes registered and heart-beating without slowing submissions).
 *
 * Each node is what agent/node.c is to tenbind on the wire (docs/
 * NODES.md): POST /v1/nodes/heartbeat with its own node token, on a
 * kept-alive connection of its own, the next one heartbeat_ms after the
 * answer.  A job the answer assigns is reported running from then on, as
 * an agent that started it would, and forgotten when acked.  No process
 * runs: this is the broker's side of the load only.
 *
 * Tokens are what broker/nodes.c gives: "tbnode_" and the hex of
 * HMAC-SHA256(the first line of STATE/node.key, "tenbin-node:" id).
 * Node i connects from 127.1.x.y (an address of its own, i + 1 in the
 * low 16 bits), as VMs have addresses of their own: tenbind caps the
 * connections one address may hold.
 *
 * One thread: libcurl's socket interface on epoll, so that a turn costs
 * what is active, not the 1,000 connections held.  Each node names
 * tenbind by a host name of its own (nI.bench, resolved to 127.0.0.1 by
 * CURLOPT_RESOLVE; the Host header stays 127.0.0.1:PORT): libcurl looks
 * for a connection to reuse among those to the same host name, and
 * checks each one it passes, a poll() apiece, so 1,000 nodes sharing
 * one name cost this process most of a core.
 *
 * The first heartbeats are spread over the first interval.  Once every
 * node has been answered 200 once (each is registered) it prints
 * "READY" on a line of its own; SIGUSR1 then
 * starts the counted window, and SIGINT or SIGTERM ends it: one
 * "BENCH key=value ..." line (heartbeats answered per second, status
 * and transport failures, latency percentiles in ms, this process's CPU
 * seconds over the window) and exit 0 (1 when a heartbeat failed in the
 * window).
 *
 * usage: bench_cloud_heartbeats PORT NODE_KEY_FILE IDS_FILE GPU_TYPE
 *   PORT       tenbind's, on 127.0.0.1
 *   IDS_FILE   node ids, one a line (at most MAX_NODES)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define MAX_NODES 20000
#define MAX_JOBS 8                /* jobs one fake node holds */
#define MAX_ANSWER (1u << 20)     /* as the agent caps them */
#define MAX_KEY 256
#define MAX_SAMPLES (1u << 22)    /* latencies kept per window */
#define DEFAULT_INTERVAL_MS 1000
#define POLL_MS 20
#define MAX_EVENTS 256

struct node {
  int64_t id;
  CURL *h;
  struct curl_slist *hdrs;
  char iface[40];                 /* "host!127.1.x.y" */
  char url[96];                   /* http://nI.bench:PORT/... */
  struct curl_slist *resolve;     /* nI.bench:PORT:127.0.0.1 */
  char *answer;
  size_t alen;
  int too_big;
  int in_flight;
  int registered;
  int64_t sent_ns, due_ns;
  int64_t interval_ms;
  int64_t jobs[MAX_JOBS];
  int njobs;
  int64_t job_at_ms[MAX_JOBS];
};

/* What the counted window saw. */
struct window {
  int64_t start_ns;
  uint64_t ok, bad_status, failed;
  double *lat_ms;
  size_t nlat;
  struct rusage ru0;
};

static volatile sig_atomic_t mark_seen, stop_seen;

static void
on_signal(int sig)
{
  if (sig == SIGUSR1)
    mark_seen = 1;
  else
    stop_seen = 1;
}

static int64_t
now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t
wall_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
  struct node *nd = arg;
  size_t len = size * n;
  char *grown;

  if (nd->alen + len > MAX_ANSWER) {
    nd->too_big = 1;
    return 0; /* curl fails the transfer */
  }
  grown = realloc(nd->answer, nd->alen + len + 1);
  if (grown == NULL)
    return 0;
  nd->answer = grown;
  memcpy(nd->answer + nd->alen, data, len);
  nd->alen += len;
  nd->answer[nd->alen] = '\0';
  return len;
}

/* Read the first line of path (the node key) into key[0..MAX_KEY). */
static int
read_key(const char *path, char *key)
{
  FILE *f = fopen(path, "r");
  size_t len;

  if (f == NULL || fgets(key, MAX_KEY, f) == NULL) {
    if (f != NULL)
      fclose(f);
    return -1;
  }
  fclose(f);
  len = strcspn(key, "\r\n");
  key[len] = '\0';
  return len >= 32 ? 0 : -1;
}

static void
node_token(const char *key, int64_t id, char *out, size_t outlen)
{
  unsigned char mac[32];
  unsigned int maclen = sizeof(mac);
  char msg[48];
  size_t k;

  snprintf(msg, sizeof(msg), "tenbin-node:%" PRId64, id);
  HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)msg,
       strlen(msg), mac, &maclen);
  k = (size_t)snprintf(out, outlen, "tbnode_");
  for (unsigned i = 0; i < maclen && k + 2 < outlen; i++, k += 2)
    snprintf(out + k, outlen - k, "%02x", mac[i]);
}

/* Node ids, one a line; count or -1. */
static long
read_ids(const char *path, struct node *nodes)
{
  FILE *f = fopen(path, "r");
  char line[64];
  long n = 0;

  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL) {
    char *end;
    long long v;

    errno = 0;
    v = strtoll(line, &end, 10);
    if (end == line)
      continue;
    if (errno != 0 || v <= 0 || (*end != '\n' && *end != '\0') ||
        n >= MAX_NODES) {
      fclose(f);
      return -1;
    }
    nodes[n++].id = v;
  }
  fclose(f);
  return n;
}

/* The heartbeat body: every job held, reported running. */
static char *
body_of(const struct node *nd, const char *gpu_type)
{
  json_t *jobs = json_array(), *b;
  char *s;

  for (int i = 0; i < nd->njobs; i++)
    json_array_append_new(
        jobs, json_pack("{s:I, s:s, s:i, s:i, s:n, s:s, s:I}", "id",
                        (json_int_t)nd->jobs[i], "state", "running",
                        "exit_code", -1, "signal", 0, "reason", "alloc", "0",
                        "at_ms", (json_int_t)nd->job_at_ms[i]));
  b = json_pack("{s:s, s:s, s:i, s:s, s:o, s:n}", "hostname", "bench-node",
                "agent_version", "bench", "gpus", 1, "gpu_type", gpu_type,
                "jobs", jobs, "interruption");
  s = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  return s;
}

/* Take an answer: the next interval, jobs assigned, jobs acked. */
static void
read_answer(struct node *nd)
{
  json_t *a = json_loadb(nd->answer, nd->alen, 0, NULL), *v;
  size_t i;

  if (a == NULL)
    return;
  v = json_object_get(a, "heartbeat_ms");
  if (json_is_integer(v) && json_integer_value(v) >= 100 &&
      json_integer_value(v) <= 60000)
    nd->interval_ms = json_integer_value(v);
  json_array_foreach(json_object_get(a, "assign"), i, v) {
    json_t *id = json_object_get(v, "id");
    int have = 0;

    if (!json_is_integer(id))
      continue;
    for (int k = 0; k < nd->njobs; k++)
      have |= nd->jobs[k] == json_integer_value(id);
    if (!have && nd->njobs < MAX_JOBS) {
      nd->jobs[nd->njobs] = json_integer_value(id);
      nd->job_at_ms[nd->njobs++] = wall_ms();
    }
  }
  json_array_foreach(json_object_get(a, "ack"), i, v) {
    for (int k = 0; k < nd->njobs; k++) {
      if (json_is_integer(v) && nd->jobs[k] == json_integer_value(v)) {
        nd->jobs[k] = nd->jobs[--nd->njobs];
        nd->job_at_ms[k] = nd->job_at_ms[nd->njobs];
        break;
      }
    }
  }
  json_decref(a);
}

static int
send_one(CURLM *m, struct node *nd, const char *gpu_type)
{
  char *body = body_of(nd, gpu_type);

  if (body == NULL)
    return -1;
  nd->alen = 0;
  nd->too_big = 0;
  curl_easy_setopt(nd->h, CURLOPT_COPYPOSTFIELDS, body);
  free(body);
  nd->in_flight = 1;
  nd->sent_ns = now_ns();
  return curl_multi_add_handle(m, nd->h) == CURLM_OK ? 0 : -1;
}

static int
cmpd(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return (x > y) - (x < y);
}

static double
pct(const struct window *w, double p)
{
  size_t k;

  if (w->nlat == 0)
    return 0;
  k = (size_t)(p / 100.0 * (double)w->nlat + 0.5);
  if (k > 0)
    k--;
  if (k >= w->nlat)
    k = w->nlat - 1;
  return w->lat_ms[k];
}

static double
tv_s(struct timeval tv)
{
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void
report(struct window *w, long nnodes)
{
  struct rusage ru;
  double secs = (double)(now_ns() - w->start_ns) / 1e9;
  double cpu;

  getrusage(RUSAGE_SELF, &ru);
  cpu = tv_s(ru.ru_utime) + tv_s(ru.ru_stime) - tv_s(w->ru0.ru_utime) -
        tv_s(w->ru0.ru_stime);
  qsort(w->lat_ms, w->nlat, sizeof(double), cmpd);
  printf("BENCH nodes=%ld window_s=%.2f ok=%" PRIu64 " per_s=%.0f "
         "bad_status=%" PRIu64 " failed=%" PRIu64 " p50_ms=%.2f p90_ms=%.2f "
         "p99_ms=%.2f max_ms=%.2f cpu_s=%.2f\n", nnodes, secs, w->ok,
         secs > 0 ? (double)w->ok / secs : 0.0, w->bad_status, w->failed,
         pct(w, 50), pct(w, 90), pct(w, 99),
         w->nlat ? w->lat_ms[w->nlat - 1] : 0.0, cpu);
  fflush(stdout);
}

/* curl's sockets on the epoll set: what each wants. */
static int
on_socket(CURL *h, curl_socket_t fd, int what, void *arg, void *sockp)
{
  int ep = *(int *)arg;
  struct epoll_event ev = {0};

  (void)h;
  (void)sockp;
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    return 0;
  }
  ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
              (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
  ev.data.fd = fd;
  if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) < 0 && errno == ENOENT)
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  return 0;
}

/* curl's one timer: when it wants socket_action(TIMEOUT), or -1. */
static int
on_timer(CURLM *m, long timeout_ms, void *arg)
{
  int64_t *deadline = arg;

  (void)m;
  *deadline = timeout_ms < 0 ? -1 : now_ns() + (int64_t)timeout_ms * 1000000;
  return 0;
}

/* Take every finished transfer. */
static void
take_done(CURLM *m, struct window *w, long *registered)
{
  CURLMsg *msg;
  int left;

  while ((msg = curl_multi_info_read(m, &left)) != NULL) {
    struct node *nd;
    char *priv = NULL;
    long status = 0;
    double ms;

    if (msg->msg != CURLMSG_DONE)
      continue;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
    nd = (struct node *)(void *)priv;
    curl_easy_getinfo(nd->h, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(m, nd->h);
    nd->in_flight = 0;
    ms = (double)(now_ns() - nd->sent_ns) / 1e6;
    if (msg->data.result != CURLE_OK) {
      w->failed++;
      if (w->failed <= 3)
        fprintf(stderr, "bench_cloud_heartbeats: node %" PRId64 ": %s\n",
                nd->id, curl_easy_strerror(msg->data.result));
      /* As the agent does, from 500 ms. */
      nd->due_ns = now_ns() + 500 * 1000000LL;
      continue;
    }
    if (status != 200) {
      w->bad_status++;
      if (w->bad_status <= 3)
        fprintf(stderr,
                "bench_cloud_heartbeats: node %" PRId64 ": %ld %.200s\n",
                nd->id, status, nd->answer != NULL ? nd->answer : "");
      nd->due_ns = now_ns() + 500 * 1000000LL;
      continue;
    }
    if (!nd->registered) {
      nd->registered = 1;
      (*registered)++;
    }
    w->ok++;
    if (w->nlat < MAX_SAMPLES)
      w->lat_ms[w->nlat++] = ms;
    read_answer(nd);
    nd->due_ns = now_ns() + nd->interval_ms * 1000000;
  }
}

int
main(int argc, char **argv)
{
  static struct node nodes[MAX_NODES];
  struct window w = {0};
  struct epoll_event evs[MAX_EVENTS];
  char key[MAX_KEY], token[96], auth[128], host[64], rsv[64];
  const char *gpu_type;
  long n, registered = 0, port;
  char *end;
  int64_t curl_deadline = -1, next_due;
  int counting = 0, ready = 0, rc = 1, ep, running;
  CURLM *m;

  if (argc != 5) {
    fprintf(stderr, "usage: bench_cloud_heartbeats PORT NODE_KEY_FILE "
            "IDS_FILE GPU_TYPE\n");
    return 2;
  }
  gpu_type = argv[4];
  errno = 0;
  port = strtol(argv[1], &end, 10);
  if (errno != 0 || *end != '\0' || port < 1 || port > 65535) {
    fprintf(stderr, "bench_cloud_heartbeats: '%.32s' is no port\n", argv[1]);
    return 2;
  }
  snprintf(host, sizeof(host), "Host: 127.0.0.1:%ld", port);
  if (read_key(argv[2], key) < 0) {
    fprintf(stderr, "bench_cloud_heartbeats: %s: no node key (a first "
            "line of 32 or more characters)\n", argv[2]);
    return 2;
  }
  n = read_ids(argv[3], nodes);
  if (n <= 0) {
    fprintf(stderr, "bench_cloud_heartbeats: %s: want 1..%d node ids, "
            "one a line\n", argv[3], MAX_NODES);
    return 2;
  }
  w.lat_ms = calloc(MAX_SAMPLES, sizeof(double));
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (w.lat_ms == NULL || ep < 0)
    return 2;
  signal(SIGUSR1, on_signal);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  m = curl_multi_init();
  curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(m, CURLMOPT_SOCKETDATA, &ep);
  curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(m, CURLMOPT_TIMERDATA, &curl_deadline);
  /* One kept-alive connection per node, never one shared. */
  curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, n + 16);
  for (long i = 0; i < n; i++) {
    struct node *nd = &nodes[i];

    nd->h = curl_easy_init();
    node_token(key, nd->id, token, sizeof(token));
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    nd->hdrs = curl_slist_append(NULL, auth);
    nd->hdrs = curl_slist_append(nd->hdrs, "Content-Type: application/json");
    nd->hdrs = curl_slist_append(nd->hdrs, "Expect:");
    nd->hdrs = curl_slist_append(nd->hdrs, host);
    snprintf(rsv, sizeof(rsv), "n%ld.bench:%ld:127.0.0.1", i, port);
    nd->resolve = curl_slist_append(NULL, rsv);
    snprintf(nd->url, sizeof(nd->url),
             "http://n%ld.bench:%ld/v1/nodes/heartbeat", i, port);
    snprintf(nd->iface, sizeof(nd->iface), "host!127.1.%ld.%ld",
             ((i + 1) >> 8) & 255, (i + 1) & 255);
    curl_easy_setopt(nd->h, CURLOPT_URL, nd->url);
    curl_easy_setopt(nd->h, CURLOPT_RESOLVE, nd->resolve);
    curl_easy_setopt(nd->h, CURLOPT_HTTPHEADER, nd->hdrs);
    curl_easy_setopt(nd->h, CURLOPT_INTERFACE, nd->iface);
    curl_easy_setopt(nd->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(nd->h, CURLOPT_WRITEDATA, nd);
    curl_easy_setopt(nd->h, CURLOPT_PRIVATE, nd);
    curl_easy_setopt(nd->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(nd->h, CURLOPT_TIMEOUT_MS, 10000L);
    nd->interval_ms = DEFAULT_INTERVAL_MS;
    /* The first heartbeats spread over the first interval. */
    nd->due_ns = now_ns() + (int64_t)i * DEFAULT_INTERVAL_MS * 1000000 / n;
  }
  getrusage(RUSAGE_SELF, &w.ru0);
  w.start_ns = now_ns();
  next_due = 0;
  while (!stop_seen) {
    int64_t t = now_ns(), wake;
    int nev, wait_ms;

    if (mark_seen && !counting) {
      counting = 1;
      w.ok = w.bad_status = w.failed = 0;
      w.nlat = 0;
      w.start_ns = t;
      getrusage(RUSAGE_SELF, &w.ru0);
    }
    /* Send what is due; find when the next one is. */
    if (next_due <= t) {
      next_due = t + (int64_t)POLL_MS * 1000000;
      for (long i = 0; i < n; i++) {
        struct node *nd = &nodes[i];

        if (nd->in_flight)
          continue;
        if (nd->due_ns <= t) {
          if (send_one(m, nd, gpu_type) < 0) {
            fprintf(stderr, "bench_cloud_heartbeats: cannot send\n");
            goto out;
          }
        } else if (nd->due_ns < next_due) {
          next_due = nd->due_ns;
        }
      }
    }
    wake = next_due;
    if (curl_deadline >= 0 && curl_deadline < wake)
      wake = curl_deadline;
    t = now_ns();
    wait_ms = wake > t ? (int)((wake - t + 999999) / 1000000) : 0;
    nev = epoll_wait(ep, evs, MAX_EVENTS, wait_ms);
    for (int i = 0; i < nev; i++) {
      int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                  (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                  (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR
                                                          : 0);

      curl_multi_socket_action(m, evs[i].data.fd, flags, &running);
    }
    if (curl_deadline >= 0 && curl_deadline <= now_ns()) {
      curl_deadline = -1;
      curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    take_done(m, &w, &registered);
    /* An answer sets its node's next due time. */
    for (long i = 0; i < n && next_due > now_ns(); i++)
      if (!nodes[i].in_flight && nodes[i].due_ns < next_due)
        next_due = nodes[i].due_ns;
    if (!ready && registered == n) {
      ready = 1;
      printf("READY %ld nodes registered\n", n);
      fflush(stdout);
    }
  }
  report(&w, n);
  rc = (w.bad_status + w.failed) > 0 ? 1 : 0;
out:
  for (long i = 0; i < n; i++) {
    if (nodes[i].in_flight)
      curl_multi_remove_handle(m, nodes[i].h);
    curl_easy_cleanup(nodes[i].h);
    curl_slist_free_all(nodes[i].hdrs);
    curl_slist_free_all(nodes[i].resolve);
    free(nodes[i].answer);
  }
  curl_multi_cleanup(m);
  curl_global_cleanup();
  close(ep);
  free(w.lat_ms);
  return rc;
}
