/* Running a host program and collecting what it prints: bounded in time and size, in a
 * process group of its own so that a timeout also ends what it started. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cs_capture {
        char *out; /* what it wrote to stdout, NUL-terminated; NULL when it could not start */
        size_t len;
        int status;     /* as waitpid() gives it */
        bool timed_out; /* killed at the deadline */
        bool too_big;   /* killed after printing more than the bound */
};

struct cs_spawn {
        const char *path;  /* absolute: what cs_find_program found */
        char *const *argv; /* argv[0] as the program should see it */
        char *const *envp; /* NULL: the caller's environment */
        int timeout_ms;    /* 0: no deadline */
        size_t max;        /* the most stdout kept */
        bool keep_stderr;  /* stderr goes to the caller's (else /dev/null) */
        const void *input; /* written to its stdin (else /dev/null) */
        size_t input_len;
};

/* Run sp->path and wait for it. 0 with *ret filled (look at status, timed_out and too_big),
 * or -errno when it could not be started. */
int cs_spawn_capture(const struct cs_spawn *sp, struct cs_capture *ret);

/* The same in two halves, for a program that runs while the caller does other work. */
struct cs_spawned {
        pid_t pid; /* -1: nothing pending */
        int out;
        long deadline; /* CLOCK_MONOTONIC ms, from the start; 0: none */
        size_t max;
};
/* Started (sp's arrays may go once it returns), or -errno. */
int cs_spawn_start(const struct cs_spawn *sp, struct cs_spawned *ret);
/* Collect and reap what cs_spawn_start started (its deadline counts from the start). */
void cs_spawn_finish(struct cs_spawned *h, struct cs_capture *ret);
/* Kill and reap it unread, if anything is pending; safe to repeat (a cleanup). */
void cs_spawn_abort(struct cs_spawned *h);
/* The program exited with status 0 within its bounds. */
bool cs_capture_ok(const struct cs_capture *c);
/* Frees (and wipes: it may hold a token) the output. */
void cs_capture_free(struct cs_capture *c);
