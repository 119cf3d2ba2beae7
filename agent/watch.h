/*
 * Watches: what changed in a published tree since its last scan, from
 * inotify, so that a republish looks at those paths alone
 * (manifest_scan_changes) instead of stat-ing every entry
 * (docs/SYNC.md "Watching a tree").
 *
 * A scan builds a watch: the build's hook (a manifest_dir_hook) adds
 * each directory to an inotify instance before the scan lists it, so
 * that any change after the listing is reported.  The loop then reads
 * the events into a set of changed paths, which the next publish takes.
 * What the set cannot describe exactly makes the watch lost, and the
 * next publish scans the whole tree and builds a new one: a directory
 * renamed (every path beneath it moves), the kernel's queue overflowing,
 * the tree itself deleted or unmounted, more than WATCH_CHANGES_MAX
 * paths, a directory that could not be watched, a publish that failed
 * after taking the changes.  A tree on a network or cluster filesystem
 * (NFS, SMB, Lustre, GPFS, Ceph, BeeGFS, FUSE...) is never watched:
 * inotify does not see other clients' writes there.
 *
 * What inotify never reports, and a watched publish therefore misses:
 * writes through a shared mmap, and changes made through a hard link
 * from outside the tree.  Hence watching is the agent's opt-in
 * (tenbin-agent --watch).
 *
 * Threads: a build's hook runs on the scan's threads (it locks); every
 * other call is the loop's.  Ownership: watch_start consumes its build;
 * watch_extended and watch_build_free consume theirs.
 */
#ifndef TENBIN_SYNC_WATCH_H
#define TENBIN_SYNC_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "sync/manifest.h"

#define WATCH_CHANGES_MAX 1000000u

struct watch;
struct watch_build;

/* A build on a new inotify instance, for a full scan of the tree named
 * label (for logs); at_root: the tree is the agent's root, whose
 * ".tenbin" is not watched.  NULL (logged) when inotify is unavailable. */
struct watch_build *watch_build_new(const char *label, int at_root);
/* A build adding to w's instance, for a scan of w's changes: the
 * directories it lists are new ones. */
struct watch_build *watch_extend(struct watch *w);
/* The hook to hand the scan (points into b). */
const struct manifest_dir_hook *watch_build_hook(struct watch_build *b);
/* The scan failed: a new instance is closed; an extension loses its
 * watch (its changes were taken). */
void watch_build_free(struct watch_build *b);

/* After the full scan succeeded: the watch it built, polled on loop, or
 * NULL when a directory could not be watched (logged). */
struct watch *watch_start(uv_loop_t *loop, struct watch_build *b);
/* After a scan of w's changes succeeded: the directories it added are
 * known, and their events that came meanwhile are noted. */
void watch_extended(struct watch *w, struct watch_build *b);

struct watch_changes {
  struct manifest_change *v; /* strcmp order; paths owned */
  size_t n;
};

/* The changes noted since the last take, read up to now (every write
 * that returned before this call is in them), into out (new contents);
 * the set starts empty again.  0, or ERR_CONFLICT when the watch is lost
 * (out empty): scan the whole tree. */
int watch_take(struct watch *w, struct watch_changes *out);
void watch_changes_release(struct watch_changes *c);
/*
 * The changes noted after seq `since` (0: all since the last take),
 * copied into out (new contents), leaving the set as it is: what a draft
 * of the next publish looks at (publish.c).  *upto: the seq they reach,
 * the next peek's since.  0, or ERR_CONFLICT when the watch is lost.
 */
int watch_peek(struct watch *w, uint64_t since, struct watch_changes *out,
               uint64_t *upto);
/* Changes noted so far, ever (grows with each; never reset by a take). */
uint64_t watch_seq(const struct watch *w);
/* cb(arg) on the loop once ms have passed without a change after one,
 * until the watch is lost or closed; cb NULL: never. */
void watch_on_quiet(struct watch *w, uint64_t ms, void (*cb)(void *arg),
                    void *arg);
/* Changes were taken and then not used: the next scan must be whole. */
void watch_lose(struct watch *w, const char *why);

/* Stop watching; w is freed on the loop, then cb(arg) (may be NULL). */
void watch_close(struct watch *w, void (*cb)(void *arg), void *arg);

#endif
