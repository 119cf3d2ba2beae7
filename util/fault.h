/*
 * Test-only fault switches: crash points and other faults, compiled in
 * only when the build defines TENBIN_FAULTS (cmake -DTENBIN_FAULTS=ON,
 * which scripts/test sets).  A production build has none: no
 * environment is read, and every switch is the constant "not armed", so
 * the code it guards folds away (SQLite's SQLITE_TEST).
 *
 * With TENBIN_FAULT=NAME in its environment, a test build kills itself
 * with SIGKILL when it reaches fault_point(NAME): no handler, no flush,
 * the same as `kill -9` landing there.  Without the variable a point
 * costs one comparison.  Names are listed where they are used
 * (grep fault_point, fault_armed).
 */
#ifndef TENBIN_UTIL_FAULT_H
#define TENBIN_UTIL_FAULT_H

#ifdef TENBIN_FAULTS
void fault_point(const char *name);
/*
 * 1 when TENBIN_FAULT names this fault, for faults that are not a crash
 * (a test-only switch that, say, corrupts what a peer is sent).  Read it
 * once, on the loop, and keep the answer.
 */
int fault_armed(const char *name);
#else
#define fault_point(name) ((void)(name))
#define fault_armed(name) ((void)(name), 0)
#endif

#endif
