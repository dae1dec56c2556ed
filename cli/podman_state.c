/* The containers of `podman run -d`: one directory per container in a per-user state dir,
 * holding its record (ctr.json, replaced atomically) and its output (ctr.log); and ps,
 * logs, stop, rm, kill and wait over them. The supervisor of a detached container is the
 * csandbox process that launched it: signals go to it (it forwards them to the container),
 * and the container dies with it (the runner's PDEATHSIG and pid namespace). */
#include "podman.h"
#include "podman_opts.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CTR_FILE   "ctr.json"
#define LOG_FILE   "ctr.log"
#define RECORD_MAX (64u << 10)

static int fail(const char *prog, const struct cs_error *err)
{
        fprintf(stderr, "%s: %s\n", prog, err->msg);
        return err->status ? err->status : CS_EXIT_SETUP;
}

static int open_private_dir(const char *path, struct cs_error *err)
{
        struct stat st;
        int fd;

        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "cannot create the container state dir %s", path);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "cannot open the container state dir %s", path);
        if (fstat(fd, &st) < 0 || st.st_uid != getuid() || (st.st_mode & 077)) {
                close(fd);
                return cs_error_setx(err, EPERM,
                                     "the container state dir %s is not a private directory of "
                                     "yours (mode 0700); remove it and try again",
                                     path);
        }
        return fd;
}

int podman_state_open(int *ret_fd, struct cs_error *err)
{
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        char path[PATH_MAX];
        struct stat st;
        int fd;

        if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
            access(xdg, W_OK) == 0) {
                snprintf(path, sizeof(path), "%s/csandbox", xdg);
                if (mkdir(path, 0700) < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "cannot create %s", path);
                if (snprintf(path, sizeof(path), "%s/csandbox/containers", xdg) >=
                    (int)sizeof(path))
                        return cs_error_setx(err, ENAMETOOLONG, "XDG_RUNTIME_DIR is too long");
        } else {
                snprintf(path, sizeof(path), "/tmp/csandbox-containers-%u", (unsigned)getuid());
        }
        fd = open_private_dir(path, err);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

void podman_ctr_free(struct podman_ctr *c)
{
        free(c->name);
        free(c->image);
        free(c->command);
        memset(c, 0, sizeof(*c));
}

unsigned long long podman_proc_starttime(long long pid)
{
        char path[64], buf[1024];
        unsigned long long t = 0;
        ssize_t n;
        int fd;
        char *p;

        if (pid <= 0)
                return 0;
        snprintf(path, sizeof(path), "/proc/%lld/stat", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        p = strrchr(buf, ')');
        if (!p)
                return 0;
        /* after "pid (comm)" p is at the space before field 3 (state); starttime is 22 */
        p++;
        for (int field = 3; field < 22 && p; field++)
                p = strchr(p + 1, ' ');
        if (!p || buf[0] == '\0')
                return 0;
        t = strtoull(p + 1, NULL, 10);
        /* a zombie is gone for our purpose */
        if (strstr(buf, ") Z ") || strstr(buf, ") X "))
                return 0;
        return t;
}

static bool id_like(const char *s)
{
        if (strlen(s) != 64)
                return false;
        for (const char *p = s; *p; p++)
                if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
                        return false;
        return true;
}

static char *json_str(cJSON *o, const char *k)
{
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static long long json_num(cJSON *o, const char *k, long long dflt)
{
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsNumber(v) ? (long long)v->valuedouble : dflt;
}

static int ctr_load(int rootfd, const char *id, struct podman_ctr *c, struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        char path[80];
        size_t len;
        cJSON *j, *st;
        int r;

        memset(c, 0, sizeof(*c));
        snprintf(path, sizeof(path), "%s/" CTR_FILE, id);
        r = cs_read_file_at(rootfd, path, RECORD_MAX, true, &buf, &len, err);
        if (r < 0)
                return r;
        j = cJSON_Parse(buf);
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                return cs_error_setx(err, EINVAL, "container %s: its record is not JSON", id);
        }
        snprintf(c->id, sizeof(c->id), "%s", id);
        c->name = json_str(j, "name");
        c->image = json_str(j, "image");
        c->command = json_str(j, "command");
        c->created = json_num(j, "created", 0);
        c->finished = json_num(j, "finished", 0);
        c->pid = json_num(j, "pid", 0);
        c->exit_code = (int)json_num(j, "exit_code", -1);
        st = cJSON_GetObjectItemCaseSensitive(j, "starttime");
        c->starttime = cJSON_IsString(st) ? strtoull(st->valuestring, NULL, 10) : 0;
        c->rm = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "rm"));
        cJSON_Delete(j);
        if (!c->name || !c->image || !c->command) {
                podman_ctr_free(c);
                return cs_error_setx(err, EINVAL, "container %s: its record is incomplete", id);
        }
        return 0;
}

int podman_ctr_save(int rootfd, const struct podman_ctr *c, struct cs_error *err)
{
        cJSON *j = cJSON_CreateObject();
        char st[32], *text;
        int dfd, r;

        snprintf(st, sizeof(st), "%llu", c->starttime);
        if (!j || !cJSON_AddStringToObject(j, "id", c->id) ||
            !cJSON_AddStringToObject(j, "name", c->name) ||
            !cJSON_AddStringToObject(j, "image", c->image) ||
            !cJSON_AddStringToObject(j, "command", c->command) ||
            !cJSON_AddNumberToObject(j, "created", (double)c->created) ||
            !cJSON_AddNumberToObject(j, "finished", (double)c->finished) ||
            !cJSON_AddNumberToObject(j, "pid", (double)c->pid) ||
            !cJSON_AddStringToObject(j, "starttime", st) ||
            !cJSON_AddNumberToObject(j, "exit_code", c->exit_code) ||
            !cJSON_AddBoolToObject(j, "rm", c->rm)) {
                cJSON_Delete(j);
                return cs_error_set(err, ENOMEM, "container record");
        }
        text = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!text)
                return cs_error_set(err, ENOMEM, "container record");
        dfd = openat(rootfd, c->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
                free(text);
                return cs_error_set(err, errno, "container %.12s", c->id);
        }
        r = cs_write_file_atomic(dfd, CTR_FILE, text, strlen(text), 0600, err);
        close(dfd);
        free(text);
        return r;
}

/* A listing of the state dir from its start: a fresh open file description (a dup would
 * share the offset a previous listing left at its end). */
static DIR *open_listing(int rootfd, struct cs_error *err)
{
        int dfd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;

        if (!d) {
                cs_error_set(err, errno, "the container state dir");
                if (dfd >= 0)
                        close(dfd);
        }
        return d;
}

static bool ctr_running(const struct podman_ctr *c);

/* A container removed on exit (--rm, or a named foreground run) whose supervisor died
 * without removing it (SIGKILL): gone as it would have gone, now. */
static bool ctr_stale(int rootfd, const struct podman_ctr *c)
{
        if (!c->rm || c->pid <= 0 || c->exit_code >= 0 || ctr_running(c))
                return false;
        (void)podman_ctr_remove(rootfd, c->id, &(struct cs_error){0});
        return true;
}

/* Every recorded container, calling fn until it returns nonzero. */
static int ctr_each(int rootfd, int (*fn)(struct podman_ctr *c, void *data), void *data,
                    struct cs_error *err)
{
        DIR *d;
        struct dirent *de;
        int r = 0;

        d = open_listing(rootfd, err);
        if (!d)
                return err->err ? -err->err : -EIO;
        while ((de = readdir(d)) && r == 0) {
                struct podman_ctr c;
                struct cs_error ignored = {0};

                if (!id_like(de->d_name) || ctr_load(rootfd, de->d_name, &c, &ignored) < 0)
                        continue; /* half made or being removed */
                if (ctr_stale(rootfd, &c)) {
                        podman_ctr_free(&c);
                        continue;
                }
                r = fn(&c, data);
                podman_ctr_free(&c);
        }
        closedir(d);
        return r < 0 ? r : 0;
}

struct name_find {
        const char *name;
};

static int name_taken(struct podman_ctr *c, void *data)
{
        return strcmp(c->name, ((struct name_find *)data)->name) == 0 ? 1 : 0;
}

int podman_name_check(int rootfd, const char *name, struct cs_error *err)
{
        struct name_find f = {name};
        DIR *d;
        struct dirent *de;

        d = open_listing(rootfd, err);
        if (!d)
                return err->err ? -err->err : -EIO;
        while ((de = readdir(d))) {
                struct podman_ctr c;
                struct cs_error ignored = {0};
                bool taken;

                if (!id_like(de->d_name) || ctr_load(rootfd, de->d_name, &c, &ignored) < 0)
                        continue;
                taken = !ctr_stale(rootfd, &c) && name_taken(&c, &f);
                podman_ctr_free(&c);
                if (taken) {
                        char id[13];

                        snprintf(id, sizeof(id), "%.12s", de->d_name); /* before closedir */
                        closedir(d);
                        return cs_error_setx(err, EEXIST,
                                             "the container name `%s` is already in use by "
                                             "container %s; remove that container or choose "
                                             "another name",
                                             name, id);
                }
        }
        closedir(d);
        return 0;
}

int podman_ctr_create(int rootfd, struct podman_ctr *c, struct cs_error *err)
{
        unsigned char rnd[32];
        int r;

        if (flock(rootfd, LOCK_EX) < 0)
                return cs_error_set(err, errno, "lock the container state dir");
        r = podman_name_check(rootfd, c->name, err);
        if (r < 0)
                goto out;
        if (!id_like(c->id)) {
                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
                        r = cs_error_set(err, errno, "getrandom");
                        goto out;
                }
                for (size_t i = 0; i < sizeof(rnd); i++)
                        snprintf(c->id + 2 * i, 3, "%02x", rnd[i]);
        }
        if (mkdirat(rootfd, c->id, 0700) < 0) {
                r = cs_error_set(err, errno, "create the container's state dir");
                goto out;
        }
        r = podman_ctr_save(rootfd, c, err);
        if (r < 0)
                (void)podman_ctr_remove(rootfd, c->id, &(struct cs_error){0});
out:
        flock(rootfd, LOCK_UN);
        return r;
}

int podman_ctr_log_open(int rootfd, const char *id, struct cs_error *err)
{
        char path[80];
        int fd;

        snprintf(path, sizeof(path), "%s/" LOG_FILE, id);
        fd = openat(rootfd, path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return cs_error_set(err, errno, "container %.12s: its log", id);
        return fd;
}

int podman_ctr_remove(int rootfd, const char *id, struct cs_error *err)
{
        char tmp[96];

        /* renamed out of sight first: no reader sees half a container */
        snprintf(tmp, sizeof(tmp), ".rm-%s-%d", id, (int)getpid());
        if (renameat(rootfd, id, rootfd, tmp) < 0)
                return errno == ENOENT ? 0 : cs_error_set(err, errno, "remove container %.12s", id);
        return cs_remove_at(rootfd, tmp, err);
}

/* The container ref names: a name, a full id, or a unique id prefix. */
static int ctr_find(int rootfd, const char *ref, struct podman_ctr *ret, struct cs_error *err)
{
        char found[65] = "";
        int matches = 0;
        DIR *d;
        struct dirent *de;

        d = open_listing(rootfd, err);
        if (!d)
                return err->err ? -err->err : -EIO;
        while ((de = readdir(d))) {
                struct podman_ctr c;
                struct cs_error ignored = {0};

                if (!id_like(de->d_name) || ctr_load(rootfd, de->d_name, &c, &ignored) < 0)
                        continue;
                if (ctr_stale(rootfd, &c)) {
                        podman_ctr_free(&c);
                        continue;
                }
                if (strcmp(c.name, ref) == 0 || strcmp(c.id, ref) == 0) {
                        snprintf(found, sizeof(found), "%s", c.id);
                        matches = 1;
                        podman_ctr_free(&c);
                        break;
                }
                if (ref[0] && strncmp(c.id, ref, strlen(ref)) == 0) {
                        snprintf(found, sizeof(found), "%s", c.id);
                        matches++;
                }
                podman_ctr_free(&c);
        }
        closedir(d);
        if (matches == 0)
                return cs_error_setx(err, ENOENT, "no container with name or ID `%s` found", ref);
        if (matches > 1)
                return cs_error_setx(err, EINVAL,
                                     "`%s` is the start of more than one container's ID; give "
                                     "more of it",
                                     ref);
        return ctr_load(rootfd, found, ret, err);
}

static bool ctr_running(const struct podman_ctr *c)
{
        return c->exit_code < 0 && c->pid > 0 && c->starttime &&
               podman_proc_starttime(c->pid) == c->starttime;
}

/* The exit code as ps shows it: a supervisor gone without writing one was killed. */
static int ctr_exit_code(const struct podman_ctr *c)
{
        return c->exit_code >= 0 ? c->exit_code : 128 + SIGKILL;
}

/* A pidfd of c's supervisor while it runs, -1 when it is gone. */
static int ctr_pidfd(const struct podman_ctr *c)
{
        int fd;

        if (!ctr_running(c))
                return -1;
        fd = (int)syscall(SYS_pidfd_open, (pid_t)c->pid, 0);
        if (fd < 0)
                return -1;
        /* the pid may have been reused between the check and the open */
        if (!ctr_running(c)) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Wait for the supervisor behind pidfd to exit, at most timeout_ms (-1: forever); true when
 * it did. */
static bool pidfd_wait(int pidfd, int timeout_ms)
{
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int r;

        do
                r = poll(&p, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        return r > 0;
}

static void pidfd_signal(int pidfd, int sig)
{
        (void)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* After its supervisor is gone: the record says exited, or goes when --rm said so. */
static void ctr_finish(int rootfd, const char *id)
{
        struct podman_ctr c;
        struct cs_error ignored = {0};

        if (ctr_load(rootfd, id, &c, &ignored) < 0)
                return;
        if (c.exit_code < 0) {
                c.exit_code = 128 + SIGKILL;
                c.finished = (long long)time(NULL);
                (void)podman_ctr_save(rootfd, &c, &ignored);
        }
        if (c.rm)
                (void)podman_ctr_remove(rootfd, id, &ignored);
        podman_ctr_free(&c);
}

static void human_duration(long long secs, char *buf, size_t len)
{
        if (secs < 1)
                snprintf(buf, len, "Less than a second");
        else if (secs < 60)
                snprintf(buf, len, "%lld second%s", secs, secs == 1 ? "" : "s");
        else if (secs < 120)
                snprintf(buf, len, "About a minute");
        else if (secs < 3600)
                snprintf(buf, len, "%lld minutes", secs / 60);
        else if (secs < 2 * 3600)
                snprintf(buf, len, "About an hour");
        else if (secs < 48 * 3600)
                snprintf(buf, len, "%lld hours", secs / 3600);
        else
                snprintf(buf, len, "%lld days", secs / 86400);
}

static void ctr_status(const struct podman_ctr *c, char *buf, size_t len)
{
        char d[64];
        long long now = (long long)time(NULL);

        if (c->pid == 0 && c->exit_code < 0) {
                snprintf(buf, len, "Created");
        } else if (ctr_running(c)) {
                human_duration(now - c->created, d, sizeof(d));
                snprintf(buf, len, "Up %s", d);
        } else {
                human_duration(now - (c->finished ? c->finished : c->created), d, sizeof(d));
                snprintf(buf, len, "Exited (%d) %s ago", ctr_exit_code(c), d);
        }
}

/* ---- ps ---- */

struct ps_row {
        char *col[7];
        long long created;
};

static int ps_row_cmp(const void *a, const void *b)
{
        long long x = ((const struct ps_row *)a)->created, y = ((const struct ps_row *)b)->created;

        return x < y ? 1
               : x > y
                   ? -1
                   : strcmp(((const struct ps_row *)a)->col[0], ((const struct ps_row *)b)->col[0]);
}

struct ps_data {
        bool all, quiet;
        const char *format;
        struct ps_row *rows;
        size_t n;
        int err;
};

static const char *const ps_head[7] = {"CONTAINER ID", "IMAGE", "COMMAND", "CREATED",
                                       "STATUS",       "PORTS", "NAMES"};

static int ps_collect(struct podman_ctr *c, void *data)
{
        struct ps_data *p = data;
        struct ps_row row = {0}, *grown;
        char created[80], status[96], d[64];
        long long now = (long long)time(NULL);

        if (!p->all && !ctr_running(c))
                return 0;
        human_duration(now - c->created, d, sizeof(d));
        snprintf(created, sizeof(created), "%s ago", d);
        ctr_status(c, status, sizeof(status));
        row.created = c->created;
        row.col[0] = strndup(c->id, 12);
        row.col[1] = strdup(c->image);
        row.col[2] = strdup(c->command);
        row.col[3] = strdup(created);
        row.col[4] = strdup(status);
        row.col[5] = strdup("");
        row.col[6] = strdup(c->name);
        grown = realloc(p->rows, (p->n + 1) * sizeof(*p->rows));
        if (!grown) {
                for (int i = 0; i < 7; i++)
                        free(row.col[i]);
                p->err = -ENOMEM;
                return -ENOMEM;
        }
        p->rows = grown;
        p->rows[p->n++] = row;
        for (int i = 0; i < 7; i++)
                if (!row.col[i])
                        p->err = -ENOMEM;
        return 0;
}

/* --format with podman's Go-template fields: {{.ID}} {{.Image}} {{.Command}} {{.Created}}
 * {{.Status}} {{.Ports}} {{.Names}}, and \t. */
static int ps_format_check(const char *f, const char *prog)
{
        static const char *const fields[] = {".ID",     ".Image", ".Command", ".CreatedHuman",
                                             ".Status", ".Ports", ".Names",   ".Created"};

        for (const char *p = strstr(f, "{{"); p; p = strstr(p + 2, "{{")) {
                const char *end = strstr(p, "}}");
                size_t len;
                bool ok = false;
                const char *s = p + 2;

                if (!end) {
                        fprintf(stderr, "%s: ps: --format `%s`: an unclosed {{\n", prog, f);
                        return -1;
                }
                while (*s == ' ')
                        s++;
                len = (size_t)(end - s);
                while (len && s[len - 1] == ' ')
                        len--;
                for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                        if (strlen(fields[i]) == len && strncmp(fields[i], s, len) == 0)
                                ok = true;
                if (!ok) {
                        fprintf(stderr,
                                "%s: ps: --format: `{{%.*s}}` is not supported by csandbox's "
                                "podman (.ID, .Image, .Command, .Created, .Status, .Ports, "
                                ".Names are)\n",
                                prog, (int)(end - p - 2), p + 2);
                        return -1;
                }
        }
        return 0;
}

static void ps_format_row(const char *f, const struct ps_row *row)
{
        for (const char *p = f; *p;) {
                if (p[0] == '\\' && p[1] == 't') {
                        putchar('\t');
                        p += 2;
                } else if (p[0] == '\\' && p[1] == 'n') {
                        putchar('\n');
                        p += 2;
                } else if (p[0] == '{' && p[1] == '{') {
                        const char *end = strstr(p, "}}"), *s = p + 2;
                        size_t len;

                        while (*s == ' ')
                                s++;
                        len = (size_t)(end - s);
                        while (len && s[len - 1] == ' ')
                                len--;
#define FIELD(n, i)                                                                                \
        if (len == strlen(n) && strncmp(s, n, len) == 0)                                           \
                fputs(row->col[i], stdout);
                        FIELD(".ID", 0)
                        FIELD(".Image", 1)
                        FIELD(".Command", 2)
                        FIELD(".Created", 3)
                        FIELD(".CreatedHuman", 3)
                        FIELD(".Status", 4)
                        FIELD(".Ports", 5)
                        FIELD(".Names", 6)
#undef FIELD
                        p = end + 2;
                } else {
                        putchar(*p++);
                }
        }
        putchar('\n');
}

/* podman_opts_parse for a subcommand, positionals into *pos (freed by the caller), at least
 * min_pos of them (containers): -1 parsed, else the exit status (0 after --help). */
static int parse_opts(const char *prog, const char *sub, const char *usage,
                      const struct podman_opt *opts, size_t n, podman_opt_fn fn, void *ctx,
                      int argc, char **argv, char ***pos, size_t *n_pos, size_t min_pos)
{
        int r;

        *pos = calloc((size_t)argc, sizeof(char *));
        if (!*pos) {
                fprintf(stderr, "%s: %s: out of memory\n", prog, sub);
                return CS_EXIT_SETUP;
        }
        r = podman_opts_parse(prog, sub, usage, opts, n, fn, ctx, argc, argv, *pos, n_pos);
        if (r == 0 && *n_pos < min_pos) {
                fprintf(stderr, "%s: %s: give at least one container's name or ID\n", prog, sub);
                return CS_EXIT_SETUP;
        }
        return r == 0 ? -1 : r == 1 ? 0 : CS_EXIT_SETUP;
}

static int set_flag(void *ctx, int id, const char *v)
{
        ((bool *)ctx)[id] = strcmp(v, "true") == 0;
        return 0;
}

enum { PS_ALL, PS_QUIET, PS_FORMAT };
static const struct podman_opt ps_opts[] = {
    {"--all", 'a', false, NULL, PS_ALL},
    {"--quiet", 'q', false, NULL, PS_QUIET},
    {"--format", 0, true, NULL, PS_FORMAT},
};

static int ps_opt(void *ctx, int id, const char *v)
{
        struct ps_data *p = ctx;

        if (id == PS_FORMAT)
                p->format = v;
        else if (id == PS_ALL)
                p->all = strcmp(v, "true") == 0;
        else
                p->quiet = strcmp(v, "true") == 0;
        return 0;
}

int podman_ps(const char *prog, int argc, char **argv)
{
        struct ps_data p = {0};
        struct cs_error err = {0};
        _cleanup_free_ char **pos = NULL;
        size_t w[7], n_pos;
        int rootfd, r;

        r = parse_opts(prog, "ps", "Usage: %s ps [-a] [-q] [--format FORMAT]\n", ps_opts,
                       sizeof(ps_opts) / sizeof(ps_opts[0]), ps_opt, &p, argc, argv, &pos, &n_pos,
                       0);
        if (r >= 0)
                return r;
        if (n_pos) {
                fprintf(stderr, "%s: ps takes no arguments (`%s`)\n", prog, pos[0]);
                return CS_EXIT_SETUP;
        }
        if (p.format && ps_format_check(p.format, prog) < 0)
                return CS_EXIT_SETUP;
        r = podman_state_open(&rootfd, &err);
        if (r < 0)
                return fail(prog, &err);
        r = ctr_each(rootfd, ps_collect, &p, &err);
        close(rootfd);
        if (r < 0 || p.err < 0) {
                if (r >= 0)
                        cs_error_set(&err, ENOMEM, "ps");
                return fail(prog, &err);
        }
        /* newest first, as podman */
        if (p.n > 1)
                qsort(p.rows, p.n, sizeof(*p.rows), ps_row_cmp);
        for (int c = 0; c < 7; c++) {
                w[c] = strlen(ps_head[c]);
                for (size_t i = 0; i < p.n; i++)
                        if (strlen(p.rows[i].col[c]) > w[c])
                                w[c] = strlen(p.rows[i].col[c]);
        }
        if (!p.quiet && !p.format)
                for (int c = 0; c < 7; c++)
                        printf(c < 6 ? "%-*s  " : "%-*s\n", c < 6 ? (int)w[c] : 0, ps_head[c]);
        for (size_t i = 0; i < p.n; i++) {
                if (p.quiet)
                        printf("%s\n", p.rows[i].col[0]);
                else if (p.format)
                        ps_format_row(p.format, &p.rows[i]);
                else
                        for (int c = 0; c < 7; c++)
                                printf(c < 6 ? "%-*s  " : "%-*s\n", c < 6 ? (int)w[c] : 0,
                                       p.rows[i].col[c]);
                for (int c = 0; c < 7; c++)
                        free(p.rows[i].col[c]);
        }
        free(p.rows);
        return fflush(stdout) == 0 ? 0 : CS_EXIT_SETUP;
}

/* ---- logs ---- */

static int copy_out(int fd)
{
        char buf[65536];
        ssize_t n;

        while ((n = read(fd, buf, sizeof(buf))) > 0)
                if (cs_write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
                        return -errno;
        return n < 0 ? -errno : 0;
}

static const struct podman_opt logs_opts[] = {{"--follow", 'f', false, NULL, 0}};

int podman_logs(const char *prog, int argc, char **argv)
{
        struct cs_error err = {0};
        struct podman_ctr c;
        const char *ref;
        bool follow = false;
        _cleanup_free_ char **pos = NULL;
        size_t n_pos;
        char path[80];
        int rootfd, fd, pidfd, r;

        r = parse_opts(prog, "logs", "Usage: %s logs [-f] CONTAINER\n", logs_opts, 1, set_flag,
                       &follow, argc, argv, &pos, &n_pos, 1);
        if (r >= 0)
                return r;
        if (n_pos > 1) {
                fprintf(stderr, "%s: logs: give one container\n", prog);
                return CS_EXIT_SETUP;
        }
        ref = pos[0];
        r = podman_state_open(&rootfd, &err);
        if (r >= 0)
                r = ctr_find(rootfd, ref, &c, &err);
        if (r < 0)
                return fail(prog, &err);
        snprintf(path, sizeof(path), "%s/" LOG_FILE, c.id);
        fd = openat(rootfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                r = errno;
                podman_ctr_free(&c);
                close(rootfd);
                if (r == ENOENT)
                        return 0;
                fprintf(stderr, "%s: logs %s: %s\n", prog, ref, strerror(r));
                return CS_EXIT_SETUP;
        }
        pidfd = follow ? ctr_pidfd(&c) : -1;
        r = copy_out(fd);
        /* -f: until the supervisor is gone, then what it wrote last */
        while (r == 0 && pidfd >= 0 && !pidfd_wait(pidfd, 100))
                r = copy_out(fd);
        if (r == 0 && pidfd >= 0)
                r = copy_out(fd);
        if (pidfd >= 0)
                close(pidfd);
        close(fd);
        close(rootfd);
        podman_ctr_free(&c);
        return r < 0 ? CS_EXIT_SETUP : 0;
}

/* ---- stop, rm, kill, wait ---- */

static int parse_timeout(const char *prog, const char *v, int *ret)
{
        char *end;
        long n;

        errno = 0;
        n = v ? strtol(v, &end, 10) : -1;
        if (!v || errno || end == v || *end || n < 0 || n > 86400) {
                fprintf(stderr, "%s: stop: --time `%s`: expected seconds (0 to 86400)\n", prog,
                        v ? v : "");
                return -1;
        }
        *ret = (int)n;
        return 0;
}

/* Stop c: SIGTERM (or sig), then after timeout s SIGKILL; waits until it is gone. */
static void ctr_stop(int rootfd, const struct podman_ctr *c, int sig, int timeout)
{
        int pidfd = ctr_pidfd(c);

        if (pidfd >= 0) {
                pidfd_signal(pidfd, sig);
                if (sig == SIGKILL || !pidfd_wait(pidfd, timeout * 1000)) {
                        pidfd_signal(pidfd, SIGKILL);
                        pidfd_wait(pidfd, -1);
                }
                close(pidfd);
        }
        ctr_finish(rootfd, c->id);
}

static const struct podman_opt stop_opts[] = {{"--time", 't', true, NULL, 0}};

struct stop_ctx {
        const char *prog;
        int timeout;
};

static int stop_opt(void *ctx, int id, const char *v)
{
        struct stop_ctx *c = ctx;

        (void)id;
        return parse_timeout(c->prog, v, &c->timeout);
}

int podman_stop(const char *prog, int argc, char **argv)
{
        struct cs_error err = {0};
        _cleanup_free_ char **pos = NULL;
        struct stop_ctx sc = {prog, 10};
        int rootfd, status;
        size_t n_pos;

        status = parse_opts(prog, "stop", "Usage: %s stop [-t SECONDS] CONTAINER...\n", stop_opts,
                            1, stop_opt, &sc, argc, argv, &pos, &n_pos, 1);
        if (status >= 0)
                return status;
        status = 0;
        if (podman_state_open(&rootfd, &err) < 0)
                return fail(prog, &err);
        for (size_t i = 0; i < n_pos; i++) {
                struct podman_ctr c;

                if (ctr_find(rootfd, pos[i], &c, &err) < 0) {
                        status = fail(prog, &err);
                        continue;
                }
                ctr_stop(rootfd, &c, SIGTERM, sc.timeout);
                printf("%s\n", pos[i]);
                podman_ctr_free(&c);
        }
        close(rootfd);
        return status;
}

static const struct podman_opt rm_opts[] = {{"--force", 'f', false, NULL, 0}};

int podman_rm(const char *prog, int argc, char **argv)
{
        struct cs_error err = {0};
        bool force = false;
        _cleanup_free_ char **pos = NULL;
        int rootfd, status;
        size_t n_pos;

        status = parse_opts(prog, "rm", "Usage: %s rm [-f] CONTAINER...\n", rm_opts, 1, set_flag,
                            &force, argc, argv, &pos, &n_pos, 1);
        if (status >= 0)
                return status;
        status = 0;
        if (podman_state_open(&rootfd, &err) < 0)
                return fail(prog, &err);
        for (size_t i = 0; i < n_pos; i++) {
                struct podman_ctr c;

                if (ctr_find(rootfd, pos[i], &c, &err) < 0) {
                        fail(prog, &err);
                        status = status ? status : 1; /* podman: no such container is 1 */
                        continue;
                }
                if (ctr_running(&c) && !force) {
                        fprintf(stderr,
                                "%s: rm: container `%s` is running; stop it first or use rm "
                                "-f\n",
                                prog, pos[i]);
                        status = 2;
                } else {
                        ctr_stop(rootfd, &c, SIGKILL, 0);
                        if (podman_ctr_remove(rootfd, c.id, &err) < 0)
                                status = fail(prog, &err);
                        else
                                printf("%s\n", c.id);
                }
                podman_ctr_free(&c);
        }
        close(rootfd);
        return status;
}

/* The signals kill can deliver: KILL (to the supervisor, which takes the container with it)
 * and those the supervisor forwards to the container (runner/internal.h). A number or a
 * name, with or without SIG; -1 for any other. */
static int parse_signal(const char *v)
{
        static const struct {
                const char *name;
                int sig;
        } sigs[] = {{"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},
                    {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"WINCH", SIGWINCH}};
        char *end;
        long n;

        if (strncasecmp(v, "SIG", 3) == 0)
                v += 3;
        n = strtol(v, &end, 10);
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
                if (strcasecmp(v, sigs[i].name) == 0 || (end != v && !*end && n == sigs[i].sig))
                        return sigs[i].sig;
        return -1;
}

static const struct podman_opt kill_opts[] = {{"--signal", 's', true, NULL, 0}};

struct kill_ctx {
        const char *prog;
        int sig;
};

static int kill_opt(void *ctx, int id, const char *v)
{
        struct kill_ctx *c = ctx;

        (void)id;
        c->sig = parse_signal(v);
        if (c->sig < 0) {
                fprintf(stderr,
                        "%s: kill: --signal `%s` is not supported by csandbox's podman (KILL, "
                        "TERM, INT, HUP, QUIT, USR1, USR2, WINCH are)\n",
                        c->prog, v);
                return -1;
        }
        return 0;
}

int podman_kill(const char *prog, int argc, char **argv)
{
        struct cs_error err = {0};
        struct kill_ctx kc = {prog, SIGKILL};
        _cleanup_free_ char **pos = NULL;
        int rootfd, status;
        size_t n_pos;

        status = parse_opts(prog, "kill", "Usage: %s kill [-s SIGNAL] CONTAINER...\n", kill_opts, 1,
                            kill_opt, &kc, argc, argv, &pos, &n_pos, 1);
        if (status >= 0)
                return status;
        status = 0;
        if (podman_state_open(&rootfd, &err) < 0)
                return fail(prog, &err);
        for (size_t i = 0; i < n_pos; i++) {
                struct podman_ctr c;
                int pidfd;

                if (ctr_find(rootfd, pos[i], &c, &err) < 0) {
                        status = fail(prog, &err);
                        continue;
                }
                pidfd = ctr_pidfd(&c);
                if (pidfd < 0) {
                        fprintf(stderr, "%s: kill: container `%s` is not running\n", prog, pos[i]);
                        status = CS_EXIT_SETUP;
                } else {
                        pidfd_signal(pidfd, kc.sig);
                        if (kc.sig == SIGKILL) {
                                pidfd_wait(pidfd, -1);
                                ctr_finish(rootfd, c.id);
                        }
                        close(pidfd);
                        printf("%s\n", pos[i]);
                }
                podman_ctr_free(&c);
        }
        close(rootfd);
        return status;
}

int podman_wait(const char *prog, int argc, char **argv)
{
        struct cs_error err = {0};
        _cleanup_free_ char **pos = NULL;
        int rootfd, status;
        size_t n_pos;

        status = parse_opts(prog, "wait", "Usage: %s wait CONTAINER...\n", NULL, 0, NULL, NULL,
                            argc, argv, &pos, &n_pos, 1);
        if (status >= 0)
                return status;
        status = 0;
        if (podman_state_open(&rootfd, &err) < 0)
                return fail(prog, &err);
        for (size_t i = 0; i < n_pos; i++) {
                struct podman_ctr c;
                char id[65];
                int pidfd;

                if (ctr_find(rootfd, pos[i], &c, &err) < 0) {
                        status = fail(prog, &err);
                        continue;
                }
                snprintf(id, sizeof(id), "%s", c.id);
                pidfd = ctr_pidfd(&c);
                if (pidfd >= 0) {
                        pidfd_wait(pidfd, -1);
                        close(pidfd);
                }
                podman_ctr_free(&c);
                if (ctr_load(rootfd, id, &c, &(struct cs_error){0}) < 0) {
                        /* removed on exit (--rm): the code went with it */
                        printf("-1\n");
                        continue;
                }
                printf("%d\n", ctr_exit_code(&c));
                podman_ctr_free(&c);
        }
        close(rootfd);
        return status;
}

int podman_ctr_lookup(int rootfd, const char *ref, struct podman_ctr *ret, struct cs_error *err)
{
        return ctr_find(rootfd, ref, ret, err);
}

bool podman_ctr_running(const struct podman_ctr *c)
{
        return ctr_running(c);
}
