/*
 * Test crash points and fault switches (see fault.h); empty unless the
 * build defines TENBIN_FAULTS.
 */
#include "fault.h"

#ifdef TENBIN_FAULTS

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void
fault_point(const char *name)
{
  static const char *armed;
  static int looked;

  if (!looked) {
    armed = getenv("TENBIN_FAULT");
    looked = 1;
  }
  if (armed == NULL || strcmp(armed, name) != 0)
    return;
  log_warn("fault point '%s' reached: killing myself (TENBIN_FAULT)", name);
  raise(SIGKILL);
}

int
fault_armed(const char *name)
{
  const char *armed = getenv("TENBIN_FAULT");

  return armed != NULL && strcmp(armed, name) == 0;
}
#endif
