/*
 * One way to run a helper program and read its output (proc.h).
 */
#define _GNU_SOURCE /* pipe2 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "timeutil.h"

extern char **environ;

int
proc_find(const char *path, const char *prog, char *out, size_t outlen)
{
  const char *p;

  if (path == NULL)
    path = "/usr/bin:/bin";
  for (p = path; *p != '\0';) {
    size_t len = strcspn(p, ":");
    int n = snprintf(out, outlen, "%.*s/%s", (int)len, p, prog);

    if (len > 0 && n > 0 && (size_t)n < outlen && access(out, X_OK) == 0)
      return 0;
    p += len;
    if (*p == ':')
      p++;
  }
  return -1;
}

int
proc_capture(const char *exe, char *const argv[], char *const envp[],
             int timeout_ms, size_t max, char **out, struct err *e)
{
  const char *what = argv[1] != NULL ? argv[1] : "";
  posix_spawn_file_actions_t fa;
  int64_t deadline = time_mono_ms() + timeout_ms;
  int pipefd[2] = {-1, -1};
  pid_t pid = -1;
  struct buf b;
  int status = 0;
  int rc;

  buf_init(&b, max);
  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return err_set(e, ERR_IO, "cannot create a pipe: %s", strerror(errno));
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY,
                                   0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY,
                                   0);
  rc = posix_spawn(&pid, exe, &fa, NULL, argv,
                   envp != NULL ? envp : environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    pid = -1;
    rc = err_set(e, ERR_IO, "cannot run '%s': %s", exe, strerror(rc));
    goto out;
  }
  for (;;) {
    struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
    char chunk[4096];
    int64_t left = deadline - time_mono_ms();
    ssize_t k;
    int n;

    if (left <= 0) {
      rc = err_set(e, ERR_TIMEOUT, "'%s %s' did not answer in %d s",
                   argv[0], what, timeout_ms / 1000);
      break;
    }
    n = poll(&pfd, 1, (int)left);
    if (n < 0 && errno != EINTR) {
      rc = err_set(e, ERR_IO, "cannot poll '%s': %s", argv[0],
                   strerror(errno));
      break;
    }
    if (n <= 0)
      continue;
    k = read(pipefd[0], chunk, sizeof(chunk));
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    if (buf_add(&b, chunk, (size_t)k) < 0) {
      rc = err_set(e, ERR_TOO_LARGE, "'%s %s' printed more than %zu bytes",
                   argv[0], what, max);
      break;
    }
  }
  if (rc < 0)
    kill(pid, SIGKILL);
out:
  if (pid > 0) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    if (rc == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
      rc = err_set(e, ERR_IO, "'%s %s' failed with status %d", argv[0],
                   what, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  close(pipefd[0]);
  if (rc == 0)
    *out = buf_take(&b, NULL);
  buf_release(&b);
  return rc;
}
