/* The privileges of `image build`'s steps, decided in one place: the ids a step's user
 * namespace maps (0 the caller; the rest of 0..BUILD_ID_MAX its subordinate range, when it
 * has one) and what a RUN keeps. The worker that writes a step's tree and the RUN's sandbox
 * both take them from here, through the spec (spec/spec.h). */
#pragma once
#include "../common/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sandbox_spec;

struct build_privileges {
        uid_t host_uid;
        gid_t host_gid;
        bool range;                      /* the caller's subordinate range is mapped */
        char why_no_range[CS_ERROR_MAX]; /* when !range: why not */
        uint64_t root_caps;              /* what a RUN as root keeps */
};

/* Decide them for the calling user. */
void build_privileges_decide(struct build_privileges *ret);
/* Into s: the id map, and for a RUN as uid:gid (0:0 for the worker) the payload's ids and
 * capabilities. */
void build_privileges_spec(const struct build_privileges *p, uid_t uid, gid_t gid,
                           struct sandbox_spec *s);
