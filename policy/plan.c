/* A claude-profile launch as a struct sandbox_spec. What goes in, and why, follows the
 * reference's mount table (§2.4) in order; the runner sorts parents before children. */
#include "plan.h"
#include "containers.h"
#include "egress_file.h"
#include "bridges.h"
#include "plan_report.h"
#include "bind.h"

#include "briefing.h"
#include "identity.h"

#include "settings.h"
#include "trust.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../common/resolve.h"
#include "../common/strbuf.h"
#include "../image/store/store.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdarg.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* §2.8.1: commands, skills, hooks, statusline.sh linked to <home>/.claude/<name> exactly. */
static int add_linked(struct plan *p, const struct profile_config *c, struct cs_error *err)
{
        static const char *const names[] = {"commands", "skills", "hooks", "statusline.sh"};
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                char target[PATH_MAX], real[PATH_MAX];
                _cleanup_free_ char *expected = NULL, *link = NULL, *gdir = NULL;
                ssize_t n = readlinkat(p->profile.dir_fd, names[i], target, sizeof(target) - 1);
                int r;

                if (n <= 0)
                        continue; /* not a link: an isolated dir or a copy, no mount */
                target[n] = '\0';
                if (!(gdir = cs_path_join(c->home, ".claude")) ||
                    !(expected = cs_path_join(gdir, names[i])) ||
                    !(link = cs_path_join(p->profile.dir, names[i])))
                        return cs_error_set(err, ENOMEM, "linked mounts");
                if (strcmp(target, expected) != 0) {
                        stage_warn(
                            &p->warnings, err,
                            "Warning: not mounting %s into the sandbox: it points at %s, not "
                            "%s. Re-point it with: ln -sfn %s %s",
                            link, target, expected, expected, link);
                        continue;
                }
                /* The profile's link is only compared, never followed (the session can
                 * re-point it at any time): the user's own path is what is opened. */
                if (!realpath(expected, real))
                        continue; /* a broken link gets no mount */
                r = plan_bind_at(&p->spec, root, "/", real, target, SPEC_MOUNT_RO, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* §2.4 #13/#14: the host's CA anchors with the extracted bundle, as a pair. */
static int add_ca_trust(struct plan *p, bool *ret_mounted, struct cs_error *err)
{
        static const char anchors[] = "/etc/pki/ca-trust/source/anchors";
        static const char extracted[] = "/etc/pki/ca-trust/extracted";
        _cleanup_closedir_ DIR *d = opendir(anchors);
        struct stat st;
        bool any = false;
        struct dirent *e;
        int r;

        *ret_mounted = false;
        while (d && (e = readdir(d)))
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        any = true;
        if (!any)
                return 0;
        if (stat(extracted, &st) < 0 || !S_ISDIR(st.st_mode)) {
                stage_warn(&p->warnings, err,
                           "Warning: %s has CA anchors but there is no %s, so the sandbox does not "
                           "trust them. Run update-ca-trust on the host.",
                           anchors, extracted);
                return 0;
        }
        r = plan_bind_host(&p->spec, anchors, anchors, SPEC_MOUNT_RO, err);
        if (r >= 0)
                r = plan_bind_host(&p->spec, extracted, extracted, SPEC_MOUNT_RO, err);
        *ret_mounted = r >= 0;
        return r;
}

/* An identity file of the image as its layers show it; "" when it cannot be read. */
static char *image_identity_file(const struct image_ref *img, const char *path)
{
        /* Dropped: a file it cannot read reads as empty, as the host's would. */
        struct cs_error ignored;
        char *buf = NULL;

        if (image_read_file(img, path, &buf, &ignored) < 0 || !buf)
                return strdup("");
        return buf;
}

/* The root: an imported image (CLAUDE_PROFILE_SANDBOX_IMAGE or --image) under an ephemeral
 * writable overlay, or the embedded default. The image's Env is the base environment. */
static int plan_root(struct plan *p, const struct plan_request *req, struct cs_error *err)
{
        const char *name = req->image ? req->image : req->config->sandbox_image;
        struct sandbox_spec *s = &p->spec;
        const char *path = NULL;
        _cleanup_free_ char *pw = NULL, *gr = NULL, *newpath = NULL;
        uid_t uid;
        gid_t gid;
        int r;

        if (!name) {
                s->root = SPEC_ROOT_HOST;
                pw = identity_read_root_file(AT_FDCWD, "/etc/passwd");
                gr = identity_read_root_file(AT_FDCWD, "/etc/group");
                r = identity_add_files(s, pw ? pw : "", gr ? gr : "", err);
                if (r < 0)
                        return r;
                return spec_env_set(s, "PATH", PLAN_HOME "/.local/bin:" SPEC_DEFAULT_PATH, false,
                                    err);
        }
        r = store_open_image(name, &p->image, err);
        if (r < 0) {
                cs_error_wrap(err, "the sandbox image %s", name);
                /* the store's message already says how to import it: add only what differs
                 * for a profile */
                if (err->err != ENOENT)
                        return r;
                return cs_error_hint(err,
                                     "SRC is an OCI layout, `podman save` or `skopeo copy ... "
                                     "oci-archive:` output, or a rootfs tar; `csandbox image pull "
                                     "REF` fetches one from a registry; or unset "
                                     "CLAUDE_PROFILE_SANDBOX_IMAGE to run on the embedded default");
        }
        r = spec_set_root_layers(s, p->image.layer_fds, p->image.layer_paths, p->image.n_layers,
                                 err);
        if (r < 0)
                return r;
        s->writable = true;
        for (char **e = p->image.config.env; e && *e; e++) {
                char *eq = strchr(*e, '=');
                _cleanup_free_ char *k = eq ? strndup(*e, (size_t)(eq - *e)) : NULL;

                if (k && spec_env_name_valid(k) && strcmp(k, "PATH") == 0)
                        path = eq + 1;
                else if (k && spec_env_name_valid(k) &&
                         (r = spec_env_set(s, k, eq + 1, false, err)) < 0)
                        return r;
        }
        if (asprintf(&newpath, "%s:%s", PLAN_HOME "/.local/bin", path ? path : SPEC_DEFAULT_PATH) <
            0)
                return cs_error_set(err, ENOMEM, "PATH");
        r = spec_env_set(s, "PATH", newpath, false, err);
        /* sudo for the image's package manager, as the reference's image has it. */
        if (r >= 0)
                r = packages_plan(s, PLAN_HOME "/.local/bin/sudo", err);
        if (r < 0)
                return r;
        /* The host user lands on the image's appuser (1000 when it has none, then added). */
        if (image_resolve_user(&p->image, PLAN_USER, &uid, &gid, err) == 0) {
                s->uid = uid;
                s->gid = gid;
                return 0;
        }
        pw = image_identity_file(&p->image, "/etc/passwd");
        gr = image_identity_file(&p->image, "/etc/group");
        return identity_add_files(s, pw ? pw : "", gr ? gr : "", err);
}

/* The state dir's copies: below the state dir fd, which profile_state_open verified. */
/* CLAUDE_PROFILE_SANDBOX_HOST_PATHS: host paths the user shows the session read-only, at
 * their real path (a link to one leads there inside too). The user's own setting, so links
 * are resolved once; what it may not show is what the refusals of a work root protect: all
 * of home, or the profiles dir with every profile's credentials. */
static int add_host_paths(struct plan *p, const struct profile_config *c, struct cs_error *err)
{
        static const char setting[] = "CLAUDE_PROFILE_SANDBOX_HOST_PATHS";
        char home[PATH_MAX], base[PATH_MAX];
        bool have_home = realpath(c->home, home) != NULL;
        bool have_base = realpath(c->profiles_base, base) != NULL;

        for (size_t i = 0; i < c->n_host_paths; i++) {
                const char *given = c->host_paths[i];
                char real[PATH_MAX];
                _cleanup_close_ int fd = -1;
                struct stat st;

                if (given[0] != '/')
                        return cs_error_setx(err, EINVAL,
                                             "%s: %s is not an absolute path; name each host "
                                             "path from / (a comma list)",
                                             setting, given);
                if (!realpath(given, real))
                        return cs_error_set(err, errno,
                                            "%s: %s cannot be shown in the sandbox; fix the path "
                                            "or remove it from the list",
                                            setting, given);
                if (strcmp(real, "/") == 0 || (have_home && plan_path_below(real, home)) ||
                    (have_base && (plan_path_below(real, base) || plan_path_below(base, real))))
                        return cs_error_setx(err, EPERM,
                                             "%s: %s (%s) would show %s, and with it every "
                                             "profile's credentials; name a directory below it "
                                             "instead",
                                             setting, given, real,
                                             have_home && plan_path_below(real, home)
                                                 ? "your whole home directory"
                                                 : "the profiles dir");
                fd = open(real, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fstat(fd, &st) < 0)
                        return cs_error_set(err, errno, "%s: open %s", setting, real);
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                        return cs_error_setx(err, EINVAL,
                                             "%s: %s is neither a directory nor a regular file; "
                                             "only those can be shown",
                                             setting, given);
                if (spec_add_bind(&p->spec, SPEC_MOUNT_RO, &fd, real, real, err) < 0)
                        return cs_error_wrap(err, "%s", setting);
        }
        return 0;
}

static int add_bind_state(struct plan *p, const char *copy, const char *dst, unsigned flags,
                          struct cs_error *err)
{
        return plan_bind_at(&p->spec, p->profile.state_fd, p->profile.state_dir, copy, dst, flags,
                            err);
}

static int add_git_state(struct plan *p, const struct worktree *w, struct cs_error *err)
{
        if (w->n_git_dirs > 0)
                stage_hooks_cleanup(p->profile.state_fd);
        for (size_t i = 0; i < w->n_git_dirs; i++) {
                _cleanup_free_ char *config = NULL, *hooks = NULL;
                _cleanup_close_ int hooks_fd = -1;
                bool hooks_missing;
                /* The fd the walk found the git dir through: never its path again. */
                const int gd = w->git_dir_fds[i];
                int r;

                /* The git dir on itself: a mountpoint cannot be renamed away, so the session
                 * cannot swap in a .git whose config and hooks are its own. (An external
                 * common dir is a mountpoint already, #5.) */
                if (!(w->common_outside && strcmp(w->git_dirs[i], w->common_dir) == 0)) {
                        int fd = fcntl(gd, F_DUPFD_CLOEXEC, 3);

                        r = plan_bind_fd(&p->spec, &fd, w->git_dirs[i], w->git_dirs[i], 0, err);
                        if (r < 0)
                                return r;
                }
                /* The copy goes over <gitdir>/hooks; a missing one is made on the host so
                 * that the sandbox cannot create hooks the host would run. */
                plan_ensure_host_dir(gd, "hooks");
                r = stage_git_dir(gd, w->git_dirs[i], &config, &hooks_fd, &hooks_missing,
                                  &p->warnings, err);
                if (r < 0)
                        return r;
                if (config) {
                        r = plan_bind_at(&p->spec, gd, w->git_dirs[i], config, config,
                                         SPEC_MOUNT_RO, err);
                        if (r < 0)
                                return r;
                }
                /* The hooks inside are a copy the runner makes in a tmpfs of the sandbox:
                 * what the session writes there is gone with it, and the host's disk sees
                 * nothing (an empty tmpfs where the git dir has no hooks). */
                if (hooks_fd >= 0 || hooks_missing) {
                        if (!(hooks = cs_path_join(w->git_dirs[i], "hooks")))
                                return cs_error_set(err, ENOMEM, "hooks");
                        r = hooks_fd >= 0
                                ? spec_add_copy(&p->spec, &hooks_fd, hooks, hooks, err)
                                : spec_add_mount(&p->spec, SPEC_MOUNT_TMPFS, 0, NULL, hooks, err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* work_fd: the work root, verified. */
static int add_local_settings(struct plan *p, const struct worktree *w, int work_fd,
                              struct cs_error *err)
{
        const char *bases[2] = {w->root, w->cwd};

        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *local = NULL, *dotclaude = NULL, *copy = NULL;
                _cleanup_close_ int dc = -1;
                const char *rel;
                int r;

                if (i == 1 && strcmp(w->root, w->cwd) == 0)
                        break;
                if (!(dotclaude = cs_path_join(bases[i], ".claude")) ||
                    !(local = cs_path_join(dotclaude, "settings.local.json")))
                        return cs_error_set(err, ENOMEM, "local settings");
                rel = plan_path_below(w->root, dotclaude);
                /* .claude opened once below the work root (no link on the way), and bound on
                 * itself when it is a real directory: the session cannot rename it away and
                 * put a settings.local.json of its own there. */
                dc = rel ? cs_open_beneath(work_fd, rel, O_PATH | O_DIRECTORY) : -1;
                if (dc < 0 && errno == ELOOP) {
                        r = stage_warn(
                            &p->warnings, err,
                            "Warning: %s is a symlink, so the sandbox gets no copy of %s.",
                            dotclaude, local);
                        if (r < 0)
                                return cs_error_set(err, ENOMEM, "local settings");
                }
                if (dc >= 0) {
                        int fd = fcntl(dc, F_DUPFD_CLOEXEC, 3);

                        r = plan_bind_fd(&p->spec, &fd, dotclaude, dotclaude, 0, err);
                        if (r < 0)
                                return r;
                }
                if (strv_push_dup(&p->local_settings, &p->n_local_settings, local) < 0)
                        return cs_error_set(err, ENOMEM, "local settings");
                r = stage_local_settings(&p->profile, dc, local, &copy, &p->warnings, err);
                if (r < 0)
                        return r;
                if (copy) {
                        r = add_bind_state(p, copy, local, 0, err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* The .env as the session sees it when it had Agent Vault keys: its other variables. */
static int dotenv_without_vault(struct plan *p, struct cs_error *err)
{
        struct strbuf b = {0};
        int r;

        for (size_t i = 0; i < p->dotenv.n; i++) {
                sb_puts(&b, p->dotenv.names[i]);
                sb_putc(&b, '=');
                sb_puts(&b, p->dotenv.values[i]);
                sb_putc(&b, '\n');
        }
        sb_puts(&b, "");
        r = b.oom ? cs_error_set(err, ENOMEM, "the .env")
                  : spec_add_file(&p->spec, PLAN_CONFIG "/.env",
                                  "the profile's .env without its Agent Vault keys", b.s, b.len,
                                  SPEC_MOUNT_SECRET, err);
        if (b.s)
                explicit_bzero(b.s, b.len);
        free(b.s);
        return r;
}

/* Pins of §2.4 #16/#17: the marker and .env, read-only, when they are regular files. */
static int add_profile_pins(struct plan *p, struct cs_error *err)
{
        static const char *const pins[] = {".sandbox", ".env"};

        for (size_t i = 0; i < 2; i++) {
                struct stat st;
                _cleanup_free_ char *src = NULL, *dst = NULL;
                int r;

                if (fstatat(p->profile.dir_fd, pins[i], &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                /* A .env with Agent Vault keys: the session sees it without them (read-only
                 * as the pin, and as unchangeable), so the access bundle stays out of reach. */
                if (i == 1 && p->vault.had_keys) {
                        r = dotenv_without_vault(p, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (!(src = cs_path_join(p->profile.dir, pins[i])) ||
                    !(dst = cs_path_join(PLAN_CONFIG, pins[i])))
                        return cs_error_set(err, ENOMEM, "pins");
                r = plan_bind_at(&p->spec, p->profile.dir_fd, p->profile.dir, src, dst,
                                 SPEC_MOUNT_RO, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The lowest of the limits in the files (of this user namespace and of the first one):
 * what the kernel checks first; -1 when none can be read. */
static long sysctl_lowest(const char *const *paths, size_t n)
{
        long low = -1;

        for (size_t i = 0; i < n && paths[i]; i++) {
                FILE *f = fopen(paths[i], "re");
                long v;

                if (!f)
                        continue;
                if (fscanf(f, "%ld", &v) == 1 && v >= 0 && (low < 0 || v < low))
                        low = v;
                fclose(f);
        }
        return low;
}

/* The session's user namespace gets half of the caller's inotify watches and instances and
 * of its user namespaces. What the session takes counts against the caller's limit as
 * well, and csandbox's change journal, outside as the caller, needs watches for as many
 * directories as the session's own watchers would (the same trees): half each. An instance
 * the journal holds already when the session starts; half of the rest keeps other
 * launches' journals and the caller's own programs going. Nested namespaces: a session
 * that used them all up would refuse the next launch its sandbox. */
static void plan_userns_limits(struct sandbox_spec *s)
{
        static const char *const files[SPEC_USERNS_LIMIT_N][2] = {
            [SPEC_USERNS_INOTIFY_WATCHES] = {"/proc/sys/user/max_inotify_watches",
                                             "/proc/sys/fs/inotify/max_user_watches"},
            [SPEC_USERNS_INOTIFY_INSTANCES] = {"/proc/sys/user/max_inotify_instances",
                                               "/proc/sys/fs/inotify/max_user_instances"},
            [SPEC_USERNS_USER_NAMESPACES] = {"/proc/sys/user/max_user_namespaces", NULL},
        };

        for (size_t i = 0; i < SPEC_USERNS_LIMIT_N; i++) {
                long v = sysctl_lowest(files[i], 2);

                s->userns_limits[i] = v < 0 ? -1 : v / 2;
        }
}

/* §2.5: the mask goes over <profile>/chrome, which claude makes a directory. Anything else
 * there (a link a session planted, a file) would leave the host's native-host wrapper
 * writable or the mask mounted somewhere else: refuse, and say how to fix it. */
static int chrome_check(struct plan *p, struct cs_error *err)
{
        char target[PATH_MAX];
        struct stat st;
        ssize_t n;

        if (fstatat(p->profile.dir_fd, "chrome", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            S_ISDIR(st.st_mode))
                return 0;
        if (S_ISLNK(st.st_mode) &&
            (n = readlinkat(p->profile.dir_fd, "chrome", target, sizeof(target) - 1)) >= 0) {
                target[n] = '\0';
                return cs_error_setx(err, ELOOP,
                                     "%s/chrome is a symlink (to %s), so the sandbox's mask "
                                     "cannot go over it and the session could rewrite what it "
                                     "points at (claude's Chrome native-host wrapper). Remove "
                                     "it (rm %s/chrome; claude makes it again as a directory) "
                                     "and launch again",
                                     p->profile.dir, target, p->profile.dir);
        }
        return cs_error_setx(err, ENOTDIR,
                             "%s/chrome is not a directory, so the sandbox's mask (over claude's "
                             "Chrome native-host wrapper) cannot be mounted there. Remove it (rm "
                             "%s/chrome; claude makes it again as a directory) and launch again",
                             p->profile.dir, p->profile.dir);
}

int plan_build(const struct plan_request *req, struct plan *p, struct cs_error *err)
{
        const struct profile_config *c = req->config;
        struct sandbox_spec *s = &p->spec;
        struct worktree w = {0};
        _cleanup_free_ char *settings_copy = NULL, *chrome = NULL, *gitconfig = NULL;
        _cleanup_free_ char *host_kh = NULL, *user_kh = NULL, *claude = NULL, *identity = NULL;
        _cleanup_free_ char *shared = NULL;
        char **mcp = NULL;
        size_t n_mcp = 0;
        bool loopback = false, claude_missing = false, ca = false;
        const char *term = getenv("TERM"), *colorterm = getenv("COLORTERM");
        _cleanup_close_ int root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int work_fd = -1, claude_fd = -1;
        _cleanup_(cs_spawn_abort) struct cs_spawned identity_git = {.pid = -1, .out = -1};
        int r;

        memset(p, 0, sizeof(*p));
        spec_init(s);
        p->profile.dir_fd = p->profile.state_fd = -1;
        relay_set_init(&p->bridges.relays);
        p->image.lock_fd = -1;
        r = profile_open(c, req->name, &p->profile, err);
        if (r < 0)
                return r;
        /* §1.5's order: the .env, then its Agent Vault keys out (and maybe the re-launch
         * through the vault's CLI), then sandbox or host. */
        r = profile_env_read(&p->profile, &p->dotenv, err);
        if (r >= 0)
                r = vault_split(&p->profile, &p->dotenv, &p->vault, err);
        if (r >= 0)
                r = vault_route(&p->vault, c, req->name, req->self_argv, err);
        if (r < 0 || p->vault.state == VAULT_EXEC)
                return r;
        /* §1.5: the override, else the marker; --sandbox or --host for this launch. */
        p->host = req->where == PLAN_WHERE_HOST ||
                  (req->where == PLAN_WHERE_DECIDE && !profile_sandboxed(c, &p->profile));
        if (p->host)
                return plan_host(p, req, err);
        /* The identity's `git config` runs beside the work tree's `git rev-parse`. */
        r = stage_git_identity_start(req->cwd, &identity_git, err);
        /* Refusals come before anything is created or copied. */
        if (r >= 0)
                r = worktree_detect(req->cwd, &w, err);
        if (r >= 0)
                r = worktree_refuse(&w, c->home, c->profiles_base, err);
        /* The image is looked up before anything is created, too. */
        s->host_uid = getuid();
        s->host_gid = getgid();
        s->uid = PLAN_UID;
        s->gid = PLAN_UID;
        if (r >= 0)
                r = plan_root(p, req, err);
        if (r >= 0)
                r = profile_state_open(&p->profile, err);
        if (r >= 0)
                r = plan_pending(p, req, err);
        if (r < 0)
                goto out;

        s->net = SPEC_NET_PASTA;
        s->net_fixed = true;
        r = plan_egress(p, req->config, err);
        if (r < 0)
                goto out;
        s->seccomp = SPEC_SECCOMP_DEFAULT;
        s->cwd = strdup(w.cwd);

        r = spec_env_set(s, "HOME", PLAN_HOME, false, err);
        if (r >= 0)
                r = spec_env_set(s, "USER", PLAN_USER, false, err);
        if (r >= 0)
                r = spec_env_set(s, "TERM", term && *term ? term : "dumb", false, err);
        if (r >= 0 && colorterm && *colorterm)
                r = spec_env_set(s, "COLORTERM", colorterm, false, err);
        if (r >= 0)
                r = spec_env_set(s, "CLAUDE_CONFIG_DIR", PLAN_CONFIG, false, err);
        if (r >= 0)
                r = spec_add_base_mounts(s, err);
        /* The embedded default: every home hidden, appuser's own writable home. */
        if (r >= 0 && s->root == SPEC_ROOT_HOST)
                r = spec_add_host_view(s, c->home, err);
        if (r >= 0 && s->root == SPEC_ROOT_HOST)
                r = spec_add_mount(s, SPEC_MOUNT_TMPFS, 0, NULL, PLAN_HOME, err);
        /* sudo on the embedded default, when the profile asks (an image session always has
         * it): the broker, and its writable layer over the host's system at the first sudo.
         * Asked for, not always: it maps the subordinate range, which costs every launch. */
        if (r >= 0 && s->root == SPEC_ROOT_HOST && c->packages) {
                r = packages_plan(s, PLAN_HOME "/.local/bin/sudo", err);
                if (r >= 0)
                        r = packages_host_layer(s, err);
        }
        if (r >= 0)
                r = add_host_paths(p, c, err);
        if (r < 0)
                goto out;

        /* §2.4, in order. #1 the profile (its fd: a linked profile dir was resolved once,
         * when it was opened), #2 the work tree (resolved; opened once, no link on the way). */
        work_fd = root_fd < 0 ? -1 : cs_open_beneath(root_fd, w.root + 1, O_PATH | O_DIRECTORY);
        if (work_fd < 0)
                r = cs_error_set(err, errno, "open the work tree %s", w.root);
        /* Another uid's tree (a CI workspace) only where git's safe.directory lists it. */
        if (r >= 0)
                r = plan_tree_owner_check(work_fd, w.root, w.common_dir != NULL,
                                          w.common_outside ? w.common_dir : NULL,
                                          &(struct plan_tree_owner){0}, err);
        if (r >= 0)
                r = plan_bind_at(s, p->profile.dir_fd, p->profile.dir, p->profile.dir, PLAN_CONFIG,
                                 0, err);
        if (r >= 0)
                r = plan_bind_at(s, work_fd, w.root, w.root, w.root, 0, err);
        /* #3 the chrome mask over a profile chrome/ made on the host when missing. */
        if (r >= 0)
                r = chrome_check(p, err);
        if (r >= 0 && plan_ensure_host_dir(p->profile.dir_fd, "chrome")) {
                r = stage_chrome(&p->profile, &chrome, err);
                if (r >= 0)
                        r = add_bind_state(p, chrome, PLAN_CONFIG "/chrome", 0, err);
        }
        /* #4 the filtered settings copy. */
        if (r >= 0)
                r = stage_settings(&p->profile, plan_bypass(req), &settings_copy, &p->warnings,
                                   err);
        if (r >= 0)
                r = add_bind_state(p, settings_copy, PLAN_CONFIG "/settings.json", 0, err);
        /* #5 an external git common dir (the first git dir, as the walk opened it), #6 git
         * config and hooks, #7 local settings. */
        if (r >= 0 && w.common_dir && w.common_outside && w.n_git_dirs) {
                int fd = fcntl(w.git_dir_fds[0], F_DUPFD_CLOEXEC, 3);

                r = plan_bind_fd(s, &fd, w.common_dir, w.common_dir, 0, err);
        }
        p->work_root = strdup(w.root);
        if (r >= 0)
                r = add_git_state(p, &w, err);
        if (r >= 0)
                r = add_local_settings(p, &w, work_fd, err);
        /* #8-#10 git config and known_hosts copies. */
        if (r >= 0)
                r = stage_gitconfig(&p->profile, c->home, &gitconfig, err);
        if (r >= 0 && gitconfig)
                r = add_bind_state(p, gitconfig, PLAN_HOME "/.gitconfig", SPEC_MOUNT_RO, err);
        if (r >= 0)
                r = stage_host_known_hosts(&p->profile, c->home, &host_kh, err);
        if (r >= 0 && host_kh)
                r = add_bind_state(p, host_kh, "/etc/ssh/ssh_known_hosts",
                                   SPEC_MOUNT_RO | SPEC_MOUNT_OPTIONAL, err);
        if (r >= 0)
                r = stage_user_known_hosts(&p->profile, &user_kh, err);
        if (r >= 0)
                r = add_bind_state(p, user_kh, PLAN_HOME "/.ssh/known_hosts", 0, err);
        /* #11 the host's claude, first on PATH. */
        if (r >= 0)
                r = stage_claude(c, &claude_fd, &claude, &claude_missing, err);
        if (r >= 0 && claude_missing) {
                r = cs_error_setx(err, ENOENT,
                                  "run %s: claude is not installed on this machine (no `%s` on "
                                  "PATH). Install it with `npm install -g "
                                  "@anthropic-ai/claude-code` or Anthropic's native installer, "
                                  "or point CLAUDE_PROFILE_CLAUDE_BIN at a claude binary",
                                  req->name, c->claude_bin);
        }
        if (r >= 0 && claude) {
                r = plan_bind_fd(s, &claude_fd, claude, PLAN_CLAUDE, SPEC_MOUNT_RO, err);
                if (r >= 0)
                        r = spec_env_set(s, "DISABLE_AUTOUPDATER", "1", false, err);
        }
        /* podman and docker: csandbox's engine, the host's images read-only. */
        if (r >= 0)
                r = containers_plan(s, PLAN_HOME "/.local/bin", PLAN_HOME, p->profile.state_fd,
                                    p->profile.state_dir, err);
        /* #12 ancestor .mcp.json files. */
        if (r >= 0)
                r = worktree_ancestor_mcp(&w, &mcp, &n_mcp, &p->warnings, err);
        for (size_t i = 0; r >= 0 && i < n_mcp; i++)
                r = plan_bind_at(s, root_fd, "/", mcp[i], mcp[i], SPEC_MOUNT_RO, err);
        /* The environment's secrets: .env (created empty when missing, so that #17 pins it),
         * then the forwarded names. */
        if (r >= 0)
                r = plan_add_env(p, req, err);
        /* §5 the bridges: SSH agents, gpg-agent, the clipboard relay. */
        if (r >= 0)
                r = plan_add_bridges(s, c, &p->profile, &p->bridges, &p->warnings, err);
        if (r >= 0)
                r = plan_chrome_scopes(c, &p->profile, &p->warnings, err);
        /* §2.2 the VM's size, as cgroup limits when asked for. */
        s->memory_max = (uint64_t)c->ram_mib << 20;
        s->cpu_milli = c->cpus_milli;
        /* The change journal's inotify watches, which the session could otherwise use up. */
        plan_userns_limits(s);
        /* #13/#14 CA trust, #15 linked globals, #16/#17 pins. */
        if (r >= 0)
                r = add_ca_trust(p, &ca, err);
        if (r >= 0)
                r = add_linked(p, c, err);
        if (r >= 0)
                r = add_profile_pins(p, err);
        /* What the host runs from the profile: read-only, or watched by the report. */
        if (r >= 0)
                r = trust_protect(s, c, &p->profile, PLAN_CONFIG, &w, &p->watch, err);
        /* The session's own .claude.json, written back by csandbox after it. */
        if (r >= 0)
                r = plan_claude_json_stage(p, err);
        /* §2.10 the git identity. */
        if (r >= 0)
                r = stage_git_identity(c, &identity_git, p->bridges.gpg, &identity, err);
        if (r >= 0 && identity) {
                r = plan_bind_host(s, identity, PLAN_HOME "/.gitconfig-identity", SPEC_MOUNT_RO,
                                   err);
                if (r >= 0)
                        r = spec_env_set(s, "GIT_CONFIG_GLOBAL", PLAN_HOME "/.gitconfig-identity",
                                         false, err);
        }
        if (r >= 0 && ca) {
                static const char *const ca_vars[] = {"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE",
                                                      "REQUESTS_CA_BUNDLE"};
                /* Over a .env value too; a forwarded one is the user's choice. */
                for (size_t i = 0; r >= 0 && i < 3; i++)
                        if (!plan_env_forwarded(c, ca_vars[i]) || !spec_env_get(s, ca_vars[i]))
                                r = spec_env_set(s, ca_vars[i],
                                                 "/etc/pki/ca-trust/extracted/pem/"
                                                 "tls-ca-bundle.pem",
                                                 false, err);
        }
        /* §8.9 Agent Vault's share, over the CA variables above and the trust store. */
        if (r >= 0)
                r = vault_sandbox(&p->vault, s, s->root == SPEC_ROOT_HOST ? NULL : &p->image, err);
        /* §3.2 shared settings, §2.11 argv; a re-pointed loopback hook needs the mapping. */
        if (r >= 0)
                r = plan_shared_settings(p, req, true, &shared, &loopback, err);
        if (r >= 0)
                r = plan_build_argv(p, req, shared, err);
        s->map_host_loopback = loopback;
        if (r >= 0)
                r = spec_egress_finish(s, "CLAUDE_PROFILE_SANDBOX_EGRESS=", err);
        /* every bind is known now: the srt file must lie in none the session writes */
        if (r >= 0)
                r = egress_file_check(s, err);
        if (r >= 0)
                r = spec_add_net_files(s, err);
        if (r < 0)
                goto out;
        spec_sort_mounts(s);
out:
        for (size_t i = 0; i < n_mcp; i++)
                free(mcp[i]);
        free(mcp);
        worktree_free(&w);
        return r;
}

void plan_free(struct plan *p)
{
        plan_host_free(p);
        profile_env_free(&p->dotenv);
        vault_free(&p->vault);
        bridges_close(&p->bridges);
        spec_free(&p->spec);
        image_ref_free(&p->image);
        profile_close(&p->profile);
        stage_warnings_free(&p->warnings);
        for (size_t i = 0; i < p->n_local_settings; i++)
                free(p->local_settings[i]);
        free(p->local_settings);
        free(p->work_root);
        if (p->claude_copy && p->profile.state_fd >= 0)
                (void)unlinkat(p->profile.state_fd, p->claude_copy, 0);
        free(p->claude_copy);
        trust_watch_free(&p->watch);
        trust_unfinished_free(p->unfinished, p->n_unfinished);
        p->unfinished = NULL;
        p->n_unfinished = 0;
}
