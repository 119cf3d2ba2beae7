/*
 * A reserve of empty files made ahead of time, so that a pull names new
 * files instead of creating them.
 *
 * Creating a file allocates an inode, and that is not always cheap: on
 * an ext4 without a journal (this bench machine's) the allocator skips
 * every inode freed in the last minute or more, reading the inode table
 * to find out, and 600 creates took 0.05-0.45 s here against 0.014 s for
 * 600 renames.  A pull of a few hundred new files among tens of
 * thousands spent a fifth of its CPU there, more after large deletes.
 * So the agent fills the reserve in the background after a pull, when
 * nothing waits (pull_prestage.c), and the next pull takes its new files
 * from it by rename; once the reserve is empty, it creates them.
 *
 * The files live in one directory of the store (.tenbin/reserve), named
 * by number, empty, mode 0600, and must be on the file system of the
 * staging trees (a rename across file systems turns the reserve off).
 * A file is taken only when it is still an empty regular file with one
 * link: an inode that something else shares is never written.
 *
 * Thread-safe: a mutex guards the list of names; the file system calls
 * run outside it.  The handle belongs to whoever opened it (the agent);
 * reserve_close frees it and leaves the files for the next start.
 */
#ifndef TENBIN_SYNC_RESERVE_H
#define TENBIN_SYNC_RESERVE_H

#include <stdatomic.h>
#include <stddef.h>

#include "util/err.h"

#define RESERVE_MIN 256u  /* files kept whatever the last pull made */
#define RESERVE_MAX 4096u /* files kept at most */

struct reserve;

/* Open the reserve in dir (an absolute path, made when missing) and
 * count the files a previous run left there.  *out is new:
 * reserve_close(). */
int reserve_open(const char *dir, struct reserve **out, struct err *e)
    WARN_UNUSED;
/* Free r (NULL-safe); the files stay. */
void reserve_close(struct reserve *r);

/*
 * A new empty file called name (one component) in the directory dirfd,
 * open for writing (the caller closes the descriptor): a file of the
 * reserve moved there, or one created now when none is left.  Like
 * openat(O_CREAT | O_EXCL): ERR_CONFLICT when name exists, which it
 * never replaces; ERR_IO for any other failure, with e saying why.
 */
int reserve_take(struct reserve *r, int dirfd, const char *name,
                 struct err *e) WARN_UNUSED;

/*
 * Create files until the reserve holds want of them (at most
 * RESERVE_MAX), or until *stop is set.  Blocking: for the thread pool.
 * Returns 0, or ERR_IO when a file could not be made (those made stay).
 */
int reserve_fill(struct reserve *r, size_t want, const atomic_int *stop,
                 struct err *e) WARN_UNUSED;

/* Files held now. */
size_t reserve_count(struct reserve *r);

#endif
