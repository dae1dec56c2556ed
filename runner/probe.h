/* What `csandbox doctor` asks of this machine before it starts a throwaway sandbox: the
 * kernel steps a launch takes first, tried for real in a child (runner/probe.c). */
#pragma once

struct cs_error;

/* A child creates a user namespace with a mount namespace, as a launch does first. 0, or
 * -errno with err saying why user namespaces are unavailable here and the fix. */
int runner_probe_userns(struct cs_error *err);
/* The caller's subordinate id range, as --map-range needs it (/etc/subuid, /etc/subgid and
 * newuidmap/newgidmap). 0, or -errno with err naming what is missing. */
int runner_probe_map_range(struct cs_error *err);
