/* podman's registry configuration, containers-registries.conf(5) version 2, read from where
 * podman reads it: $CONTAINERS_REGISTRIES_CONF when set, else ~/.config/containers/
 * registries.conf when it exists, else /etc/containers/registries.conf; then the drop-ins,
 * registries.conf.d/ *.conf of /etc/containers (unless the user's own registries.conf is the
 * main file) and of ~/.config/containers, each directory in lexical order, a later file
 * replacing an earlier one's value per key, per [[registry]] prefix and per alias. The
 * short-name aliases podman records in ~/.cache/containers/short-name-aliases.conf come
 * after the configured ones.
 *
 * What it changes: which registry a short name means (an alias, else the one
 * unqualified-search registry; several are refused with the choices, as podman without a
 * terminal does), and where an image is fetched from (a [[registry]]'s mirrors in order,
 * then its location, rewriting the prefix; insecure; blocked is refused naming its file).
 * Version 1's [registries.search], [registries.insecure] and [registries.block] lists,
 * which podman still reads, are read as their version 2 equivalents. Without any
 * configuration a short name means docker.io, as docker reads it. */
#pragma once
#include "registry.h"

#include <stdbool.h>
#include <stddef.h>

struct cs_error;
struct regconf;

#define REGCONF_ENV "CONTAINERS_REGISTRIES_CONF"

/* An empty configuration (no file read). NULL when out of memory. */
struct regconf *regconf_new(void);
void regconf_free(struct regconf *c);
/* Merge one file's len bytes (file names it in messages) over what c holds, as a drop-in
 * does. aliases_only: the short-name alias cache, whose other keys are ignored. */
int regconf_add(struct regconf *c, const char *buf, size_t len, const char *file, bool aliases_only,
                struct cs_error *err);
/* Every file podman would read, in its order, merged; home is $HOME, config and cache
 * $XDG_CONFIG_HOME and $XDG_CACHE_HOME (NULL or "": below home). */
int regconf_load(struct regconf **ret, struct cs_error *err);

/* The references text stands for, in the order a pull tries them (more than one only in
 * short-name-mode "permissive" or "disabled"). A qualified name is itself; a short one is
 * an alias's value, else each unqualified-search registry's. */
int regconf_resolve(const struct regconf *c, const char *text, struct registry_ref *ret, size_t max,
                    size_t *ret_n, struct cs_error *err);
/* Where ref is fetched from, in order: ret holds REGISTRY_ENDPOINTS_MAX. Refused when its
 * registry is blocked. */
int regconf_endpoints(const struct regconf *c, const struct registry_ref *ref,
                      struct registry_endpoint *ret, size_t *ret_n, struct cs_error *err);

/* One source of a pull: the reference and where to fetch it. */
struct registry_source {
        struct registry_ref ref;
        struct registry_endpoint endpoints[REGISTRY_ENDPOINTS_MAX];
        size_t n_endpoints;
};
#define REGISTRY_SOURCES_MAX 8
/* regconf_load, regconf_resolve and regconf_endpoints of each: what `image pull`, podman
 * pull, sandbox-cache and build's FROM ask a registry for. ret holds
 * REGISTRY_SOURCES_MAX. */
int registry_resolve(const char *text, struct registry_source *ret, size_t *ret_n,
                     struct cs_error *err);
