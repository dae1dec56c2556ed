/* appuser's entries in the sandbox's /etc/passwd and /etc/group (reference §2.12). */
#pragma once
#include "../spec/spec.h"

struct cs_error;

/* passwd and group with appuser (uid and gid 1000) in place of any line that named appuser
 * or id 1000, added to the spec as /etc/passwd and /etc/group. */
int identity_add_files(struct sandbox_spec *s, const char *passwd, const char *group,
                       struct cs_error *err);
/* An identity file of the root (dirfd: the image's rootfs, or AT_FDCWD for the host's),
 * read bounded and never through a link; "" when it cannot be read; NULL on ENOMEM. */
char *identity_read_root_file(int dirfd, const char *path);
