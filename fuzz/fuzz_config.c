/*
 * tenbind's configuration file: config_load of the input, and
 * config_parse_listen of the input as a --listen value.  The file is a
 * memfd read through /proc/self/fd, so nothing reaches a disk.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/config.h"
#include "fuzz/fuzz.h"

static int memfd = -1;
static char path[64];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  memfd = memfd_create("tenbin-fuzz-config", MFD_CLOEXEC);
  if (memfd < 0)
    abort();
  snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct daemon_config cfg;
  struct err e = {0};
  char host[64];
  uint16_t port;
  char *text;

  if (ftruncate(memfd, 0) < 0 ||
      (size > 0 && pwrite(memfd, data, size, 0) != (ssize_t)size))
    abort();
  if (config_load(path, NULL, &cfg, &e) == 0) {
    FUZZ_CHECK(cfg.root != NULL && cfg.sites != NULL);
    config_release(&cfg);
  }
  /* The --listen option takes the same syntax from the command line. */
  text = fuzz_cstr(data, size);
  if (config_parse_listen(text, host, sizeof(host), &port, &e) == 0)
    (void)config_is_loopback(host);
  free(text);
  return 0;
}
