/* `version` and `info`, as podman prints them, with --format (`json`, or a template whose
 * {{.A.B}} fields are looked up in the same JSON, case-insensitively as Go's field names
 * meet podman's JSON keys).
 *
 * The version is csandbox's own, with "+csandbox" as semver's build metadata: a version
 * check finds a version in podman's place and form ("podman version X.Y.Z...") and can
 * tell csandbox from a podman release, which it is not. */
#include "podman.h"
#include "podman_opts.h"

#include "../common/error.h"
#include "../image/store/store.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define PODMAN_VERSION CSANDBOX_VERSION "+csandbox"

static const char *go_arch(const char *machine)
{
        if (strcmp(machine, "x86_64") == 0)
                return "amd64";
        if (strcmp(machine, "aarch64") == 0)
                return "arm64";
        return machine;
}

static cJSON *version_obj(void)
{
        struct utsname u;
        char osarch[96];
        cJSON *o = cJSON_CreateObject();

        if (uname(&u) < 0)
                snprintf(u.machine, sizeof(u.machine), "unknown");
        snprintf(osarch, sizeof(osarch), "linux/%s", go_arch(u.machine));
        if (!o || !cJSON_AddStringToObject(o, "APIVersion", PODMAN_VERSION) ||
            !cJSON_AddStringToObject(o, "Version", PODMAN_VERSION) ||
            !cJSON_AddStringToObject(o, "GoVersion", "") ||
            !cJSON_AddStringToObject(o, "GitCommit", "") ||
            !cJSON_AddStringToObject(o, "BuiltTime", "") ||
            !cJSON_AddNumberToObject(o, "Built", 0) ||
            !cJSON_AddStringToObject(o, "OsArch", osarch) ||
            !cJSON_AddStringToObject(o, "Os", "linux")) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

/* The value at a dotted path (".Client.Version"; "." is all of root), or NULL. */
static cJSON *lookup(cJSON *root, const char *path, size_t len)
{
        cJSON *cur = root;
        size_t i = 0;

        if (len == 0 || path[0] != '.')
                return NULL;
        if (len == 1)
                return root;
        while (i < len && cur) {
                char key[64];
                size_t k = 0;

                if (path[i] != '.')
                        return NULL;
                i++;
                while (i < len && path[i] != '.' && k < sizeof(key) - 1)
                        key[k++] = path[i++];
                key[k] = '\0';
                cur = cJSON_GetObjectItem(cur, key); /* case-insensitive */
        }
        return cur;
}

static void print_value(const cJSON *v)
{
        char *text;

        if (cJSON_IsString(v)) {
                fputs(v->valuestring, stdout);
        } else if (cJSON_IsBool(v)) {
                fputs(cJSON_IsTrue(v) ? "true" : "false", stdout);
        } else if (cJSON_IsNumber(v)) {
                printf("%.0f", v->valuedouble);
        } else {
                text = cJSON_PrintUnformatted(v);
                fputs(text ? text : "", stdout);
                free(text);
        }
}

/* A Go template's fields ({{.A.B}}, {{json .A}}) filled from root: checked whole first,
 * so a field csandbox lacks prints nothing but the error (125). */
static int template_print(const char *prog, const char *fmt, cJSON *root)
{
        for (int pass = 0; pass < 2; pass++) {
                for (const char *p = fmt; *p;) {
                        const char *end, *f, *fe;
                        bool json = false;
                        cJSON *v;

                        if (strncmp(p, "{{", 2) != 0) {
                                if (pass && p[0] == '\\' && (p[1] == 'n' || p[1] == 't')) {
                                        putchar(p[1] == 'n' ? '\n' : '\t');
                                        p += 2;
                                        continue;
                                }
                                if (pass)
                                        putchar(*p);
                                p++;
                                continue;
                        }
                        end = strstr(p, "}}");
                        if (!end) {
                                fprintf(stderr, "Error: --format `%s`: a {{ without }}\n", fmt);
                                return CS_EXIT_SETUP;
                        }
                        f = p + 2;
                        fe = end;
                        while (*f == ' ')
                                f++;
                        while (fe > f && fe[-1] == ' ')
                                fe--;
                        if (strncmp(f, "json ", 5) == 0) {
                                json = true;
                                f += 5;
                                while (*f == ' ')
                                        f++;
                        }
                        v = lookup(root, f, (size_t)(fe - f));
                        if (!v) {
                                fprintf(stderr,
                                        "Error: --format: `%.*s` is not a field csandbox's %s "
                                        "knows (see %s %s --format json)\n",
                                        (int)(end - p - 2), p + 2, prog, prog,
                                        cJSON_GetObjectItem(root, "host") ? "info" : "version");
                                return CS_EXIT_SETUP;
                        }
                        if (pass && json) {
                                char *text = cJSON_PrintUnformatted(v);

                                fputs(text ? text : "", stdout);
                                free(text);
                        } else if (pass) {
                                print_value(v);
                        }
                        p = end + 2;
                }
        }
        putchar('\n');
        return fflush(stdout) == 0 ? 0 : CS_EXIT_SETUP;
}

static int format_print(const char *prog, const char *fmt, cJSON *root)
{
        if (strcmp(fmt, "json") == 0 || strcmp(fmt, "{{json .}}") == 0) {
                char *text = cJSON_Print(root);

                if (!text)
                        return CS_EXIT_SETUP;
                printf("%s\n", text);
                free(text);
                return 0;
        }
        return template_print(prog, fmt, root);
}

static const struct podman_opt format_opts[] = {{"--format", 'f', true, NULL, 0}};

static int format_opt(void *ctx, int id, const char *v)
{
        (void)id;
        *(const char **)ctx = v;
        return 0;
}

/* --format FORMAT and no argument; -1 parsed, else the exit status. */
static int parse_format(const char *prog, const char *sub, const char *usage, int argc, char **argv,
                        const char **format)
{
        char **pos = calloc((size_t)argc + 1, sizeof(char *));
        size_t n_pos = 0;
        int r;

        if (!pos)
                return CS_EXIT_SETUP;
        r = podman_opts_parse(prog, sub, usage, format_opts, 1, format_opt, format, argc, argv, pos,
                              &n_pos);
        if (r == 0 && n_pos) {
                fprintf(stderr, "Error: `%s %s` takes no arguments (`%s`)\n", prog, sub, pos[0]);
                r = -1;
        }
        free(pos);
        return r == 0 ? -1 : r == 1 ? 0 : CS_EXIT_SETUP;
}

int podman_version(const char *prog, int argc, char **argv)
{
        const char *format = NULL;
        cJSON *root, *client, *server;
        int r;

        r = parse_format(prog, "version", "Usage: %s version [--format FORMAT]\n", argc, argv,
                         &format);
        if (r >= 0)
                return r;
        root = cJSON_CreateObject();
        client = version_obj();
        server = version_obj();
        if (!root || !client || !server) {
                cJSON_Delete(root), cJSON_Delete(client), cJSON_Delete(server);
                return CS_EXIT_SETUP;
        }
        /* podman without a remote service calls itself both (podman version --format
         * '{{.Server.Version}}' is the same as the client's) */
        cJSON_AddItemToObject(root, "Client", client);
        cJSON_AddItemToObject(root, "Server", server);
        if (format) {
                r = format_print(prog, format, root);
        } else {
                printf("Client:       csandbox's %s\n"
                       "Version:      %s\n"
                       "API Version:  %s\n"
                       "OS/Arch:      %s\n",
                       prog, PODMAN_VERSION, PODMAN_VERSION,
                       cJSON_GetObjectItem(client, "OsArch")->valuestring);
                r = fflush(stdout) == 0 ? 0 : CS_EXIT_SETUP;
        }
        cJSON_Delete(root);
        return r;
}

void podman_print_short_version(const char *prog)
{
        printf("%s version %s\n", prog, PODMAN_VERSION);
}

static cJSON *info_obj(void)
{
        struct utsname u;
        char hostname[256] = "", kernel[128] = "", *graph = NULL, volpath[4200];
        struct cs_error err = {0};
        const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
        cJSON *root = cJSON_CreateObject(), *host, *sec, *rt, *store;

        if (!root)
                return NULL;
        if (uname(&u) == 0)
                snprintf(kernel, sizeof(kernel), "%s", u.release);
        else
                snprintf(u.machine, sizeof(u.machine), "unknown");
        gethostname(hostname, sizeof(hostname) - 1);
        (void)store_default_root(&graph, &err);
        if (xdg && xdg[0] == '/')
                snprintf(volpath, sizeof(volpath), "%s/csandbox/volumes", xdg);
        else
                snprintf(volpath, sizeof(volpath), "%s/.local/share/csandbox/volumes",
                         home ? home : "");
        host = cJSON_AddObjectToObject(root, "host");
        sec = host ? cJSON_AddObjectToObject(host, "security") : NULL;
        rt = host ? cJSON_AddObjectToObject(host, "ociRuntime") : NULL;
        store = cJSON_AddObjectToObject(root, "store");
        if (!host || !sec || !rt || !store ||
            !cJSON_AddStringToObject(host, "arch", go_arch(u.machine)) ||
            !cJSON_AddStringToObject(host, "os", "linux") ||
            !cJSON_AddStringToObject(host, "hostname", hostname) ||
            !cJSON_AddStringToObject(host, "kernel", kernel) ||
            !cJSON_AddStringToObject(
                host, "cgroupVersion",
                access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "v2" : "v1") ||
            !cJSON_AddStringToObject(host, "networkBackend", "csandbox") ||
            !cJSON_AddStringToObject(rt, "name", "csandbox") ||
            !cJSON_AddStringToObject(rt, "version", CSANDBOX_VERSION) ||
            !cJSON_AddBoolToObject(sec, "rootless", getuid() != 0) ||
            !cJSON_AddBoolToObject(sec, "seccompEnabled", true) ||
            !cJSON_AddStringToObject(sec, "seccompProfilePath", "") ||
            !cJSON_AddBoolToObject(sec, "selinuxEnabled", false) ||
            !cJSON_AddBoolToObject(sec, "apparmorEnabled", false) ||
            !cJSON_AddStringToObject(sec, "capabilities", "") ||
            !cJSON_AddStringToObject(store, "graphRoot", graph ? graph : "") ||
            !cJSON_AddStringToObject(store, "graphDriverName", "csandbox") ||
            !cJSON_AddStringToObject(store, "volumePath", volpath) ||
            !cJSON_AddItemToObject(root, "version", version_obj())) {
                free(graph);
                cJSON_Delete(root);
                return NULL;
        }
        free(graph);
        return root;
}

/* podman info's YAML, from the JSON: nested objects indented two spaces. */
static void yaml_print(const cJSON *o, int depth)
{
        for (const cJSON *c = o->child; c; c = c->next) {
                printf("%*s%s:", depth * 2, "", c->string);
                if (cJSON_IsObject(c)) {
                        putchar('\n');
                        yaml_print(c, depth + 1);
                        continue;
                }
                putchar(' ');
                if (cJSON_IsString(c) && !c->valuestring[0])
                        fputs("\"\"", stdout);
                else
                        print_value(c);
                putchar('\n');
        }
}

int podman_info(const char *prog, int argc, char **argv)
{
        const char *format = NULL;
        cJSON *root;
        int r;

        r = parse_format(prog, "info", "Usage: %s info [--format FORMAT]\n", argc, argv, &format);
        if (r >= 0)
                return r;
        root = info_obj();
        if (!root) {
                fprintf(stderr, "Error: info: out of memory\n");
                return CS_EXIT_SETUP;
        }
        if (format) {
                r = format_print(prog, format, root);
        } else {
                yaml_print(root, 0);
                r = fflush(stdout) == 0 ? 0 : CS_EXIT_SETUP;
        }
        cJSON_Delete(root);
        return r;
}
