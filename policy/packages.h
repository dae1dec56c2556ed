/* csandbox's static helpers for inside, and the package broker's part of the plan
 * (packages.c). */
#pragma once
#include "../spec/spec.h"

/* One of csandbox's static helpers for inside (name, beside csandbox), opened once by fd and
 * checked: a regular executable only its owner can change. purpose starts the error. */
int plan_shim_open(const char *name, const char *purpose, int *ret_fd, char **ret_path,
                   struct cs_error *err);
/* The package broker (runner/broker.c) with csandbox's sudo at SPEC_BROKER_DIR/sudo and,
 * when also_at is set, there too (a run's ~/.local/bin/sudo). */
int packages_plan(struct sandbox_spec *s, const char *also_at, struct cs_error *err);
/* On the embedded default: the host directories the broker's writable layer covers (the
 * host's system and its package databases, those that are directories here), so that sudo
 * installs into the session over the host's read-only view (runner/host_layer.c). */
int packages_host_layer(struct sandbox_spec *s, struct cs_error *err);
