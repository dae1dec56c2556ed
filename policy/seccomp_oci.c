/* OCI/Docker JSON seccomp profiles -> classic BPF programs, compiled with runc's and crun's
 * semantics so podman's and Docker's profiles load as they are. */
#include "seccomp.h"
#include "seccomp_bpf.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

/* Limits on an untrusted JSON profile beyond its size. */
#define OCI_SYSCALLS_MAX 4096
#define OCI_ARGS_MAX     6
#define OCI_NAMES_MAX    65536
#define OCI_FIELD_MAX    160

static void cjson_deletep(cJSON **j)
{
        cJSON_Delete(*j);
}
#define _cleanup_cjson_ __attribute__((cleanup(cjson_deletep)))

struct oci_compiler {
        const char *origin;
        struct cs_error *err;
        scmp_filter_ctx ctx;
        uint32_t native;
        uint32_t def_action;
        unsigned kernel[3]; /* uname release: major, minor, patch */
        size_t n_names;
};

/* Docker's arch names (Go's GOARCH, plus the spellings profiles use) per libseccomp arch;
 * includes/excludes.arches are matched against the native arch's names only, as moby does. */
static const struct {
        uint32_t arch;
        const char *names[3];
} oci_arch_names[] = {
    {SCMP_ARCH_X86_64, {"amd64", "x86_64"}},
    {SCMP_ARCH_X86, {"386", "x86", "i386"}},
    {SCMP_ARCH_X32, {"x32"}},
    {SCMP_ARCH_AARCH64, {"arm64", "aarch64"}},
    {SCMP_ARCH_ARM, {"arm"}},
    {SCMP_ARCH_PPC64LE, {"ppc64le"}},
    {SCMP_ARCH_PPC64, {"ppc64"}},
    {SCMP_ARCH_PPC, {"ppc"}},
    {SCMP_ARCH_S390X, {"s390x"}},
    {SCMP_ARCH_S390, {"s390"}},
    {SCMP_ARCH_MIPS, {"mips"}},
    {SCMP_ARCH_MIPSEL, {"mipsle", "mipsel"}},
    {SCMP_ARCH_MIPS64, {"mips64"}},
    {SCMP_ARCH_MIPSEL64, {"mips64le", "mipsel64"}},
    {SCMP_ARCH_MIPS64N32, {"mips64n32"}},
    {SCMP_ARCH_MIPSEL64N32, {"mips64len32"}},
    {SCMP_ARCH_RISCV64, {"riscv64"}},
    {SCMP_ARCH_PARISC64, {"parisc64"}},
    {SCMP_ARCH_PARISC, {"parisc"}},
};

static bool oci_is_native_arch_name(const struct oci_compiler *c, const char *name)
{
        for (size_t i = 0; i < sizeof(oci_arch_names) / sizeof(*oci_arch_names); i++) {
                if (oci_arch_names[i].arch != c->native)
                        continue;
                for (size_t j = 0; j < 3 && oci_arch_names[i].names[j]; j++)
                        if (strcmp(oci_arch_names[i].names[j], name) == 0)
                                return true;
        }
        return false;
}

/* A field path such as "syscalls[3].args[0].op", truncated if absurdly deep. */
static __attribute__((format(printf, 2, 3))) void field_format(char f[OCI_FIELD_MAX],
                                                               const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(f, OCI_FIELD_MAX, fmt, ap);
        va_end(ap);
}

static int oci_field_error(struct oci_compiler *c, const char *field, const char *why)
{
        cs_error_set(c->err, 0, "seccomp profile %s: %s: %s", c->origin, field, why);
        return cs_error_hint(c->err, "Fix the profile (OCI/Docker seccomp JSON format)");
}

static const char *cjson_type_name(const cJSON *j)
{
        if (cJSON_IsBool(j))
                return "a boolean";
        if (cJSON_IsNumber(j))
                return "a number";
        if (cJSON_IsString(j))
                return "a string";
        if (cJSON_IsArray(j))
                return "an array";
        if (cJSON_IsObject(j))
                return "an object";
        return "something else";
}

static int oci_type_error(struct oci_compiler *c, const char *field, const char *expected,
                          const cJSON *got)
{
        char why[128];

        snprintf(why, sizeof(why), "expected %s, got %s", expected, cjson_type_name(got));
        return oci_field_error(c, field, why);
}

/* A member of obj, or NULL when absent or null (Go's decoder reads null as absent). */
static const cJSON *oci_member(const cJSON *obj, const char *key)
{
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

        return cJSON_IsNull(j) ? NULL : j;
}

/* An integral JSON number in [0, max]. cJSON keeps numbers as doubles, so above 2^53 a
 * value may not be the one written: refuse it rather than filter on another number. */
static int oci_uint(struct oci_compiler *c, const cJSON *j, const char *field, uint64_t max,
                    uint64_t *ret)
{
        uint64_t u;
        double d;

        if (!cJSON_IsNumber(j))
                return oci_type_error(c, field, "a number", j);
        d = j->valuedouble;
        if (d > 9007199254740992.0)
                return oci_field_error(c, field, "values above 2^53 cannot be represented exactly");
        if (!(d >= 0))
                return oci_field_error(c, field, "expected a non-negative integer");
        u = (uint64_t)d;
        if ((double)u != d)
                return oci_field_error(c, field, "expected a non-negative integer");
        if (u > max) {
                char why[64];

                snprintf(why, sizeof(why), "%.0f is over the limit of %llu", d,
                         (unsigned long long)max);
                return oci_field_error(c, field, why);
        }
        *ret = u;
        return 0;
}

/* Check that j is an array of strings (field names it); NULL is an empty array. */
static int oci_string_array(struct oci_compiler *c, const cJSON *j, const char *field)
{
        const cJSON *it;
        char elem[OCI_FIELD_MAX];
        size_t i = 0;

        if (!j)
                return 0;
        if (!cJSON_IsArray(j))
                return oci_type_error(c, field, "an array of strings", j);
        cJSON_ArrayForEach(it, j)
        {
                if (!cJSON_IsString(it)) {
                        field_format(elem, "%s[%zu]", field, i);
                        return oci_type_error(c, elem, "a string", it);
                }
                i++;
        }
        return 0;
}

static int oci_action(struct oci_compiler *c, const cJSON *action, const cJSON *errno_ret,
                      const char *field, const char *errno_field, uint32_t *ret)
{
        uint64_t e = EPERM;
        const char *a;
        int r;

        if (!action)
                return oci_field_error(c, field, "missing");
        if (!cJSON_IsString(action))
                return oci_type_error(c, field, "a string", action);
        if (errno_ret) {
                /* The kernel clamps larger values; an errno over 4095 is a mistake. */
                r = oci_uint(c, errno_ret, errno_field, 4095, &e);
                if (r < 0)
                        return r;
        }
        a = action->valuestring;
        if (strcmp(a, "SCMP_ACT_ALLOW") == 0)
                *ret = SCMP_ACT_ALLOW;
        else if (strcmp(a, "SCMP_ACT_ERRNO") == 0)
                *ret = SCMP_ACT_ERRNO((uint32_t)e);
        else if (strcmp(a, "SCMP_ACT_KILL") == 0 || strcmp(a, "SCMP_ACT_KILL_THREAD") == 0)
                *ret = SCMP_ACT_KILL_THREAD;
        else if (strcmp(a, "SCMP_ACT_KILL_PROCESS") == 0)
                *ret = SCMP_ACT_KILL_PROCESS;
        else if (strcmp(a, "SCMP_ACT_TRAP") == 0)
                *ret = SCMP_ACT_TRAP;
        else if (strcmp(a, "SCMP_ACT_TRACE") == 0)
                *ret = SCMP_ACT_TRACE((uint32_t)e);
        else if (strcmp(a, "SCMP_ACT_LOG") == 0)
                *ret = SCMP_ACT_LOG;
        else if (strcmp(a, "SCMP_ACT_NOTIFY") == 0)
                return oci_field_error(c, field,
                                       "SCMP_ACT_NOTIFY needs a seccomp notify listener, which "
                                       "csandbox does not run; use SCMP_ACT_ERRNO instead");
        else
                return oci_field_error(c, field,
                                       "unknown action (expected SCMP_ACT_ALLOW, _ERRNO, _KILL, "
                                       "_KILL_THREAD, _KILL_PROCESS, _TRAP, _TRACE or _LOG)");
        return 0;
}

static int oci_op(struct oci_compiler *c, const cJSON *op, const char *field,
                  enum scmp_compare *ret)
{
        static const struct {
                const char *name;
                enum scmp_compare op;
        } ops[] = {
            {"SCMP_CMP_NE", SCMP_CMP_NE},
            {"SCMP_CMP_LT", SCMP_CMP_LT},
            {"SCMP_CMP_LE", SCMP_CMP_LE},
            {"SCMP_CMP_EQ", SCMP_CMP_EQ},
            {"SCMP_CMP_GE", SCMP_CMP_GE},
            {"SCMP_CMP_GT", SCMP_CMP_GT},
            {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
        };

        if (!op)
                return oci_field_error(c, field, "missing");
        if (!cJSON_IsString(op))
                return oci_type_error(c, field, "a string", op);
        for (size_t i = 0; i < sizeof(ops) / sizeof(*ops); i++) {
                if (strcmp(ops[i].name, op->valuestring) == 0) {
                        *ret = ops[i].op;
                        return 0;
                }
        }
        return oci_field_error(c, field,
                               "unknown operator (expected SCMP_CMP_NE, _LT, _LE, _EQ, _GE, _GT "
                               "or _MASKED_EQ)");
}

static int oci_args(struct oci_compiler *c, const cJSON *args, const char *field,
                    struct scmp_arg_cmp cmp[OCI_ARGS_MAX], unsigned *ret_n)
{
        char f[OCI_FIELD_MAX];
        const cJSON *it;
        unsigned n = 0;
        int r;

        *ret_n = 0;
        if (!args)
                return 0;
        if (!cJSON_IsArray(args))
                return oci_type_error(c, field, "an array", args);
        if (cJSON_GetArraySize(args) > OCI_ARGS_MAX)
                return oci_field_error(c, field, "more than 6 argument conditions");
        cJSON_ArrayForEach(it, args)
        {
                uint64_t index, value = 0, value_two = 0;
                enum scmp_compare op = SCMP_CMP_EQ;

                field_format(f, "%s[%u]", field, n);
                if (!cJSON_IsObject(it))
                        return oci_type_error(c, f, "an object", it);
                field_format(f, "%s[%u].index", field, n);
                if (!oci_member(it, "index"))
                        return oci_field_error(c, f, "missing");
                r = oci_uint(c, oci_member(it, "index"), f, 5, &index);
                if (r < 0)
                        return r;
                if (oci_member(it, "value")) {
                        field_format(f, "%s[%u].value", field, n);
                        r = oci_uint(c, oci_member(it, "value"), f, UINT64_MAX, &value);
                        if (r < 0)
                                return r;
                }
                if (oci_member(it, "valueTwo")) {
                        field_format(f, "%s[%u].valueTwo", field, n);
                        r = oci_uint(c, oci_member(it, "valueTwo"), f, UINT64_MAX, &value_two);
                        if (r < 0)
                                return r;
                }
                field_format(f, "%s[%u].op", field, n);
                r = oci_op(c, oci_member(it, "op"), f, &op);
                if (r < 0)
                        return r;
                /* For MASKED_EQ, value is the mask and valueTwo the datum, as in runc. */
                cmp[n] = (struct scmp_arg_cmp){
                    .arg = (unsigned)index,
                    .op = op,
                    .datum_a = value,
                    .datum_b = value_two,
                };
                n++;
        }
        *ret_n = n;
        return 0;
}

static bool oci_args_share_an_index(const struct scmp_arg_cmp *cmp, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = i + 1; j < n; j++)
                        if (cmp[i].arg == cmp[j].arg)
                                return true;
        return false;
}

/* "4.8" or "5.10.3" against the running kernel: true when the kernel is at least that. */
static int oci_kernel_at_least(struct oci_compiler *c, const cJSON *j, const char *field, bool *ret)
{
        unsigned want[3] = {0, 0, 0};
        int consumed = 0, n;

        if (!cJSON_IsString(j))
                return oci_type_error(c, field, "a string", j);
        n = sscanf(j->valuestring, "%u.%u%n.%u%n", &want[0], &want[1], &consumed, &want[2],
                   &consumed);
        if (n < 2 || j->valuestring[consumed] != '\0')
                return oci_field_error(c, field, "expected a kernel version such as \"5.8\"");
        *ret = true;
        for (size_t i = 0; i < 3; i++) {
                if (c->kernel[i] != want[i]) {
                        *ret = c->kernel[i] > want[i];
                        break;
                }
        }
        return 0;
}

static bool oci_strings_contain_native_arch(const struct oci_compiler *c, const cJSON *arr)
{
        const cJSON *it;

        cJSON_ArrayForEach(it, arr)
        {
                if (oci_is_native_arch_name(c, it->valuestring))
                        return true;
        }
        return false;
}

/* includes/excludes, as runc applies them. The payload holds no capabilities, so a rule
 * that needs one is dropped and a rule for those without it is kept. */
static int oci_filter_applies(struct oci_compiler *c, const cJSON *obj, bool includes,
                              const char *field, bool *ret)
{
        char f[OCI_FIELD_MAX];
        const cJSON *caps, *arches, *kernel;
        int r;

        *ret = true;
        if (!obj)
                return 0;
        if (!cJSON_IsObject(obj))
                return oci_type_error(c, field, "an object", obj);

        caps = oci_member(obj, "caps");
        field_format(f, "%s.caps", field);
        r = oci_string_array(c, caps, f);
        if (r < 0)
                return r;
        if (includes && cJSON_GetArraySize(caps) > 0)
                *ret = false;

        arches = oci_member(obj, "arches");
        field_format(f, "%s.arches", field);
        r = oci_string_array(c, arches, f);
        if (r < 0)
                return r;
        if (cJSON_GetArraySize(arches) > 0 &&
            oci_strings_contain_native_arch(c, arches) != includes)
                *ret = false;

        kernel = oci_member(obj, "minKernel");
        if (kernel) {
                bool at_least;

                field_format(f, "%s.minKernel", field);
                r = oci_kernel_at_least(c, kernel, f, &at_least);
                if (r < 0)
                        return r;
                if (at_least != includes)
                        *ret = false;
        }
        return 0;
}

static int oci_rule_add(struct oci_compiler *c, uint32_t action, const char *name,
                        const struct scmp_arg_cmp *cmp, unsigned n_cmp, const char *field)
{
        int nr = seccomp_syscall_resolve_name(name);
        int r;

        /* Profiles name syscalls of other kernels and arches: an unknown one has no rule. */
        if (nr == __NR_SCMP_ERROR)
                return 0;
        /* libseccomp refuses two conditions on one argument in a rule; runc then adds one
         * rule per condition, and so do we. */
        if (oci_args_share_an_index(cmp, n_cmp)) {
                for (unsigned i = 0; i < n_cmp; i++) {
                        r = seccomp_rule_add_array(c->ctx, action, nr, 1, &cmp[i]);
                        if (r < 0)
                                break;
                }
        } else {
                r = seccomp_rule_add_array(c->ctx, action, nr, n_cmp, cmp);
        }
        if (r < 0) {
                char why[128];

                snprintf(why, sizeof(why), "libseccomp refused the rule for %s: %s", name,
                         strerror(-r));
                return oci_field_error(c, field, why);
        }
        return 0;
}

static int oci_syscall(struct oci_compiler *c, const cJSON *sc, size_t idx)
{
        char field[OCI_FIELD_MAX], f[OCI_FIELD_MAX], ferr[OCI_FIELD_MAX];
        const cJSON *names, *name, *it;
        struct scmp_arg_cmp cmp[OCI_ARGS_MAX];
        unsigned n_cmp;
        uint32_t action;
        bool applies;
        int r;

        field_format(field, "syscalls[%zu]", idx);
        if (!cJSON_IsObject(sc))
                return oci_type_error(c, field, "an object", sc);

        names = oci_member(sc, "names");
        field_format(f, "%s.names", field);
        r = oci_string_array(c, names, f);
        if (r < 0)
                return r;
        name = oci_member(sc, "name");
        if (name && !cJSON_IsString(name)) {
                field_format(f, "%s.name", field);
                return oci_type_error(c, f, "a string", name);
        }
        if (!names && !name)
                return oci_field_error(c, field, "has neither names nor name");
        c->n_names += (size_t)cJSON_GetArraySize(names) + (name ? 1 : 0);
        if (c->n_names > OCI_NAMES_MAX)
                return oci_field_error(c, field, "more than 65536 syscall names in the profile");

        field_format(f, "%s.action", field);
        field_format(ferr, "%s.errnoRet", field);
        r = oci_action(c, oci_member(sc, "action"), oci_member(sc, "errnoRet"), f, ferr, &action);
        if (r < 0)
                return r;
        field_format(f, "%s.args", field);
        r = oci_args(c, oci_member(sc, "args"), f, cmp, &n_cmp);
        if (r < 0)
                return r;

        field_format(f, "%s.includes", field);
        r = oci_filter_applies(c, oci_member(sc, "includes"), true, f, &applies);
        if (r < 0 || !applies)
                return r;
        field_format(f, "%s.excludes", field);
        r = oci_filter_applies(c, oci_member(sc, "excludes"), false, f, &applies);
        if (r < 0 || !applies)
                return r;
        /* libseccomp refuses a rule that repeats the default action; it changes nothing. */
        if (action == c->def_action)
                return 0;

        if (name) {
                r = oci_rule_add(c, action, name->valuestring, cmp, n_cmp, field);
                if (r < 0)
                        return r;
        }
        cJSON_ArrayForEach(it, names)
        {
                r = oci_rule_add(c, action, it->valuestring, cmp, n_cmp, field);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* "SCMP_ARCH_X86_64" -> SCMP_ARCH_X86_64; 0 for a name this libseccomp does not know. */
static uint32_t oci_arch_resolve(const char *name)
{
        char lower[32];
        size_t i;

        if (strncmp(name, "SCMP_ARCH_", 10) != 0)
                return 0;
        name += 10;
        for (i = 0; name[i] && i + 1 < sizeof(lower); i++)
                lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
        if (name[i])
                return 0;
        lower[i] = '\0';
        return seccomp_arch_resolve_name(lower);
}

/* Add the arches a string array names; unknown ones are left out (the kernel's bad-arch
 * action still stops any syscall made through them). */
static int oci_arches_add(struct oci_compiler *c, const cJSON *arr, const char *field)
{
        const cJSON *it;
        int r;

        r = oci_string_array(c, arr, field);
        if (r < 0)
                return r;
        cJSON_ArrayForEach(it, arr)
        {
                uint32_t arch = oci_arch_resolve(it->valuestring);

                if (arch == 0)
                        continue;
                r = cs_seccomp_arch_add(c->ctx, arch, c->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* archMap ([{architecture, subArchitectures}]): the entry of the native arch gives the
 * arches; without one, the architectures list does. */
static int oci_architectures(struct oci_compiler *c, const cJSON *root)
{
        const cJSON *map = oci_member(root, "archMap"), *it;
        char f[OCI_FIELD_MAX];
        size_t i = 0;

        if (map && !cJSON_IsArray(map))
                return oci_type_error(c, "archMap", "an array", map);
        cJSON_ArrayForEach(it, map)
        {
                const cJSON *arch, *subs;
                int r;

                field_format(f, "archMap[%zu]", i);
                if (!cJSON_IsObject(it))
                        return oci_type_error(c, f, "an object", it);
                arch = oci_member(it, "architecture");
                field_format(f, "archMap[%zu].architecture", i);
                if (!cJSON_IsString(arch))
                        return oci_type_error(c, f, "a string", arch);
                subs = oci_member(it, "subArchitectures");
                field_format(f, "archMap[%zu].subArchitectures", i);
                r = oci_string_array(c, subs, f);
                if (r < 0)
                        return r;
                if (oci_arch_resolve(arch->valuestring) == c->native)
                        return oci_arches_add(c, subs, f);
                i++;
        }
        return oci_arches_add(c, oci_member(root, "architectures"), "architectures");
}

static void oci_kernel_version(unsigned ret[3])
{
        struct utsname u;

        ret[0] = ret[1] = ret[2] = 0;
        if (uname(&u) == 0)
                sscanf(u.release, "%u.%u.%u", &ret[0], &ret[1], &ret[2]);
}

/* A parse error as origin:line:column, with a few characters of what is there. */
static int oci_parse_error(const char *origin, const char *json, size_t len, size_t pos,
                           const char *why, struct cs_error *err)
{
        size_t line = 1, col = 1, n = 0;
        char near[24];

        if (pos > len)
                pos = len;
        /* cJSON reports one past an object key that lacks its opening quote. */
        if (pos >= 2 && !strchr(" \t\r\n{,\"[:", json[pos - 1]) &&
            strchr(" \t\r\n{,", json[pos - 2]))
                pos--;
        for (size_t i = 0; i < pos; i++) {
                if (json[i] == '\n') {
                        line++;
                        col = 1;
                } else {
                        col++;
                }
        }
        for (size_t i = pos; i < len && n + 1 < sizeof(near) && json[i] != '\n'; i++)
                near[n++] = json[i] >= 0x20 && json[i] < 0x7f ? json[i] : '?';
        near[n] = '\0';
        cs_error_set(err, 0, "seccomp profile %s:%zu:%zu: %s%s%s%s", origin, line, col, why,
                     n ? " near `" : " at the end of the file", near, n ? "`" : "");
        return cs_error_hint(err, "Fix the JSON syntax there");
}

int seccomp_compile_oci(const char *json, size_t len, const char *origin, struct sock_fprog *ret,
                        struct cs_error *err)
{
        _cleanup_seccomp_ scmp_filter_ctx ctx = NULL;
        _cleanup_cjson_ cJSON *root = NULL;
        struct oci_compiler c = {.origin = origin, .err = err};
        const cJSON *syscalls, *it;
        const char *end = NULL;
        size_t i = 0;
        int r;

        if (len > SECCOMP_FILE_MAX)
                return cs_error_set(err, 0, "seccomp profile %s is %zu bytes, over the limit of %u",
                                    origin, len, SECCOMP_FILE_MAX);
        root = cJSON_ParseWithLengthOpts(json, len, &end, false);
        if (!root)
                return oci_parse_error(origin, json, len, end ? (size_t)(end - json) : 0,
                                       "invalid JSON", err);
        /* cJSON stops after the first value; anything but blanks after it is an error. */
        for (size_t pos = (size_t)(end - json); pos < len; pos++)
                if (!strchr(" \t\r\n", json[pos]) || json[pos] == '\0')
                        return oci_parse_error(origin, json, len, pos,
                                               "unexpected text after the JSON value", err);
        if (!cJSON_IsObject(root))
                return oci_type_error(&c, "(top level)", "an object", root);

        c.native = seccomp_arch_native();
        oci_kernel_version(c.kernel);
        r = oci_action(&c, oci_member(root, "defaultAction"), oci_member(root, "defaultErrnoRet"),
                       "defaultAction", "defaultErrnoRet", &c.def_action);
        if (r < 0)
                return r;
        r = cs_seccomp_filter_new(c.def_action, &ctx, err);
        if (r < 0)
                return r;
        c.ctx = ctx;
        r = oci_architectures(&c, root);
        if (r < 0)
                return r;

        syscalls = oci_member(root, "syscalls");
        if (syscalls && !cJSON_IsArray(syscalls))
                return oci_type_error(&c, "syscalls", "an array", syscalls);
        if (cJSON_GetArraySize(syscalls) > OCI_SYSCALLS_MAX)
                return oci_field_error(&c, "syscalls", "more than 4096 entries");
        cJSON_ArrayForEach(it, syscalls)
        {
                r = oci_syscall(&c, it, i++);
                if (r < 0)
                        return r;
        }
        r = cs_seccomp_export(ctx, "the seccomp profile", ret, err);
        if (r < 0)
                return cs_error_wrap(err, "%s", origin);
        return 0;
}

int seccomp_compile_file(const char *path, struct sock_fprog *ret, struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r;

        r = cs_read_file_at(AT_FDCWD, path, SECCOMP_FILE_MAX, false, &buf, &len, err);
        if (r < 0) {
                cs_error_wrap(err, "seccomp profile");
                return cs_error_hint(err, "--seccomp takes the path of a readable OCI/Docker "
                                          "seccomp JSON profile, or default, strict or none");
        }
        return seccomp_compile_oci(buf, len, path, ret, err);
}
