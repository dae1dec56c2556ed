/* A layer blob (tar, gzip or zstd) applied onto a scratch rootfs with the import's code and
 * small limits, twice (the second pass meets what the first made: links, whiteouts,
 * replaced types), then finished as the import finishes a tree; and the entry-name helpers.
 * Invariants: nothing is ever created beside the rootfs (the scratch dir holds only `root`
 * and an empty `outside`), and a normalised name has no absolute, empty, `.` or `..` part. */
#include "fuzz.h"

#include "common/error.h"
#include "common/fileio.h"
#include "image/layer/layer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[] = "/tmp/csandbox-fuzz-layer.XXXXXX";
static int base_fd = -1;

struct mem {
        const uint8_t *p;
        size_t left;
};

static ssize_t mem_read(void *opaque, void *buf, size_t len, struct cs_error *err)
{
        struct mem *m = opaque;

        (void)err;
        if (len > m->left)
                len = m->left;
        memcpy(buf, m->p, len);
        m->p += len;
        m->left -= len;
        return (ssize_t)len;
}

static void scratch_remove(void)
{
        struct cs_error err = {0};

        if (base_fd >= 0) {
                cs_empty_dir(base_fd, &err);
                rmdir(base);
        }
}

/* The scratch dir holds `root` and an empty `outside`, and nothing else. */
static void check_scratch(void)
{
        int fd = openat(base_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int outside;

        FUZZ_CHECK(d);
        while ((de = readdir(d)))
                FUZZ_CHECK(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                           strcmp(de->d_name, "root") == 0 || strcmp(de->d_name, "outside") == 0);
        closedir(d);
        outside = openat(base_fd, "outside", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        FUZZ_CHECK(outside >= 0);
        d = fdopendir(outside);
        FUZZ_CHECK(d);
        while ((de = readdir(d)))
                FUZZ_CHECK(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0);
        closedir(d);
}

static void apply(const uint8_t *data, size_t size)
{
        const struct layer_limits lim = {
            .max_size = 8u << 20, .max_entries = 4096, .max_path = 1024, .max_layers = 4};
        struct layer_tree *t = NULL;
        struct cs_error err = {0};
        unsigned char diff[32];
        int root, meta, r;

        if (base_fd < 0) {
                FUZZ_CHECK(mkdtemp(base));
                base_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                FUZZ_CHECK(base_fd >= 0 && mkdirat(base_fd, "outside", 0755) == 0);
                atexit(scratch_remove);
        }
        FUZZ_CHECK(mkdirat(base_fd, "root", 0755) == 0);
        root = openat(base_fd, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        FUZZ_CHECK(root >= 0 && layer_tree_new(root, &lim, &t, &err) == 0);
        r = 0;
        for (int pass = 0; pass < 2 && r == 0; pass++) {
                struct mem m = {data, size};

                r = layer_apply(t, "layer 1/1", -1, mem_read, &m, diff, &err);
                FUZZ_CHECK(r == 0 || err.msg[0] != '\0');
        }
        if (r == 0) {
                /* no layer beneath: pending hard links into one fail with a message */
                r = layer_tree_set_lowers(t, NULL, 0, &err);
                FUZZ_CHECK(r == 0 || err.msg[0] != '\0');
        }
        if (r == 0) {
                meta = open("/dev/null", O_WRONLY | O_CLOEXEC);
                FUZZ_CHECK(meta >= 0);
                r = layer_tree_finish(t, meta, &err);
                FUZZ_CHECK(r == 0 || err.msg[0] != '\0');
                close(meta);
        }
        layer_tree_free(t);
        close(root);
        check_scratch();
        FUZZ_CHECK(cs_remove_at(base_fd, "root", &err) == 0);
}

static void check_names(const uint8_t *data, size_t size)
{
        char *s = fuzz_cstr(data, size), *norm = NULL, esc[512], safe[64];
        struct cs_error err = {0};
        ssize_t n;

        if (layer_path_normalize(s, 256, &norm, &err) == 0) {
                FUZZ_CHECK(norm[0] != '/' && !strstr(norm, "//"));
                for (const char *c = norm; *c;) {
                        size_t len = strcspn(c, "/");

                        FUZZ_CHECK(len > 0 && !(len == 1 && c[0] == '.') &&
                                   !(len == 2 && c[0] == '.' && c[1] == '.'));
                        c += len + (c[len] == '/');
                }
                free(norm);
        }
        n = layer_path_escape(s, esc, sizeof(esc));
        if (n >= 0) {
                FUZZ_CHECK((size_t)n == strlen(esc));
                for (ssize_t i = 0; i < n; i++)
                        FUZZ_CHECK((unsigned char)esc[i] > ' ' && (unsigned char)esc[i] < 0x7f);
        }
        layer_sanitize(s, safe, sizeof(safe));
        FUZZ_CHECK(strlen(safe) < sizeof(safe));
        for (const char *c = safe; *c; c++)
                FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        apply(data, size);
        check_names(data, size);
        return 0;
}
