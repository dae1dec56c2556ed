/* COPY and ADD of `csandbox image build`, as docker and podman build do them: sources are
 * globs in the context (or another stage's root), a directory's contents are copied, a
 * local tar is unpacked by ADD. The context and the step's root are hostile trees: the
 * context is read with openat2(RESOLVE_BENEATH) and then by fd, entry by entry, never
 * following a link; the destination is resolved inside the root (RESOLVE_IN_ROOT, so
 * Debian's /lib -> usr/lib is taken) and every file is created by fd with O_EXCL|O_NOFOLLOW.
 * Hard links within a copied directory become separate files (as COPY without --link). */
#include "build-copy-ctx.h"
#include "../oci/digest.h"
#include "../layer/layer.h"
#include "../store/store.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"
#include "../../common/path.h"
#include "../../common/resolve.h"
#include "../../common/strv.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PASSWD_MAX (4u << 20)

static void md_str(struct copy_ctx *x, const char *s)
{
        copy_md_add(x, s, strlen(s) + 1);
}

static void md_num(struct copy_ctx *x, unsigned long long v)
{
        char b[32];

        snprintf(b, sizeof(b), "%llo", v);
        md_str(x, b);
}

/* len bytes of fd from its start into the digest: fewer means it changed meanwhile. */
static int md_fd(struct copy_ctx *x, int fd, uint64_t len, const char *shown)
{
        char buf[65536];
        uint64_t off = 0;

        while (off < len) {
                ssize_t n =
                    pread(fd, buf, len - off < sizeof(buf) ? len - off : sizeof(buf), (off_t)off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return cs_error_set(x->err, n < 0 ? errno : EAGAIN, "%s: read `%s`%s",
                                            x->c->what, shown,
                                            n < 0 ? "" : " (it changed while it was copied)");
                copy_md_add(x, buf, (size_t)n);
                off += (uint64_t)n;
        }
        return 0;
}

static int budget(struct copy_ctx *x, uint64_t bytes, const char *shown)
{
        if (++x->entries > LAYER_DEFAULT_MAX_ENTRIES)
                return cs_error_setx(x->err, E2BIG, "%s: more than %llu files to copy", x->c->what,
                                     (unsigned long long)LAYER_DEFAULT_MAX_ENTRIES);
        if (bytes > LAYER_DEFAULT_MAX_SIZE - x->bytes)
                return cs_error_setx(x->err, EFBIG,
                                     "%s: `%s` takes the copy beyond the limit of %llu bytes",
                                     x->c->what, shown, (unsigned long long)LAYER_DEFAULT_MAX_SIZE);
        x->bytes += bytes;
        return 0;
}

/* ---- copying ---- */

static int copy_file(struct copy_ctx *x, int in, const struct stat *st, int dfd, const char *name,
                     const char *shown)
{
        _cleanup_close_ int out = -1;
        uint64_t copied;
        int r;

        r = budget(x, (uint64_t)st->st_size, shown);
        if (r < 0)
                return r;
        if (x->md) {
                md_str(x, "F");
                md_num(x, copy_perm_of(x, st));
                md_num(x, (unsigned long long)st->st_size);
                if (x->root_fd < 0)
                        return md_fd(x, in, (uint64_t)st->st_size, shown);
        }
        r = copy_clear_at(x, dfd, name, false, shown);
        if (r < 0)
                return r;
        out = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return cs_error_set(x->err, errno, "%s: create `%s`", x->c->what, shown);
        r = cs_copy_fd_len(in, out, (uint64_t)st->st_size, &copied);
        if (r < 0)
                return cs_error_set(x->err, -r, "%s: copy `%s`", x->c->what, shown);
        /* the digest of the copy itself, which only this step can write, so a source that
         * changed while it was read and changed back cannot pass as unchanged */
        if (x->md) {
                r = md_fd(x, out, (uint64_t)st->st_size, shown);
                if (r < 0)
                        return r;
        }
        return copy_set_attrs(x, out, copy_perm_of(x, st), &st->st_mtim, x->uid, x->gid, shown);
}

static int copy_symlink(struct copy_ctx *x, int sfd, const char *sname, const struct stat *st,
                        int dfd, const char *name, const char *shown)
{
        char target[LAYER_DEFAULT_MAX_PATH + 1];
        ssize_t n = readlinkat(sfd, sname, target, sizeof(target));
        struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, st->st_mtim};
        int r;

        if (n < 0 || (size_t)n >= sizeof(target))
                return cs_error_set(x->err, n < 0 ? errno : ENAMETOOLONG,
                                    "%s: read the symlink `%s`", x->c->what, shown);
        target[n] = '\0';
        r = budget(x, 0, shown);
        if (r < 0)
                return r;
        if (x->md) {
                md_str(x, "L");
                md_str(x, target);
                if (x->root_fd < 0)
                        return 0;
        }
        r = copy_clear_at(x, dfd, name, false, shown);
        if (r < 0)
                return r;
        if (symlinkat(target, dfd, name) < 0)
                return cs_error_set(x->err, errno, "%s: create the symlink `%s`", x->c->what,
                                    shown);
        if (fchownat(dfd, name, x->uid, x->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return cs_error_set(x->err, errno, "%s: chown `%s`", x->c->what, shown);
        (void)utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
}

/* The directory sfd's entries into dfd: crel is its path relative to the copy (for the
 * digest), srel relative to the source root (for the ignore file), drel the destination's
 * path in the root. */
static int copy_tree(struct copy_ctx *x, int sfd, int dfd, const char *crel, const char *srel,
                     const char *drel, int depth)
{
        char **names = NULL;
        size_t n = 0;
        int r;

        if (depth > LAYER_MAX_DEPTH)
                return cs_error_setx(x->err, ELOOP, "%s: `%s` is more than %d directories deep",
                                     x->c->what, srel, LAYER_MAX_DEPTH);
        r = build_list_dir(sfd, BUILD_MAX_DIR_ENTRIES, &names, &n, srel, x->err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_free_ char *c = copy_path_join(crel, names[i]);
                _cleanup_free_ char *s = copy_path_join(srel, names[i]);
                _cleanup_free_ char *d = copy_path_join(drel, names[i]);
                _cleanup_close_ int in = -1, out = -1;
                char shown[256];
                struct stat st;
                bool made = false, excl;

                if (!c || !s || !d) {
                        r = cs_error_setx(x->err, ENAMETOOLONG, "%s: a path under `%s` is too long",
                                          x->c->what, srel);
                        break;
                }
                layer_sanitize(s, shown, sizeof(shown));
                if (fstatat(sfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = cs_error_set(x->err, errno, "%s: stat `%s`", x->c->what, shown);
                        break;
                }
                excl = copy_ignored(x, s);
                /* an excluded directory is still walked for what a `!` takes back */
                if (excl && !(S_ISDIR(st.st_mode) && build_ignore_has_exceptions(x->ign)))
                        continue;
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                        continue; /* fifos, sockets, devices: not made in a user namespace */
                if (x->md && !excl)
                        md_str(x, c);
                if (S_ISLNK(st.st_mode)) {
                        r = copy_symlink(x, sfd, names[i], &st, dfd, names[i], shown);
                } else if (S_ISREG(st.st_mode)) {
                        in = openat(sfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                        if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
                                r = cs_error_set(x->err, in < 0 ? errno : EAGAIN,
                                                 "%s: open `%s` (it changed while it was copied)",
                                                 x->c->what, shown);
                        else
                                r = copy_file(x, in, &st, dfd, names[i], shown);
                } else {
                        in = openat(sfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (in < 0) {
                                r = cs_error_set(x->err, errno, "%s: open `%s`", x->c->what, shown);
                                break;
                        }
                        r = budget(x, 0, shown);
                        if (r == 0 && x->md && !excl) {
                                md_str(x, "D");
                                md_num(x, copy_perm_of(x, &st));
                        }
                        if (r == 0 && x->md && x->root_fd < 0) {
                                r = copy_tree(x, in, -1, c, s, d, depth + 1);
                                continue;
                        }
                        if (r == 0)
                                r = out = copy_dest_dir(x, dfd, names[i], d,
                                                        excl ? 0755 : copy_perm_of(x, &st), x->uid,
                                                        x->gid, &made);
                        if (r >= 0)
                                r = copy_tree(x, in, out, c, s, d, depth + 1);
                        /* made only for what a `!` took back: gone again when nothing was */
                        if (r == 0 && excl && made && unlinkat(dfd, names[i], AT_REMOVEDIR) == 0)
                                continue;
                        /* an excluded directory's own mode and mtime are not copied (nor
                         * in the digest) */
                        if (r == 0 && !excl)
                                r = copy_set_attrs(x, out, copy_perm_of(x, &st), &st.st_mtim,
                                                   x->uid, x->gid, shown);
                }
        }
        build_names_free(names, n);
        return r;
}

/* ---- the instruction ---- */

static int chown_resolve(struct copy_ctx *x)
{
        const struct build_copy *c = x->c;
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        const char *files[2] = {"/etc/passwd", "/etc/group"};
        char **bufs[2] = {&passwd, &group};
        size_t len, ulen = strcspn(c->chown, ":");
        bool numeric = ulen > 0;
        int r;

        for (size_t i = 0; i < ulen; i++)
                numeric &= isdigit((unsigned char)c->chown[i]) != 0;
        if (numeric && !c->chown[ulen] && ulen < 10) {
                /* a uid alone: the same number as gid, as docker and buildkit do */
                x->uid = (uid_t)strtoul(c->chown, NULL, 10);
                x->gid = (gid_t)x->uid;
                return 0;
        }
        for (int i = 0; i < 2; i++) {
                _cleanup_close_ int fd =
                    cs_open_in_root(x->root_fd, files[i], O_RDONLY | O_NONBLOCK);
                struct stat st;

                if (fd < 0)
                        continue;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                r = cs_read_fd(fd, files[i], PASSWD_MAX, bufs[i], &len, x->err);
                if (r < 0)
                        return cs_error_wrap(x->err, "%s: --chown=%s", c->what, c->chown);
        }
        r = image_lookup_user(passwd, group, c->chown, &x->uid, &x->gid, x->err);
        return r < 0 ? cs_error_wrap(x->err, "%s: --chown=%s", c->what, c->chown) : 0;
}

static int ctx_init(struct copy_ctx *x, const struct build_copy *c, int root_fd,
                    struct cs_error *err)
{
        *x = (struct copy_ctx){.c = c, .root_fd = root_fd, .err = err};
        if (c->n_srcs == 0)
                return cs_error_setx(err, EINVAL, "%s: no source to copy", c->what);
        if (c->chmod) {
                char *end;
                unsigned long m = strtoul(c->chmod, &end, 8);

                if (!*c->chmod || *end || m > 07777 ||
                    strspn(c->chmod, "01234567") != strlen(c->chmod))
                        return cs_error_setx(err, EINVAL,
                                             "%s: --chmod=%s is not an octal mode (0 to 7777)",
                                             c->what, c->chmod);
                x->chmod_set = true;
                x->chmod = (mode_t)m;
        }
        if (c->from_context && c->n_ignore) {
                int r = build_ignore_compile(c->ignore, c->n_ignore, &x->ign, err);
                if (r < 0)
                        return cs_error_wrap(err, "%s: the ignore file", c->what);
        }
        return 0;
}

static int md_begin(struct copy_ctx *x)
{
        if (!(x->md = digest_new()))
                return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
        return 0;
}

static void md_end(struct copy_ctx *x, char ret[65])
{
        unsigned char sum[32];
        char d[OCI_DIGEST_LEN + 1];

        digest_end(x->md, sum);
        oci_digest_format(sum, d);
        memcpy(ret, d + strlen("sha256:"), 65);
}

int build_copy_apply(int root_fd, const struct build_copy *c, char ret_digest[65],
                     struct cs_error *err)
{
        struct copy_ctx x;
        _cleanup_free_ char *dest = NULL;
        char **srcs = NULL;
        size_t n = 0;
        bool dir_dest;
        int r;

        r = ctx_init(&x, c, root_fd, err);
        if (r == 0 && ret_digest)
                r = md_begin(&x);
        if (r == 0 && c->chown)
                r = chown_resolve(&x);
        x.chown_set = c->chown != NULL;
        if (r == 0)
                r = copy_sources_expand(&x, &srcs, &n);
        if (r < 0)
                goto out;
        dir_dest = copy_dest_is_dir(c->dest);
        if (n > 1 && !dir_dest) {
                r = cs_error_setx(err, EINVAL,
                                  "%s: with more than one source, the destination `%s` must be a "
                                  "directory ending in `/`",
                                  c->what, c->dest);
                goto out;
        }
        dest = c->dest[0] == '/' ? strdup(c->dest) : cs_path_join(c->workdir, c->dest);
        if (!dest) {
                r = cs_error_set(err, ENOMEM, "%s", c->what);
                goto out;
        }
        build_path_clean(dest);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_close_ int in = -1, dfd = -1, existing = -1;
                char shown[256];
                struct stat st;

                in = r = copy_src_open_checked(&x, srcs[i], &st, shown);
                if (r < 0)
                        break;
                if (x.md) {
                        md_str(&x, "S");
                        md_str(&x, srcs[i]);
                }
                if (S_ISDIR(st.st_mode) ||
                    (c->add && copy_unpack_tar(&x, in, &st, -1, true, shown) == 0)) {
                        dfd = r = copy_dest_open_dirs(&x, dest, true);
                        if (r >= 0 && x.md && S_ISDIR(st.st_mode)) {
                                md_str(&x, "D");
                        } else if (r >= 0 && x.md) {
                                /* as the digest sees it: an archive, and its bytes as a file */
                                md_str(&x, "A");
                                md_str(&x, "F");
                                md_num(&x, copy_perm_of(&x, &st));
                                md_num(&x, (unsigned long long)st.st_size);
                        }
                        if (r >= 0 && S_ISDIR(st.st_mode))
                                r = copy_tree(&x, in, dfd, "", srcs[i], dest, 0);
                        else if (r >= 0)
                                r = copy_unpack_tar(&x, in, &st, dfd, false, shown);
                        continue;
                }
                /* a file: into dest when it is a directory, else as dest (from its start:
                 * ADD's probe for an archive has read some of it) */
                if (c->add && lseek(in, 0, SEEK_SET) < 0) {
                        r = cs_error_set(err, errno, "%s: %s", c->what, shown);
                        break;
                }
                existing = cs_open_in_root(root_fd, dest, O_PATH | O_DIRECTORY);
                if (dir_dest || existing >= 0) {
                        const char *base =
                            strrchr(srcs[i], '/') ? strrchr(srcs[i], '/') + 1 : srcs[i];

                        dfd = r = copy_dest_open_dirs(&x, dest, false);
                        if (r >= 0)
                                r = copy_file(&x, in, &st, dfd, base, shown);
                } else {
                        _cleanup_free_ char *parent = strdup(dest);
                        char *slash = parent ? strrchr(parent, '/') : NULL;

                        if (!slash) {
                                r = cs_error_set(err, ENOMEM, "%s", c->what);
                                break;
                        }
                        *slash = '\0';
                        dfd = r = copy_dest_open_dirs(&x, *parent ? parent : "/", false);
                        if (r >= 0)
                                r = copy_file(&x, in, &st, dfd, slash + 1, shown);
                }
        }
        if (r == 0 && x.md)
                md_end(&x, ret_digest);
out:
        EVP_MD_CTX_free(x.md);
        strv_free(&srcs, &n);
        build_ignore_free(x.ign);
        return r < 0 ? r : 0;
}

int build_copy_digest(const struct build_copy *c, char ret[65], struct cs_error *err)
{
        struct copy_ctx x;
        char **srcs = NULL;
        size_t n = 0;
        int r;

        r = ctx_init(&x, c, -1, err);
        if (r == 0)
                r = md_begin(&x);
        if (r == 0)
                r = copy_sources_expand(&x, &srcs, &n);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_close_ int in = -1;
                char shown[256];
                struct stat st;

                in = r = copy_src_open_checked(&x, srcs[i], &st, shown);
                if (r < 0)
                        break;
                /* which source, and (for a file) the name it is copied under */
                md_str(&x, "S");
                md_str(&x, srcs[i]);
                if (S_ISDIR(st.st_mode)) {
                        md_str(&x, "D");
                        r = copy_tree(&x, in, -1, "", srcs[i], "", 0);
                } else {
                        /* ADD: whether it is unpacked is part of what it copies */
                        if (c->add && copy_unpack_tar(&x, in, &st, -1, true, shown) == 0)
                                md_str(&x, "A");
                        r = copy_file(&x, in, &st, -1, NULL, shown);
                }
        }
        if (r == 0)
                md_end(&x, ret);
        EVP_MD_CTX_free(x.md);
        strv_free(&srcs, &n);
        build_ignore_free(x.ign);
        return r < 0 ? r : 0;
}
