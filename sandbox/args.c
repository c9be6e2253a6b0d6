/* args.c: kforge-jail's options (getopt_long, stops at "--" or the first non-option). */
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: kforge-jail --profile build|shell|run [--gpu N] --workdir DIR [--ro PATH]...\n"
    "         [--rw PATH]... [--time SECONDS] [--mem MIB] [--pids N] [--output-limit KIB]\n"
    "         [--cpu SECONDS] [--cpus N] [--fsize MIB] [--disk MIB] [--disk-files N]\n"
    "         [--nofile N] [--tmp-size MIB] [--shm-size MIB] [--env NAME[=VALUE]]...\n"
    "         [--stdin FILE] [--host-uid UID] [--host-gid GID] [--cgroup-parent DIR]\n"
    "         [--report FILE] [--record FILE] [--no-auto-python] -- COMMAND [ARGS...]\n"
    "Runs COMMAND in a jail and exits with its status (128+signal when it was killed), or\n"
    "with 125 when the jail itself failed. A limit of 0 means none. See sandbox/README.md.\n";

const char *kf_jail_usage(void) {
    return USAGE;
}

enum {
    O_PROFILE = 256,
    O_GPU,
    O_WORKDIR,
    O_RO,
    O_RW,
    O_TIME,
    O_MEM,
    O_PIDS,
    O_OUTPUT,
    O_CPU,
    O_CPUS,
    O_FSIZE,
    O_DISK,
    O_DISK_FILES,
    O_NOFILE,
    O_TMP,
    O_SHM,
    O_ENV,
    O_STDIN,
    O_HOST_UID,
    O_HOST_GID,
    O_CGROUP,
    O_REPORT,
    O_RECORD,
    O_NO_AUTO_PY,
    O_HELP
};

static const struct option LONGOPTS[] = {
    {"profile", required_argument, NULL, O_PROFILE},
    {"gpu", required_argument, NULL, O_GPU},
    {"workdir", required_argument, NULL, O_WORKDIR},
    {"ro", required_argument, NULL, O_RO},
    {"rw", required_argument, NULL, O_RW},
    {"time", required_argument, NULL, O_TIME},
    {"mem", required_argument, NULL, O_MEM},
    {"pids", required_argument, NULL, O_PIDS},
    {"output-limit", required_argument, NULL, O_OUTPUT},
    {"cpu", required_argument, NULL, O_CPU},
    {"cpus", required_argument, NULL, O_CPUS},
    {"fsize", required_argument, NULL, O_FSIZE},
    {"disk", required_argument, NULL, O_DISK},
    {"disk-files", required_argument, NULL, O_DISK_FILES},
    {"nofile", required_argument, NULL, O_NOFILE},
    {"tmp-size", required_argument, NULL, O_TMP},
    {"shm-size", required_argument, NULL, O_SHM},
    {"env", required_argument, NULL, O_ENV},
    {"stdin", required_argument, NULL, O_STDIN},
    {"host-uid", required_argument, NULL, O_HOST_UID},
    {"host-gid", required_argument, NULL, O_HOST_GID},
    {"cgroup-parent", required_argument, NULL, O_CGROUP},
    {"report", required_argument, NULL, O_REPORT},
    {"record", required_argument, NULL, O_RECORD},
    {"no-auto-python", no_argument, NULL, O_NO_AUTO_PY},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || s[0] == '\0' || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

static int push(const char ***arr, size_t *n, const char *s) {
    const char **a = realloc(*arr, (*n + 1) * sizeof(*a));
    if (a == NULL)
        return -1;
    a[(*n)++] = s;
    *arr = a;
    return 0;
}

/* Applies one option; returns 0 or -1 (err filled). */
static int apply(struct kf_jail_args *a, int opt, const char *v, char *err, size_t n) {
    struct kf_jail_opts *o = &a->opts;
    uint64_t u = 0;
    double d = 0;
    int bad = 0;
    switch (opt) {
    case O_PROFILE:
        bad = kf_jail_profile_parse(v, &o->profile);
        break;
    case O_GPU:
        bad = parse_u64(v, &u) || u > 1024;
        o->gpu = (int)u;
        break;
    case O_WORKDIR:
        o->workdir = v;
        break;
    case O_RO:
        bad = push(&a->ro, &o->n_ro, v);
        break;
    case O_RW:
        bad = push(&a->rw, &o->n_rw, v);
        break;
    case O_ENV:
        bad = push(&a->env, &o->n_env, v) || strchr(v, '=') == v;
        break;
    case O_TIME:
        bad = parse_double(v, &d);
        o->time_ms = (uint64_t)(d * 1000.0 + 0.5);
        break;
    case O_CPUS:
        bad = parse_double(v, &d);
        o->cpus = d;
        break;
    case O_MEM:
        bad = parse_u64(v, &o->mem_mib);
        break;
    case O_PIDS:
        bad = parse_u64(v, &o->pids);
        break;
    case O_OUTPUT:
        bad = parse_u64(v, &o->output_limit_kib);
        break;
    case O_CPU:
        bad = parse_u64(v, &o->cpu_s);
        break;
    case O_FSIZE:
        bad = parse_u64(v, &o->fsize_mib);
        break;
    case O_DISK:
        bad = parse_u64(v, &o->disk_mib);
        break;
    case O_DISK_FILES:
        bad = parse_u64(v, &o->disk_files);
        break;
    case O_NOFILE:
        bad = parse_u64(v, &o->nofile);
        break;
    case O_TMP:
        bad = parse_u64(v, &o->tmp_mib) || o->tmp_mib == 0;
        break;
    case O_SHM:
        bad = parse_u64(v, &o->shm_mib) || o->shm_mib == 0;
        break;
    case O_STDIN:
        a->stdin_path = v;
        break;
    case O_HOST_UID:
        bad = parse_u64(v, &u) || u >= 0xffffffffu;
        o->host_uid = (int64_t)u;
        break;
    case O_HOST_GID:
        bad = parse_u64(v, &u) || u >= 0xffffffffu;
        o->host_gid = (int64_t)u;
        break;
    case O_CGROUP:
        o->cgroup_parent = v;
        break;
    case O_REPORT:
        a->report_path = v;
        break;
    case O_RECORD:
        o->record_path = v;
        break;
    case O_NO_AUTO_PY:
        o->no_auto_python = true;
        break;
    default:
        bad = 1;
        break;
    }
    if (bad) {
        const char *name = "?";
        for (const struct option *lo = LONGOPTS; lo->name; lo++)
            if (lo->val == opt)
                name = lo->name;
        snprintf(err, n, "bad value for --%s: %s", name, v ? v : "");
        return -1;
    }
    return 0;
}

int kf_jail_args_parse(struct kf_jail_args *a, int argc, char **argv, char *err, size_t n) {
    memset(a, 0, sizeof(*a));
    kf_jail_opts_init(&a->opts);
    bool have_profile = false;
    optind = 1;
    opterr = 0;
    for (;;) {
        int idx = 0;
        int opt = getopt_long(argc, argv, "+h", LONGOPTS, &idx);
        if (opt == -1)
            break;
        if (opt == 'h' || opt == O_HELP)
            return 1;
        if (opt == '?' || opt == ':') {
            snprintf(err, n, "unknown or incomplete option: %s",
                     optind > 0 && optind <= argc ? argv[optind - 1] : "?");
            return -1;
        }
        if (opt == O_PROFILE)
            have_profile = true;
        if (apply(a, opt, optarg, err, n) != 0)
            return -1;
    }
    if (!have_profile) {
        snprintf(err, n, "--profile is required");
        return -1;
    }
    if (a->opts.workdir == NULL) {
        snprintf(err, n, "--workdir is required");
        return -1;
    }
    if (optind >= argc) {
        snprintf(err, n, "no command given (after --)");
        return -1;
    }
    a->opts.ro_paths = a->ro;
    a->opts.rw_paths = a->rw;
    a->opts.env = a->env;
    a->opts.argv = (const char *const *)(argv + optind);
    return 0;
}

void kf_jail_args_free(struct kf_jail_args *a) {
    free(a->ro);
    free(a->rw);
    free(a->env);
    a->ro = a->rw = a->env = NULL;
}
