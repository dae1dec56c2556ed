/* The briefing claude gets as its system prompt addition (reference §2): what the sandbox
 * is, what persists and what does not, and what to do when it blocks something. */
#include "briefing.h"

const char plan_briefing[] =
    "You are running inside csandbox, an ephemeral sandbox built from Linux namespaces "
    "(not a VM and not a container engine): your own user, mount, pid, ipc, uts and "
    "network namespaces, no capabilities and a seccomp filter. The host "
    "filesystem is visible only where it is mounted: the working directory's git work "
    "tree (and its git dir), the profile's Claude config at ~/.claude, and a few "
    "read-only files; everything else is an image, or the host's system read-only "
    "(/usr, /etc, /opt and the other program directories, and of /var only package "
    "databases and caches programs read; other homes, /run, /var's data, /srv, /mnt, "
    "/media and the rest of / are empty), and "
    "changes outside those mounts vanish when the session ends, while changes under "
    "them persists on the host. The files the host runs commands from are protected: "
    ".git/config is read-only, so git push -u, git branch -u, git remote add and git "
    "config cannot save; prefer git push origin HEAD. .git/hooks, the profile's "
    "settings.json and .claude/settings.local.json are copies that are discarded at "
    "the end. podman and docker are here, csandbox's own: "
    "each container is a sandbox nested in this one, with this session's network (or "
    "none with --network none), binds only of paths you can see, the user's images "
    "read-only and what you pull or build kept for this profile; no daemon, and -p is "
    "refused. Containers you start that write into the "
    "repository should run with --user \"$(id -u):$(id -g)\". When the sandbox blocks "
    "something you need, ask the user instead of working around it.";
