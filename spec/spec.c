#include "spec.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/path.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bounds on what a producer may put into one spec; a profile or a flag list past these is
 * a mistake or an attack, not a sandbox. */
#define SPEC_MAX_MOUNTS 4096
#define SPEC_MAX_ARGS   65536

static void spec_lowers_free(struct sandbox_spec *s)
{
        for (size_t i = 0; i < s->n_lowers; i++) {
                if (s->lowers[i].fd >= 0)
                        close(s->lowers[i].fd);
                free(s->lowers[i].path);
                free(s->lowers[i].real);
        }
        free(s->lowers);
        s->lowers = NULL;
        s->n_lowers = 0;
}

void spec_init(struct sandbox_spec *s)
{
        memset(s, 0, sizeof(*s));
        s->root = SPEC_ROOT_HOST;
        s->root_fd = -1;
        s->upper_fd = s->work_fd = -1;
        s->net = SPEC_NET_NONE;
        s->seccomp = SPEC_SECCOMP_DEFAULT;
        for (size_t i = 0; i < SPEC_USERNS_LIMIT_N; i++)
                s->userns_limits[i] = -1;
}

void spec_free(struct sandbox_spec *s)
{
        for (size_t i = 0; i < s->n_mounts; i++) {
                if (s->mounts[i].source_fd >= 0)
                        close(s->mounts[i].source_fd);
                free(s->mounts[i].source_real);
                free(s->mounts[i].source);
                free(s->mounts[i].dest);
                free(s->mounts[i].data);
        }
        free(s->mounts);
        for (size_t i = 0; i < s->n_env; i++) {
                free(s->env[i].name);
                if (s->env[i].value)
                        explicit_bzero(s->env[i].value, strlen(s->env[i].value));
                free(s->env[i].value);
        }
        free(s->env);
        for (size_t i = 0; i < s->argc; i++)
                free(s->argv[i]);
        free(s->argv);
        free(s->root_path);
        free(s->root_real);
        if (s->root_fd >= 0)
                close(s->root_fd);
        if (s->upper_fd >= 0)
                close(s->upper_fd);
        if (s->work_fd >= 0)
                close(s->work_fd);
        spec_lowers_free(s);
        free(s->hostname);
        free(s->cwd);
        free(s->seccomp_path);
        free(s->rlimits);
        spec_egress_free(s);
        spec_decided_free(s);
        memset(s, 0, sizeof(*s));
}

int spec_normalize_dest(const char *path, const char *what, char **ret, struct cs_error *err)
{
        size_t len = strlen(path);
        _cleanup_free_ char *out = NULL;
        size_t o = 0;
        const char *p = path;

        if (path[0] != '/')
                return cs_error_setx(err, EINVAL,
                                     "%s `%s` is not an absolute path: paths inside the sandbox "
                                     "start with /",
                                     what, path);
        if (len >= SPEC_PATH_MAX)
                return cs_error_setx(err, ENAMETOOLONG, "%s is longer than %d bytes", what,
                                     SPEC_PATH_MAX);
        out = malloc(len + 2);
        if (!out)
                return cs_error_set(err, ENOMEM, "%s", what);
        while (*p) {
                const char *c;
                size_t n;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                c = p;
                while (*p && *p != '/')
                        p++;
                n = (size_t)(p - c);
                if (n == 1 && c[0] == '.')
                        continue;
                if (n == 2 && c[0] == '.' && c[1] == '.')
                        return cs_error_setx(err, EINVAL,
                                             "%s `%s` contains `..`, which could point outside "
                                             "the sandbox root: give the path without `..`",
                                             what, path);
                out[o++] = '/';
                memcpy(out + o, c, n);
                o += n;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = '\0';
        *ret = cs_take_ptr(&out);
        return 0;
}

static struct spec_mount *spec_mount_append(struct sandbox_spec *s, struct cs_error *err)
{
        struct spec_mount *n;

        if (s->n_mounts >= SPEC_MAX_MOUNTS) {
                cs_error_setx(err, E2BIG, "more than %d mounts requested", SPEC_MAX_MOUNTS);
                return NULL;
        }
        n = realloc(s->mounts, (s->n_mounts + 1) * sizeof(*n));
        if (!n) {
                cs_error_set(err, ENOMEM, "add mount");
                return NULL;
        }
        s->mounts = n;
        n = &s->mounts[s->n_mounts];
        memset(n, 0, sizeof(*n));
        n->source_fd = -1;
        n->seq = s->n_mounts;
        return n;
}

static const char *spec_mount_what(enum spec_mount_kind kind)
{
        switch (kind) {
        case SPEC_MOUNT_BIND:
                return "bind destination";
        case SPEC_MOUNT_TMPFS:
                return "--tmpfs destination";
        case SPEC_MOUNT_DIR:
                return "--dir destination";
        case SPEC_MOUNT_FILE:
                return "--file destination";
        case SPEC_MOUNT_SYMLINK:
                return "--symlink destination";
        case SPEC_MOUNT_PROC:
                return "proc destination";
        case SPEC_MOUNT_DEV:
                return "dev destination";
        case SPEC_MOUNT_COPY:
                return "copy destination";
        }
        return "destination";
}

int spec_add_mount(struct sandbox_spec *s, enum spec_mount_kind kind, unsigned flags,
                   const char *source, const char *dest, struct cs_error *err)
{
        _cleanup_free_ char *d = NULL;
        _cleanup_free_ char *src = NULL;
        struct spec_mount *m;
        int r;

        if (kind == SPEC_MOUNT_BIND || kind == SPEC_MOUNT_COPY)
                return cs_error_setx(err, EINVAL,
                                     "bind %s: a bind source enters the spec as an fd "
                                     "(spec_add_bind), never as a path",
                                     dest);
        r = spec_normalize_dest(dest, spec_mount_what(kind), &d, err);
        if (r < 0)
                return r;
        if (strcmp(d, "/") == 0)
                return cs_error_setx(err, EINVAL, "%s cannot be / itself", spec_mount_what(kind));
        if (source) {
                if (strlen(source) >= SPEC_PATH_MAX)
                        return cs_error_setx(err, ENAMETOOLONG, "source of %s is too long", d);
                src = strdup(source);
                if (!src)
                        return cs_error_set(err, ENOMEM, "add mount");
        }
        m = spec_mount_append(s, err);
        if (!m)
                return -err->err;
        m->kind = kind;
        m->flags = flags;
        m->source = cs_take_ptr(&src);
        m->dest = cs_take_ptr(&d);
        m->mode = kind == SPEC_MOUNT_TMPFS || kind == SPEC_MOUNT_DIR ? 0755 : 0;
        s->n_mounts++;
        return 0;
}

/* The name the kernel gives fd: how the runner finds the same object again in its copy of
 * the mount table (and checks that it is the same). */
static int fd_kernel_name(int fd, const char *shown, char **ret, struct cs_error *err)
{
        char link[64], buf[SPEC_PATH_MAX];
        ssize_t n;

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, buf, sizeof(buf) - 1);
        if (n <= 0 || n >= (ssize_t)sizeof(buf) - 1 || buf[0] != '/')
                return cs_error_setx(err, n < 0 ? errno : ENAMETOOLONG,
                                     "cannot name %s through /proc/self/fd (is /proc mounted?)",
                                     shown);
        buf[n] = '\0';
        *ret = strdup(buf);
        if (!*ret)
                return cs_error_set(err, ENOMEM, "name %s", shown);
        return 0;
}

int spec_set_root_dir(struct sandbox_spec *s, int *fd, const char *path, struct cs_error *err)
{
        _cleanup_close_ int f = cs_take_fd(fd);
        _cleanup_free_ char *shown = NULL, *real = NULL;
        struct stat sb;
        int r;

        if (f < 0 || fstat(f, &sb) < 0)
                return cs_error_setx(err, EBADF, "the root %s is not open", path);
        if (!S_ISDIR(sb.st_mode))
                return cs_error_setx(err, ENOTDIR,
                                     "the root %s is not a directory; give the directory that "
                                     "holds the root tree",
                                     path);
        r = fd_kernel_name(f, path, &real, err);
        if (r < 0)
                return r;
        shown = strdup(path);
        if (!shown)
                return cs_error_set(err, ENOMEM, "root %s", path);
        free(s->root_path);
        free(s->root_real);
        if (s->root_fd >= 0)
                close(s->root_fd);
        s->root = SPEC_ROOT_DIR;
        s->root_path = cs_take_ptr(&shown);
        s->root_real = cs_take_ptr(&real);
        s->root_fd = cs_take_fd(&f);
        return 0;
}

int spec_set_root_layers(struct sandbox_spec *s, const int *fds, char *const *paths, size_t n,
                         struct cs_error *err)
{
        int fd;
        int r;

        if (n == 0 || n > SPEC_MAX_LOWERS)
                return cs_error_setx(err, E2BIG,
                                     "the root has %zu layers; an overlay stacks 1 to %d", n,
                                     SPEC_MAX_LOWERS);
        fd = fcntl(fds[0], F_DUPFD_CLOEXEC, 3);
        r = spec_set_root_dir(s, &fd, paths[0], err);
        if (r < 0)
                return r;
        spec_lowers_free(s);
        s->lowers = calloc(n - 1 ? n - 1 : 1, sizeof(*s->lowers));
        if (!s->lowers)
                return cs_error_set(err, ENOMEM, "root layers");
        for (size_t i = 1; i < n; i++) {
                struct spec_lower *l = &s->lowers[s->n_lowers];

                l->fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (l->fd < 0)
                        return cs_error_set(err, errno, "layer %s", paths[i]);
                s->n_lowers++;
                l->path = strdup(paths[i]);
                if (!l->path)
                        return cs_error_set(err, ENOMEM, "layer %s", paths[i]);
                r = fd_kernel_name(l->fd, paths[i], &l->real, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int spec_set_root_upper(struct sandbox_spec *s, int upper_fd, int work_fd, struct cs_error *err)
{
        int u = fcntl(upper_fd, F_DUPFD_CLOEXEC, 3), w = fcntl(work_fd, F_DUPFD_CLOEXEC, 3);

        if (u < 0 || w < 0) {
                int e = errno;

                if (u >= 0)
                        close(u);
                if (w >= 0)
                        close(w);
                return cs_error_set(err, e, "the root's upper dir");
        }
        if (s->upper_fd >= 0)
                close(s->upper_fd);
        if (s->work_fd >= 0)
                close(s->work_fd);
        s->upper_fd = u;
        s->work_fd = w;
        return 0;
}

/* A mount whose source enters as an fd (BIND, COPY): the fd taken, its kernel name kept. */
static int add_fd_mount(struct sandbox_spec *s, enum spec_mount_kind kind, unsigned flags,
                        int *source_fd, const char *source, const char *dest, struct cs_error *err)
{
        _cleanup_close_ int fd = cs_take_fd(source_fd);
        _cleanup_free_ char *d = NULL, *src = NULL, *real = NULL;
        const char *what = kind == SPEC_MOUNT_COPY ? "copy" : "bind";
        struct spec_mount *m;
        struct stat sb;
        int r;

        r = spec_normalize_dest(dest, spec_mount_what(kind), &d, err);
        if (r < 0)
                return r;
        if (fd < 0 || fstat(fd, &sb) < 0)
                return cs_error_setx(err, EBADF, "%s %s: no open source", what, d);
        if (S_ISLNK(sb.st_mode))
                return cs_error_setx(err, ELOOP, "%s %s: the source %s is a symlink itself", what,
                                     d, source);
        if (kind == SPEC_MOUNT_COPY && (!S_ISDIR(sb.st_mode) || (fcntl(fd, F_GETFL) & O_PATH)))
                return cs_error_setx(err, EINVAL,
                                     "copy %s: the source %s must be a directory opened for "
                                     "reading",
                                     d, source);
        if (strlen(source) >= SPEC_PATH_MAX)
                return cs_error_setx(err, ENAMETOOLONG, "source of %s is too long", d);
        r = fd_kernel_name(fd, source, &real, err);
        if (r < 0)
                return cs_error_wrap(err, "%s %s", what, d);
        src = strdup(source);
        if (!src)
                return cs_error_set(err, ENOMEM, "add mount");
        m = spec_mount_append(s, err);
        if (!m)
                return -err->err;
        m->kind = kind;
        m->flags = flags;
        m->source = cs_take_ptr(&src);
        m->source_real = cs_take_ptr(&real);
        m->source_fd = cs_take_fd(&fd);
        m->dest = cs_take_ptr(&d);
        if (kind == SPEC_MOUNT_COPY)
                m->mode = sb.st_mode & 0777;
        s->n_mounts++;
        return 0;
}

int spec_add_bind(struct sandbox_spec *s, unsigned flags, int *source_fd, const char *source,
                  const char *dest, struct cs_error *err)
{
        return add_fd_mount(s, SPEC_MOUNT_BIND, flags, source_fd, source, dest, err);
}

int spec_add_copy(struct sandbox_spec *s, int *dir_fd, const char *source, const char *dest,
                  struct cs_error *err)
{
        return add_fd_mount(s, SPEC_MOUNT_COPY, 0, dir_fd, source, dest, err);
}

int spec_add_file(struct sandbox_spec *s, const char *dest, const char *origin, const void *data,
                  size_t len, unsigned flags, struct cs_error *err)
{
        _cleanup_free_ char *copy = malloc(len + 1);
        int r;

        if (!copy)
                return cs_error_set(err, ENOMEM, "copy of %s", origin);
        memcpy(copy, data, len);
        copy[len] = '\0';
        r = spec_add_mount(s, SPEC_MOUNT_FILE, flags | SPEC_MOUNT_RO, origin, dest, err);
        if (r < 0)
                return r;
        s->mounts[s->n_mounts - 1].data = cs_take_ptr(&copy);
        s->mounts[s->n_mounts - 1].data_len = len;
        s->mounts[s->n_mounts - 1].mode = 0444;
        return 0;
}

int spec_add_base_mounts(struct sandbox_spec *s, struct cs_error *err)
{
        int r;

        r = spec_add_mount(s, SPEC_MOUNT_PROC, SPEC_MOUNT_DEFAULT, NULL, "/proc", err);
        if (r >= 0)
                r = spec_add_mount(s, SPEC_MOUNT_DEV, SPEC_MOUNT_DEFAULT, NULL, "/dev", err);
        if (r >= 0)
                r = spec_add_mount(s, SPEC_MOUNT_TMPFS, SPEC_MOUNT_DEFAULT, NULL, "/tmp", err);
        if (r >= 0)
                s->mounts[s->n_mounts - 1].mode = 01777;
        return r;
}

int spec_add_net_files(struct sandbox_spec *s, struct cs_error *err)
{
        const char *host = s->hostname ? s->hostname : SPEC_DEFAULT_HOSTNAME;
        char hostname[128], hosts[512], resolv[256];
        const unsigned flags = SPEC_MOUNT_OPTIONAL | SPEC_MOUNT_DEFAULT;
        int r;

        if (s->net == SPEC_NET_HOST)
                return 0;
        snprintf(hostname, sizeof(hostname), "%s\n", host);
        snprintf(hosts, sizeof(hosts),
                 "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                 "127.0.1.1\t%s\n%s",
                 host,
                 (s->net == SPEC_NET_PASTA || s->net == SPEC_NET_RELAY) && s->map_host_loopback
                     ? SPEC_NET_HOST_LOOPBACK "\thost.containers.internal "
                                              "host.csandbox.internal\n"
                     : "");
        if (s->net == SPEC_NET_PASTA && s->egress == SPEC_EGRESS_ALLOWLIST)
                snprintf(resolv, sizeof(resolv),
                         "# csandbox: answered by csandbox for the allowed hosts only\n"
                         "nameserver %s\n",
                         SPEC_NET_DNS);
        else if (s->net == SPEC_NET_PASTA || s->net == SPEC_NET_RELAY)
                snprintf(resolv, sizeof(resolv),
                         "# csandbox: queries go through the sandbox's network to the host's "
                         "resolver\nnameserver %s\n",
                         SPEC_NET_DNS);
        else
                snprintf(resolv, sizeof(resolv),
                         "# csandbox: this sandbox has no network (--net none)\n");
        r = spec_add_file(s, "/etc/hostname", "csandbox: hostname", hostname, strlen(hostname),
                          flags, err);
        if (r >= 0)
                r = spec_add_file(s, "/etc/hosts", "csandbox: hosts", hosts, strlen(hosts), flags,
                                  err);
        if (r >= 0)
                r = spec_add_file(s, "/etc/resolv.conf", "csandbox: resolv.conf", resolv,
                                  strlen(resolv), flags, err);
        return r;
}

static size_t dest_depth(const char *p)
{
        size_t d = 0;

        if (strcmp(p, "/") == 0)
                return 0;
        for (; *p; p++)
                if (*p == '/')
                        d++;
        return d;
}

static int mount_cmp(const void *a, const void *b)
{
        const struct spec_mount *x = a, *y = b;
        size_t dx = dest_depth(x->dest), dy = dest_depth(y->dest);

        bool ax = (x->flags & SPEC_MOUNT_DEFAULT) != 0, ay = (y->flags & SPEC_MOUNT_DEFAULT) != 0;

        if (dx != dy)
                return dx < dy ? -1 : 1;
        /* What every sandbox gets comes first, so a flag on the same path overrides it. */
        if (ax != ay)
                return ax ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void spec_sort_mounts(struct sandbox_spec *s)
{
        if (s->n_mounts > 1)
                qsort(s->mounts, s->n_mounts, sizeof(s->mounts[0]), mount_cmp);
        for (size_t i = 0; i < s->n_mounts; i++)
                s->mounts[i].seq = i;
}

int spec_set_argv(struct sandbox_spec *s, int argc, char *const *argv, struct cs_error *err)
{
        char **v;

        if (argc <= 0)
                return cs_error_setx(err, EINVAL, "no command given");
        if (argc > SPEC_MAX_ARGS)
                return cs_error_setx(err, E2BIG, "more than %d arguments", SPEC_MAX_ARGS);
        v = calloc((size_t)argc + 1, sizeof(*v));
        if (!v)
                return cs_error_set(err, ENOMEM, "argv");
        for (int i = 0; i < argc; i++) {
                v[i] = strdup(argv[i]);
                if (!v[i]) {
                        for (int j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        return cs_error_set(err, ENOMEM, "argv");
                }
        }
        for (size_t i = 0; i < s->argc; i++)
                free(s->argv[i]);
        free(s->argv);
        s->argv = v;
        s->argc = (size_t)argc;
        return 0;
}

const char *spec_mount_kind_name(enum spec_mount_kind k)
{
        static const char *const names[] = {
            [SPEC_MOUNT_BIND] = "bind",       [SPEC_MOUNT_TMPFS] = "tmpfs",
            [SPEC_MOUNT_DIR] = "dir",         [SPEC_MOUNT_FILE] = "file",
            [SPEC_MOUNT_SYMLINK] = "symlink", [SPEC_MOUNT_PROC] = "proc",
            [SPEC_MOUNT_COPY] = "copy",       [SPEC_MOUNT_DEV] = "dev",
        };
        return names[k];
}
