/* The change journal (journal.h): an inotify watcher in a process of its own. */
#include "journal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WATCH_MASK                                                                                 \
        (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE |        \
         IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
#define FLUSH_MS    100
#define FLUSH_BATCH 4096u
#define WALK_CHUNK  64u
#define MOVES_MAX   64u
#define RETRY_MS    1000

struct dir_entry {
        unsigned root;
        char *rel; /* NULL: no watch with this number */
};

struct pathref {
        unsigned root;
        char *rel;
        bool all; /* walk: every entry below counts as changed */
};

struct move {
        uint32_t cookie;
        unsigned root;
        char *rel;
};

struct watcher {
        const int *roots;
        unsigned n_roots;
        struct timespec since;
        const struct journal_ops *ops;
        int in;
        struct dir_entry *by_wd;
        size_t cap_wd;
        struct pathref *queue; /* directories to watch and list */
        size_t n_queue, head_queue, cap_queue;
        struct pathref *dirty;
        size_t n_dirty, cap_dirty;
        struct pathref *unwatched; /* could not be watched: walked again at the end */
        size_t n_unwatched, cap_unwatched;
        struct move moves[MOVES_MAX];
        size_t n_moves;
        /* Referrers the session changed: a .git entry, a commondir or gitdir file, a link.
         * What they lead to may change later, anywhere (even where nothing is watched):
         * they are judged again after every batch and at the end. */
        struct pathref *refs;
        size_t n_refs, cap_refs;
        bool overflow, final;
        bool blind;  /* told ops->blind: a directory lacks its watch for want of watches */
        bool short_; /* a watch was refused for want of watches since the last retry */
        long long retried;
};

bool journal_after(const struct timespec *t, const struct timespec *since)
{
        return t->tv_sec > since->tv_sec ||
               (t->tv_sec == since->tv_sec && t->tv_nsec >= since->tv_nsec);
}

static char *join(const char *dir, const char *name)
{
        char *s = NULL;

        if (asprintf(&s, "%s%s%s", dir, *dir ? "/" : "", name) < 0)
                return NULL;
        return s;
}

/* Append to one of the lists; the list takes rel. Out of memory: the process ends with an
 * error, and the parent then keeps the session's record as its report (fail closed). */
static void push(struct pathref **v, size_t *n, size_t *cap, unsigned root, char *rel, bool all)
{
        if (!rel)
                _exit(3);
        if (*n == *cap) {
                size_t c = *cap ? *cap * 2 : 256;
                struct pathref *nv = realloc(*v, c * sizeof(**v));

                if (!nv)
                        _exit(3);
                *v = nv;
                *cap = c;
        }
        (*v)[(*n)++] = (struct pathref){.root = root, .rel = rel, .all = all};
}

static void mark(struct watcher *w, unsigned root, const char *rel)
{
        if (*rel)
                push(&w->dirty, &w->n_dirty, &w->cap_dirty, root, strdup(rel), false);
}

static void enqueue(struct watcher *w, unsigned root, const char *rel, bool all)
{
        if (w->head_queue > 0 && w->head_queue == w->n_queue)
                w->head_queue = w->n_queue = 0;
        push(&w->queue, &w->n_queue, &w->cap_queue, root, strdup(rel), all);
}

static void set_wd(struct watcher *w, int wd, unsigned root, const char *rel)
{
        if ((size_t)wd >= w->cap_wd) {
                size_t c = (size_t)wd * 2 + 64;
                struct dir_entry *nv = realloc(w->by_wd, c * sizeof(*nv));

                if (!nv)
                        _exit(3);
                memset(nv + w->cap_wd, 0, (c - w->cap_wd) * sizeof(*nv));
                w->by_wd = nv;
                w->cap_wd = c;
        }
        free(w->by_wd[wd].rel);
        w->by_wd[wd].root = root;
        w->by_wd[wd].rel = strdup(rel);
        if (!w->by_wd[wd].rel)
                _exit(3);
}

/* Watch the directory root/rel, then list it: an entry changed before the watch existed
 * shows by its ctime (or counts whole, for a directory that appeared in the session). */
static void walk_one(struct watcher *w, const struct pathref *d)
{
        int fd = cs_open_beneath(w->roots[d->root], *d->rel ? d->rel : ".", O_RDONLY | O_DIRECTORY);
        char proc[64];
        DIR *dir;
        struct dirent *de;
        int wd;

        if (fd < 0) {
                /* Gone, or a link now: the change that did it is judged. Unreadable (mode
                 * 000, which the session can set and undo): listed again when its mode
                 * changes, and at the end. */
                if ((errno == EACCES || errno == EPERM) && !w->final)
                        push(&w->unwatched, &w->n_unwatched, &w->cap_unwatched, d->root,
                             strdup(d->rel), true);
                return;
        }
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        wd = w->in >= 0 ? inotify_add_watch(w->in, proc, WATCH_MASK) : -1;
        if (wd >= 0)
                set_wd(w, wd, d->root, d->rel);
        else if (!w->final) {
                int e = errno;

                push(&w->unwatched, &w->n_unwatched, &w->cap_unwatched, d->root, strdup(d->rel),
                     d->all);
                /* Out of watches (the session may have taken them): tell, so that the
                 * session is paused until this one can be watched. */
                if (e == ENOSPC || e == ENOMEM) {
                        w->short_ = true;
                        if (!w->blind && w->ops->blind)
                                w->ops->blind(w->ops->ctx, true, d->root, d->rel, e);
                        w->blind = true;
                }
        }
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return;
        }
        while ((de = readdir(dir))) {
                struct stat st;
                _cleanup_free_ char *child = NULL;
                bool changed;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                child = join(d->rel, de->d_name);
                if (!child)
                        _exit(3);
                changed = d->all || journal_after(&st.st_ctim, &w->since);
                if (changed)
                        mark(w, d->root, child);
                /* Without events (a scan), a directory that changed may have been moved in
                 * whole, its entries keeping their old ctimes: all of it counts. */
                if (S_ISDIR(st.st_mode))
                        enqueue(w, d->root, child, d->all || (w->in < 0 && changed));
        }
        closedir(dir);
}

/* Every watch whose path is old (or below it) now has new's path, in root nroot. */
static void rename_prefix(struct watcher *w, unsigned oroot, const char *old, unsigned nroot,
                          const char *new)
{
        size_t ol = strlen(old);

        for (size_t i = 0; i < w->cap_wd; i++) {
                struct dir_entry *e = &w->by_wd[i];
                char *s = NULL;

                if (!e->rel || e->root != oroot || strncmp(e->rel, old, ol) != 0 ||
                    (e->rel[ol] && e->rel[ol] != '/'))
                        continue;
                if (asprintf(&s, "%s%s", new, e->rel + ol) < 0)
                        _exit(3);
                free(e->rel);
                e->rel = s;
                e->root = nroot;
        }
}

static void read_events(struct watcher *w)
{
        char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;

        while ((n = read(w->in, buf, sizeof(buf))) > 0) {
                for (char *p = buf; p < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *)(void *)p;
                        struct dir_entry *d;
                        _cleanup_free_ char *child = NULL;

                        p += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                w->overflow = true;
                                continue;
                        }
                        if (ev->wd < 0 || (size_t)ev->wd >= w->cap_wd || !w->by_wd[ev->wd].rel)
                                continue;
                        d = &w->by_wd[ev->wd];
                        if (ev->mask & IN_IGNORED) {
                                free(d->rel);
                                d->rel = NULL;
                                continue;
                        }
                        if (ev->len == 0 || !ev->name[0]) {
                                mark(w, d->root, d->rel);
                                continue;
                        }
                        child = join(d->rel, ev->name);
                        if (!child)
                                _exit(3);
                        mark(w, d->root, child);
                        if (!(ev->mask & IN_ISDIR))
                                continue;
                        if (ev->mask & IN_MOVED_FROM) {
                                if (w->n_moves == MOVES_MAX) {
                                        free(w->moves[0].rel);
                                        memmove(w->moves, w->moves + 1,
                                                --w->n_moves * sizeof(w->moves[0]));
                                }
                                w->moves[w->n_moves++] = (struct move){
                                    .cookie = ev->cookie, .root = d->root, .rel = strdup(child)};
                                continue;
                        }
                        if (ev->mask & IN_MOVED_TO) {
                                for (size_t i = 0; i < w->n_moves; i++) {
                                        if (w->moves[i].cookie != ev->cookie || !w->moves[i].rel)
                                                continue;
                                        rename_prefix(w, w->moves[i].root, w->moves[i].rel, d->root,
                                                      child);
                                        free(w->moves[i].rel);
                                        w->moves[i] = w->moves[--w->n_moves];
                                        break;
                                }
                        }
                        /* Created or moved in: every entry below counts as changed (a
                         * directory moved into place as a .git, say). A directory whose
                         * mode changed may be readable now where it was not: listed whole. */
                        if (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_ATTRIB))
                                enqueue(w, d->root, child, true);
                }
        }
}

static int ref_cmp(const void *a, const void *b)
{
        const struct pathref *x = a, *y = b;

        if (x->root != y->root)
                return x->root < y->root ? -1 : 1;
        return strcmp(x->rel, y->rel);
}

static void remember_referrer(struct watcher *w, const struct pathref *d)
{
        for (size_t i = 0; i < w->n_refs; i++)
                if (w->refs[i].root == d->root && strcmp(w->refs[i].rel, d->rel) == 0)
                        return;
        push(&w->refs, &w->n_refs, &w->cap_refs, d->root, strdup(d->rel), false);
}

/* The referrers, judged again with this batch (all of them at the end; while the session
 * runs, as many as stay cheap to judge at every batch). */
#define REFS_EVERY_BATCH 256u
static void rejudge_referrers(struct watcher *w, bool all)
{
        if (!all && w->n_refs > REFS_EVERY_BATCH)
                return;
        for (size_t i = 0; i < w->n_refs; i++)
                mark(w, w->refs[i].root, w->refs[i].rel);
}

static void flush(struct watcher *w)
{
        if (w->n_dirty == 0)
                return;
        /* (A scan sees the final state once: nothing to judge again.) */
        if (w->in >= 0)
                rejudge_referrers(w, w->final);
        qsort(w->dirty, w->n_dirty, sizeof(w->dirty[0]), ref_cmp);
        for (size_t i = 0; i < w->n_dirty; i++) {
                if (i > 0 && ref_cmp(&w->dirty[i], &w->dirty[i - 1]) == 0)
                        continue;
                if (w->ops->rejudge &&
                    w->ops->rejudge(w->ops->ctx, w->roots[w->dirty[i].root], w->dirty[i].rel))
                        remember_referrer(w, &w->dirty[i]);
                w->ops->changed(w->ops->ctx, w->dirty[i].root, w->roots[w->dirty[i].root],
                                w->dirty[i].rel);
        }
        for (size_t i = 0; i < w->n_dirty; i++)
                free(w->dirty[i].rel);
        w->n_dirty = 0;
        w->ops->flushed(w->ops->ctx, false);
}

static long long now_ms(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void walk_all(struct watcher *w)
{
        for (unsigned r = 0; r < w->n_roots; r++)
                if (w->roots[r] >= 0)
                        enqueue(w, r, "", false);
}

/* Is an ancestor of ref (the same root) in the sorted list v[0..n)? */
static bool ancestor_listed(const struct pathref *v, size_t n, const struct pathref *ref)
{
        _cleanup_free_ char *up = strdup(ref->rel);

        if (!up)
                _exit(3);
        for (char *slash = strrchr(up, '/');; slash = strrchr(up, '/')) {
                struct pathref key = {.root = ref->root, .rel = up};

                if (slash)
                        *slash = '\0';
                else if (*up)
                        *up = '\0';
                else
                        return false;
                if (bsearch(&key, v, n, sizeof(*v), ref_cmp))
                        return true;
        }
}

/* Blind: once a second, try to watch the first directory left unwatched; when that works,
 * walk every topmost unwatched directory again (watch, then list by ctime), and when that
 * walk ends without a refusal, every directory is watched: say so. The unwatched list keeps
 * what stays unwatched, for the final walk. */
static void retry_blind(struct watcher *w, bool finishing)
{
        bool walking = w->head_queue < w->n_queue;
        struct pathref *v = w->unwatched;
        size_t n = w->n_unwatched;

        if (!w->blind || finishing || walking)
                return;
        if (!w->short_) {
                w->blind = false;
                if (w->ops->blind)
                        w->ops->blind(w->ops->ctx, false, 0, "", 0);
                return;
        }
        if (now_ms() - w->retried < RETRY_MS)
                return;
        w->retried = now_ms();
        if (n) {
                int fd = cs_open_beneath(w->roots[v[0].root], *v[0].rel ? v[0].rel : ".",
                                         O_RDONLY | O_DIRECTORY);
                char proc[64];
                int wd = -1;

                if (fd >= 0) {
                        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                        wd = inotify_add_watch(w->in, proc, WATCH_MASK);
                        close(fd);
                        if (wd < 0)
                                return; /* still out of watches */
                        set_wd(w, wd, v[0].root, v[0].rel);
                }
        }
        w->short_ = false;
        qsort(v, n, sizeof(*v), ref_cmp);
        for (size_t i = 0; i < n; i++)
                if ((i == 0 || ref_cmp(&v[i], &v[i - 1]) != 0) && !ancestor_listed(v, n, &v[i]))
                        enqueue(w, v[i].root, v[i].rel, v[i].all);
        for (size_t i = 0; i < n; i++)
                free(v[i].rel);
        w->n_unwatched = 0;
}

static _Noreturn void watcher_main(struct watcher *w, int ctl, int done)
{
        long long last = now_ms(), last_refs = last;
        bool finishing = false;

        walk_all(w);
        for (;;) {
                struct pollfd p[2] = {{.fd = w->in, .events = POLLIN},
                                      {.fd = ctl, .events = POLLIN}};
                bool walking = w->head_queue < w->n_queue;

                (void)poll(p, finishing ? 1 : 2, walking || finishing ? 0 : FLUSH_MS);
                retry_blind(w, finishing);
                if (!finishing && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
                        finishing = true;
                read_events(w);
                if (w->overflow) {
                        /* Events were lost: every root is walked again, by ctime. */
                        w->overflow = false;
                        walk_all(w);
                }
                for (unsigned k = 0; k < WALK_CHUNK && w->head_queue < w->n_queue; k++) {
                        struct pathref d = w->queue[w->head_queue++];

                        walk_one(w, &d);
                        free(d.rel);
                }
                /* What a referrer leads to may change where no watch sees it (outside the
                 * roots): judged again every second too. */
                if (w->n_refs && now_ms() - last_refs >= 1000) {
                        rejudge_referrers(w, false);
                        last_refs = now_ms();
                }
                if (w->n_dirty &&
                    (finishing || w->n_dirty >= FLUSH_BATCH || now_ms() - last >= FLUSH_MS)) {
                        flush(w);
                        last = now_ms();
                }
                if (finishing && w->head_queue == w->n_queue) {
                        read_events(w);
                        if (w->overflow || w->head_queue < w->n_queue)
                                continue;
                        if (!w->final) {
                                /* What could not be watched is listed again, by ctime. */
                                w->final = true;
                                for (size_t i = 0; i < w->n_unwatched; i++)
                                        enqueue(w, w->unwatched[i].root, w->unwatched[i].rel,
                                                w->unwatched[i].all);
                                if (w->head_queue < w->n_queue)
                                        continue;
                        }
                        rejudge_referrers(w, true);
                        flush(w);
                        w->ops->flushed(w->ops->ctx, true);
                        /* Said before the exit: closing the inotify instance waits for the
                         * kernel's grace period (fsnotify's SRCU, 10-20 ms), which csandbox
                         * need not wait for. */
                        (void)!write(done, "d", 1);
                        _exit(0);
                }
        }
}

int journal_start(struct journal *j, const int *roots, unsigned n, const struct timespec *since,
                  const struct journal_ops *ops, struct cs_error *err)
{
        int ctl[2], done[2], in;
        pid_t parent = getpid();

        j->pid = -1;
        j->ctl = -1;
        j->done = -1;
        in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (in < 0)
                return cs_error_set(err, errno,
                                    "start the change journal (inotify_init1); raise "
                                    "fs.inotify.max_user_instances");
        if (pipe2(ctl, O_CLOEXEC) < 0) {
                close(in);
                return cs_error_set(err, errno, "start the change journal");
        }
        if (pipe2(done, O_CLOEXEC) < 0) {
                close(in);
                close(ctl[0]);
                close(ctl[1]);
                return cs_error_set(err, errno, "start the change journal");
        }
        j->pid = fork();
        if (j->pid < 0) {
                close(in);
                close(ctl[0]);
                close(ctl[1]);
                close(done[0]);
                close(done[1]);
                return cs_error_set(err, errno, "start the change journal");
        }
        if (j->pid == 0) {
                struct watcher w = {
                    .roots = roots, .n_roots = n, .since = *since, .ops = ops, .in = in};

                close(ctl[1]);
                close(done[0]);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(2);
                /* Signals are csandbox's to forward, not the journal's: the journal ends
                 * when csandbox says so (or dies). A process group of its own keeps out
                 * what is sent to csandbox's (`timeout`, a CI runner, the terminal's keys);
                 * what is sent to it by pid is ignored as well. */
                (void)setpgid(0, 0);
                signal(SIGTERM, SIG_IGN);
                signal(SIGUSR1, SIG_IGN);
                signal(SIGUSR2, SIG_IGN);
                signal(SIGALRM, SIG_IGN);
                signal(SIGINT, SIG_IGN);
                signal(SIGQUIT, SIG_IGN);
                signal(SIGHUP, SIG_IGN);
                signal(SIGTSTP, SIG_IGN);
                signal(SIGTTOU, SIG_IGN);
                signal(SIGPIPE, SIG_IGN);
                watcher_main(&w, ctl[0], done[1]);
        }
        close(in);
        close(ctl[0]);
        close(done[1]);
        j->ctl = ctl[1];
        j->done = done[0];
        return 0;
}

int journal_finish(struct journal *j, struct cs_error *err)
{
        int status;
        ssize_t n;
        char word = 0;

        if (j->pid < 0)
                return cs_error_setx(err, ESRCH, "the change journal did not run");
        close(j->ctl);
        j->ctl = -1;
        /* Its word that every change is judged is enough: its exit (the inotify instance's
         * teardown) is left to finish on its own, and it is reaped whenever (a zombie at
         * most until csandbox exits). Without the word, its status says why. */
        do
                n = read(j->done, &word, 1);
        while (n < 0 && errno == EINTR);
        close(j->done);
        j->done = -1;
        if (n == 1 && word == 'd') {
                (void)waitpid(j->pid, NULL, WNOHANG);
                j->pid = -1;
                return 0;
        }
        while (waitpid(j->pid, &status, 0) < 0)
                if (errno != EINTR)
                        return cs_error_set(err, errno, "wait for the change journal");
        j->pid = -1;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return cs_error_setx(err, EIO, "the change journal ended early (%s %d)",
                                     WIFEXITED(status) ? "status" : "signal",
                                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 0;
}

void journal_abort(struct journal *j)
{
        if (j->pid > 0) {
                kill(j->pid, SIGKILL);
                while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (j->ctl >= 0)
                close(j->ctl);
        if (j->done >= 0)
                close(j->done);
        j->pid = -1;
        j->ctl = -1;
        j->done = -1;
}

int journal_scan(const int *roots, unsigned n, const struct timespec *since,
                 const struct journal_ops *ops)
{
        struct watcher w = {
            .roots = roots, .n_roots = n, .since = *since, .ops = ops, .in = -1, .final = true};

        walk_all(&w);
        while (w.head_queue < w.n_queue) {
                struct pathref d = w.queue[w.head_queue++];

                walk_one(&w, &d);
                free(d.rel);
                if (w.n_dirty >= FLUSH_BATCH)
                        flush(&w);
        }
        flush(&w);
        ops->flushed(ops->ctx, true);
        for (size_t i = 0; i < w.n_refs; i++)
                free(w.refs[i].rel);
        free(w.refs);
        free(w.queue);
        free(w.dirty);
        free(w.unwatched);
        free(w.by_wd);
        return 0;
}

void journal_strip_setid(int root_fd, const char *rel)
{
        _cleanup_close_ int fd = cs_open_beneath(root_fd, rel, O_PATH | O_NOFOLLOW);
        char proc[64];
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            !(st.st_mode & (S_ISUID | S_ISGID)))
                return;
        /* chmod through the fd's magic link: an O_PATH fd takes no fchmod, and the file may
         * be unreadable to us (mode 04000). The path is never resolved again. */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        (void)chmod(proc, st.st_mode & 01777);
}
