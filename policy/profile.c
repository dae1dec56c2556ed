/* claude-profile's layout, as its launcher reads it (reference §1): the CLAUDE_PROFILE_*
 * settings, the profile dir, the .env file, the .sandbox marker and the state dir. */
#include "profile.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../spec/spec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* pydantic-settings runs with env_ignore_empty=True: an empty value is the same as unset. */
static const char *setting_get(const char *name)
{
        const char *v = getenv(name);

        return v && *v ? v : NULL;
}

/* pydantic's str -> bool: these words, compared case-insensitively, and nothing else. */
static int bool_parse(const char *name, const char *value, bool *ret, struct cs_error *err)
{
        static const char *const yes[] = {"1", "true", "yes", "on", "t", "y"};
        static const char *const no[] = {"0", "false", "no", "off", "f", "n"};

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (strcasecmp(value, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(value, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return cs_error_setx(err, EINVAL,
                             "%s=%.64s is not a boolean: use 1, true, yes or on to enable, "
                             "0, false, no or off to disable (any case), or leave it empty "
                             "for the default",
                             name, value);
}

/* Unset or empty: no limit. The reference's VM defaults to 4096 MiB and 4 CPUs because a VM
 * must be given a size; a namespace sandbox shares the host's memory and CPUs as a host
 * launch does, so csandbox limits only when asked. */
static int limits_parse(struct profile_config *c, struct cs_error *err)
{
        const char *ram = setting_get("CLAUDE_PROFILE_SANDBOX_RAM_MIB");
        const char *cpus = setting_get("CLAUDE_PROFILE_SANDBOX_CPUS");
        uint64_t bytes = 0;
        int r = 0;

        if (ram)
                r = spec_parse_memory_mib("CLAUDE_PROFILE_SANDBOX_RAM_MIB=", ram, &bytes, err);
        c->ram_mib = (unsigned long)(bytes >> 20);
        if (r >= 0 && cpus)
                r = spec_parse_cpus("CLAUDE_PROFILE_SANDBOX_CPUS=", cpus, &c->cpus_milli, err);
        return r;
}

/* A relative path is taken against the cwd, as Python's Path would; "/x/" becomes "/x". */
static int path_absolute(const char *path, char **ret)
{
        _cleanup_free_ char *cwd = NULL;
        char *s;
        size_t n;

        if (path[0] == '/') {
                s = strdup(path);
        } else {
                cwd = getcwd(NULL, 0);
                if (!cwd)
                        return -errno;
                if (asprintf(&s, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, path) < 0)
                        s = NULL;
        }
        if (!s)
                return -ENOMEM;
        n = strlen(s);
        while (n > 1 && s[n - 1] == '/')
                s[--n] = '\0';
        *ret = s;
        return 0;
}

int profile_forward_env_split(const char *list, char ***ret, size_t *ret_n)
{
        const char *p = list;
        char **v = NULL;
        size_t n = 0;

        while (*p) {
                const char *end = strchr(p, ',');
                const char *b = p, *e = end ? end : p + strlen(p);

                while (b < e && (*b == ' ' || *b == '\t'))
                        b++;
                while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
                        e--;
                if (e > b && strv_push(&v, &n, strndup(b, (size_t)(e - b))) < 0)
                        goto oom;
                if (!end)
                        break;
                p = end + 1;
        }
        *ret = v;
        *ret_n = n;
        return 0;
oom:
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
        return -ENOMEM;
}

void profile_config_free(struct profile_config *c)
{
        if (!c)
                return;
        free(c->home);
        free(c->profiles_base);
        free(c->data_home);
        free(c->claude_bin);
        free(c->sandbox_image);
        free(c->infisical);
        free(c->infisical_bin);
        for (size_t i = 0; i < c->n_forward_env; i++)
                free(c->forward_env[i]);
        free(c->forward_env);
        for (size_t i = 0; i < c->n_host_paths; i++)
                free(c->host_paths[i]);
        free(c->host_paths);
        free(c->egress);
        free(c->allow_hosts);
        memset(c, 0, sizeof(*c));
}

int profile_config_load(struct profile_config *ret, struct cs_error *err)
{
        struct profile_config c = {.sandbox_override = PROFILE_UNSET, .skip_permissions = true};
        const char *home = setting_get("HOME"), *v;
        int r;

        if (!home)
                return cs_error_setx(err, EINVAL,
                                     "HOME is not set: csandbox needs it to find the profiles "
                                     "and the state dirs");
        if (home[0] != '/')
                return cs_error_setx(err, EINVAL, "HOME=%s is not an absolute path", home);
        c.home = strdup(home);
        if (!c.home)
                goto oom;

        v = setting_get("CLAUDE_PROFILE_PROFILES_BASE");
        if (v) {
                r = path_absolute(v, &c.profiles_base);
                if (r < 0) {
                        profile_config_free(&c);
                        return cs_error_set(err, -r, "CLAUDE_PROFILE_PROFILES_BASE=%s", v);
                }
        } else if (asprintf(&c.profiles_base, "%s/.claude-profiles", home) < 0) {
                c.profiles_base = NULL;
                goto oom;
        }

        /* The XDG spec says a relative XDG_DATA_HOME is invalid and is to be ignored. */
        v = setting_get("XDG_DATA_HOME");
        if (v && v[0] == '/')
                r = path_absolute(v, &c.data_home);
        else
                r = asprintf(&c.data_home, "%s/.local/share", home) < 0 ? -ENOMEM : 0;
        if (r < 0) {
                c.data_home = NULL;
                goto oom;
        }

        v = setting_get("CLAUDE_PROFILE_CLAUDE_BIN");
        c.claude_bin = strdup(v ? v : "claude");
        if (!c.claude_bin)
                goto oom;
        v = setting_get("CLAUDE_PROFILE_SANDBOX_IMAGE");
        if (v && !(c.sandbox_image = strdup(v)))
                goto oom;
        v = setting_get("CLAUDE_PROFILE_SANDBOX_INFISICAL");
        if (v && !(c.infisical = strdup(v)))
                goto oom;
        v = setting_get("CLAUDE_PROFILE_INFISICAL_BIN");
        if (!(c.infisical_bin = strdup(v ? v : "infisical")))
                goto oom;

        v = setting_get("CLAUDE_PROFILE_SANDBOX");
        if (v) {
                bool on = false;

                r = bool_parse("CLAUDE_PROFILE_SANDBOX", v, &on, err);
                if (r < 0) {
                        profile_config_free(&c);
                        return r;
                }
                c.sandbox_override = on ? PROFILE_ON : PROFILE_OFF;
        }
        /* The boolean settings: unset (or empty) keeps the default. */
        const struct {
                const char *name;
                bool *value;
        } flags[] = {
            {"CLAUDE_PROFILE_SANDBOX_SKIP_PERMISSIONS", &c.skip_permissions},
            {"CLAUDE_PROFILE_SANDBOX_SSH_AGENT", &c.ssh_agent},
            {"CLAUDE_PROFILE_SANDBOX_GH", &c.gh},
            {"CLAUDE_PROFILE_SANDBOX_GPG", &c.gpg},
            {"CLAUDE_PROFILE_SANDBOX_CLIPBOARD", &c.clipboard},
            {"CLAUDE_PROFILE_SANDBOX_CHROME", &c.chrome},
            {"CLAUDE_PROFILE_SANDBOX_PULUMI", &c.pulumi},
            {"CLAUDE_PROFILE_SANDBOX_PACKAGES", &c.packages},
        };
        for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
                v = setting_get(flags[i].name);
                r = v ? bool_parse(flags[i].name, v, flags[i].value, err) : 0;
                if (r < 0) {
                        profile_config_free(&c);
                        return r;
                }
        }
        r = limits_parse(&c, err);
        if (r < 0) {
                profile_config_free(&c);
                return r;
        }
        v = setting_get("CLAUDE_PROFILE_SANDBOX_FORWARD_ENV");
        if (v && profile_forward_env_split(v, &c.forward_env, &c.n_forward_env) < 0)
                goto oom;
        v = setting_get("CLAUDE_PROFILE_SANDBOX_HOST_PATHS");
        if (v && profile_forward_env_split(v, &c.host_paths, &c.n_host_paths) < 0)
                goto oom;
        v = setting_get("CLAUDE_PROFILE_SANDBOX_EGRESS");
        if (v && !(c.egress = strdup(v)))
                goto oom;
        v = setting_get("CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS");
        if (v && !(c.allow_hosts = strdup(v)))
                goto oom;
        r = plan_egress_check(&c, err);
        if (r < 0) {
                profile_config_free(&c);
                return r;
        }

        *ret = c;
        return 0;
oom:
        profile_config_free(&c);
        return cs_error_set(err, ENOMEM, "load the CLAUDE_PROFILE_* settings");
}

/* The launch path of claude-profile checks only that the dir exists; csandbox also refuses
 * what would leave profiles_base (a '/', "." or ".."), since the name becomes a path. */
static int profile_name_check(const char *name, struct cs_error *err)
{
        size_t n = strlen(name);

        if (n == 0)
                return cs_error_setx(err, EINVAL, "a profile name cannot be empty");
        if (n > PROFILE_NAME_MAX)
                return cs_error_setx(err, ENAMETOOLONG,
                                     "profile name '%.32s...' is longer than %d bytes", name,
                                     PROFILE_NAME_MAX);
        if (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return cs_error_setx(err, EINVAL,
                                     "'%s' can't be a profile name: it must name a directory "
                                     "inside the profiles dir (no '/', not '.' or '..')",
                                     name);
        return 0;
}

void profile_close(struct profile *p)
{
        if (!p)
                return;
        free(p->name);
        free(p->dir);
        free(p->state_dir);
        if (p->dir_fd >= 0)
                close(p->dir_fd);
        if (p->state_fd >= 0)
                close(p->state_fd);
        *p = (struct profile){.dir_fd = -1, .state_fd = -1};
}

int profile_open(const struct profile_config *c, const char *name, struct profile *ret,
                 struct cs_error *err)
{
        struct profile p = {.dir_fd = -1, .state_fd = -1};
        int r;

        r = profile_name_check(name, err);
        if (r < 0)
                return r;
        p.name = strdup(name);
        if (!p.name || asprintf(&p.dir, "%s/%s", c->profiles_base, name) < 0)
                p.dir = NULL;
        if (!p.dir ||
            asprintf(&p.state_dir, "%s/claude-profile/profiles/%s", c->data_home, name) < 0) {
                p.state_dir = NULL;
                profile_close(&p);
                return cs_error_set(err, ENOMEM, "open profile '%s'", name);
        }
        /* The profile dir itself (and the profiles base) may be a link the user made: the
         * sandbox never sees profiles_base, only the inside of one profile, so it cannot
         * plant this one. It is followed here, once; from then on dir_fd is the profile. */
        p.dir_fd = open(p.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (p.dir_fd >= 0) {
                struct stat st;

                if (fstat(p.dir_fd, &st) < 0 || st.st_uid != getuid()) {
                        r = cs_error_setx(err, EPERM,
                                          "profile '%s': %s is not yours (owner uid %u, you are "
                                          "%u); csandbox uses only your own profile dirs",
                                          name, p.dir, (unsigned)st.st_uid, (unsigned)getuid());
                        profile_close(&p);
                        return r;
                }
        }
        if (p.dir_fd < 0) {
                int e = errno;

                if (e == ENOENT)
                        r = cs_error_setx(err, ENOENT,
                                          "Profile '%s' does not exist. Create it with: "
                                          "csandbox add %s (or mkdir %s)",
                                          name, name, p.dir);
                else if (e == ENOTDIR)
                        r = cs_error_setx(err, ENOTDIR, "profile '%s': %s is not a directory", name,
                                          p.dir);
                else
                        r = cs_error_set(err, e, "open profile '%s' at %s", name, p.dir);
                profile_close(&p);
                return r;
        }
        *ret = p;
        return 0;
}

/* One step of mkdir -p below data_home: never through a link, so a planted link cannot
 * send the state (copies the sandbox may write) somewhere else. */
static int dir_step_open(int parent_fd, const char *name, const char *path, struct cs_error *err)
{
        int fd;

        if (mkdirat(parent_fd, name, 0700) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "create %s", path);
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                struct stat st;
                int e = errno;

                if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                        return cs_error_setx(err, ELOOP,
                                             "%s is a symlink, which csandbox does not follow "
                                             "for state dirs. Check it and remove it",
                                             path);
                if (e == ENOTDIR || e == ELOOP)
                        return cs_error_setx(err, ENOTDIR, "%s is not a directory", path);
                return cs_error_set(err, e, "open %s", path);
        }
        return fd;
}

static int data_home_open(const char *data_home, struct cs_error *err)
{
        int fd, r;

        /* data_home itself is the user's own dir: links in it are the user's choice. */
        fd = open(data_home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                r = cs_mkdir_parents(data_home, 0700, err);
                if (r < 0)
                        return r;
                fd = open(data_home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        }
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", data_home);
        return fd;
}

int profile_state_open(struct profile *p, struct cs_error *err)
{
        const char *steps[] = {"claude-profile", "profiles", p->name};
        _cleanup_free_ char *data_home = NULL, *path = NULL;
        _cleanup_close_ int fd = -1;
        size_t prefix;
        struct stat st;
        int r;

        /* state_dir is "<data_home>/claude-profile/profiles/<name>". */
        prefix = strlen(p->state_dir) - strlen("/claude-profile/profiles/") - strlen(p->name);
        data_home = strndup(p->state_dir, prefix);
        if (!data_home)
                return cs_error_set(err, ENOMEM, "open %s", p->state_dir);
        fd = data_home_open(data_home, err);
        if (fd < 0)
                return fd;
        path = strdup(data_home);
        for (size_t i = 0; path && i < sizeof(steps) / sizeof(steps[0]); i++) {
                char *next;
                int child;

                if (asprintf(&next, "%s/%s", path, steps[i]) < 0)
                        break;
                free(path);
                path = next;
                child = dir_step_open(fd, steps[i], path, err);
                if (child < 0)
                        return child;
                close(fd);
                fd = child;
        }
        if (!path || strcmp(path, p->state_dir) != 0)
                return cs_error_set(err, ENOMEM, "open %s", p->state_dir);
        /* §8.6: the state dir is 0700 however it was made (umask, an older tool). */
        if (fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "stat %s", p->state_dir);
        if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
                return cs_error_set(err, errno, "make %s mode 0700", p->state_dir);
        r = cs_take_fd(&fd);
        if (p->state_fd >= 0)
                close(p->state_fd);
        p->state_fd = r;
        return 0;
}

bool profile_marked(const struct profile *p)
{
        struct stat st;

        /* lexists(): a dangling link counts. An error other than "nothing there" (EACCES,
         * EIO) also counts, so a doubt never turns the sandbox off. */
        if (fstatat(p->dir_fd, ".sandbox", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return true;
        return errno != ENOENT;
}

bool profile_sandboxed(const struct profile_config *c, const struct profile *p)
{
        if (c->sandbox_override != PROFILE_UNSET)
                return c->sandbox_override == PROFILE_ON;
        return profile_marked(p);
}
