/* A build step's overlay upper dir made a layer of the store (layer.h): the sandbox's own
 * mountpoints dropped, the overlay's bookkeeping xattrs removed, owners recorded in the
 * metadata file and the tree given to the caller, and the diff_id taken from the layer's tar
 * form streamed into SHA-256 (nothing written).
 *
 * The tar form: pax (restricted: ustar headers, pax records only where ustar cannot say
 * it), directories before their contents and siblings in byte order, mtimes in whole
 * seconds, no atime/ctime, no user or group names; the xattrs the step left (not the
 * overlay's, nor the host's SELinux label) sorted by name; a whiteout (0/0 character
 * device) is an empty `.wh.NAME` file of mode 0 owned by 0:0, an opaque directory has a
 * `.wh..wh..opq` entry first. Files that are hard links of each other are one file and
 * hard-link entries to its first name. */
#include "build-commit-ctx.h"
#include "build-private.h"
#include "../oci/digest.h"
#include "../layer/layer.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/resolve.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* The overlay's xattrs other than the opaque marker: bookkeeping of this mount (origin,
 * impure, redirect, metacopy), meaningless in a layer. */
static void strip_overlay_xattrs(struct commit_ctx *x, int fd)
{
        char *list = x->buf;
        ssize_t n = flistxattr(fd, list, XATTR_LIST_MAX_LEN);

        for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(list + i) + 1)
                if (strncmp(list + i, "user.overlay.", 13) == 0 &&
                    strcmp(list + i, "user.overlay.opaque") != 0)
                        (void)fremovexattr(fd, list + i);
}

/* Record the entry (metadata line, tar entry), then give it to the caller (the ids the
 * caller has here), its mode put back (chown clears setuid and setgid). */
static int commit_entry(struct commit_ctx *x, int dfd, const char *name, int fd,
                        const struct stat *st, const char *path, const char *shown)
{
        char target[LAYER_DEFAULT_MAX_PATH + 1];
        const char *hardlink = NULL;
        int64_t size = S_ISREG(st->st_mode) ? st->st_size : 0;
        int r;

        uid_t uid;
        gid_t gid;

        commit_entry_owner(x, path, st, &uid, &gid);
        r = layer_meta_line(x->meta, path, st->st_mode, uid, gid, x->err);
        if (r < 0)
                return r;
        x->stats.files++;
        if (S_ISLNK(st->st_mode)) {
                ssize_t n = readlinkat(dfd, name, target, sizeof(target));

                if (n < 0 || (size_t)n >= sizeof(target))
                        return cs_error_set(x->err, n < 0 ? errno : ENAMETOOLONG,
                                            "read the symlink `%s`", shown);
                target[n] = '\0';
        }
        if (S_ISREG(st->st_mode) && st->st_nlink > 1 && (hardlink = commit_link_first(x, st, path)))
                size = 0;
        r = commit_tar_header(x, path, st->st_mode, uid, gid, st->st_mtim.tv_sec, size,
                              S_ISLNK(st->st_mode) ? target : NULL, hardlink, hardlink ? -1 : fd);
        if (r == 0 && size > 0) {
                x->stats.size += (uint64_t)size;
                r = commit_tar_data(x, fd, size, shown);
        }
        if (r < 0)
                return r;
        if (fchownat(dfd, name, x->uid, x->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return cs_error_set(x->err, errno, "chown `%s` to the caller", shown);
        if (fd >= 0 && fchmod(fd, st->st_mode & 07777) < 0)
                return cs_error_set(x->err, errno, "chmod `%s`", shown);
        return 0;
}

static int commit_dir(struct commit_ctx *x, int dfd, const char *rel, int depth)
{
        char **names = NULL;
        size_t n = 0;
        int r;

        if (depth > LAYER_MAX_DEPTH)
                return cs_error_setx(x->err, ELOOP, "`%s` is more than %d directories deep", rel,
                                     LAYER_MAX_DEPTH);
        r = build_list_dir(dfd, BUILD_MAX_DIR_ENTRIES, &names, &n, rel, x->err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_free_ char *path = NULL, *wh = NULL;
                _cleanup_close_ int fd = -1;
                char shown[256];
                struct stat st;

                if (asprintf(&path, "%s%s%s", rel, *rel ? "/" : "", names[i]) < 0) {
                        r = cs_error_set(x->err, ENOMEM, "commit the layer");
                        break;
                }
                layer_sanitize(path, shown, sizeof(shown));
                if (strlen(path) > LAYER_DEFAULT_MAX_PATH) {
                        r = cs_error_setx(x->err, ENAMETOOLONG,
                                          "`%s` has a name longer than %u bytes", shown,
                                          LAYER_DEFAULT_MAX_PATH);
                        break;
                }
                if (++x->stats.entries > LAYER_DEFAULT_MAX_ENTRIES) {
                        r = cs_error_setx(x->err, E2BIG, "the layer has more than %llu entries",
                                          (unsigned long long)LAYER_DEFAULT_MAX_ENTRIES);
                        break;
                }
                if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = cs_error_set(x->err, errno, "stat `%s`", shown);
                        break;
                }
                if (is_whiteout(&st)) {
                        /* what the step deleted: hidden in the lower layers */
                        if (asprintf(&wh, "%s%s.wh.%s", rel, *rel ? "/" : "", names[i]) < 0)
                                r = cs_error_set(x->err, ENOMEM, "commit the layer");
                        if (r == 0)
                                r = commit_tar_header(x, wh, S_IFREG, 0, 0, st.st_mtim.tv_sec, 0,
                                                      NULL, NULL, -1);
                        if (r == 0 &&
                            fchownat(dfd, names[i], x->uid, x->gid, AT_SYMLINK_NOFOLLOW) < 0)
                                r = cs_error_set(x->err, errno, "chown `%s`", shown);
                        continue;
                }
                if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
                        fd = openat(dfd, names[i],
                                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
                                        (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
                        if (fd < 0) {
                                r = cs_error_set(x->err, errno, "open `%s`", shown);
                                break;
                        }
                        strip_overlay_xattrs(x, fd);
                }
                r = commit_entry(x, dfd, names[i], fd, &st, path, shown);
                if (r == 0 && S_ISDIR(st.st_mode)) {
                        if (commit_is_opaque(fd)) {
                                _cleanup_free_ char *opq = NULL;

                                if (asprintf(&opq, "%s/.wh..wh..opq", path) < 0)
                                        r = cs_error_set(x->err, ENOMEM, "commit the layer");
                                else
                                        r = commit_tar_header(x, opq, S_IFREG, 0, 0,
                                                              st.st_mtim.tv_sec, 0, NULL, NULL, -1);
                        }
                        if (r == 0)
                                r = commit_dir(x, fd, path, depth + 1);
                }
        }
        build_names_free(names, n);
        return r;
}

/* The lower layers' ownership tables, when their trees sit in layer dirs of the store. */
static void lowers_records(struct commit_ctx *x)
{
        /* only ownership tables: no stream is read against these limits */
        struct layer_limits lim = LAYER_LIMITS_DEFAULT;
        /* Dropped: without the tables, copied-up directories keep their owner on disk. */
        struct cs_error ignored;

        if (!x->n_lowers || !(x->lt_dirs = calloc(x->n_lowers, sizeof(int))))
                return;
        for (size_t k = 0; k < x->n_lowers; k++) {
                x->lt_dirs[k] = openat(x->lowers[k], "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (x->lt_dirs[k] < 0)
                        break;
                x->n_lt_dirs++;
        }
        if (x->n_lt_dirs != x->n_lowers || layer_tree_new(x->lowers[0], &lim, &x->lt, &ignored) < 0)
                return;
        if (layer_tree_set_lowers(x->lt, x->lt_dirs, x->n_lt_dirs, &ignored) < 0) {
                layer_tree_free(x->lt);
                x->lt = NULL;
        }
}

static void lowers_records_free(struct commit_ctx *x)
{
        layer_tree_free(x->lt);
        for (size_t k = 0; k < x->n_lt_dirs; k++)
                close(x->lt_dirs[k]);
        free(x->lt_dirs);
}

int build_layer_commit(int upper_fd, const int *lower_fds, size_t n_lowers,
                       const char *const *mountpoints, size_t n_mountpoints, uint32_t given_max,
                       int meta_fd, unsigned char ret_diff_id[32], struct layer_stats *ret_stats,
                       bool *ret_empty, struct cs_error *err)
{
        return build_layer_commit_tap(upper_fd, lower_fds, n_lowers, mountpoints, n_mountpoints,
                                      given_max, meta_fd, NULL, NULL, ret_diff_id, ret_stats,
                                      ret_empty, err);
}

int build_layer_commit_tap(int upper_fd, const int *lower_fds, size_t n_lowers,
                           const char *const *mountpoints, size_t n_mountpoints, uint32_t given_max,
                           int meta_fd, build_tar_tap tap, void *opaque,
                           unsigned char ret_diff_id[32], struct layer_stats *ret_stats,
                           bool *ret_empty, struct cs_error *err)
{
        struct commit_ctx x = {.uid = geteuid(),
                               .gid = getegid(),
                               .lowers = lower_fds,
                               .n_lowers = n_lowers,
                               .given_max = given_max,
                               .tap = tap,
                               .tap_opaque = opaque,
                               .err = err};
        _cleanup_close_ int root = -1;
        struct stat st;
        bool empty = false;
        int r = 0, fd;

        root = openat(upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return cs_error_set(err, errno, "open the step's upper dir");
        for (size_t i = 0; i < n_mountpoints; i++) {
                _cleanup_free_ char *p = NULL;
                const char *m = mountpoints[i];

                while (*m == '/')
                        m++;
                r = layer_path_normalize(*m ? m : ".", LAYER_DEFAULT_MAX_PATH, &p, err);
                if (r < 0)
                        return cs_error_wrap(err, "the sandbox's mountpoint `%s`", mountpoints[i]);
                r = commit_drop_mountpoint(&x, root, p);
                if (r < 0)
                        return r;
        }

        lowers_records(&x);
        x.buf = malloc(COMMIT_BUF > XATTR_LIST_MAX_LEN ? COMMIT_BUF : XATTR_LIST_MAX_LEN);
        if (x.buf && x.lt) {
                r = commit_prune_copied_up(&x, root, "", 0, !commit_is_opaque(root));
                if (r < 0)
                        goto out;
        }
        x.md = digest_new();
        x.a = archive_write_new();
        x.e = archive_entry_new();
        fd = dup(meta_fd);
        x.meta = fd < 0 ? NULL : fdopen(fd, "w");
        if (!x.meta && fd >= 0)
                close(fd);
        if (!x.buf || !x.md || !x.a || !x.e || !x.meta) {
                r = cs_error_set(err, x.meta ? ENOMEM : errno, "commit the layer");
                goto out;
        }
        if (archive_write_set_format_pax_restricted(x.a) != ARCHIVE_OK ||
            archive_write_add_filter_none(x.a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(x.a, 1) != ARCHIVE_OK ||
            archive_write_open(x.a, &x, NULL, commit_tar_sink, NULL) != ARCHIVE_OK) {
                r = cs_error_setx(err, EIO, "commit the layer: the tar writer: %s",
                                  archive_error_string(x.a));
                goto out;
        }
        if (fstat(root, &st) < 0) {
                r = cs_error_set(err, errno, "stat the step's upper dir");
                goto out;
        }
        strip_overlay_xattrs(&x, root);
        r = layer_meta_line(x.meta, ".", st.st_mode, st.st_uid, st.st_gid, err);
        if (r == 0 && commit_is_opaque(root))
                r = commit_tar_header(&x, ".wh..wh..opq", S_IFREG, 0, 0, st.st_mtim.tv_sec, 0, NULL,
                                      NULL, -1);
        if (r == 0)
                r = commit_dir(&x, root, "", 0);
        if (r == 0 && (fchown(root, x.uid, x.gid) < 0 || fchmod(root, st.st_mode & 07777) < 0))
                r = cs_error_set(err, errno, "chown the step's upper dir to the caller");
        if (r == 0 && archive_write_close(x.a) != ARCHIVE_OK)
                r = cs_error_setx(err, EIO, "commit the layer: the tar writer: %s",
                                  archive_error_string(x.a));
        if (r == 0 && fflush(x.meta) != 0)
                r = cs_error_set(err, errno, "write the layer's metadata");
        if (r == 0) {
                empty = commit_dir_is_empty(root) && !commit_is_opaque(root);
                digest_end(x.md, ret_diff_id);
                *ret_stats = x.stats;
                *ret_empty = empty;
        }
out:
        if (x.meta && fclose(x.meta) != 0 && r == 0)
                r = cs_error_set(err, errno, "write the layer's metadata");
        if (x.a)
                archive_write_free(x.a);
        archive_entry_free(x.e);
        EVP_MD_CTX_free(x.md);
        for (size_t i = 0; i < x.links_cap; i++)
                free(x.links[i].path);
        free(x.links);
        free(x.buf);
        lowers_records_free(&x);
        return r;
}
