/* The change journal: while a session runs, a watcher process of csandbox's own (outside
 * the sandbox, as the user) follows every change under the session's writable roots with
 * inotify and hands each changed path to a judge, in batches, within a fraction of a
 * second. Complete by construction: a directory is watched before it is listed, and what
 * changed in it before the watch shows by its ctime, which no unprivileged process can set
 * back; a directory that could not be watched (the watch limit) or a queue that overflowed
 * is walked again at the end by ctime. Its cost grows with what changed: the walk that sets
 * the watches runs beside the session, not after it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

struct cs_error;

struct journal_ops {
        /* One changed path (rel below root number root, whose dir fd is root_fd), in the
         * watcher process. */
        void (*changed)(void *ctx, unsigned root, int root_fd, const char *rel);
        /* After each batch, and once more at the end (last). */
        void (*flushed)(void *ctx, bool last);
        /* While the session runs: a directory could not be watched for want of watches
         * (blind, err the errno, root and rel the directory), or, after a blind one, every
         * directory is watched again (!blind). The watcher retries every second. NULL: not
         * told. */
        void (*blind)(void *ctx, bool blind, unsigned root, const char *rel, int err);
        /* Whether a changed path is to be judged again every second while the session runs
         * and at its end, wherever it then leads (the judge's choice: what it reads through
         * a path may change with no event on it). NULL: none is. */
        bool (*rejudge)(void *ctx, int root_fd, const char *rel);
        void *ctx;
};

struct journal {
        pid_t pid;
        int ctl;  /* closed by journal_finish: the session is over */
        int done; /* the watcher writes one byte here once every change is judged */
};

/* Start watching the directory fds roots[0..n) (kept open by the watcher). since: changes
 * at or after it count (the launch's start). */
int journal_start(struct journal *j, const int *roots, unsigned n, const struct timespec *since,
                  const struct journal_ops *ops, struct cs_error *err);
/* The session is over: wait until the watcher has judged every change (and flushed). */
int journal_finish(struct journal *j, struct cs_error *err);
/* Stop it without waiting (an error path). */
void journal_abort(struct journal *j);

/* Without a watcher, in this process: every path below the roots whose ctime is at or after
 * since, handed to ops as journal_start's watcher would at its end (a directory that changed
 * counts whole). How a launch finishes the check of a session whose csandbox was killed:
 * ctime cannot be set back, so nothing the session changed is missed. */
int journal_scan(const int *roots, unsigned n, const struct timespec *since,
                 const struct journal_ops *ops);
/* A regular file below root_fd with a setuid or setgid bit loses both (any local user
 * running it would act as the user). */
void journal_strip_setid(int root_fd, const char *rel);

/* The watcher's bookkeeping, exposed for the unit test: whether a timestamp counts. */
bool journal_after(const struct timespec *t, const struct timespec *since);
