/*
 * The shim of the local adapter: "tenbind --shim JOBDIR", one per job.
 *
 * tenbind spawns it in a session of its own with the job directory's
 * lock, already flock'ed, on descriptor LOCAL_LOCK_FD.  The shim holds
 * that lock for its whole life, so "lock held" means "a shim is alive"
 * to any tenbind, this one or the next.  It records itself (shim.pid),
 * marks the job started (durably, before the job can exist), forks the
 * job into a process group of its own, enforces the time limit and the
 * cancel grace period (SIGTERM to the shim means cancel), and, once the
 * job's main process has ended, kills and reaps whatever the job left
 * behind (the shim is a child subreaper) and writes status.json
 * atomically.  Then it exits, which releases the lock.
 *
 * It is a plain synchronous program: signals are blocked and read from a
 * signalfd, next to the pipe on which the forked child reports a failure
 * to start the job (the classic close-on-exec pipe: EOF means exec
 * succeeded).
 */
#define _GNU_SOURCE /* close_range, pipe2, signalfd */
#include "adapters/adapter.h"
#include "adapters/local.h"
#include "local_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define START_ERROR_MAX 512

/* spec.json, as the shim uses it. */
struct shim_spec {
  int64_t job_id;
  char **argv;
  char **env;
  char *chdir;
  char *stdout_path;
  char *stderr_path; /* NULL: with stdout */
  int64_t time_limit_s;
  int64_t cancel_grace_s;
};

/* How the job ended, for status.json. */
struct shim_end {
  const char *reason; /* LOCAL_END_* */
  int exit_code;
  int signal;
  int killed_after_grace;
  char error[START_ERROR_MAX]; /* empty unless reason is "error" */
  int64_t start_ms;
  int64_t end_ms;
};

static void
strv_release(char **v)
{
  if (v == NULL)
    return;
  for (char **p = v; *p != NULL; p++)
    free(*p);
  free(v);
}

static void
spec_release(struct shim_spec *s)
{
  strv_release(s->argv);
  strv_release(s->env);
  free(s->chdir);
  free(s->stdout_path);
  free(s->stderr_path);
  memset(s, 0, sizeof(*s));
}

/* A JSON array of strings as a new NULL-terminated vector, or NULL. */
static char **
json_strv(const json_t *arr)
{
  size_t n = json_array_size(arr);
  char **v;

  if (!json_is_array(arr))
    return NULL;
  v = xcalloc(n + 1, sizeof(*v));
  for (size_t i = 0; i < n; i++) {
    const char *s = json_string_value(json_array_get(arr, i));

    if (s == NULL) {
      strv_release(v);
      return NULL;
    }
    v[i] = xstrdup(s);
  }
  return v;
}

static int
load_spec(const char *dir, struct shim_spec *s, struct err *e)
{
  static const struct jsonx_field fields[] = {
      {"job_id", JX_INT},         {"argv", JX_ARRAY},
      {"env", JX_ARRAY},          {"chdir", JX_STRING},
      {"stdout", JX_STRING},      {"stderr", JX_STRING},
      {"time_limit_s", JX_INT},   {"cancel_grace_s", JX_INT},
      {"alloc", JX_STRING},       {"gpu_type", JX_STRING},
      {NULL, 0}};
  char *path = adapter_local__path(dir, "spec.json");
  char *text = NULL;
  size_t len;
  json_t *obj = NULL;
  int rc;

  rc = file_read(path, LOCAL_SPEC_MAX, &text, &len, e);
  if (rc < 0)
    goto out;
  rc = jsonx_parse_object(text, len, &obj, e);
  if (rc == 0)
    rc = jsonx_check(obj, fields, "", e);
  if (rc < 0) {
    err_prefix(e, "'%s'", path);
    goto out;
  }
  s->job_id = json_integer_value(json_object_get(obj, "job_id"));
  s->time_limit_s = json_integer_value(json_object_get(obj, "time_limit_s"));
  s->cancel_grace_s =
      json_integer_value(json_object_get(obj, "cancel_grace_s"));
  s->argv = json_strv(json_object_get(obj, "argv"));
  s->env = json_strv(json_object_get(obj, "env"));
  s->chdir = xstrdup(jsonx_str(obj, "chdir"));
  s->stdout_path = xstrdup(jsonx_str(obj, "stdout"));
  s->stderr_path = xstrdup(jsonx_str(obj, "stderr"));
  if (s->argv == NULL || s->argv[0] == NULL || s->env == NULL ||
      s->chdir == NULL || s->stdout_path == NULL || s->time_limit_s < 0 ||
      s->cancel_grace_s < 0) {
    rc = err_set(e, ERR_INVALID, "'%s' lacks a command, env, chdir or "
                 "stdout", path);
    goto out;
  }
  rc = 0;
out:
  json_decref(obj);
  free(text);
  free(path);
  return rc;
}

static int
write_status(const char *dir, int64_t job_id, const struct shim_end *end,
             struct err *e)
{
  json_t *st = json_object();
  char *text;
  int rc;

  json_object_set_new(st, "job_id", json_integer(job_id));
  json_object_set_new(st, "reason", json_string(end->reason));
  json_object_set_new(st, "exit_code", json_integer(end->exit_code));
  json_object_set_new(st, "signal", json_integer(end->signal));
  json_object_set_new(st, "killed_after_grace",
                      json_boolean(end->killed_after_grace));
  /* The message may quote a path that is not UTF-8: drop it then. */
  json_object_set_new(st, "error", end->error[0] != '\0'
                                       ? json_string(end->error)
                                       : json_null());
  json_object_set_new(st, "start_ms", json_integer(end->start_ms));
  json_object_set_new(st, "end_ms", json_integer(end->end_ms));
  text = jsonx_dump(st);
  rc = file_write_atomic(dir, "status.json", text, strlen(text),
                                   0600, e);
  free(text);
  json_decref(st);
  return rc;
}

/*
 * Close every descriptor above the lock: whatever tenbind had open
 * without close-on-exec (a listening socket, the database) must not live
 * on in a job that outlives it.
 */
static void
close_inherited_fds(void)
{
  if (close_range(LOCAL_LOCK_FD + 1, ~0U, 0) == 0)
    return;
  for (int fd = LOCAL_LOCK_FD + 1; fd < 1024; fd++)
    close(fd);
}

/* The descriptor we were given must be this job's lock, held by us. */
static int
check_lock(const char *dir, struct err *e)
{
  char *path = adapter_local__path(dir, "lock");
  struct stat a;
  struct stat b;
  int rc = 0;

  if (fstat(LOCAL_LOCK_FD, &a) < 0 || stat(path, &b) < 0 ||
      a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    rc = err_set(e, ERR_INVALID, "descriptor %d is not '%s'", LOCAL_LOCK_FD,
                 path);
  } else if (flock(LOCAL_LOCK_FD, LOCK_EX | LOCK_NB) < 0) {
    /* Converting a lock we hold always succeeds: someone else has it. */
    rc = err_set(e, ERR_CONFLICT, "'%s' is locked by another shim", path);
  }
  free(path);
  if (rc == 0 && fcntl(LOCAL_LOCK_FD, F_SETFD, FD_CLOEXEC) < 0)
    rc = err_set(e, ERR_IO, "cannot set close-on-exec on the lock: %s",
                 strerror(errno));
  return rc;
}

static int
write_pid_file(const char *dir, struct err *e)
{
  unsigned long long start;
  char text[64];
  int n;

  if (adapter_local__proc_start(getpid(), &start) < 0)
    return err_set(e, ERR_IO, "cannot read /proc/self/stat");
  n = snprintf(text, sizeof(text), "%ld %llu\n", (long)getpid(), start);
  return file_write_atomic(dir, "shim.pid", text, (size_t)n, 0600,
                                     e);
}

/* ---- the job's side of the fork (no return) ---- */

static void
child_fail(int errfd, int code, const char *fmt, ...) PRINTF_LIKE(3, 4);

/* Report why the job could not start, on the pipe and in its log. */
static void
child_fail(int errfd, int code, const char *fmt, ...)
{
  char msg[START_ERROR_MAX];
  va_list ap;
  ssize_t ignored;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (n < 0)
    n = 0;
  if ((size_t)n >= sizeof(msg))
    n = (int)sizeof(msg) - 1;
  ignored = write(errfd, msg, (size_t)n);
  ignored = write(STDERR_FILENO, "tenbin: ", 8);
  ignored = write(STDERR_FILENO, msg, (size_t)n);
  ignored = write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  _exit(code);
}

static const char *
env_get(char **env, const char *name)
{
  size_t n = strlen(name);

  for (char **p = env; *p != NULL; p++) {
    if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
      return *p + n + 1;
  }
  return NULL;
}

/* Find cmd the way a shell would, on the job's PATH (not the shim's). */
static int
resolve(const char *cmd, char **env, char *out, size_t outlen)
{
  const char *path = env_get(env, "PATH");
  const char *p;

  if (strchr(cmd, '/') != NULL) {
    snprintf(out, outlen, "%s", cmd);
    return 0;
  }
  if (path == NULL)
    path = DEFAULT_PATH;
  for (p = path;; p++) {
    const char *colon = strchr(p, ':');
    int n = colon != NULL ? (int)(colon - p) : (int)strlen(p);
    struct stat st;

    /* An empty PATH entry means the working directory. */
    if ((size_t)snprintf(out, outlen, "%.*s%s%s", n, p, n > 0 ? "/" : "",
                         cmd) < outlen &&
        stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
        access(out, X_OK) == 0)
      return 0;
    if (colon == NULL)
      return -1;
    p = colon;
  }
}

static int
open_output(const char *path, int target)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

  if (fd < 0)
    return -1;
  if (dup2(fd, target) < 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

static void
run_job(const struct shim_spec *s, int errfd, pid_t shim)
{
  char exe[PATH_MAX];
  sigset_t none;

  /* Undo the shim's signal set-up: the job starts like any process. */
  for (int sig = 1; sig < 32; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP)
      signal(sig, SIG_DFL);
  }
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* Its own process group, so a signal to the job never hits the shim. */
  setpgid(0, 0);
  /* A job whose shim died has nobody to record it and would be reported
   * LOST, hence run again: it must not keep running.  getppid() closes
   * the race with a shim that died before prctl. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != shim)
    _exit(127);
  close(LOCAL_LOCK_FD);
  if (open_output(s->stdout_path, STDOUT_FILENO) < 0)
    child_fail(errfd, 127, "cannot open output '%s': %s", s->stdout_path,
               strerror(errno));
  if (s->stderr_path == NULL) {
    if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
      child_fail(errfd, 127, "cannot redirect stderr: %s", strerror(errno));
  } else if (open_output(s->stderr_path, STDERR_FILENO) < 0) {
    child_fail(errfd, 127, "cannot open error output '%s': %s",
               s->stderr_path, strerror(errno));
  }
  if (chdir(s->chdir) < 0)
    child_fail(errfd, 127, "cannot change to directory '%s': %s", s->chdir,
               strerror(errno));
  if (resolve(s->argv[0], s->env, exe, sizeof(exe)) < 0)
    child_fail(errfd, 127, "command '%s' not found", s->argv[0]);
  execve(exe, s->argv, s->env);
  child_fail(errfd, errno == ENOENT ? 127 : 126, "cannot execute '%s': %s",
             exe, strerror(errno));
}

/* ---- the shim's side: supervise until the job has ended ---- */

/* Most children read at once; more are found on the next round. */
#define MAX_CHILDREN 1024
/* How long to wait for the job's last processes once all are SIGKILLed:
 * only a process stuck in the kernel takes long to die. */
#define REAP_MS 5000

/*
 * The shim's children (the job and, the shim being a subreaper, every
 * orphaned descendant of it, zombies included) into out; -1 when the
 * kernel does not offer the list (no CONFIG_PROC_CHILDREN).
 */
static int
list_children(pid_t *out, int max)
{
  char path[64];
  char *text = NULL;
  char *p;
  int n = 0;

  /* The shim is single-threaded: its thread id is its pid. */
  snprintf(path, sizeof(path), "/proc/self/task/%ld/children",
           (long)getpid());
  if (file_read(path, 64u << 10, &text, NULL, NULL) < 0)
    return -1;
  p = text;
  while (n < max) {
    char *end;
    long v = strtol(p, &end, 10);

    if (end == p)
      break;
    out[n++] = (pid_t)v;
    p = end;
  }
  free(text);
  return n;
}

/* Reap orphans of the job that have exited, so a long job that leaves
 * many behind does not fill the process table with zombies.  The job's
 * main process itself stays unreaped (see job_exited()). */
static void
reap_orphans(pid_t job)
{
  pid_t kids[MAX_CHILDREN];
  int n = list_children(kids, MAX_CHILDREN);

  for (int i = 0; i < n; i++) {
    if (kids[i] != job)
      waitpid(kids[i], NULL, WNOHANG);
  }
}

/* Drain the signalfd; returns 1 when a SIGTERM was among the signals. */
static int
drain_signals(int sfd)
{
  struct signalfd_siginfo si;
  int term = 0;

  while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
    if (si.ssi_signo == SIGTERM)
      term = 1;
  }
  return term;
}

/*
 * After the job's main process has been reaped: kill and reap whatever
 * of the job is left, so that "ended" means no process of the job runs
 * on (none holds a GPU handed to the next job) and none lingers as a
 * zombie.  Processes that left the job's process group are reached
 * because the shim is a subreaper: once orphaned they are its children.
 */
static void
end_descendants(int sfd)
{
  int64_t deadline = time_mono_ms() + REAP_MS;

  for (;;) {
    pid_t kids[MAX_CHILDREN];
    struct pollfd pfd = {.fd = sfd, .events = POLLIN};
    int64_t left;
    int n = list_children(kids, MAX_CHILDREN);
    pid_t r;

    /* Our children all belong to the job, and an unreaped child's pid
     * cannot be reused: signalling them is safe. */
    for (int i = 0; i < n; i++)
      kill(kids[i], SIGKILL);
    do
      r = waitpid(-1, NULL, WNOHANG);
    while (r > 0);
    if (r < 0 && errno == ECHILD)
      return;
    left = deadline - time_mono_ms();
    if (left <= 0) {
      log_warn("shim: processes of the job are still alive after %d s",
               REAP_MS / 1000);
      return;
    }
    if (poll(&pfd, 1, (int)left) > 0)
      drain_signals(sfd);
  }
}

struct supervisor {
  pid_t pid;              /* the job, also its process group */
  int64_t grace_ms;
  int64_t limit_at;       /* monotonic deadline of the time limit, or -1 */
  int64_t kill_at;        /* monotonic time to send SIGKILL, or -1 */
  int terminating;
  struct shim_end *end;
};

/* Begin ending the job for reason (cancel or time limit). */
static void
terminate(struct supervisor *sv, const char *reason)
{
  if (sv->terminating)
    return;
  sv->terminating = 1;
  sv->end->reason = reason;
  if (sv->grace_ms == 0) {
    kill(-sv->pid, SIGKILL);
    sv->end->killed_after_grace = 1;
    return;
  }
  kill(-sv->pid, SIGTERM);
  sv->kill_at = time_mono_ms() + sv->grace_ms;
}

static int
job_exited(pid_t pid)
{
  siginfo_t si;

  /* WNOWAIT leaves the job a zombie: while it is unreaped its pid, hence
   * its process group id, cannot be reused, so kill(-pid) stays safe. */
  memset(&si, 0, sizeof(si));
  return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         si.si_pid == pid;
}

static void
supervise(struct supervisor *sv, int sfd, int errfd)
{
  struct buf errbuf;

  buf_init(&errbuf, START_ERROR_MAX - 1);
  for (;;) {
    struct pollfd pfd[2];
    int64_t now;
    int64_t next = -1;
    int timeout;
    int n;

    if (job_exited(sv->pid) && errfd < 0)
      break;
    now = time_mono_ms();
    if (sv->limit_at >= 0 && now >= sv->limit_at) {
      sv->limit_at = -1;
      terminate(sv, LOCAL_END_TIMEOUT);
    }
    if (sv->kill_at >= 0 && now >= sv->kill_at) {
      sv->kill_at = -1;
      kill(-sv->pid, SIGKILL);
      sv->end->killed_after_grace = 1;
    }
    if (sv->limit_at >= 0)
      next = sv->limit_at;
    if (sv->kill_at >= 0 && (next < 0 || sv->kill_at < next))
      next = sv->kill_at;
    timeout = next < 0 ? -1 : (int)(next > now ? next - now : 0);
    pfd[0].fd = sfd;
    pfd[0].events = POLLIN;
    pfd[1].fd = errfd;
    pfd[1].events = POLLIN;
    n = poll(pfd, errfd >= 0 ? 2 : 1, timeout);
    if (n < 0 && errno != EINTR) {
      log_error("shim: poll: %s", strerror(errno));
      sleep(1);
      continue;
    }
    if (n <= 0)
      continue;
    if (errfd >= 0 && pfd[1].revents != 0) {
      char chunk[START_ERROR_MAX];
      ssize_t k = read(errfd, chunk, sizeof(chunk));

      if (k > 0) {
        /* The child writes one report of less than the cap. */
        if (buf_add(&errbuf, chunk, (size_t)k) < 0)
          log_warn("shim: start error report cut");
      } else if (k == 0 || errno != EINTR) {
        close(errfd);
        errfd = -1;
      }
    }
    if (pfd[0].revents != 0) {
      if (drain_signals(sfd))
        terminate(sv, LOCAL_END_CANCELLED);
      reap_orphans(sv->pid);
    }
  }
  if (errbuf.len > 0) {
    sv->end->reason = LOCAL_END_ERROR;
    snprintf(sv->end->error, sizeof(sv->end->error), "%s", buf_str(&errbuf));
  }
  buf_release(&errbuf);
}

/* Cancelled before the job was forked: SIGTERM is already pending. */
static int
cancel_pending(void)
{
  sigset_t pending;

  return sigpending(&pending) == 0 && sigismember(&pending, SIGTERM);
}

int
adapter_local_shim_main(int argc, char **argv)
{
  struct shim_spec spec;
  struct shim_end end;
  struct supervisor sv;
  struct err e = {0};
  const char *dir;
  char stamp[32];
  sigset_t set;
  int errpipe[2] = {-1, -1};
  int sfd = -1;
  int status = 0;
  int rc = 1;
  pid_t pid;

  memset(&spec, 0, sizeof(spec));
  memset(&end, 0, sizeof(end));
  end.exit_code = -1;
  /* First of all: a cancel that arrives while we set up must wait. */
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGPIPE);
  sigprocmask(SIG_BLOCK, &set, NULL);
  if (argc != 1) {
    log_error("usage: tenbind --shim JOBDIR");
    return 2;
  }
  dir = argv[0];
  close_inherited_fds();
  if (check_lock(dir, &e) < 0) {
    log_error("shim: %s", err_msg(&e));
    return 2;
  }
  if (write_pid_file(dir, &e) < 0) {
    log_error("shim: %s", err_msg(&e));
    goto out;
  }
  if (load_spec(dir, &spec, &e) < 0) {
    /* Recorded, so tenbind reports why instead of a vanished shim. */
    end.reason = LOCAL_END_ERROR;
    snprintf(end.error, sizeof(end.error), "%s", err_msg(&e));
    end.start_ms = end.end_ms = time_now_ms();
    log_error("shim: %s", end.error);
    goto write;
  }
  if (cancel_pending()) {
    end.reason = LOCAL_END_CANCELLED;
    end.start_ms = end.end_ms = time_now_ms();
    goto write;
  }
  end.start_ms = time_now_ms();
  time_format_iso(end.start_ms, stamp, sizeof(stamp));
  /* Durable before the fork: a job process exists only if this does. */
  if (file_write_atomic(dir, "started", stamp, strlen(stamp), 0600,
                                  &e) < 0) {
    log_error("shim: %s", err_msg(&e));
    goto out;
  }
  sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0 || pipe2(errpipe, O_CLOEXEC) < 0) {
    end.reason = LOCAL_END_ERROR;
    snprintf(end.error, sizeof(end.error), "shim: cannot set up: %s",
             strerror(errno));
    end.end_ms = time_now_ms();
    goto write;
  }
  /* Orphans of the job become the shim's children, not init's: they
   * are ended with the job and reaped (init may not reap). */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
    log_warn("shim: cannot become a subreaper: %s", strerror(errno));
  {
    pid_t self = getpid();

    pid = fork();
    if (pid == 0) {
      close(errpipe[0]);
      run_job(&spec, errpipe[1], self);
    }
  }
  close(errpipe[1]);
  errpipe[1] = -1;
  if (pid < 0) {
    end.reason = LOCAL_END_ERROR;
    snprintf(end.error, sizeof(end.error), "shim: cannot fork: %s",
             strerror(errno));
    end.end_ms = time_now_ms();
    goto write;
  }
  /* Also here, so the group exists before any kill(-pid) below. */
  setpgid(pid, pid);
  end.reason = LOCAL_END_EXITED;
  memset(&sv, 0, sizeof(sv));
  sv.pid = pid;
  sv.grace_ms = spec.cancel_grace_s * 1000;
  sv.limit_at = spec.time_limit_s > 0
                    ? time_mono_ms() + spec.time_limit_s * 1000
                    : -1;
  sv.kill_at = -1;
  sv.end = &end;
  supervise(&sv, sfd, errpipe[0]);
  errpipe[0] = -1; /* supervise() closed it */
  /* The job's main process has ended; like Slurm, end whatever it left
   * behind in its process group, then reap it and the rest. */
  kill(-pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      log_error("shim: waitpid: %s", strerror(errno));
      goto out;
    }
  }
  end_descendants(sfd);
  end.end_ms = time_now_ms();
  if (WIFEXITED(status))
    end.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    end.signal = WTERMSIG(status);
write:
  if (write_status(dir, spec.job_id, &end, &e) < 0) {
    log_error("shim: %s", err_msg(&e));
    goto out;
  }
  rc = 0;
out:
  if (sfd >= 0)
    close(sfd);
  if (errpipe[0] >= 0)
    close(errpipe[0]);
  spec_release(&spec);
  return rc;
}
