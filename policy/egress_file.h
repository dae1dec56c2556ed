/* An srt settings file as egress entries: network.allowedDomains and network.deniedDomains
 * (the rest of the file is srt's own and ignored), so a file written for srt works. */
#pragma once

struct cs_error;
struct sandbox_spec;

/* The file's entries into s; what names it in errors (the flag or the setting). */
int egress_file_load(struct sandbox_spec *s, const char *path, const char *what,
                     struct cs_error *err);
/* Refused when the file lies in anything s binds read-write: the session could widen its
 * own list through it. Call once every bind is in s. */
int egress_file_check(const struct sandbox_spec *s, const char *path, const char *what,
                      struct cs_error *err);
