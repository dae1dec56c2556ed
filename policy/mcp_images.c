/* Reading `docker run`/`podman run` command lines the way podman's option parser does. */
#include "policy/mcp_images.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* podman run's options that take a value (long names, without the leading dashes). */
static const char *const long_valued[] = {
    "add-host",
    "annotation",
    "arch",
    "attach",
    "authfile",
    "blkio-weight",
    "blkio-weight-device",
    "cap-add",
    "cap-drop",
    "cert-dir",
    "cgroup-conf",
    "cgroup-parent",
    "cgroupns",
    "cgroups",
    "chrootdirs",
    "cidfile",
    "conmon-pidfile",
    "cpu-period",
    "cpu-quota",
    "cpu-rt-period",
    "cpu-rt-runtime",
    "cpu-shares",
    "cpus",
    "cpuset-cpus",
    "cpuset-mems",
    "creds",
    "decryption-key",
    "detach-keys",
    "device",
    "device-cgroup-rule",
    "device-read-bps",
    "device-read-iops",
    "device-write-bps",
    "device-write-iops",
    "dns",
    "dns-option",
    "dns-opt",
    "dns-search",
    "entrypoint",
    "env",
    "env-file",
    "env-merge",
    "expose",
    "gidmap",
    "gpus",
    "group-add",
    "group-entry",
    "health-cmd",
    "health-interval",
    "health-retries",
    "health-start-period",
    "health-timeout",
    "health-on-failure",
    "hostname",
    "hostuser",
    "image-volume",
    "init-path",
    "ip",
    "ip6",
    "ipc",
    "label",
    "label-file",
    "log-driver",
    "log-opt",
    "mac-address",
    "memory",
    "memory-reservation",
    "memory-swap",
    "memory-swappiness",
    "mount",
    "name",
    "network",
    "net",
    "network-alias",
    "oom-score-adj",
    "os",
    "passwd-entry",
    "personality",
    "pid",
    "pidfile",
    "pids-limit",
    "platform",
    "pod",
    "pod-id-file",
    "preserve-fds",
    "publish",
    "pull",
    "requires",
    "restart",
    "sdnotify",
    "seccomp-policy",
    "secret",
    "security-opt",
    "shm-size",
    "shm-size-systemd",
    "stop-signal",
    "stop-timeout",
    "storage-opt",
    "subgidname",
    "subuidname",
    "sysctl",
    "systemd",
    "timeout",
    "tmpfs",
    "tz",
    "uidmap",
    "ulimit",
    "umask",
    "unsetenv",
    "user",
    "userns",
    "uts",
    "variant",
    "volume",
    "volumes-from",
    "workdir",
    "chdir",
    "retry",
    "retry-delay",
    "kernel-memory",
    "isolation",
    "runtime",
    "link",
};

/* Those that take none. */
static const char *const long_flags[] = {
    "detach",
    "disable-content-trust",
    "env-host",
    "http-proxy",
    "init",
    "interactive",
    "no-healthcheck",
    "no-hosts",
    "oom-kill-disable",
    "privileged",
    "publish-all",
    "quiet",
    "read-only",
    "read-only-tmpfs",
    "replace",
    "rm",
    "rmi",
    "rootfs",
    "sig-proxy",
    "tls-verify",
    "tty",
    "help",
    "passwd",
    "no-hostname",
};

/* Short options that take a value; the rest podman knows take none. */
static const char short_valued[] = "acehlmpuvw";
static const char short_flags[] = "diPqt";

static bool in(const char *const *list, size_t n, const char *s, size_t len)
{
        for (size_t i = 0; i < n; i++)
                if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0)
                        return true;
        return false;
}

static bool is_engine(const char *cmd)
{
        const char *base = strrchr(cmd, '/');

        base = base ? base + 1 : cmd;
        return strcmp(base, "docker") == 0 || strcmp(base, "podman") == 0;
}

/* Skip the option at argv[*i]; advances *i past its value when it takes one. */
static int skip_option(const char *const *argv, size_t argc, size_t *i, struct cs_error *e)
{
        const char *a = argv[*i];

        if (a[1] == '-') {
                const char *name = a + 2, *eq = strchr(name, '=');
                size_t len = eq ? (size_t)(eq - name) : strlen(name);

                if (in(long_valued, sizeof(long_valued) / sizeof(*long_valued), name, len)) {
                        if (!eq && ++*i >= argc)
                                return cs_error_setx(e, EINVAL, "option `%s` needs a value", a);
                        return 0;
                }
                if (in(long_flags, sizeof(long_flags) / sizeof(*long_flags), name, len))
                        return 0; /* --rm, and --rm=true: a boolean's value is joined */
                return cs_error_setx(e, EINVAL,
                                     "option `%.*s` of `run` is not one csandbox knows, so the "
                                     "image after it cannot be found",
                                     (int)(len + 2), a);
        }
        /* A cluster of short options: -it, -e X, -eX=1, -ie X. */
        for (const char *c = a + 1; *c; c++) {
                if (strchr(short_valued, *c)) {
                        if (c[1] == '\0' && ++*i >= argc)
                                return cs_error_setx(e, EINVAL, "option `-%c` needs a value", *c);
                        return 0;
                }
                if (!strchr(short_flags, *c))
                        return cs_error_setx(e, EINVAL,
                                             "option `-%c` of `run` is not one csandbox knows, so "
                                             "the image after it cannot be found",
                                             *c);
        }
        return 0;
}

int mcp_run_image(const char *cmd, const char *const *argv, size_t argc, const char **image,
                  struct cs_error *e)
{
        size_t i = 0;

        *image = NULL;
        if (!cmd || !is_engine(cmd))
                return 0;
        /* Global options before the subcommand: only the --opt=value form is unambiguous. */
        while (i < argc && argv[i][0] == '-' && argv[i][1] == '-' && strchr(argv[i], '='))
                i++;
        if (i < argc && strcmp(argv[i], "container") == 0)
                i++;
        if (i >= argc || strcmp(argv[i], "run") != 0)
                return 0;
        for (i++; i < argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--") == 0) {
                        i++;
                        break;
                }
                if (a[0] != '-' || a[1] == '\0')
                        break;
                int r = skip_option(argv, argc, &i, e);
                if (r < 0)
                        return r;
        }
        if (i >= argc || argv[i][0] == '\0')
                return cs_error_setx(e, EINVAL, "`run` names no image");
        *image = argv[i];
        return 1;
}
