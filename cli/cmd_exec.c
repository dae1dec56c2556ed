/* `csandbox exec`: its flags turned into a spec (parse_exec, which `csandbox doctor` uses
 * too), printed (--plan) or launched. */
#include "cmd_exec.h"
#include "cli.h"
#include "../runner/runner.h"
#include "../spec/spec.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../image/store/store.h"
#include "../policy/bridges.h"
#include "../policy/egress_file.h"
#include "../policy/seccomp.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENV_FILE_MAX  (1u << 20)
#define COPY_FILE_MAX (16u << 20)

static const char usage_exec[] =
    "Usage: csandbox exec [OPTIONS] [--] COMMAND [ARG...]\n"
    "\n"
    "Run COMMAND in new user, mount, pid, ipc, uts and network namespaces, with every\n"
    "capability dropped, no_new_privs set and a seccomp filter loaded.\n"
    "\n"
    "Root:\n"
    "  --rootfs DIR            pivot into DIR, read-only (default: the host's / read-only,\n"
    "                          with /home, /root, /tmp, /var/tmp, /run and $HOME empty)\n"
    "  --image NAME            an imported image (csandbox image import) as the root, its\n"
    "                          Env, WorkingDir and User as defaults, and, without a\n"
    "                          COMMAND, its Entrypoint and Cmd\n"
    "  --writable              keep the root writable; writes go to a tmpfs and vanish\n"
    "Mounts (in command-line order, parents before children):\n"
    "  --bind SRC DST          bind SRC read-write at DST\n"
    "  --ro-bind SRC DST       bind SRC read-only at DST (submounts too)\n"
    "  --dev-bind SRC DST      bind SRC read-write at DST, device nodes usable (e.g.\n"
    "                          /dev/net/tun, for --net pasta in a nested sandbox)\n"
    "  --bind-try, --ro-bind-try, --dev-bind-try SRC DST\n"
    "                          the same, skipped when SRC does not exist\n"
    "  --tmpfs DST             an empty tmpfs at DST\n"
    "  --dir DST               create the directory DST\n"
    "  --symlink TARGET DST    create the symlink DST pointing at TARGET\n"
    "  --file SRC DST          a read-only copy of SRC's content at DST\n"
    "Identity and namespaces:\n"
    "  --uid N, --gid N        ids inside (default: your own)\n"
    "  --map-range             map 65536 ids through newuidmap/newgidmap (/etc/subuid)\n"
    "  --package-broker        let /run/csandbox/sudo run a package manager (apt-get, dnf,\n"
    "                          apk, ...) as the namespace's root, to install packages into\n"
    "                          the session's writable layer; maps the subordinate range\n"
    "  --hostname NAME         hostname inside (default: csandbox)\n"
    "  --net none|pasta|relay|host\n"
    "                          own network namespace with loopback only (default);\n"
    "                          own namespace with internet through pasta (slirp4netns\n"
    "                          when pasta is missing; the relay where /dev/net/tun\n"
    "                          cannot be used), host loopback unreachable; csandbox's\n"
    "                          relay: TCP to any host and DNS only, no tun needed; or\n"
    "                          the host's network (every loopback service reachable)\n"
    "  --map-host-loopback     with --net pasta or relay: 169.254.1.2 reaches the host's\n"
    "                          127.0.0.1\n"
    "  --egress open|allowlist|none\n"
    "                          where the sandbox may connect: as --net says (default),\n"
    "                          only the --allow-host hosts and what claude needs (its own\n"
    "                          network, every program's TCP through csandbox's proxy, DNS\n"
    "                          through its resolver, nothing else), or nowhere\n"
    "  --allow-host PATTERN    with --egress allowlist: example.com, *.example.com, either\n"
    "                          with :PORT, or an address range (192.0.2.0/24); repeatable\n"
    "  --deny-host PATTERN     with --egress allowlist or --net relay: the same, denied;\n"
    "                          denied entries win\n"
    "  --egress-file FILE      with --egress allowlist: the entries of an srt settings file\n"
    "                          (network.allowedDomains, network.deniedDomains); not in a\n"
    "                          read-write --bind\n"
    "  --egress-log FILE       with --egress allowlist or --net relay: each refusal one\n"
    "                          line in FILE\n"
    "Process:\n"
    "  --chdir DIR             working directory inside (default: the current one if it\n"
    "                          exists inside, else /)\n"
    "  --setenv KEY VALUE      set a variable (the environment starts with PATH, TERM, HOME)\n"
    "  --unsetenv KEY          remove a variable\n"
    "  --env-file FILE         KEY=VALUE lines from FILE (values kept out of --plan)\n"
    "  --env-fd N              KEY=VALUE lines read from file descriptor N\n"
    "  --seccomp PROFILE       default, strict, none, or an OCI/Docker JSON file\n"
    "  --tty=auto|pty|inherit  auto (default): those of stdin, stdout and stderr that\n"
    "                          are terminals become a pty of the sandbox's own, relayed\n"
    "                          to yours; pty: all three, always; inherit: your terminal\n"
    "                          itself (the sandbox can change its modes)\n"
    "  --proc=auto|fresh|bind|none\n"
    "                          /proc: auto (default) a fresh one, or where the kernel\n"
    "                          refuses it (most containers) the outer one read-only;\n"
    "                          fresh: refuse to launch instead; bind: the outer one\n"
    "                          read-only (its processes show); none: an empty one\n"
    "  --memory MIB            limit the sandbox's memory (cgroup v2, in a scope of your\n"
    "                          systemd user session; a warning says why when it cannot)\n"
    "  --cpus N                limit its CPU time to N CPUs (0.01 to 1024), likewise\n"
    "  --plan                  print the sandbox spec as JSON and exit\n"
    "\n"
    "Exit status: COMMAND's own; 128+N when it died of signal N; 125 when csandbox\n"
    "failed; 126 when COMMAND cannot be executed; 127 when it was not found.\n";

struct exec_flag {
        const char *name;
        int nargs;
};

/* One row per pair, as the help lists them; kept by hand so that a new flag is a one-line
 * change. */
/* clang-format off */
static const struct exec_flag exec_flags[] = {
    {"--rootfs", 1},    {"--writable", 0},
    {"--bind", 2},      {"--ro-bind", 2},
    {"--bind-try", 2},  {"--ro-bind-try", 2},
    {"--dev-bind", 2},  {"--dev-bind-try", 2},
    {"--tmpfs", 1},     {"--dir", 1},
    {"--symlink", 2},   {"--file", 2},
    {"--uid", 1},       {"--gid", 1},
    {"--map-range", 0}, {"--package-broker", 0}, {"--map-host-loopback", 0},
    {"--hostname", 1},  {"--net", 1},
    {"--chdir", 1},     {"--setenv", 2},
    {"--unsetenv", 1},  {"--env-file", 1},
    {"--env-fd", 1},    {"--seccomp", 1},
    {"--image", 1},     {"--plan", 0},
    {"--help", 0},      {"--tty", 1},
    {"--proc", 1},      {"--memory", 1},
    {"--cpus", 1},      {"--egress", 1},
    {"--allow-host", 1}, {"--egress-log", 1},
    {"--deny-host", 1}, {"--egress-file", 1},
};
/* clang-format on */

static const struct exec_flag *exec_flag_find(const char *arg)
{
        static const struct exec_flag inline_values[] = {{"--tty=", 0}, {"--proc=", 0}};

        for (size_t i = 0; i < sizeof(inline_values) / sizeof(inline_values[0]); i++)
                if (strncmp(arg, inline_values[i].name, strlen(inline_values[i].name)) == 0)
                        return &inline_values[i];
        for (size_t i = 0; i < sizeof(exec_flags) / sizeof(exec_flags[0]); i++)
                if (strcmp(exec_flags[i].name, arg) == 0)
                        return &exec_flags[i];
        return NULL;
}

static int parse_id(const char *flag, const char *v, unsigned *ret, struct cs_error *err)
{
        char *end;
        unsigned long n;

        errno = 0;
        n = strtoul(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || n >= 4294967295UL)
                return cs_error_setx(err, EINVAL, "%s `%s`: expected a numeric id", flag, v);
        *ret = (unsigned)n;
        return 0;
}

/* A host path as the user gave it, made absolute against the cwd (not resolved: the runner
 * resolves it when it opens it). */
static int host_path(const char *flag, const char *p, char **ret, struct cs_error *err)
{
        char cwd[PATH_MAX];

        if (p[0] == '\0')
                return cs_error_setx(err, EINVAL, "%s: the path is empty", flag);
        if (p[0] == '/') {
                *ret = strdup(p);
        } else {
                if (!getcwd(cwd, sizeof(cwd)))
                        return cs_error_set(err, errno, "%s %s: cannot find the current directory",
                                            flag, p);
                if (asprintf(ret, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, p) < 0)
                        *ret = NULL;
        }
        if (!*ret)
                return cs_error_set(err, ENOMEM, "%s", flag);
        return 0;
}

static int add_bind(struct sandbox_spec *s, const char *flag, const char *src, const char *dst,
                    struct cs_error *err)
{
        bool ro = strstr(flag, "ro-") != NULL;
        bool optional = strstr(flag, "-try") != NULL;
        bool dev = strncmp(flag, "--dev-", 6) == 0;
        _cleanup_free_ char *abs = NULL;
        int fd, r;

        r = host_path(flag, src, &abs, err);
        if (r < 0)
                return r;
        /* The user's own path, symlinks followed as bubblewrap does, opened once: the
         * sandbox gets this object whatever the path names by the time it is mounted. */
        fd = open(abs, O_PATH | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT && optional)
                        return 0;
                if (errno == ENOENT)
                        return cs_error_setx(err, ENOENT,
                                             "%s %s %s: the source %s does not exist (use %s-try "
                                             "to skip a missing source)",
                                             flag, src, dst, abs,
                                             ro    ? "--ro-bind"
                                             : dev ? "--dev-bind"
                                                   : "--bind");
                return cs_error_set(err, errno, "%s %s %s: cannot use the source %s", flag, src,
                                    dst, abs);
        }
        r = spec_add_bind(s,
                          (ro ? SPEC_MOUNT_RO : 0) | (optional ? SPEC_MOUNT_OPTIONAL : 0) |
                              (dev ? SPEC_MOUNT_DEVICES : 0),
                          &fd, abs, dst, err);
        if (r < 0)
                return cs_error_wrap(err, "%s", flag);
        return 0;
}

static int add_file_copy(struct sandbox_spec *s, const char *src, const char *dst,
                         struct cs_error *err)
{
        _cleanup_free_ char *abs = NULL;
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r;

        r = host_path("--file", src, &abs, err);
        if (r < 0)
                return r;
        r = cs_read_file_at(AT_FDCWD, abs, COPY_FILE_MAX, false, &data, &len, err);
        if (r < 0)
                return cs_error_wrap(err, "--file %s %s", src, dst);
        r = spec_add_file(s, dst, abs, data, len, 0, err);
        if (r < 0)
                return cs_error_wrap(err, "--file");
        return 0;
}

static int read_env_file(struct sandbox_spec *s, const char *path, struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        char origin[PATH_MAX + 16];
        size_t len;
        int r;

        r = cs_read_file_at(AT_FDCWD, path, ENV_FILE_MAX, false, &buf, &len, err);
        if (r < 0)
                return cs_error_wrap(err, "--env-file");
        snprintf(origin, sizeof(origin), "--env-file %s", path);
        r = spec_env_parse(s, buf, len, origin, true, err);
        explicit_bzero(buf, len);
        return r;
}

static int read_env_fd(struct sandbox_spec *s, const char *v, struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        unsigned fd = 0;
        size_t len;
        char what[64];
        int r;

        r = parse_id("--env-fd", v, &fd, err);
        if (r < 0)
                return r;
        if (fd <= 2 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
                return cs_error_setx(err, EBADF, "--env-fd %s: not an open file descriptor above 2",
                                     v);
        snprintf(what, sizeof(what), "--env-fd %u", fd);
        r = cs_read_fd((int)fd, what, ENV_FILE_MAX, &buf, &len, err);
        close((int)fd);
        if (r < 0)
                return r;
        r = spec_env_parse(s, buf, len, what, true, err);
        explicit_bzero(buf, len);
        return r;
}

/* The value of --image, if any: its config is the base the other flags build on. */
static const char *prescan_image(int argc, char **argv)
{
        const char *image = NULL;

        for (int i = 0; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0; i++) {
                const struct exec_flag *f = exec_flag_find(argv[i]);

                if (!f || i + f->nargs >= argc)
                        break;
                if (strcmp(argv[i], "--image") == 0)
                        image = argv[i + 1];
                i += f->nargs;
        }
        return image;
}

/* An imported image as the root: read-only (or an overlay with --writable), its Env as the
 * base environment, its WorkingDir and User as the defaults. */
static int apply_image(struct sandbox_spec *s, const char *name, struct image_ref *img,
                       struct cs_error *err)
{
        uid_t uid;
        gid_t gid;
        int r;

        r = store_open_image(name, img, err);
        if (r < 0)
                return cs_error_wrap(err, "--image %s", name);
        r = spec_set_root_layers(s, img->layer_fds, img->layer_paths, img->n_layers, err);
        if (r < 0)
                return cs_error_wrap(err, "--image %s", name);
        for (char **e = img->config.env; e && *e; e++) {
                char *eq = strchr(*e, '=');
                _cleanup_free_ char *k = eq ? strndup(*e, (size_t)(eq - *e)) : NULL;

                if (k && spec_env_name_valid(k)) {
                        r = spec_env_set(s, k, eq + 1, false, err);
                        if (r < 0)
                                return r;
                }
        }
        if (img->config.working_dir && img->config.working_dir[0] == '/') {
                r = spec_normalize_dest(img->config.working_dir, "the image's WorkingDir", &s->cwd,
                                        err);
                if (r < 0)
                        return r;
                s->cwd_optional = true;
        }
        r = image_resolve_user(img, img->config.user ? img->config.user : "", &uid, &gid, err);
        if (r < 0)
                return cs_error_wrap(err, "--image %s: its User", name);
        s->uid = uid;
        s->gid = gid;
        return 0;
}

int parse_exec(int argc, char **argv, struct sandbox_spec *s, struct image_ref *img, bool *ret_plan,
               bool *ret_help, struct cs_error *err)
{
        const char *term = getenv("TERM"), *home = getenv("HOME");
        const char *image = prescan_image(argc, argv);
        int i, r;

        spec_init(s);
        s->host_uid = getuid();
        s->host_gid = getgid();
        s->uid = s->host_uid;
        s->gid = s->host_gid;
        *ret_plan = false;
        *ret_help = false;

        r = spec_env_set(s, "PATH", SPEC_DEFAULT_PATH, false, err);
        if (r < 0)
                return r;
        r = spec_env_set(s, "TERM", term && *term && spec_env_name_valid("TERM") ? term : "dumb",
                         false, err);
        if (r < 0)
                return r;
        /* HOME as bubblewrap and podman give it: the caller's home path (an empty tmpfs
         * inside, on the embedded default); --unsetenv HOME removes it. */
        r = spec_env_set(s, "HOME", home && home[0] == '/' ? home : "/", false, err);
        if (r < 0)
                return r;
        r = spec_add_base_mounts(s, err);
        if (r < 0)
                return r;
        if (image) {
                r = apply_image(s, image, img, err);
                if (r < 0)
                        return r;
        }

        for (i = 0; i < argc; i++) {
                const char *a = argv[i];
                const struct exec_flag *f;
                const char *v1, *v2;

                if (strcmp(a, "--") == 0) {
                        i++;
                        break;
                }
                if (a[0] != '-')
                        break;
                f = exec_flag_find(a);
                if (!f)
                        return cs_error_setx(
                            err, EINVAL, "exec: unknown option `%s`; see `csandbox exec --help`",
                            a);
                if (i + f->nargs >= argc)
                        return cs_error_setx(err, EINVAL,
                                             "exec: %s needs %d argument%s; see `csandbox exec "
                                             "--help`",
                                             a, f->nargs, f->nargs > 1 ? "s" : "");
                v1 = f->nargs > 0 ? argv[i + 1] : NULL;
                v2 = f->nargs > 1 ? argv[i + 2] : NULL;
                i += f->nargs;

                if (strcmp(a, "--help") == 0) {
                        *ret_help = true;
                        return 0;
                } else if (strcmp(a, "--image") == 0) {
                        /* Applied first (prescan_image). */
                } else if (strcmp(a, "--rootfs") == 0) {
                        _cleanup_free_ char *abs = NULL;
                        int fd;

                        if (image)
                                return cs_error_setx(err, EINVAL,
                                                     "--rootfs and --image both name the root; "
                                                     "give one of them");
                        r = host_path(a, v1, &abs, err);
                        if (r < 0)
                                return r;
                        /* Opened once, here: the sandbox gets this tree. */
                        fd = open(abs, O_PATH | O_CLOEXEC);
                        if (fd < 0)
                                return cs_error_set(err, errno, "--rootfs %s", abs);
                        r = spec_set_root_dir(s, &fd, abs, err);
                        if (r < 0)
                                return cs_error_wrap(err, "--rootfs");
                } else if (strcmp(a, "--writable") == 0) {
                        s->writable = true;
                } else if (strstr(a, "bind") && strncmp(a, "--proc", 6) != 0) {
                        /* (--proc=bind is a --proc value) */
                        r = add_bind(s, a, v1, v2, err);
                } else if (strcmp(a, "--tmpfs") == 0) {
                        r = spec_add_mount(s, SPEC_MOUNT_TMPFS, 0, NULL, v1, err);
                } else if (strcmp(a, "--dir") == 0) {
                        r = spec_add_mount(s, SPEC_MOUNT_DIR, 0, NULL, v1, err);
                } else if (strcmp(a, "--symlink") == 0) {
                        r = spec_add_mount(s, SPEC_MOUNT_SYMLINK, 0, v1, v2, err);
                } else if (strcmp(a, "--file") == 0) {
                        r = add_file_copy(s, v1, v2, err);
                } else if (strcmp(a, "--uid") == 0) {
                        r = parse_id(a, v1, &s->uid, err);
                } else if (strcmp(a, "--gid") == 0) {
                        r = parse_id(a, v1, &s->gid, err);
                } else if (strcmp(a, "--map-range") == 0) {
                        s->map_range = true;
                } else if (strcmp(a, "--package-broker") == 0) {
                        r = packages_plan(s, NULL, err);
                } else if (strcmp(a, "--hostname") == 0) {
                        if (strlen(v1) == 0 || strlen(v1) > 64)
                                return cs_error_setx(err, EINVAL,
                                                     "--hostname `%s`: a hostname has 1 to 64 "
                                                     "characters",
                                                     v1);
                        free(s->hostname);
                        s->hostname = strdup(v1);
                } else if (strcmp(a, "--net") == 0) {
                        if (strcmp(v1, "none") == 0)
                                s->net = SPEC_NET_NONE;
                        else if (strcmp(v1, "host") == 0)
                                s->net = SPEC_NET_HOST;
                        else if (strcmp(v1, "pasta") == 0)
                                s->net = SPEC_NET_PASTA;
                        else if (strcmp(v1, "relay") == 0)
                                s->net = SPEC_NET_RELAY;
                        else
                                return cs_error_setx(
                                    err, EINVAL, "--net `%s`: expected none, pasta, relay or host",
                                    v1);
                } else if (strcmp(a, "--map-host-loopback") == 0) {
                        s->map_host_loopback = true;
                } else if (strcmp(a, "--egress") == 0) {
                        if (!spec_egress_parse(v1, &s->egress))
                                return cs_error_setx(
                                    err, EINVAL, "--egress `%s`: expected open, allowlist or none",
                                    v1);
                } else if (strcmp(a, "--allow-host") == 0) {
                        r = spec_egress_add(s, v1, false, "--allow-host", err);
                } else if (strcmp(a, "--egress-file") == 0) {
                        r = egress_file_load(s, v1, "--egress-file", err);
                } else if (strcmp(a, "--deny-host") == 0) {
                        r = spec_egress_deny(s, v1, "--deny-host", err);
                } else if (strcmp(a, "--egress-log") == 0) {
                        free(s->egress_log);
                        s->egress_log = NULL;
                        r = host_path(a, v1, &s->egress_log, err);
                } else if (strcmp(a, "--chdir") == 0) {
                        free(s->cwd);
                        s->cwd = NULL;
                        r = spec_normalize_dest(v1, "--chdir", &s->cwd, err);
                } else if (strcmp(a, "--setenv") == 0) {
                        r = spec_env_set(s, v1, v2, false, err);
                        if (r < 0)
                                cs_error_wrap(err, "--setenv");
                } else if (strcmp(a, "--unsetenv") == 0) {
                        spec_env_unset(s, v1);
                } else if (strcmp(a, "--env-file") == 0) {
                        r = read_env_file(s, v1, err);
                } else if (strcmp(a, "--env-fd") == 0) {
                        r = read_env_fd(s, v1, err);
                } else if (strcmp(a, "--seccomp") == 0) {
                        free(s->seccomp_path);
                        s->seccomp_path = NULL;
                        if (strcmp(v1, "default") == 0) {
                                s->seccomp = SPEC_SECCOMP_DEFAULT;
                        } else if (strcmp(v1, "strict") == 0) {
                                s->seccomp = SPEC_SECCOMP_STRICT;
                        } else if (strcmp(v1, "none") == 0) {
                                s->seccomp = SPEC_SECCOMP_NONE;
                        } else {
                                s->seccomp = SPEC_SECCOMP_FILE;
                                r = host_path(a, v1, &s->seccomp_path, err);
                        }
                } else if (strcmp(a, "--plan") == 0) {
                        *ret_plan = true;
                } else if (strncmp(a, "--tty", 5) == 0) {
                        const char *v = a[5] == '=' ? a + 6 : v1;

                        if (!spec_tty_parse(v, &s->tty))
                                return cs_error_setx(
                                    err, EINVAL, "--tty `%s`: expected auto, pty or inherit", v);
                } else if (strcmp(a, "--memory") == 0) {
                        r = spec_parse_memory_mib("--memory ", v1, &s->memory_max, err);
                } else if (strcmp(a, "--cpus") == 0) {
                        r = spec_parse_cpus("--cpus ", v1, &s->cpu_milli, err);
                } else if (strncmp(a, "--proc", 6) == 0) {
                        const char *v = a[6] == '=' ? a + 7 : v1;

                        if (!spec_proc_parse(v, &s->proc))
                                return cs_error_setx(
                                    err, EINVAL, "--proc `%s`: expected auto, fresh, bind or none",
                                    v);
                }
                if (r < 0)
                        return r;
        }
        if (i >= argc && image) {
                /* No COMMAND: the image's Entrypoint + Cmd. */
                char *cmdv[256];
                int n = 0;

                for (char **e = img->config.entrypoint; e && *e && n < 255; e++)
                        cmdv[n++] = *e;
                for (char **e = img->config.cmd; e && *e && n < 255; e++)
                        cmdv[n++] = *e;
                if (n == 0)
                        return cs_error_setx(err, EINVAL,
                                             "--image %s has no Entrypoint or Cmd: give a "
                                             "COMMAND",
                                             image);
                r = spec_set_argv(s, n, cmdv, err);
                if (r < 0)
                        return r;
        } else if (i >= argc)
                return cs_error_setx(err, EINVAL,
                                     "exec: no COMMAND given; usage: csandbox exec [OPTIONS] [--] "
                                     "COMMAND [ARG...]");
        if (s->root == SPEC_ROOT_HOST) {
                r = spec_add_host_view(s, getenv("HOME"), err);
                /* --package-broker on the host's view: a writable layer over it */
                if (r >= 0 && s->package_broker)
                        r = packages_host_layer(s, err);
                if (r < 0)
                        return r;
        }
        if (s->egress != SPEC_EGRESS_ALLOWLIST &&
            (s->n_egress_hosts || s->n_egress_files || s->egress_log)) {
                /* the relay, open, keeps only to denied entries */
                bool relay_ok =
                    s->net == SPEC_NET_RELAY && s->egress == SPEC_EGRESS_OPEN && !s->n_egress_files;

                for (size_t k = 0; relay_ok && k < s->n_egress_hosts; k++)
                        relay_ok = s->egress_hosts[k].deny;
                if (!relay_ok)
                        return cs_error_setx(
                            err, EINVAL,
                            "--allow-host, --deny-host, --egress-file and --egress-log go with "
                            "--egress allowlist (--deny-host and --egress-log also with --net "
                            "relay)");
        }
        r = spec_egress_finish(s, "--egress", err);
        /* after every --bind: the file must lie in none the session can write */
        if (r >= 0)
                r = egress_file_check(s, err);
        if (r < 0)
                return r;
        r = spec_add_net_files(s, err);
        if (r < 0)
                return r;
        if (!s->cwd) {
                char cwd[PATH_MAX];

                /* The caller's cwd, when it exists inside; / otherwise. */
                if (getcwd(cwd, sizeof(cwd)) && cwd[0] == '/') {
                        s->cwd = strdup(cwd);
                        s->cwd_optional = true;
                }
        }
        if (i < argc) {
                r = spec_set_argv(s, argc - i, argv + i, err);
                if (r < 0)
                        return r;
        }
        spec_sort_mounts(s);
        return 0;
}

int cli_print_plan(const struct sandbox_spec *s)
{
        struct cs_error err = {0};
        cJSON *j;
        char *text;
        int r = 0;

        if (spec_validate(s, &err) < 0)
                return cli_fail(&err);
        j = spec_to_json(s);
        text = j ? cJSON_Print(j) : NULL;
        if (!text || printf("%s\n", text) < 0 || fflush(stdout) != 0) {
                fprintf(stderr, "csandbox: --plan: cannot write the plan to stdout\n");
                r = CS_EXIT_SETUP;
        }
        free(text);
        cJSON_Delete(j);
        return r;
}

int exec_launch(const struct sandbox_spec *s, int *ret_status, struct cs_error *err)
{
        struct sock_fprog filter = {0};
        bool owned = false;
        int r = 0;

        if (s->seccomp == SPEC_SECCOMP_FILE) {
                r = seccomp_compile_file(s->seccomp_path, &filter, err);
                owned = true;
        } else if (s->seccomp != SPEC_SECCOMP_NONE) {
                r = seccomp_builtin(s->seccomp, &filter, err);
        }
        if (r < 0)
                return r;
        r = launch_run(s, s->seccomp == SPEC_SECCOMP_NONE ? NULL : &filter, ret_status, err);
        if (owned)
                seccomp_fprog_free(&filter);
        return r;
}

int cmd_exec(int argc, char **argv)
{
        struct sandbox_spec s;
        struct image_ref img = {.lock_fd = -1};
        struct cs_error err = {0};
        bool plan, help;
        int status = CS_EXIT_SETUP;
        int r;

        struct rlimit nofile;
        bool raised = raise_nofile_limit(&nofile);

        r = parse_exec(argc, argv, &s, &img, &plan, &help, &err);
        if (r >= 0 && raised)
                r = spec_add_rlimit(&s, RLIMIT_NOFILE, &nofile, &err);
        if (r >= 0 && !help)
                r = runner_spec_complete(&s, &err);
        if (r >= 0)
                spec_print_warnings(&s);
        if (r < 0) {
                spec_free(&s);
                image_ref_free(&img);
                return cli_fail(&err);
        }
        if (help) {
                fputs(usage_exec, stdout);
                spec_free(&s);
                return 0;
        }
        if (plan) {
                status = cli_print_plan(&s);
        } else {
                r = exec_launch(&s, &status, &err);
                if (r < 0)
                        status = cli_fail(&err);
        }
        spec_free(&s);
        /* Held until the sandbox is gone: rm and prune leave a rootfs in use alone. */
        image_ref_free(&img);
        return status;
}
