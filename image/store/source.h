/* Where an import reads its blobs from: an OCI layout directory, or a tar (oci-archive,
 * docker-archive) read entry by entry without unpacking it to disk. */
#pragma once

/* The longest member name of a source archive csandbox accepts. */
#define MEMBER_PATH_MAX 4096
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cs_error;
struct archive;

enum image_format {
        IMAGE_FORMAT_AUTO,
        IMAGE_FORMAT_OCI,            /* layout directory */
        IMAGE_FORMAT_OCI_ARCHIVE,    /* tar of a layout directory */
        IMAGE_FORMAT_DOCKER_ARCHIVE, /* docker save / podman save */
        IMAGE_FORMAT_ROOTFS_TAR,     /* podman export, possibly compressed */
};

struct image_source {
        bool is_tar;
        int dir_fd;        /* layout directory */
        char *tar_path;    /* tar sources are rescanned per member; seeks skip the data */
        struct archive *a; /* the tar, positioned at the current member's data */
        int member_fd;     /* the current member in a directory */
};

int source_open(const char *path, bool is_tar, struct image_source *ret, struct cs_error *err);
void source_close(struct image_source *s);

/* Position at member (a relative path such as "blobs/sha256/HEX"); -ENOENT with a message
 * when it is absent. Symlinks and hard links between tar members are followed inside the
 * archive (docker save links identical layers); nothing outside it is ever opened. */
int source_open_member(struct image_source *s, const char *member, struct cs_error *err);
/* The current member's next bytes: > 0, 0 at its end, < 0 on error. */
ssize_t source_read(struct image_source *s, void *buf, size_t len, struct cs_error *err);
/* A whole member, bounded by max. */
int source_read_member(struct image_source *s, const char *member, size_t max, char **ret_buf,
                       size_t *ret_len, struct cs_error *err);

/* The kind of a tar file: oci-archive (has index.json and oci-layout), docker-archive
 * (has manifest.json), else a rootfs tar (also every compressed tar). */
int source_detect_tar(const char *path, enum image_format *ret, struct cs_error *err);
