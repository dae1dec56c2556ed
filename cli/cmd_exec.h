#pragma once
#include <stdbool.h>

#include "../spec/spec.h"

struct image_ref;
struct cs_error;

/* `csandbox exec`'s flags -> a spec (also the throwaway sandboxes of `csandbox doctor`, so
 * its verdict comes from the same code). img holds an --image's lock until the sandbox is
 * gone. */
int parse_exec(int argc, char **argv, struct sandbox_spec *s, struct image_ref *img, bool *ret_plan,
               bool *ret_help, struct cs_error *err);

/* A spec of parse_exec (runner_spec_complete'd) launched as `csandbox exec` launches it:
 * its seccomp filter compiled, launch_run; *ret_status as launch_run's. */
int exec_launch(const struct sandbox_spec *s, int *ret_status, struct cs_error *err);

/* `csandbox exec ARGS`: the exit status. */
int cmd_exec(int argc, char **argv);
