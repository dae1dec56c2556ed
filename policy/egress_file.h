/* An srt settings file as egress entries: network.allowedDomains and network.deniedDomains
 * (the rest of the file is srt's own and ignored), so a file written for srt works. */
#pragma once

struct cs_error;
struct sandbox_spec;

/* The file's entries into s; what names it in errors (the flag or the setting). The file is
 * opened once, with no symlink and no ".." on its path, must be a regular file with a single
 * link, and is read from that fd, which s keeps (s->egress_files) for egress_file_check. */
int egress_file_load(struct sandbox_spec *s, const char *path, const char *what,
                     struct cs_error *err);
/* Refuses every file egress_file_load read when the session could write it or any
 * directory above it: judged on the fds that were read, by identity against everything s
 * binds read-write, whatever name or mount reaches it. Call once every bind is in s. */
int egress_file_check(const struct sandbox_spec *s, struct cs_error *err);
