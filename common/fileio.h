/* Bounded reads of files csandbox parses. Every such file may be hostile input. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cs_error;

/* Read a regular file into a NUL-terminated heap buffer. Refuses a file larger than max
 * (naming the limit), anything that is not a regular file, and, with nofollow, a symlink
 * as the last component. dirfd may be AT_FDCWD. *ret_buf is set only on success. */
int cs_read_file_at(int dirfd, const char *path, size_t max, bool nofollow, char **ret_buf,
                    size_t *ret_len, struct cs_error *err);
/* Read everything from an open fd (bounded by max) into a NUL-terminated heap buffer. */
int cs_read_fd(int fd, const char *what, size_t max, char **ret_buf, size_t *ret_len,
               struct cs_error *err);
/* write(2) all of buf, retrying on EINTR and short writes. */
int cs_write_all(int fd, const void *buf, size_t len);
/* Write a file atomically relative to dirfd: a `.NAME.<pid>.partial` sibling written and
 * renamed over NAME, so a reader (or a concurrent launch) sees the old or the
 * new content, never a torn one. The partial is created O_EXCL|O_NOFOLLOW; NAME itself is
 * replaced, never written through (a symlink planted at NAME is replaced, not followed).
 * A file that already holds exactly data (and mode) is left as it is. No fsync: these are
 * copies regenerated on every launch, not data to keep. */
int cs_write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                         struct cs_error *err);
/* The same with an fsync before the rename, for data to keep (the image store's names). */
int cs_write_file_durable(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                          struct cs_error *err);
/* The same, for a file written once and never changed (content-addressed): the partial is
 * linked into place, so a file already there (a concurrent writer's) is kept, never
 * replaced from under a reader. */
int cs_write_file_once(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                       struct cs_error *err);
/* Remove dirfd/name, recursively, never following a link (directories are opened
 * O_NOFOLLOW and emptied through their fds; one made read-only is made writable first). */
int cs_remove_at(int dirfd, const char *name, struct cs_error *err);
/* Remove everything under the directory dirfd, the same way. */
int cs_empty_dir(int dirfd, struct cs_error *err);
/* Copy an open fd's bytes: copy_file_range, else read/write (the fds start at offset 0). */
int cs_copy_fd_bytes(int in, int out);
/* At most len bytes from in to out (at their offsets): fewer only when in ends first
 * (*ret_copied says how many). For a file that may grow while it is copied. */
int cs_copy_fd_len(int in, int out, uint64_t len, uint64_t *ret_copied);

/* Limits of cs_copy_tree, and what it met (bytes, entries, the first entry skipped). */
struct cs_copy_budget {
        size_t max_bytes, max_entries;
        int max_depth;
        size_t bytes, entries;
        const char *skipped; /* "a fifo, socket or device" when one was left out */
};
/* Copy the tree under the directory fd src into the directory fd dst: links as links (never
 * followed), regular files with their permission bits, directories recursively; other types
 * are skipped (b->skipped). -EFBIG past a limit, -ELOOP too deep. */
int cs_copy_tree(int src, int dst, struct cs_copy_budget *b);
/* mkdir -p: path and every missing directory above it, with mode. For the user's own
 * directories only (data dirs, caches): it follows the links on the way, as the user's
 * choice; below a dir the sandbox can write, create step by step through fds instead. */
int cs_mkdir_parents(const char *path, mode_t mode, struct cs_error *err);
/* n bytes for people: "512 B", "3.4 MB" (powers of 1000). */
void cs_human_size(uint64_t n, char *buf, size_t len);
