/* A stored layer back into its tar form, for `podman save`: the walk and the tar of a
 * build's commit (build-commit.c), read-only, with each entry's owner and mode from the
 * layer's ownership record. A layer a build committed comes out byte for byte as the
 * commit hashed it, so its diff_id holds; an imported one comes out in that same canonical
 * form, with a diff_id of its own. */
#include "build-commit-ctx.h"
#include "build-private.h"
#include "../oci/digest.h"
#include "../layer/layer.h"
#include "../../common/cleanup.h"
#include "../../common/error.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The entry's recorded mode and owner, else what the tree shows. */
static void export_owner(struct commit_ctx *x, const char *path, const struct stat *st,
                         mode_t *mode, uid_t *uid, gid_t *gid)
{
        uint32_t m, u, g;

        if (x->lt && layer_lowers_record(x->lt, path, &m, &u, &g) &&
            (m & S_IFMT) == (st->st_mode & S_IFMT)) {
                *mode = m;
                *uid = u;
                *gid = g;
                return;
        }
        *mode = st->st_mode;
        *uid = 0;
        *gid = 0;
}

static int export_entry(struct commit_ctx *x, int dfd, const char *name, int fd,
                        const struct stat *st, const char *path, const char *shown)
{
        char target[LAYER_DEFAULT_MAX_PATH + 1];
        const char *hardlink = NULL;
        int64_t size = S_ISREG(st->st_mode) ? st->st_size : 0;
        mode_t mode;
        uid_t uid;
        gid_t gid;
        int r;

        export_owner(x, path, st, &mode, &uid, &gid);
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
        r = commit_tar_header(x, path, mode, uid, gid, st->st_mtim.tv_sec, size,
                              S_ISLNK(st->st_mode) ? target : NULL, hardlink, hardlink ? -1 : fd);
        if (r == 0 && size > 0) {
                x->stats.size += (uint64_t)size;
                r = commit_tar_data(x, fd, size, shown);
        }
        return r;
}

static int export_dir(struct commit_ctx *x, int dfd, const char *rel, int depth)
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
                        r = cs_error_set(x->err, ENOMEM, "export the layer");
                        break;
                }
                layer_sanitize(path, shown, sizeof(shown));
                if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = cs_error_set(x->err, errno, "stat `%s`", shown);
                        break;
                }
                if (is_whiteout(&st)) {
                        if (asprintf(&wh, "%s%s.wh.%s", rel, *rel ? "/" : "", names[i]) < 0)
                                r = cs_error_set(x->err, ENOMEM, "export the layer");
                        if (r == 0)
                                r = commit_tar_header(x, wh, S_IFREG, 0, 0, st.st_mtim.tv_sec, 0,
                                                      NULL, NULL, -1);
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
                }
                r = export_entry(x, dfd, names[i], fd, &st, path, shown);
                if (r == 0 && S_ISDIR(st.st_mode)) {
                        if (commit_is_opaque(fd)) {
                                _cleanup_free_ char *opq = NULL;

                                if (asprintf(&opq, "%s/.wh..wh..opq", path) < 0)
                                        r = cs_error_set(x->err, ENOMEM, "export the layer");
                                else
                                        r = commit_tar_header(x, opq, S_IFREG, 0, 0,
                                                              st.st_mtim.tv_sec, 0, NULL, NULL, -1);
                        }
                        if (r == 0)
                                r = export_dir(x, fd, path, depth + 1);
                }
        }
        build_names_free(names, n);
        return r;
}

int build_layer_export(int layer_dir_fd, build_tar_tap tap, void *opaque,
                       unsigned char ret_diff_id[32], struct cs_error *err)
{
        struct layer_limits lim = LAYER_LIMITS_DEFAULT;
        struct commit_ctx x = {.tap = tap, .tap_opaque = opaque, .err = err};
        _cleanup_close_ int root = -1;
        struct stat st;
        int r = 0;

        root = openat(layer_dir_fd, LAYER_DIFF, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return cs_error_set(err, errno, "open the layer's tree");
        /* the layer's own ownership record, read as a lower layer's is */
        if (layer_tree_new(root, &lim, &x.lt, err) < 0)
                return -1;
        if (layer_tree_set_lowers(x.lt, &layer_dir_fd, 1, err) < 0) {
                layer_tree_free(x.lt);
                return -1;
        }
        x.buf = malloc(COMMIT_BUF > XATTR_LIST_MAX_LEN ? COMMIT_BUF : XATTR_LIST_MAX_LEN);
        x.md = digest_new();
        x.a = archive_write_new();
        x.e = archive_entry_new();
        if (!x.buf || !x.md || !x.a || !x.e) {
                r = cs_error_set(err, ENOMEM, "export the layer");
                goto out;
        }
        if (archive_write_set_format_pax_restricted(x.a) != ARCHIVE_OK ||
            archive_write_add_filter_none(x.a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(x.a, 1) != ARCHIVE_OK ||
            archive_write_open(x.a, &x, NULL, commit_tar_sink, NULL) != ARCHIVE_OK) {
                r = cs_error_setx(err, EIO, "export the layer: the tar writer: %s",
                                  archive_error_string(x.a));
                goto out;
        }
        if (fstat(root, &st) < 0) {
                r = cs_error_set(err, errno, "stat the layer's tree");
                goto out;
        }
        if (commit_is_opaque(root))
                r = commit_tar_header(&x, ".wh..wh..opq", S_IFREG, 0, 0, st.st_mtim.tv_sec, 0, NULL,
                                      NULL, -1);
        if (r == 0)
                r = export_dir(&x, root, "", 0);
        if (r == 0 && archive_write_close(x.a) != ARCHIVE_OK)
                r = cs_error_setx(err, EIO, "export the layer: the tar writer: %s",
                                  archive_error_string(x.a));
        if (r == 0)
                digest_end(x.md, ret_diff_id);
out:
        if (x.a)
                archive_write_free(x.a);
        archive_entry_free(x.e);
        EVP_MD_CTX_free(x.md);
        for (size_t i = 0; i < x.links_cap; i++)
                free(x.links[i].path);
        free(x.links);
        free(x.buf);
        layer_tree_free(x.lt);
        return r;
}
