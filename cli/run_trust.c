/* `run`'s trust report, end to end: the session's record before the launch, the change
 * journal while it runs (each finding shown on the terminal as it appears, and added to the
 * record), and after it the report, kept where every later launch in that tree and of that
 * profile looks. policy/ decides what is a finding (trust_rules.c); runner/journal.c
 * watches; this file wires them and prints. */
#include "run_trust.h"

#include "../policy/plan_report.h"
#include "../runner/runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/strv.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPORT_TERMINAL_LINES 40u
#define FINDINGS_MAX          (64u << 20)

static const char *const place_names[] = {"profile", "tree"};

/* kind, path and detail of an item "kind\tpath\tdetail", non-printables made '?'. */
static void item_line(const char *item, FILE *f)
{
        _cleanup_free_ char *copy = strdup(item);
        char *kind = copy, *path, *detail;

        if (!copy)
                return;
        for (char *c = copy; *c; c++)
                if (!isprint((unsigned char)*c) && *c != '\t')
                        *c = '?';
        path = strchr(kind, '\t');
        if (!path)
                return;
        *path++ = '\0';
        detail = strchr(path, '\t');
        if (detail)
                *detail++ = '\0';
        fprintf(f, "  %s: %s%s%s%s\n", kind, path, detail && *detail ? " (" : "",
                detail && *detail ? detail : "", detail && *detail ? ")" : "");
}

/* In the watcher: one changed path judged; a setuid or setgid bit does not stay. */
static void on_changed(void *ctx, unsigned root, int root_fd, const char *rel)
{
        struct run_trust *t = ctx;

        trust_judge(&t->rules, (enum trust_root)root, root_fd, rel, &t->found[root]);
        journal_strip_setid(root_fd, rel);
}

static bool on_rejudge(void *ctx, int root_fd, const char *rel)
{
        (void)ctx;
        return trust_rejudge(root_fd, rel);
}

/* In the watcher, after a batch: what is new is written to the findings file, added to the
 * session's record (a killed csandbox leaves it), and shown at once. */
static void on_flushed(void *ctx, bool last)
{
        struct run_trust *t = ctx;

        (void)last;
        for (unsigned root = 0; root < TRUST_ROOT_N; root++) {
                struct plan_trust *f = &t->found[root];
                unsigned place = root == TRUST_ROOT_PROFILE ? 0 : 1;

                for (; t->reported[root] < f->n; t->reported[root]++) {
                        const char *item = f->items[t->reported[root]];
                        _cleanup_free_ char *line = NULL, *shown = NULL;
                        size_t len = 0;
                        FILE *m;

                        if (asprintf(&line, "%u\t%s\n", root, item) >= 0)
                                (void)cs_write_all(t->out, line, strlen(line));
                        m = open_memstream(&shown, &len);
                        if (!m)
                                continue;
                        item_line(item, m);
                        fclose(m);
                        trust_session_note(&t->places[place], t->records[place], shown);
                        if (++t->live <= REPORT_TERMINAL_LINES) {
                                _cleanup_free_ char *msg = NULL;

                                if (shown[0] && shown[strlen(shown) - 1] == '\n')
                                        shown[strlen(shown) - 1] = '\0';
                                /* On a terminal the session may have left concealed text,
                                 * black on black or the line-drawing charset: the warning
                                 * is drawn with plain attributes and ASCII. */
                                if (asprintf(&msg,
                                             "%s\r\n\acsandbox: the session just changed what "
                                             "the host would run; do not run git or claude "
                                             "there until you have checked it:\r\n%s\r\n",
                                             isatty(STDERR_FILENO) ? "\033[0m\033(B\017" : "",
                                             shown) >= 0)
                                        (void)cs_write_all(STDERR_FILENO, msg, strlen(msg));
                        }
                }
        }
}

static void scan_flushed(void *ctx, bool last)
{
        (void)ctx, (void)last;
}

/* The sessions whose csandbox was killed before their check (plan_pending found them):
 * each is finished here, by a walk of its roots for what changed since it started. One
 * that changed what the host runs becomes a report like any other, and the launch refuses;
 * one that changed nothing is dropped, and the launch goes on. */
static int finish_unfinished(struct run_trust *t, const struct plan *plan, const char *work_root,
                             struct cs_error *err)
{
        _cleanup_free_ bool *clean = calloc(plan->n_unfinished + 1, sizeof(bool));
        bool refuse = false;

        if (!clean)
                return cs_error_set(err, ENOMEM, "the session records");

        for (size_t i = 0; i < plan->n_unfinished; i++) {
                const struct trust_unfinished *u = &plan->unfinished[i];
                const struct trust_place pl = {.fd = u->dir_fd, .path = u->dir_path};
                _cleanup_free_ char *all = NULL;
                char **items = NULL;
                size_t n_items = 0, len = 0;
                int roots[TRUST_ROOT_N] = {-1, -1, -1};
                struct tm tm;
                char when[32];
                FILE *f;

                if (u->profile) {
                        roots[TRUST_ROOT_PROFILE] = plan->profile.dir_fd;
                } else if (strcmp(u->work_root, work_root) == 0) {
                        roots[TRUST_ROOT_WORK] = t->roots[TRUST_ROOT_WORK];
                        roots[TRUST_ROOT_COMMON] = t->roots[TRUST_ROOT_COMMON];
                } else {
                        /* Another tree's record, found from a directory below it: its
                         * rules are that tree's launch's. */
                        f = open_memstream(&all, &len);
                        if (f) {
                                trust_unfinished_text(plan->unfinished, plan->n_unfinished, i, f);
                                fclose(f);
                        }
                        fprintf(stderr,
                                "%s`csandbox run %s` started in %s checks what it left; until "
                                "then no launch starts here.\n",
                                all ? all : "", plan->profile.name, u->work_root);
                        refuse = true;
                        continue;
                }
                t->ops = (struct journal_ops){.changed = on_changed,
                                              .flushed = scan_flushed,
                                              .rejudge = on_rejudge,
                                              .ctx = t};
                for (unsigned r = 0; r < TRUST_ROOT_N; r++)
                        t->found[r] = (struct plan_trust){0};
                (void)journal_scan(roots, TRUST_ROOT_N, &u->since, &t->ops);
                for (unsigned r = 0; r < TRUST_ROOT_N; r++) {
                        for (size_t k = 0; k < t->found[r].n; k++)
                                (void)strv_push_dup(&items, &n_items, t->found[r].items[k]);
                        trust_free(&t->found[r]);
                }
                gmtime_r(&u->since.tv_sec, &tm);
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
                if (n_items == 0 && !*u->seen) {
                        trust_unfinished_drop(u);
                        clean[i] = true;
                        continue;
                }
                f = open_memstream(&all, &len);
                if (!f) {
                        strv_free(&items, &n_items);
                        return cs_error_set(err, ENOMEM, "the session's report");
                }
                fprintf(f,
                        "Warning: the sandboxed session in %s that started %s (its csandbox was "
                        "killed, or the machine stopped; checked now) changed what claude or "
                        "git runs on the host (in its %s):\n",
                        u->work_root, when, u->profile ? "profile" : "tree");
                for (size_t k = 0; k < n_items; k++)
                        item_line(items[k], f);
                fflush(f);
                /* What the journal saw while it ran and the walk no longer finds (undone
                 * since, or out of the walk's reach): listed too, once. */
                for (const char *line = u->seen, *end; *line; line = end) {
                        end = strchr(line, '\n');
                        end = end ? end + 1 : line + strlen(line);
                        if (!memmem(all, len, line, (size_t)(end - line)))
                                fprintf(f, "%.*s", (int)(end - line), line);
                }
                fprintf(f, "Check these before running claude or git on the host with this "
                           "profile or in this project.");
                fclose(f);
                strv_free(&items, &n_items);
                if (!all)
                        return cs_error_set(err, ENOMEM, "the session's report");
                fprintf(stderr, "%s\n", all);
                if (trust_pending_add(&pl, u->work_root, all, err) < 0)
                        return -1; /* the record stays, and refuses */
                trust_unfinished_drop(u);
                refuse = true;
        }
        /* One session has a record in the profile's place and one in the tree's: said once,
         * and only when neither found anything. */
        for (size_t i = 0; i < plan->n_unfinished; i++) {
                const struct trust_unfinished *u = &plan->unfinished[i];
                bool quiet = !clean[i];
                struct tm tm;
                char when[32];

                for (size_t e = 0; e < plan->n_unfinished && !quiet; e++)
                        quiet = e != i && strcmp(plan->unfinished[e].name, u->name) == 0 &&
                                (e < i || !clean[e]);
                if (quiet)
                        continue;
                gmtime_r(&u->since.tv_sec, &tm);
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
                fprintf(stderr,
                        "csandbox: the session in %s that started %s ended without its check "
                        "(csandbox was killed, or the machine stopped); checked now: it changed "
                        "nothing claude or git runs.\n",
                        u->work_root, when);
        }
        if (refuse)
                return cs_error_setx(err, EPERM,
                                     "Refusing to start the sandbox for profile %s: an earlier "
                                     "sandboxed session changed what claude or git runs on the "
                                     "host, or was not checked yet (above). Check each of them "
                                     "(a nested repository's config or a hook runs commands in "
                                     "any git or claude on the host), then accept them and "
                                     "start with: csandbox run --accept-changes %s",
                                     plan->profile.name, plan->profile.name);
        return 0;
}

/* In the watcher: out of inotify watches, the session is paused (csandbox's main process
 * stops it on the 'p'), and the user told why and what to do; or it goes on ('r'). */
static void on_blind(void *ctx, bool blind, unsigned root, const char *rel, int e)
{
        struct run_trust *t = ctx;
        _cleanup_free_ char *msg = NULL;
        const char *plain = isatty(STDERR_FILENO) ? "\033[0m\033(B\017" : "";
        _cleanup_free_ char *dir = NULL;
        char now[32] = "";
        long max = -1;
        FILE *f;

        (void)!write(t->pause[1], blind ? "p" : "r", 1);
        if (!blind) {
                if (asprintf(&msg,
                             "%s\r\ncsandbox: every directory is watched again; the session "
                             "goes on\r\n",
                             plain) >= 0)
                        (void)cs_write_all(STDERR_FILENO, msg, strlen(msg));
                return;
        }
        f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");
        if (f) {
                if (fscanf(f, "%ld", &max) != 1 || max <= 0)
                        max = -1;
                fclose(f);
        }
        if (max > 0)
                snprintf(now, sizeof(now), " = %ld", max);
        /* The name is the session's: no control characters reach the terminal. */
        if (asprintf(&dir, "%s%s%s",
                     root < TRUST_ROOT_N && t->rules.root_path[root] ? t->rules.root_path[root]
                                                                     : "",
                     *rel ? "/" : "", rel) < 0)
                dir = NULL;
        for (char *c = dir; c && *c; c++)
                if (!isprint((unsigned char)*c))
                        *c = '?';
        if (asprintf(&msg,
                     "%s\r\n\acsandbox: the session is paused: its change journal cannot watch "
                     "%s (%s), so it could not warn you of what the session changes there. "
                     "Your inotify watches are used up (fs.inotify.max_user_watches%s). Raise "
                     "the limit, as root: sysctl fs.inotify.max_user_watches=%ld (or close "
                     "programs that watch many files); the session goes on by itself once "
                     "every directory is watched. To end it instead: kill %ld\r\n",
                     plain, dir ? dir : "a directory", strerror(e), now,
                     max > 0 ? max * 2 : 1048576L, (long)getppid()) >= 0)
                (void)cs_write_all(STDERR_FILENO, msg, strlen(msg));
}

int run_trust_begin(struct run_trust *t, const struct plan *plan, const struct profile_config *c,
                    struct cs_error *err)
{
        struct cs_error serr = {0};
        const char *work_root = plan->work_root ? plan->work_root : ".";
        int r;

        memset(t, 0, sizeof(*t));
        t->out = -1;
        t->git_fd = -1;
        t->pause[0] = t->pause[1] = -1;
        t->journal.pid = -1;
        t->journal.ctl = -1;
        t->journal.done = -1;
        for (unsigned i = 0; i < TRUST_ROOT_N; i++)
                t->roots[i] = -1;
        t->places[0].fd = t->places[1].fd = -1;
        r = plan_trust_rules(plan, c, &t->rules, err);
        if (r < 0)
                return r;
        t->roots[TRUST_ROOT_PROFILE] = fcntl(plan->profile.dir_fd, F_DUPFD_CLOEXEC, 3);
        for (unsigned i = TRUST_ROOT_WORK; i < TRUST_ROOT_N; i++)
                if (t->rules.root_path[i])
                        t->roots[i] = open(t->rules.root_path[i],
                                           O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* Before the records exist: what changes from here on is this session's. */
        r = finish_unfinished(t, plan, work_root, err);
        if (r < 0)
                return r;
        clock_gettime(CLOCK_REALTIME, &t->since);
        /* The refs before the session: a commit it makes is judged by what its checkout
         * would write (trust_refs.c). */
        if (plan->watch.git_dir)
                t->git_fd =
                    open(plan->watch.git_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        trust_refs_read(t->git_fd, &t->refs);
        /* The records first: from here on, a csandbox that dies leaves a refusal behind. */
        r = trust_place_profile(&plan->profile, true, &t->places[0], err);
        if (r >= 0)
                r = trust_place_tree(c->data_home, work_root, true, &t->places[1], err);
        if (r >= 0 && trust_session_identity(&(pid_t){0}, (char[40]){0}, &(unsigned long long){0},
                                             &serr) < 0) {
                if (runner_note_first("session-record"))
                        fprintf(stderr,
                                "csandbox: warning (shown once on this machine; `csandbox "
                                "doctor` repeats it): no running-session record can be kept: "
                                "%s. A csandbox killed during a session then leaves nothing "
                                "that makes the next launch wait until its changes are "
                                "checked. Run csandbox where /proc is this container's own, "
                                "with /proc/sys/kernel/random/boot_id readable (no /proc of "
                                "another pid namespace bound in, no mask on it)\n",
                                serr.msg);
        } else {
                for (unsigned i = 0; r >= 0 && i < 2; i++)
                        if (trust_session_begin(&t->places[i], work_root, &t->since, &t->records[i],
                                                &serr) < 0)
                                fprintf(stderr, "csandbox: warning: %s\n", serr.msg);
        }
        if (r < 0)
                return r;
        t->out = memfd_create("csandbox-trust", MFD_CLOEXEC);
        if (t->out < 0)
                return cs_error_set(err, errno, "record the session's changes (memfd_create)");
        if (pipe2(t->pause, O_CLOEXEC) < 0)
                return cs_error_set(err, errno, "start the change journal (pipe2)");
        t->ops = (struct journal_ops){.changed = on_changed,
                                      .flushed = on_flushed,
                                      .blind = on_blind,
                                      .rejudge = on_rejudge,
                                      .ctx = t};
        r = journal_start(&t->journal, t->roots, TRUST_ROOT_N, &t->since, &t->ops, err);
        if (r < 0)
                return r;
        /* The watcher alone writes: its end (exit) is the pipe's. */
        close(t->pause[1]);
        t->pause[1] = -1;
        runner_pause_from(t->pause[0]);
        t->started = true;
        return 0;
}

/* The report of one place: its items, every one in the file, the first lines on the
 * terminal. */
static void report_place(struct run_trust *t, unsigned place, char **items, size_t n,
                         const char *work_root)
{
        _cleanup_free_ char *all = NULL;
        size_t len = 0;
        struct cs_error serr = {0};
        FILE *f = open_memstream(&all, &len);

        if (!f)
                return;
        fprintf(f,
                "Warning: the sandboxed session changed what claude or git runs on the host (in "
                "its %s):\n",
                place_names[place]);
        for (size_t i = 0; i < n; i++)
                item_line(items[i], f);
        fprintf(f, "Check these before running claude or git on the host with this profile or "
                   "in this project.");
        fclose(f);
        if (!all)
                return;
        if (trust_pending_add(&t->places[place], work_root, all, &serr) < 0) {
                fprintf(stderr, "csandbox: warning: %s; the session's record stands for it\n",
                        serr.msg);
                free(t->records[place]);
                t->records[place] = NULL; /* kept: it refuses the next launch */
        }
        if (n <= REPORT_TERMINAL_LINES) {
                fprintf(stderr, "%s\n", all);
        } else {
                char *cut = all;

                for (unsigned i = 0; i < REPORT_TERMINAL_LINES + 1 && cut; i++)
                        cut = strchr(cut + 1, '\n');
                fprintf(stderr, "%.*s\n  ... and %zu more, listed in %s\n",
                        cut ? (int)(cut - all) : (int)len, all, n - REPORT_TERMINAL_LINES,
                        t->places[place].path);
        }
}

void run_trust_end(struct run_trust *t, struct plan *plan)
{
        struct cs_error err = {0};
        _cleanup_free_ char *text = NULL;
        char **items[2] = {0};
        size_t n_items[2] = {0};
        const char *work_root = plan->work_root ? plan->work_root : ".";
        bool judged = false;

        if (t->started) {
                if (journal_finish(&t->journal, &err) < 0)
                        fprintf(stderr,
                                "csandbox: warning: %s; what the session changed could not be "
                                "judged whole, so its record refuses the next launch\n",
                                err.msg);
                else
                        judged = true;
        }
        if (judged && lseek(t->out, 0, SEEK_SET) == 0 &&
            cs_read_fd(t->out, "the session's changes", FINDINGS_MAX, &text, NULL, &err) < 0) {
                fprintf(stderr, "csandbox: warning: %s\n", err.msg);
                judged = false;
        }
        for (char *line = text, *next; judged && line && *line; line = next) {
                unsigned root;
                char *tab = strchr(line, '\t');

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (!tab || sscanf(line, "%u", &root) != 1 || root >= TRUST_ROOT_N)
                        continue;
                (void)strv_push_dup(&items[root == TRUST_ROOT_PROFILE ? 0 : 1],
                                    &n_items[root == TRUST_ROOT_PROFILE ? 0 : 1], tab + 1);
        }
        /* The commits the session made, by what their checkout would write. */
        if (judged && t->git_fd >= 0) {
                struct trust_refs after;
                struct plan_trust found = {0};

                trust_refs_read(t->git_fd, &after);
                trust_refs_judge(work_root, &t->refs, &after, &found);
                for (size_t i = 0; i < found.n; i++)
                        (void)strv_push_dup(&items[1], &n_items[1], found.items[i]);
                trust_free(&found);
                trust_refs_free(&after);
        }
        /* The session's .claude.json, written back by csandbox; what it added that the host
         * would run waits. */
        {
                struct plan_trust back = {0};

                plan_claude_json_writeback(plan, &back);
                for (size_t i = 0; i < back.n; i++)
                        (void)strv_push_dup(&items[0], &n_items[0], back.items[i]);
                trust_free(&back);
        }
        for (unsigned place = 0; place < 2; place++)
                if (n_items[place] && (judged || place == 0))
                        report_place(t, place, items[place], n_items[place], work_root);
        for (unsigned place = 0; place < 2; place++) {
                if (judged)
                        trust_session_end(&t->places[place], t->records[place]);
                strv_free(&items[place], &n_items[place]);
        }
}

void run_trust_free(struct run_trust *t)
{
        if (t->journal.pid > 0)
                journal_abort(&t->journal);
        for (unsigned i = 0; i < TRUST_ROOT_N; i++) {
                if (t->roots[i] >= 0)
                        close(t->roots[i]);
                trust_free(&t->found[i]);
        }
        for (unsigned i = 0; i < 2; i++) {
                trust_place_close(&t->places[i]);
                free(t->records[i]);
        }
        if (t->out >= 0)
                close(t->out);
        runner_pause_from(-1);
        for (unsigned i = 0; i < 2; i++)
                if (t->pause[i] >= 0)
                        close(t->pause[i]);
        if (t->git_fd >= 0)
                close(t->git_fd);
        trust_refs_free(&t->refs);
        trust_rules_free(&t->rules);
}
