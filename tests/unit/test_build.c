/* image build's tree steps: the ignore matcher, source globs and the COPY digest without
 * namespaces; COPY/ADD into an overlay and the layer commit in a user namespace of our own
 * (uid 0 mapped to the caller), as a build step runs them. */
#include "tests/unit/check.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "image/containerfile/build-private.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static char tmp[256];

static void mkfile(const char *rel, const char *content, mode_t mode)
{
        char p[512];
        int fd;

        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
        if (fd < 0 || write(fd, content, strlen(content)) < 0) {
                perror(p);
                exit(2);
        }
        fchmod(fd, mode);
        close(fd);
}

static void mkd(const char *rel)
{
        char p[512];

        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
                perror(p);
                exit(2);
        }
}

static void mkl(const char *target, const char *rel)
{
        char p[512];

        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        if (symlink(target, p) < 0) {
                perror(p);
                exit(2);
        }
}

static int opendir_at(const char *rel)
{
        char p[512];

        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        return open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* ---- the matcher ---- */

static bool excl(const char *const *pats, size_t n, const char *path)
{
        struct build_ignore *m = NULL;
        struct cs_error err = {0};
        bool r;

        if (build_ignore_compile((char *const *)pats, n, &m, &err) < 0) {
                printf("# compile: %s\n", err.msg);
                return false;
        }
        r = build_ignore_excludes(m, path);
        build_ignore_free(m);
        return r;
}

static void test_ignore_star_stays_in_its_directory(void)
{
        const char *p[] = {"*.md"};

        CHECK(excl(p, 1, "a.md"));
        CHECK(!excl(p, 1, "doc/a.md"));
        CHECK(!excl(p, 1, "a.mdx"));
        PASS();
}

static void test_ignore_doublestar_crosses_directories(void)
{
        const char *p[] = {"**/*.md"}, *q[] = {"a/**"}, *r[] = {"a/**/z"};

        CHECK(excl(p, 1, "a.md"));
        CHECK(excl(p, 1, "x/y/a.md"));
        CHECK(excl(q, 1, "a/b/c"));
        CHECK(!excl(q, 1, "ab"));
        CHECK(excl(r, 1, "a/z"));
        CHECK(excl(r, 1, "a/b/c/z"));
        CHECK(!excl(r, 1, "a/bz"));
        PASS();
}

static void test_ignore_directory_excludes_its_contents(void)
{
        const char *p[] = {"node_modules", "/build/"};

        CHECK(excl(p, 2, "node_modules/x/y.js"));
        CHECK(excl(p, 2, "build/out.o"));
        CHECK(!excl(p, 2, "src/node_modules2"));
        PASS();
}

static void test_ignore_exception_takes_back_the_last_match_wins(void)
{
        const char *p[] = {"*.md", "!README.md"}, *q[] = {"*.md", "!README.md", "README*"};
        const char *s[] = {"docs", "!docs/keep.txt"};

        CHECK(excl(p, 2, "CHANGES.md"));
        CHECK(!excl(p, 2, "README.md"));
        CHECK(excl(q, 3, "README.md"));
        CHECK(!excl(s, 2, "docs/keep.txt"));
        CHECK(excl(s, 2, "docs/other.txt"));
        PASS();
}

static void test_ignore_classes_escapes_and_question_mark(void)
{
        const char *p[] = {"[a-c].txt"}, *q[] = {"[^a].txt"}, *r[] = {"\\*.txt"}, *s[] = {"?.txt"};

        CHECK(excl(p, 1, "b.txt") && !excl(p, 1, "d.txt"));
        CHECK(excl(q, 1, "b.txt") && !excl(q, 1, "a.txt"));
        CHECK(excl(r, 1, "*.txt") && !excl(r, 1, "a.txt"));
        CHECK(excl(s, 1, "é.txt") && !excl(s, 1, "ab.txt"));
        PASS();
}

static void test_ignore_malformed_patterns_are_refused(void)
{
        const char *bad[] = {"[a", "[]", "a[b-]", "!", "!  "};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct build_ignore *m = NULL;
                struct cs_error err = {0};

                CHECKF(build_ignore_compile((char *const *)&bad[i], 1, &m, &err) < 0 && err.msg[0],
                       "`%s` was accepted", bad[i]);
        }
        PASS();
}

static void test_ignore_pathological_pattern_is_linear(void)
{
        char pat[4097], name[4097];
        const char *p[] = {pat};

        for (int i = 0; i < 4096; i += 2)
                memcpy(pat + i, "*a", 2);
        pat[4096] = '\0';
        memset(name, 'a', 4095);
        name[4095] = 'b';
        name[4096] = '\0';
        CHECK(!excl(p, 1, name)); /* backtracking would not end */
        PASS();
}

static void test_ignore_file_parse_comments_and_bom(void)
{
        const char text[] = "\xef\xbb\xbf# comment\n*.o\n\n  #not a comment\n!keep.o";
        struct cs_error err = {0};
        char **v = NULL;
        size_t n = 0;

        CHECK(build_ignore_parse(text, sizeof(text) - 1, &v, &n, &err) == 0);
        CHECK(n == 3 && strcmp(v[0], "*.o") == 0 && strcmp(v[1], "  #not a comment") == 0 &&
              strcmp(v[2], "!keep.o") == 0 && v[3] == NULL);
        build_names_free(v, n);
        CHECK(build_ignore_parse("a\0b", 3, &v, &n, &err) < 0);
        PASS();
}

static void test_path_clean_is_go_filepath_clean(void)
{
        static const char *cases[][2] = {
            {"", "."},         {"a//b/./c/", "a/b/c"}, {"/../a", "/a"},
            {"a/../..", ".."}, {"../../x", "../../x"}, {"/a/b/../../..", "/"},
            {"./", "."},       {"a/b/..", "a"}};

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char b[64];

                snprintf(b, sizeof(b), "%s", cases[i][0]);
                build_path_clean(b);
                CHECKF(strcmp(b, cases[i][1]) == 0, "`%s` -> `%s`, want `%s`", cases[i][0], b,
                       cases[i][1]);
        }
        PASS();
}

/* ---- the digest ---- */

static int digest(const char *ctx, const char *const *srcs, size_t n, const char *const *ign,
                  size_t n_ign, char out[65], struct cs_error *err)
{
        _cleanup_close_ int fd = opendir_at(ctx);
        struct build_copy c = {.src_root_fd = fd,
                               .from_context = true,
                               .ignore = (char *const *)ign,
                               .n_ignore = n_ign,
                               .srcs = (char *const *)srcs,
                               .n_srcs = n,
                               .dest = "/d/",
                               .workdir = "/",
                               .what = "Containerfile:3"};

        return build_copy_digest(&c, out, err);
}

static void test_copy_digest_follows_content_modes_and_ignores(void)
{
        const char *all[] = {"."}, *ign[] = {"*.log"}, *txt[] = {"*.txt"};
        char a[65], b[65], c[65], d[65];
        struct cs_error err = {0};

        mkd("dg");
        mkd("dg/sub");
        mkfile("dg/one.txt", "1", 0644);
        mkfile("dg/sub/two.txt", "2", 0644);
        mkl("one.txt", "dg/ln");
        CHECKF(digest("dg", all, 1, NULL, 0, a, &err) == 0, "%s", err.msg);
        CHECK(digest("dg", all, 1, NULL, 0, b, &err) == 0 && strcmp(a, b) == 0);
        mkfile("dg/x.log", "noise", 0644);
        CHECK(digest("dg", all, 1, ign, 1, c, &err) == 0 && strcmp(a, c) == 0);
        CHECK(digest("dg", all, 1, NULL, 0, c, &err) == 0 && strcmp(a, c) != 0);
        mkfile("dg/one.txt", "1", 0755);
        CHECK(digest("dg", all, 1, ign, 1, d, &err) == 0 && strcmp(a, d) != 0);
        mkfile("dg/one.txt", "X", 0644);
        CHECK(digest("dg", all, 1, ign, 1, d, &err) == 0 && strcmp(a, d) != 0);
        CHECK(digest("dg", txt, 1, NULL, 0, d, &err) == 0);
        PASS();
}

static void test_copy_sources_outside_the_context_are_refused(void)
{
        const char *up[] = {"../x"}, *esc[] = {"out"}, *none[] = {"*.nothing"}, *ign[] = {"secret"},
                   *sec[] = {"secret"};
        struct cs_error err = {0};
        char d[65];

        mkd("ctx");
        mkl("../../etc", "ctx/out");
        mkfile("ctx/secret", "s", 0600);
        CHECK(digest("ctx", up, 1, NULL, 0, d, &err) < 0 && strstr(err.msg, "outside"));
        CHECK(strstr(err.msg, "Containerfile:3"));
        CHECKF(digest("ctx", esc, 1, NULL, 0, d, &err) < 0 && strstr(err.msg, "out of the"), "%s",
               err.msg);
        CHECK(digest("ctx", none, 1, NULL, 0, d, &err) < 0 && strstr(err.msg, "matches"));
        CHECK(digest("ctx", sec, 1, ign, 1, d, &err) < 0 && strstr(err.msg, "excluded"));
        PASS();
}

/* ---- in a user namespace: copy into an overlay, then commit ---- */

struct tarbuf {
        char *p;
        size_t n;
};

static void tap(void *opaque, const void *buf, size_t len)
{
        struct tarbuf *t = opaque;

        t->p = realloc(t->p, t->n + len);
        memcpy(t->p + t->n, buf, len);
        t->n += len;
}

/* The tar's entry names, each followed by '\n'. */
static char *tar_names(const struct tarbuf *t)
{
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        char *out = calloc(1, 1);
        size_t n = 0;

        archive_read_support_format_tar(a);
        archive_read_open_memory(a, t->p, t->n);
        while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
                const char *name = archive_entry_pathname(e);
                out = realloc(out, n + strlen(name) + 2);
                n += (size_t)sprintf(out + n, "%s\n", name);
        }
        archive_read_free(a);
        return out;
}

static int copy_into(int root, const char *const *srcs, size_t n, const char *dest, bool add,
                     const char *chown, const char *chmod, struct cs_error *err)
{
        _cleanup_close_ int ctx = opendir_at("ctx2");
        const char *ign[] = {"**/*.md", "!KEEP.md"};
        struct build_copy c = {.src_root_fd = ctx,
                               .from_context = true,
                               .ignore = (char *const *)ign,
                               .n_ignore = 2,
                               .srcs = (char *const *)srcs,
                               .n_srcs = n,
                               .dest = dest,
                               .workdir = "/work",
                               .add = add,
                               .chown = chown,
                               .chmod = chmod,
                               .what = "Containerfile:7"};

        char copied[65], want[65];
        int r = build_copy_apply(root, &c, copied, err);

        /* the copy's own digest is the digest of its sources, for every kind of source */
        if (r >= 0 && (build_copy_digest(&c, want, err) < 0 || strcmp(copied, want) != 0))
                r = cs_error_setx(err, EIO, "the copy's digest %s is not the sources' %s", copied,
                                  want);
        return r;
}

static void write_tar_gz(const char *rel)
{
        char p[512];
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();
        static const char *names[] = {"/abs.txt", "d/in.txt", "d/../../x"};

        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        archive_write_set_format_pax_restricted(a);
        archive_write_add_filter_gzip(a);
        archive_write_open_filename(a, p);
        for (int i = 0; i < 2; i++) {
                archive_entry_clear(e);
                archive_entry_set_pathname(e, names[i]);
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_perm(e, 0640);
                archive_entry_set_size(e, 2);
                archive_entry_set_mtime(e, 1000000000, 0);
                archive_write_header(a, e);
                archive_write_data(a, "hi", 2);
        }
        archive_entry_free(e);
        archive_write_free(a);
}

/* One entry of a hostile archive: a file (no link), a symlink or a hard link to link. */
struct tar_ent {
        const char *name;
        mode_t type;
        const char *link;
};

static void write_tar(const char *rel, const struct tar_ent *ents, size_t n)
{
        char p[512];
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();

        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        archive_write_set_format_pax_restricted(a);
        archive_write_open_filename(a, p);
        for (size_t i = 0; i < n; i++) {
                archive_entry_clear(e);
                archive_entry_set_pathname(e, ents[i].name);
                archive_entry_set_filetype(e, ents[i].type);
                archive_entry_set_perm(e, 0644);
                if (ents[i].type == AE_IFLNK)
                        archive_entry_set_symlink(e, ents[i].link);
                else if (ents[i].link)
                        archive_entry_set_hardlink(e, ents[i].link);
                else
                        archive_entry_set_size(e, 2);
                archive_write_header(a, e);
                if (ents[i].type == AE_IFREG && !ents[i].link)
                        archive_write_data(a, "x\n", 2);
        }
        archive_entry_free(e);
        archive_write_free(a);
}

/* ADD of archives that climb out of /dest/ by `..`, through a symlink they plant (absolute
 * or relative) and by hard links: each refused, and nothing appears outside /dest. */
static bool add_hostile_tars(int root)
{
        static const struct tar_ent dotdot[] = {{"../pwned", AE_IFREG, NULL}},
                                    abs_link[] = {{"esc", AE_IFLNK, "/"},
                                                  {"esc/pwned", AE_IFREG, NULL}},
                                    rel_link[] = {{"up", AE_IFLNK, "../etc"},
                                                  {"up/pwned", AE_IFREG, NULL}},
                                    hard_up[] = {{"hl", AE_IFREG, "../etc/passwd"}},
                                    hard_abs[] = {{"hl", AE_IFREG, "/etc/passwd"}};
        static const struct {
                const char *file;
                const struct tar_ent *ents;
                size_t n;
        } cases[] = {{"evil-dotdot.tar", dotdot, 1},
                     {"evil-abs-link.tar", abs_link, 2},
                     {"evil-rel-link.tar", rel_link, 2},
                     {"evil-hard-up.tar", hard_up, 1},
                     {"evil-hard-abs.tar", hard_abs, 1}};
        struct cs_error err = {0};
        struct stat st;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *src[] = {cases[i].file};
                char rel[64];

                snprintf(rel, sizeof(rel), "ctx2/%s", cases[i].file);
                write_tar(rel, cases[i].ents, cases[i].n);
                if (copy_into(root, src, 1, "/dest/", true, NULL, NULL, &err) >= 0)
                        return fail("ADD %s /dest/ was not refused", cases[i].file);
                if (fstatat(root, "pwned", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
                    fstatat(root, "etc/pwned", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
                    fstatat(root, "dest/hl", &st, AT_SYMLINK_NOFOLLOW) == 0)
                        return fail("ADD %s wrote outside /dest/ (or linked out of it)",
                                    cases[i].file);
                if (fstatat(root, "etc/passwd", &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_nlink != 1)
                        return fail("ADD %s linked /etc/passwd", cases[i].file);
        }
        return true;
}

static bool has_line(const char *text, const char *line)
{
        size_t n = strlen(line);

        for (const char *p = text; (p = strstr(p, line)); p++)
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || !p[n]))
                        return true;
        return false;
}

static bool ns_scenario(void)
{
        char merged[512], opts[2048], meta_path[512];
        struct cs_error err = {0};
        struct stat st;
        struct layer_stats stats;
        unsigned char id1[32], id2[32];
        struct tarbuf tb = {0}, tb2 = {0};
        bool empty = true;
        _cleanup_free_ char *names = NULL, *meta = NULL;
        _cleanup_close_ int root = -1, upper = -1, lower = -1, mfd = -1;
        const char *one[] = {"a.txt"}, *sub[] = {"sub"}, *two[] = {"a.txt", "KEEP.md"},
                   *md[] = {"b.md"}, *arch[] = {"arch.tgz"}, *glob[] = {"*.txt"},
                   *mounts[] = {"/run/secret", "/etc/hosts"};

        /* the lower layer: a usr-merged root, a file the step deletes, a dir it replaces */
        mkd("lower");
        mkd("lower/etc");
        mkd("lower/usr");
        mkd("lower/usr/lib");
        mkl("usr/lib", "lower/lib");
        mkfile("lower/etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0644);
        mkfile("lower/etc/group", "root:x:0:\n", 0644);
        mkfile("lower/etc/hosts", "", 0644);
        mkfile("lower/old.txt", "old", 0644);
        mkd("lower/keep");
        mkfile("lower/keep/f", "f", 0644);
        mkd("upper");
        mkd("work");
        mkd("merged");
        /* the context */
        mkd("ctx2");
        mkd("ctx2/sub");
        mkfile("ctx2/a.txt", "a", 0644);
        mkfile("ctx2/b.md", "b", 0644);
        mkfile("ctx2/KEEP.md", "k", 0644);
        mkfile("ctx2/sub/c.txt", "c", 04755);
        mkfile("ctx2/sub/d.md", "d", 0644);
        mkl("c.txt", "ctx2/sub/link");
        write_tar_gz("ctx2/arch.tgz");
        {
                char p[512];
                struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 123456789}};

                snprintf(p, sizeof(p), "%s/ctx2/a.txt", tmp);
                utimensat(AT_FDCWD, p, ts, 0);
        }

        snprintf(merged, sizeof(merged), "%s/merged", tmp);
        snprintf(opts, sizeof(opts),
                 "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work,userxattr", tmp, tmp, tmp);
        if (mount("overlay", merged, "overlay", 0, opts) < 0)
                return fail("mount the overlay: %s", strerror(errno));
        root = open(merged, O_PATH | O_DIRECTORY | O_CLOEXEC);

        if (copy_into(root, one, 1, "dst/", false, NULL, NULL, &err) < 0)
                return fail("COPY a.txt dst/: %s", err.msg);
        if (fstatat(root, "work/dst/a.txt", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            st.st_mtim.tv_sec != 123456789)
                return fail("a.txt not at /work/dst/a.txt with its mtime");
        if (copy_into(root, sub, 1, "/lib/sub/", false, "root", NULL, &err) < 0)
                return fail("COPY sub /lib/sub/: %s", err.msg);
        if (fstatat(root, "usr/lib/sub/c.txt", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            (st.st_mode & 07777) != 04755)
                return fail("sub/c.txt not through /lib -> usr/lib, or its setuid bit lost");
        if (fstatat(root, "usr/lib/sub/link", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
                return fail("the context's symlink was not copied as a symlink");
        if (fstatat(root, "usr/lib/sub/d.md", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return fail("an ignored file was copied");
        if (copy_into(root, two, 2, "/multi", false, NULL, NULL, &err) >= 0 ||
            !strstr(err.msg, "ending in `/`"))
                return fail("two sources into a file destination: %s", err.msg);
        if (copy_into(root, two, 2, "/multi/", false, NULL, "0600", &err) < 0)
                return fail("COPY a.txt KEEP.md /multi/: %s", err.msg);
        if (fstatat(root, "multi/KEEP.md", &st, 0) < 0 || (st.st_mode & 07777) != 0600)
                return fail("--chmod=0600 not applied to the `!` taken back KEEP.md");
        if (copy_into(root, md, 1, "/x", false, NULL, NULL, &err) >= 0)
                return fail("an ignored source was copied");
        if (copy_into(root, glob, 1, "/renamed.txt", false, NULL, NULL, &err) < 0 ||
            fstatat(root, "renamed.txt", &st, 0) < 0 || !S_ISREG(st.st_mode))
                return fail("COPY *.txt /renamed.txt: %s", err.msg);
        if (copy_into(root, arch, 1, "/un/", true, NULL, NULL, &err) < 0)
                return fail("ADD arch.tgz /un/: %s", err.msg);
        if (fstatat(root, "un/abs.txt", &st, 0) < 0 || fstatat(root, "un/d/in.txt", &st, 0) < 0 ||
            (st.st_mode & 07777) != 0640)
                return fail("the archive was not unpacked under /un/");
        if (copy_into(root, arch, 1, "/plain/", false, NULL, NULL, &err) < 0 ||
            fstatat(root, "plain/arch.tgz", &st, 0) < 0)
                return fail("COPY of an archive must not unpack it: %s", err.msg);
        if (!add_hostile_tars(root))
                return false;
        if (copy_into(root, one, 1, "dst/", false, "nobody", NULL, &err) >= 0 ||
            !strstr(err.msg, "nobody"))
                return fail("--chown=nobody resolved without a passwd entry");

        /* what a RUN would do: delete a lower file, replace a dir, leave a mountpoint */
        if (unlinkat(root, "old.txt", 0) < 0)
                return fail("rm old.txt: %s", strerror(errno));
        {
                _cleanup_close_ int m = open(merged, O_RDONLY | O_DIRECTORY);

                unlinkat(m, "keep/f", 0);
                unlinkat(m, "keep", AT_REMOVEDIR);
                mkdirat(m, "keep", 0750);
                mkdirat(m, "run", 0755);
                close(openat(m, "run/secret", O_CREAT | O_WRONLY, 0644));
                close(openat(m, "etc/hosts", O_TRUNC | O_WRONLY, 0644));
        }
        close(root);
        root = -1;
        if (umount(merged) < 0)
                return fail("umount: %s", strerror(errno));

        upper = opendir_at("upper");
        lower = opendir_at("lower");
        snprintf(meta_path, sizeof(meta_path), "%s/metadata", tmp);
        mfd = open(meta_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (build_layer_commit_tap(upper, &lower, 1, mounts, 2, 0, mfd, tap, &tb, id1, &stats,
                                   &empty, &err) < 0)
                return fail("commit: %s", err.msg);
        if (empty || stats.files == 0)
                return fail("the layer is empty");
        names = tar_names(&tb);
        if (!has_line(names, ".wh.old.txt") || !has_line(names, "keep/.wh..wh..opq"))
                return fail("no whiteout or opaque entry in the tar:\n%s", names);
        if (strstr(names, "run") || strstr(names, "secret"))
                return fail("the sandbox's mountpoint is in the layer:\n%s", names);
        if (!has_line(names, "etc/hosts"))
                return fail("etc/hosts, in the lower dir, was dropped as a mountpoint");
        if (fstatat(upper, "run", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return fail("run/ is still in the upper dir");
        {
                size_t len;
                struct cs_error e2 = {0};

                if (cs_read_file_at(AT_FDCWD, meta_path, 1 << 20, true, &meta, &len, &e2) < 0)
                        return fail("read the metadata: %s", e2.msg);
        }
        if (!has_line(meta, "40755 0 0 ."))
                return fail("no root line in the metadata:\n%s", meta);
        if (!has_line(meta, "104755 0 0 usr/lib/sub/c.txt") ||
            !has_line(meta, "100644 0 0 work/dst/a.txt") || strstr(meta, "old.txt"))
                return fail("metadata lines:\n%s", meta);
        if (fstatat(upper, "usr/lib/sub/c.txt", &st, 0) < 0 || (st.st_mode & 07777) != 04755)
                return fail("the setuid bit was lost by the chown");
        {
                char p[512], list[4096];
                ssize_t n;

                snprintf(p, sizeof(p), "%s/upper/etc", tmp);
                n = llistxattr(p, list, sizeof(list));
                for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
                        if (strncmp(list + i, "user.overlay.", 13) == 0)
                                return fail("the overlay's xattr %s is left", list + i);
        }
        /* the same tree gives the same tar */
        if (build_layer_commit_tap(upper, &lower, 1, NULL, 0, 0, mfd, tap, &tb2, id2, &stats,
                                   &empty, &err) < 0)
                return fail("commit again: %s", err.msg);
        if (memcmp(id1, id2, 32) != 0 || tb.n != tb2.n || memcmp(tb.p, tb2.p, tb.n) != 0)
                return fail("the diff_id is not deterministic");
        free(tb.p);
        free(tb2.p);
        return true;
}

/* Run ns_scenario in a child in a user and mount namespace of its own (0 -> our uid). */
static bool test_copy_and_commit_in_a_user_namespace(void)
{
        int status;
        pid_t pid = (fflush(stdout), fork());

        if (pid == 0) {
                int r = check_unshare_user();

                if (r < 0)
                        _exit(r == -1 ? 77 : 3);
                if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        _exit(3);
                bool ok = ns_scenario();
                _cleanup_close_ int t = open(tmp, O_PATH | O_DIRECTORY);
                struct cs_error e = {0};

                /* the overlay's work/work is 000 and root's: only removable in here */
                (void)cs_remove_at(t, "work", &e);
                if (!ok) {
                        printf("# %s\n", why);
                        fflush(stdout);
                        _exit(1);
                }
                _exit(0);
        }
        if (pid < 0 || waitpid(pid, &status, 0) < 0)
                return fail("fork: %s", strerror(errno));
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
                return fail("skipped: no unprivileged user namespaces here"), true;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return fail("the scenario failed (status %d)", status);
        return true;
}

int main(void)
{
        snprintf(tmp, sizeof(tmp), "%s/csb-build-XXXXXX", getenv("TMPDIR") ?: "/tmp");
        if (!mkdtemp(tmp)) {
                perror("mkdtemp");
                return 2;
        }
        test_ignore_star_stays_in_its_directory();
        test_ignore_doublestar_crosses_directories();
        test_ignore_directory_excludes_its_contents();
        test_ignore_exception_takes_back_the_last_match_wins();
        test_ignore_classes_escapes_and_question_mark();
        test_ignore_malformed_patterns_are_refused();
        test_ignore_pathological_pattern_is_linear();
        test_ignore_file_parse_comments_and_bom();
        test_path_clean_is_go_filepath_clean();
        test_copy_digest_follows_content_modes_and_ignores();
        test_copy_sources_outside_the_context_are_refused();
        RUN(test_copy_and_commit_in_a_user_namespace);
        {
                char cmd[300];

                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
                if (system(cmd) != 0)
                        printf("# could not remove %s\n", tmp);
        }
        return failures ? 1 : 0;
}
