/*
 * plan.c: turns kf_jail_opts into a kf_plan (mounts, environment, rlimits) in the parent.
 *
 * The view: a tmpfs root holding read-only binds of /usr and /etc (and /bin, /lib... as the
 * symlinks or binds they are on the host), a fresh /proc and a read-only /sys, a /dev with
 * only the null-like nodes (plus GPU N's nodes in profile run), tmpfs /tmp and /dev/shm, the
 * workdir read-write, and the --ro/--rw paths, each at its host path.
 */
#include "plan.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define JAIL_PATH "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Remembers p for kf_plan_free; returns p, or NULL (and frees p) when out of memory. */
static void *own(struct kf_plan *plan, void *p) {
    if (p == NULL)
        return NULL;
    if (plan->n_owned == plan->cap_owned) {
        size_t cap = plan->cap_owned ? plan->cap_owned * 2 : 64;
        void **n = realloc(plan->owned, cap * sizeof(*n));
        if (n == NULL) {
            free(p);
            return NULL;
        }
        plan->owned = n;
        plan->cap_owned = cap;
    }
    plan->owned[plan->n_owned++] = p;
    return p;
}

/* A printf-formatted string owned by the plan, or NULL when out of memory. */
static char *ownf(struct kf_plan *plan, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    return own(plan, s);
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Number of components of an absolute path: "/" 0, "/usr" 1, "/usr/lib" 2. */
static int depth(const char *path) {
    int d = 0;
    for (const char *p = path; *p; p++)
        if (*p == '/' && p[1] != '\0' && p[1] != '/')
            d++;
    return d;
}

static bool is_under(const char *path, const char *dir) {
    size_t n = strlen(dir);
    if (strcmp(dir, "/") == 0)
        return true;
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Adds an op; strings must already be owned by the plan or static. Returns 0 or -1. */
static int add_op(struct kf_plan *plan, enum kf_mnt_kind kind, unsigned flags, const char *src,
                  const char *dst, const char *data) {
    for (size_t i = 0; i < plan->n_ops; i++) {
        const struct kf_mnt_op *o = &plan->ops[i];
        if (o->kind == kind && o->flags == flags && strcmp(o->dst, dst) == 0)
            return 0; /* the same mount twice: keep one */
    }
    if (plan->n_ops == plan->cap_ops) {
        size_t cap = plan->cap_ops ? plan->cap_ops * 2 : 64;
        struct kf_mnt_op *n = realloc(plan->ops, cap * sizeof(*n));
        if (n == NULL)
            return -1;
        plan->ops = n;
        plan->cap_ops = cap;
    }
    char *stage = ownf(plan, "%s%s", plan->staging, dst);
    if (stage == NULL)
        return -1;
    plan->ops[plan->n_ops++] = (struct kf_mnt_op){
        .kind = kind, .flags = flags, .src = src, .dst = dst, .stage = stage, .data = data};
    return 0;
}

/* Binds a host path that must exist, at its real path; a symlink at the given path when
 * that differs. ro: read-only. Returns 0 or -1 with err set. */
static int add_user_path(struct kf_plan *plan, const char *path, bool ro, char *err,
                         size_t errlen) {
    if (path == NULL || path[0] != '/') {
        set_err(err, errlen, "path %s: must be absolute", path ? path : "(null)");
        return -1;
    }
    char *real = own(plan, realpath(path, NULL));
    if (real == NULL) {
        set_err(err, errlen, "path %s: %s", path, strerror(errno));
        return -1;
    }
    if (strcmp(real, "/") == 0 || is_under(real, "/proc") || is_under(real, "/sys") ||
        is_under(real, "/dev")) {
        set_err(err, errlen, "path %s: / and paths under /proc, /sys and /dev are not allowed",
                path);
        return -1;
    }
    struct stat st;
    if (stat(real, &st) != 0) {
        set_err(err, errlen, "path %s: %s", path, strerror(errno));
        return -1;
    }
    unsigned flags =
        KF_MNT_F_USER | (ro ? KF_MNT_F_RO : 0) | (S_ISDIR(st.st_mode) ? 0 : KF_MNT_F_FILE);
    if (add_op(plan, KF_MNT_BIND, flags, real, real, NULL) != 0)
        goto oom;
    if (strcmp(real, path) != 0) {
        char *dst = own(plan, strdup(path));
        if (dst == NULL || add_op(plan, KF_MNT_SYMLINK, KF_MNT_F_OPTIONAL, NULL, dst, real) != 0)
            goto oom;
    }
    return 0;
oom:
    set_err(err, errlen, "out of memory");
    return -1;
}

/* /bin, /lib...: a symlink where the host has one (merged /usr), else a read-only bind. */
static int add_system_path(struct kf_plan *plan, const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            return 0;
        target[n] = '\0';
        char *t = own(plan, strdup(target));
        return t ? add_op(plan, KF_MNT_SYMLINK, 0, NULL, path, t) : -1;
    }
    if (!S_ISDIR(st.st_mode))
        return 0;
    return add_op(plan, KF_MNT_BIND, KF_MNT_F_RO, path, path, NULL);
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Adds dir read-only when it is a Python prefix (a venv, or holds lib/python3*) that the
 * view does not show yet. */
static int add_python_prefix(struct kf_plan *plan, const char *dir) {
    if (dir[0] != '/' || strcmp(dir, "/") == 0)
        return 0;
    for (size_t i = 0; i < plan->n_ops; i++) {
        const struct kf_mnt_op *o = &plan->ops[i];
        if (o->kind == KF_MNT_BIND && is_under(dir, o->dst))
            return 0;
    }
    char probe[PATH_MAX + 32];
    bool python = false;
    snprintf(probe, sizeof(probe), "%s/pyvenv.cfg", dir);
    if (exists(probe))
        python = true;
    snprintf(probe, sizeof(probe), "%s/lib", dir);
    DIR *d = python ? NULL : opendir(probe);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (strncmp(e->d_name, "python3", 7) == 0)
                python = true;
        closedir(d);
    }
    if (!python)
        return 0;
    char *p = own(plan, strdup(dir));
    return p ? add_op(plan, KF_MNT_BIND, KF_MNT_F_RO, p, p, NULL) : -1;
}

/* The interpreter named by argv[0] (a path): its prefix, and the prefix of the file it
 * resolves to (a venv's base interpreter), read-only. */
static int add_auto_python(struct kf_plan *plan, const char *argv0, const char *workdir) {
    if (strchr(argv0, '/') == NULL)
        return 0;
    char abs[PATH_MAX * 2 + 2];
    if (argv0[0] == '/')
        kf_strlcpy(abs, argv0, sizeof(abs));
    else
        snprintf(abs, sizeof(abs), "%s/%s", workdir, argv0);
    for (int pass = 0; pass < 2; pass++) {
        char buf[PATH_MAX];
        if (pass == 0) {
            kf_strlcpy(buf, abs, sizeof(buf));
        } else if (realpath(abs, buf) == NULL) {
            return 0;
        }
        for (int up = 0; up < 2; up++) { /* dirname twice: .../prefix/bin/python */
            char *slash = strrchr(buf, '/');
            if (slash == NULL || slash == buf)
                return 0;
            *slash = '\0';
        }
        if (add_python_prefix(plan, buf) != 0)
            return -1;
    }
    return 0;
}

static int add_gpu(struct kf_plan *plan, int gpu, char *err, size_t errlen) {
    char *node = ownf(plan, "/dev/nvidia%d", gpu);
    if (node == NULL)
        return -1;
    const char *required[] = {"/dev/nvidiactl", node};
    for (size_t i = 0; i < 2; i++) {
        if (!exists(required[i])) {
            set_err(err, errlen, "--gpu %d: %s: %s", gpu, required[i], strerror(errno));
            return -1;
        }
        if (add_op(plan, KF_MNT_BIND, KF_MNT_F_DEV | KF_MNT_F_FILE, required[i], required[i],
                   NULL) != 0)
            return -1;
    }
    const char *optional[] = {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"};
    for (size_t i = 0; i < 2; i++)
        if (add_op(plan, KF_MNT_BIND, KF_MNT_F_DEV | KF_MNT_F_FILE | KF_MNT_F_OPTIONAL, optional[i],
                   optional[i], NULL) != 0)
            return -1;
    /* The other GPUs' nodes are absent: the driver skips a GPU whose node it cannot open,
     * as under a device cgroup, so CUDA sees GPU N alone (as device 0). */
    return 0;
}

static int add_env(struct kf_plan *plan, size_t *n, size_t cap, const char *kv) {
    const char *eq = strchr(kv, '=');
    size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
    char *entry;
    if (eq == NULL) { /* NAME alone: the caller's value, if it has one */
        char name[256];
        if (klen >= sizeof(name))
            return 0;
        memcpy(name, kv, klen);
        name[klen] = '\0';
        const char *v = getenv(name);
        if (v == NULL)
            return 0;
        entry = ownf(plan, "%s=%s", name, v);
    } else {
        entry = own(plan, strdup(kv));
    }
    if (entry == NULL)
        return -1;
    for (size_t i = 0; i < *n; i++) { /* a later entry replaces an earlier one */
        if (strncmp(plan->envp[i], entry, klen + 1) == 0) {
            plan->envp[i] = entry;
            if (klen == 4 && strncmp(entry, "PATH", 4) == 0)
                plan->path_env = entry + 5;
            return 0;
        }
    }
    if (*n + 1 >= cap)
        return -1;
    plan->envp[(*n)++] = entry;
    plan->envp[*n] = NULL;
    if (klen == 4 && strncmp(entry, "PATH", 4) == 0)
        plan->path_env = entry + 5;
    return 0;
}

static int build_env(struct kf_plan *plan, const struct kf_jail_opts *o) {
    size_t cap = o->n_env + 16, n = 0;
    plan->envp = own(plan, calloc(cap, sizeof(char *)));
    if (plan->envp == NULL)
        return -1;
    char *pwd = ownf(plan, "PWD=%s", plan->workdir);
    const char *defaults[] = {"PATH=" JAIL_PATH, "HOME=/tmp",    "TMPDIR=/tmp",   "USER=kforge",
                              "LOGNAME=kforge",  "LANG=C.UTF-8", "SHELL=/bin/sh", pwd};
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        if (defaults[i] == NULL || add_env(plan, &n, cap, defaults[i]) != 0)
            return -1;
    for (size_t i = 0; i < o->n_env; i++)
        if (add_env(plan, &n, cap, o->env[i]) != 0)
            return -1;
    return 0;
}

static void add_rlimit(struct kf_plan *plan, int resource, rlim_t soft, rlim_t hard) {
    struct rlimit cur;
    if (getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
        /* without CAP_SYS_RESOURCE in the host's namespace, a hard limit cannot grow */
        if (hard == RLIM_INFINITY || hard > cur.rlim_max)
            hard = cur.rlim_max;
        if (soft == RLIM_INFINITY || soft > hard)
            soft = hard;
    }
    if (plan->n_rlimits < KF_PLAN_MAX_RLIMITS)
        plan->rlimits[plan->n_rlimits++] =
            (struct kf_plan_rlimit){resource, {.rlim_cur = soft, .rlim_max = hard}};
}

static void build_rlimits(struct kf_plan *plan, const struct kf_jail_opts *o, bool pids_rlimit,
                          bool mem_rlimit) {
    add_rlimit(plan, RLIMIT_CORE, 0, 0);
    add_rlimit(plan, RLIMIT_AS, RLIM_INFINITY, RLIM_INFINITY); /* CUDA maps huge ranges */
    if (o->cpu_s > 0)
        add_rlimit(plan, RLIMIT_CPU, o->cpu_s, o->cpu_s + 1);
    if (o->fsize_mib > 0)
        add_rlimit(plan, RLIMIT_FSIZE, o->fsize_mib << 20, o->fsize_mib << 20);
    if (o->nofile > 0)
        add_rlimit(plan, RLIMIT_NOFILE, o->nofile, o->nofile);
    if (o->pids > 0 && pids_rlimit)
        add_rlimit(plan, RLIMIT_NPROC, o->pids, o->pids);
    if (o->mem_mib > 0 && mem_rlimit)
        add_rlimit(plan, RLIMIT_DATA, o->mem_mib << 20, o->mem_mib << 20);
}

static const char *pick_staging(void) {
    const char *candidates[] = {"/tmp", "/mnt", "/var/tmp", "/run", "/dev"};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        struct stat st;
        if (lstat(candidates[i], &st) == 0 && S_ISDIR(st.st_mode))
            return candidates[i];
    }
    return "/dev";
}

static int cmp_depth(const void *a, const void *b) {
    const struct kf_mnt_op *x = a, *y = b;
    int dx = depth(x->dst), dy = depth(y->dst);
    return (dx > dy) - (dx < dy);
}

/* A stable sort by depth (insertion sort: the lists are short). */
static void sort_ops(struct kf_plan *plan) {
    for (size_t i = 1; i < plan->n_ops; i++) {
        struct kf_mnt_op cur = plan->ops[i];
        size_t j = i;
        while (j > 0 && cmp_depth(&plan->ops[j - 1], &cur) > 0) {
            plan->ops[j] = plan->ops[j - 1];
            j--;
        }
        plan->ops[j] = cur;
    }
}

static const char PASSWD[] = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                             "kforge:x:1000:1000:kforge:/tmp:/bin/sh\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char GROUP[] = "root:x:0:\nkforge:x:1000:\nnogroup:x:65534:\n";

static int build_mounts(struct kf_plan *plan, const struct kf_jail_opts *o, char *err,
                        size_t errlen) {
    const char *sys[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
    if (add_op(plan, KF_MNT_BIND, KF_MNT_F_RO, "/usr", "/usr", NULL) != 0 ||
        add_op(plan, KF_MNT_BIND, KF_MNT_F_RO, "/etc", "/etc", NULL) != 0)
        goto oom;
    for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
        if (add_system_path(plan, sys[i]) != 0)
            goto oom;
    /* secrets of the host that /etc holds: hidden, whoever the jail runs as */
    const char *etc_masks[] = {"/etc/shadow",    "/etc/shadow-",     "/etc/gshadow",
                               "/etc/gshadow-",  "/etc/sudoers",     "/etc/sudoers.d",
                               "/etc/ssh",       "/etc/ssl/private", "/etc/security/opasswd",
                               "/etc/machine-id"};
    for (size_t i = 0; i < sizeof(etc_masks) / sizeof(etc_masks[0]); i++) {
        struct stat st;
        if (lstat(etc_masks[i], &st) != 0 || S_ISLNK(st.st_mode))
            continue;
        unsigned f = KF_MNT_F_OPTIONAL | (S_ISDIR(st.st_mode) ? 0 : KF_MNT_F_FILE);
        if (add_op(plan, KF_MNT_MASK, f, NULL, etc_masks[i], NULL) != 0)
            goto oom;
    }
    if (add_op(plan, KF_MNT_FILE, KF_MNT_F_RO, NULL, "/etc/passwd", PASSWD) != 0 ||
        add_op(plan, KF_MNT_FILE, KF_MNT_F_RO, NULL, "/etc/group", GROUP) != 0)
        goto oom;

    /* read-only, but in run --gpu: the CUDA driver names its threads through
     * /proc/self/task/TID/comm and fails cuInit (304) when it cannot (mounts.c keeps the
     * system-wide parts read-only there) */
    unsigned proc_flags = o->profile == KF_JAIL_RUN && o->gpu >= 0 ? 0 : KF_MNT_F_RO;
    if (add_op(plan, KF_MNT_PROC, proc_flags, NULL, "/proc", NULL) != 0)
        goto oom;
    const char *proc_masks[] = {"/proc/kcore", "/proc/timer_list", "/proc/sched_debug",
                                "/proc/keys", "/proc/sysrq-trigger"};
    for (size_t i = 0; i < sizeof(proc_masks) / sizeof(proc_masks[0]); i++)
        if (add_op(plan, KF_MNT_MASK, KF_MNT_F_OPTIONAL | KF_MNT_F_FILE, NULL, proc_masks[i],
                   NULL) != 0)
            goto oom;
    if (add_op(plan, KF_MNT_SYSFS, KF_MNT_F_RO, NULL, "/sys", NULL) != 0)
        goto oom;

    if (add_op(plan, KF_MNT_TMPFS, 0, NULL, "/dev", "mode=755,size=64k,nr_inodes=256") != 0)
        goto oom;
    const char *nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
        if (add_op(plan, KF_MNT_BIND, KF_MNT_F_DEV | KF_MNT_F_FILE, nodes[i], nodes[i], NULL))
            goto oom;
    const char *links[][2] = {{"/dev/fd", "/proc/self/fd"},
                              {"/dev/stdin", "/proc/self/fd/0"},
                              {"/dev/stdout", "/proc/self/fd/1"},
                              {"/dev/stderr", "/proc/self/fd/2"}};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
        if (add_op(plan, KF_MNT_SYMLINK, 0, NULL, links[i][0], links[i][1]) != 0)
            goto oom;
    char *shm = ownf(plan, "mode=1777,size=%llum", (unsigned long long)o->shm_mib);
    char *tmp = ownf(plan, "mode=1777,size=%llum", (unsigned long long)o->tmp_mib);
    if (shm == NULL || tmp == NULL || add_op(plan, KF_MNT_TMPFS, 0, NULL, "/dev/shm", shm) ||
        add_op(plan, KF_MNT_TMPFS, 0, NULL, "/tmp", tmp) != 0)
        goto oom;
    if (o->profile == KF_JAIL_RUN && o->gpu >= 0 && add_gpu(plan, o->gpu, err, errlen) != 0) {
        if (err[0] == '\0')
            goto oom;
        return -1;
    }

    for (size_t i = 0; i < o->n_ro; i++)
        if (add_user_path(plan, o->ro_paths[i], true, err, errlen) != 0)
            return -1;
    for (size_t i = 0; i < o->n_rw; i++)
        if (add_user_path(plan, o->rw_paths[i], false, err, errlen) != 0)
            return -1;
    if (add_op(plan, KF_MNT_BIND, KF_MNT_F_USER, plan->workdir, plan->workdir, NULL) != 0)
        goto oom;
    if (!o->no_auto_python && add_auto_python(plan, o->argv[0], plan->workdir) != 0)
        goto oom;
    sort_ops(plan);
    return 0;
oom:
    set_err(err, errlen, "out of memory");
    return -1;
}

int kf_plan_build(struct kf_plan *plan, const struct kf_jail_opts *o, bool pids_rlimit,
                  bool mem_rlimit, char *err, size_t errlen) {
    memset(plan, 0, sizeof(*plan));
    err[0] = '\0';
    plan->profile = o->profile;
    plan->hostname = "kforge";
    plan->staging = pick_staging();
    plan->path_env = JAIL_PATH;
    if (o->argv == NULL || o->argv[0] == NULL || o->argv[0][0] == '\0') {
        set_err(err, errlen, "no command given");
        return -1;
    }
    if (o->gpu >= 0 && o->profile != KF_JAIL_RUN) {
        set_err(err, errlen, "--gpu needs --profile run");
        return -1;
    }
    if (o->workdir == NULL) {
        set_err(err, errlen, "--workdir is required");
        return -1;
    }
    struct stat st;
    plan->workdir = own(plan, realpath(o->workdir, NULL));
    if (plan->workdir == NULL || stat(plan->workdir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "workdir %s: %s", o->workdir,
                plan->workdir ? "not a directory" : strerror(errno));
        return -1;
    }
    if (strcmp(plan->workdir, "/") == 0 || is_under(plan->workdir, "/proc") ||
        is_under(plan->workdir, "/sys") || is_under(plan->workdir, "/dev") ||
        is_under(plan->workdir, "/usr") || is_under(plan->workdir, "/etc")) {
        set_err(err, errlen, "workdir %s: not allowed there", o->workdir);
        return -1;
    }
    if (build_mounts(plan, o, err, errlen) != 0)
        return -1;

    size_t argc = 0;
    while (o->argv[argc] != NULL)
        argc++;
    plan->argv = own(plan, calloc(argc + 1, sizeof(char *)));
    if (plan->argv == NULL)
        goto oom;
    for (size_t i = 0; i < argc; i++)
        if ((plan->argv[i] = own(plan, strdup(o->argv[i]))) == NULL)
            goto oom;
    if (build_env(plan, o) != 0)
        goto oom;
    build_rlimits(plan, o, pids_rlimit, mem_rlimit);

    char buf[32];
    plan->cap_last_cap = 40;
    if (kf_read_file("/proc/sys/kernel/cap_last_cap", buf, sizeof(buf)) > 0)
        plan->cap_last_cap = atoi(buf);
    plan->drop_groups = geteuid() == 0;
    if (o->pids > 0 && pids_rlimit) /* per-namespace pid_max (Linux 6.14+) is at least 301 */
        plan->pid_max = o->pids + 1 < 301 ? 301 : (int)(o->pids + 1);
    return 0;
oom:
    set_err(err, errlen, "out of memory");
    return -1;
}

void kf_plan_free(struct kf_plan *plan) {
    for (size_t i = 0; i < plan->n_owned; i++)
        free(plan->owned[i]);
    free(plan->owned);
    free(plan->ops);
    plan->owned = NULL;
    plan->ops = NULL;
    plan->n_owned = plan->n_ops = 0;
}
