/* `run`'s trust report: the record, the journal while the session runs, the report after. */
#pragma once
#include "../policy/plan.h"
#include "../policy/trust_rules.h"
#include "../runner/journal.h"

struct run_trust {
        struct trust_rules rules;
        struct trust_place places[2]; /* the profile's, the tree's */
        char *records[2];             /* the session's record in each */
        int roots[TRUST_ROOT_N];
        struct timespec since;
        struct journal_ops ops;
        struct journal journal;
        bool started;
        /* In the watcher process: what was found, and how much of it was passed on. */
        struct plan_trust found[TRUST_ROOT_N];
        size_t reported[TRUST_ROOT_N];
        unsigned live;
        struct trust_refs refs; /* the repository's refs when the session started */
        int git_fd;
        int out; /* a memfd: "root\tkind\tpath\tdetail" lines, written by the watcher */
        /* The watcher's word to the runner: 'p' pause the session (a directory could not
         * be watched), 'r' resume it. */
        int pause[2];
};

/* Before the launch: the records, the rules, the journal. */
int run_trust_begin(struct run_trust *t, const struct plan *plan, const struct profile_config *c,
                    struct cs_error *err);
/* After the session: wait for the journal, print and keep the report, drop the records. */
void run_trust_end(struct run_trust *t, struct plan *plan);
void run_trust_free(struct run_trust *t);
