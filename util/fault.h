/*
 * Crash points for tests of crash safety at an exact moment.
 *
 * With TENBIN_FAULT=NAME in its environment, the process kills itself
 * with SIGKILL when it reaches fault_point(NAME): no handler, no flush,
 * the same as `kill -9` landing there.  Without the variable a point
 * costs one comparison.  Names are listed where they are used
 * (grep fault_point).
 */
#ifndef TENBIN_UTIL_FAULT_H
#define TENBIN_UTIL_FAULT_H

void fault_point(const char *name);
/*
 * 1 when TENBIN_FAULT names this fault, for faults that are not a crash
 * (a test-only switch that, say, corrupts what a peer is sent).  Read it
 * once, on the loop, and keep the answer.
 */
int fault_armed(const char *name);

#endif
