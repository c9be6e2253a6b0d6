/*
 * jail.c: kf_jail_run(), the parent's side from start to finish.
 *
 *   1. cgroup (cgroup.c) where delegated, else rlimit fallbacks, noted in result->notes;
 *   2. the plan (plan.c) and the seccomp program (seccomp_filter.c), built before clone();
 *   3. clone() into new user, mount, PID, network, IPC, UTS and cgroup namespaces; the child
 *      (child.c) waits until this side has written its uid/gid maps and cgroup;
 *   4. the supervisor loop (supervise.c) until the jail's PID 1 is gone, walking the writable
 *      paths for the disk quota (disk.c) when one is set;
 *   5. the result: exit status, signal, which limit fired, captured output.
 */
#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "child.h"
#include "disk.h"
#include "plan.h"
#include "record.h"
#include "seccomp_filter.h"
#include "supervise.h"
#include "util.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

#define JAIL_NS_FLAGS                                                                              \
    (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |     \
     CLONE_NEWCGROUP)

void kf_jail_opts_init(struct kf_jail_opts *o) {
    memset(o, 0, sizeof(*o));
    o->profile = KF_JAIL_SHELL;
    o->gpu = -1;
    o->time_ms = 600 * 1000;
    o->pids = 1024;
    o->output_limit_kib = 1024;
    o->fsize_mib = 1024;
    o->nofile = 4096;
    o->tmp_mib = 1024;
    o->shm_mib = 256;
    o->stdin_fd = -1;
    o->host_uid = -1;
    o->host_gid = -1;
}

const char *kf_jail_limit_name(enum kf_jail_limit limit) {
    switch (limit) {
    case KF_LIMIT_TIME:
        return "time";
    case KF_LIMIT_MEMORY:
        return "memory";
    case KF_LIMIT_PIDS:
        return "pids";
    case KF_LIMIT_OUTPUT:
        return "output";
    case KF_LIMIT_CPU:
        return "cpu";
    case KF_LIMIT_FSIZE:
        return "fsize";
    case KF_LIMIT_DISK:
        return "disk";
    case KF_LIMIT_NONE:
        break;
    }
    return NULL;
}

const char *kf_jail_profile_name(enum kf_jail_profile p) {
    return p == KF_JAIL_BUILD ? "build" : p == KF_JAIL_RUN ? "run" : "shell";
}

int kf_jail_profile_parse(const char *name, enum kf_jail_profile *p) {
    if (strcmp(name, "build") == 0)
        *p = KF_JAIL_BUILD;
    else if (strcmp(name, "shell") == 0)
        *p = KF_JAIL_SHELL;
    else if (strcmp(name, "run") == 0)
        *p = KF_JAIL_RUN;
    else
        return -1;
    return 0;
}

void kf_jail_result_free(struct kf_jail_result *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
    r->out_len = r->err_len = 0;
}

static void note_add(struct kf_jail_result *r, const char *s) {
    if (r->notes[0] != '\0')
        kf_strlcat(r->notes, " ", sizeof(r->notes));
    kf_strlcat(r->notes, s, sizeof(r->notes));
}

static int setup_failed(struct kf_jail_result *r, const char *fmt, const char *arg) {
    r->setup_failed = true;
    r->exit_code = KF_JAIL_EXIT_SETUP;
    snprintf(r->error, sizeof(r->error), fmt, arg);
    return -1;
}

/* Writes the jail's uid/gid maps: inside 1000 = host_uid/host_gid. Returns 0 or -1. */
static int write_id_maps(pid_t pid, uid_t host_uid, gid_t host_gid, bool privileged, char *what,
                         size_t n) {
    char path[64], map[64];
    if (!privileged) { /* an unprivileged gid_map needs setgroups denied first */
        snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
        if (kf_write_file(path, "deny") != 0 && errno != ENOENT) {
            snprintf(what, n, "write %s: %s", path, strerror(errno));
            return -1;
        }
    }
    snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
    snprintf(map, sizeof(map), "%d %u 1\n", KF_JAIL_INSIDE_UID, (unsigned)host_uid);
    if (kf_write_file(path, map) != 0) {
        snprintf(what, n, "write %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
    snprintf(map, sizeof(map), "%d %u 1\n", KF_JAIL_INSIDE_GID, (unsigned)host_gid);
    if (kf_write_file(path, map) != 0) {
        snprintf(what, n, "write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

struct jail_pipes {
    int out[2], err[2], msg[2], sync[2], rec[2];
};

static void close_pair(int *p) {
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0) {
            close(p[i]);
            p[i] = -1;
        }
}

static void close_pipes(struct jail_pipes *jp) {
    close_pair(jp->out);
    close_pair(jp->err);
    close_pair(jp->msg);
    close_pair(jp->sync);
    close_pair(jp->rec);
}

static int open_pipes(struct jail_pipes *jp, bool record) {
    memset(jp, -1, sizeof(*jp));
    if (pipe2(jp->out, O_CLOEXEC) != 0 || pipe2(jp->err, O_CLOEXEC) != 0 ||
        pipe2(jp->msg, O_CLOEXEC | O_DIRECT) != 0 || pipe2(jp->sync, O_CLOEXEC) != 0)
        return -1;
    if (record && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, jp->rec) != 0)
        return -1;
    const int nb[] = {jp->out[0], jp->err[0], jp->msg[0]};
    for (size_t i = 0; i < 3; i++)
        if (fcntl(nb[i], F_SETFL, O_NONBLOCK) != 0)
            return -1;
    return 0;
}

/* Decides which limit, if any, ended the command. */
static enum kf_jail_limit classify(const struct kf_jail_opts *o, const struct kf_super *s,
                                   const struct kf_cgroup *cg, const struct kf_plan *plan,
                                   const struct kf_jail_result *r, bool nproc_effective) {
    bool oom = false, pids_max = false;
    if (cg->active)
        kf_cgroup_events(cg, &oom, &pids_max);
    bool failed = r->exit_code != 0;
    if (s->killed_output)
        return KF_LIMIT_OUTPUT;
    if (s->killed_disk)
        return KF_LIMIT_DISK;
    if (oom)
        return KF_LIMIT_MEMORY;
    /* without a cgroup, RLIMIT_DATA makes allocations fail: a process that failed after
     * using most of the limit is taken to have hit it */
    if (!cg->memory && o->mem_mib > 0 && failed && r->maxrss_kib * 4 >= o->mem_mib * 1024 * 3)
        return KF_LIMIT_MEMORY;
    if (pids_max && failed)
        return KF_LIMIT_PIDS;
    if (!cg->pids && o->pids > 0 && s->killed_time && s->tasks_at_kill > 0) {
        uint64_t cap = nproc_effective ? o->pids : s->pid_max_ok ? (uint64_t)plan->pid_max - 1 : 0;
        if (cap > 0 && (uint64_t)s->tasks_at_kill * 10 >= cap * 9)
            return KF_LIMIT_PIDS;
    }
    if (s->killed_time)
        return KF_LIMIT_TIME;
    if (r->signal == SIGXCPU ||
        (o->cpu_s > 0 && r->signal == SIGKILL && r->cpu_ms >= o->cpu_s * 1000))
        return KF_LIMIT_CPU;
    if (r->signal == SIGXFSZ)
        return KF_LIMIT_FSIZE;
    if (s->disk_over_at_end) /* the command ended on its own, holding more than its quota */
        return KF_LIMIT_DISK;
    return KF_LIMIT_NONE;
}

static void fill_status(struct kf_jail_result *r, const struct kf_super *s) {
    int st = s->got_exit ? s->status : s->init_status;
    if (!s->got_exit && (s->killed_time || s->killed_output || s->killed_disk || WIFSIGNALED(st))) {
        r->signal = WIFSIGNALED(st) ? WTERMSIG(st) : SIGKILL;
        r->exit_code = 128 + r->signal;
    } else if (WIFEXITED(st)) {
        r->exit_code = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        r->signal = WTERMSIG(st);
        r->exit_code = 128 + r->signal;
    }
    r->wall_ms = s->end_ms - s->start_ms;
    r->cpu_ms = (uint64_t)s->ru.ru_utime.tv_sec * 1000 + (uint64_t)s->ru.ru_utime.tv_usec / 1000 +
                (uint64_t)s->ru.ru_stime.tv_sec * 1000 + (uint64_t)s->ru.ru_stime.tv_usec / 1000;
    r->maxrss_kib = (uint64_t)s->ru.ru_maxrss;
}

/* Everything a run holds, released by cleanup(). */
struct jail_run {
    struct kf_cgroup cg;
    struct kf_plan plan;
    struct jail_pipes jp;
    struct kf_super sup;
    struct kf_disk disk; /* the disk quota's roots (none without a quota) */
    struct kf_record *rec;
    int pidfd;
    pid_t pid;
};

static void cleanup(struct jail_run *j) {
    close_pipes(&j->jp);
    if (j->pidfd >= 0)
        close(j->pidfd);
    if (j->rec != NULL) {
        kf_record_close(j->rec);
        free(j->rec);
    }
    free(j->sup.out.data);
    free(j->sup.err.data);
    kf_disk_close(&j->disk);
    kf_seccomp_free(&j->plan.filter);
    kf_plan_free(&j->plan);
    kf_cgroup_destroy(&j->cg);
}

/* Starts the jail's PID 1 and hands it its id maps and cgroup. Returns 0 or -1 (r filled). */
static int start(struct jail_run *j, const struct kf_jail_opts *o, struct kf_jail_result *r) {
    bool privileged = geteuid() == 0;
    uid_t host_uid = o->host_uid >= 0 ? (uid_t)o->host_uid : geteuid();
    gid_t host_gid = o->host_gid >= 0 ? (gid_t)o->host_gid : getegid();
    if (!privileged && (host_uid != geteuid() || host_gid != getegid()))
        return setup_failed(r, "%s", "--host-uid/--host-gid need root");
    if (open_pipes(&j->jp, o->record_path != NULL) != 0)
        return setup_failed(r, "pipes: %s", strerror(errno));

    struct kf_child_fds fds = {.msg_w = j->jp.msg[1],
                               .sync_r = j->jp.sync[0],
                               .out_w = j->jp.out[1],
                               .err_w = j->jp.err[1],
                               .stdin_fd = o->stdin_fd,
                               .record_sock = j->jp.rec[1]};
    int pidfd = -1;
    long pid = syscall(SYS_clone, (unsigned long)(JAIL_NS_FLAGS | CLONE_PIDFD | SIGCHLD), NULL,
                       &pidfd, NULL, 0);
    if (pid < 0)
        return setup_failed(r, "clone into new namespaces: %s (are user namespaces allowed?)",
                            strerror(errno));
    if (pid == 0)
        kf_child_main(&j->plan, &fds);
    j->pid = (pid_t)pid;
    j->pidfd = pidfd;
    close(j->jp.out[1]);
    close(j->jp.err[1]);
    close(j->jp.msg[1]);
    close(j->jp.sync[0]);
    j->jp.out[1] = j->jp.err[1] = j->jp.msg[1] = j->jp.sync[0] = -1;
    if (j->jp.rec[1] >= 0) {
        close(j->jp.rec[1]);
        j->jp.rec[1] = -1;
    }

    char what[256];
    if (write_id_maps(j->pid, host_uid, host_gid, privileged, what, sizeof(what)) != 0)
        goto fail;
    if (j->cg.active && kf_cgroup_attach(&j->cg, j->pid) != 0) {
        snprintf(what, sizeof(what), "cgroup attach: %s", strerror(errno));
        goto fail;
    }
    if (kf_write_all(j->jp.sync[1], "G", 1) != 0) {
        snprintf(what, sizeof(what), "start the jail: %s", strerror(errno));
        goto fail;
    }
    close_pair(j->jp.sync);
    return 0;
fail:
    kill(j->pid, SIGKILL);
    waitpid(j->pid, NULL, __WALL);
    close(j->pidfd);
    j->pidfd = -1;
    return setup_failed(r, "%s", what);
}

int kf_jail_run(const struct kf_jail_opts *o, struct kf_jail_result *r) {
    memset(r, 0, sizeof(*r));
    r->exit_code = KF_JAIL_EXIT_SETUP;
    r->memory_enforcement = "none";
    r->pids_enforcement = "none";
    struct jail_run *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return setup_failed(r, "%s", "out of memory");
    memset(&j->jp, -1, sizeof(j->jp));
    j->pidfd = -1;
    uint64_t start_ms = kf_now_ms();
    int rc = -1;

    kf_cgroup_create(&j->cg, o, r->notes, sizeof(r->notes));
    bool pids_rlimit = o->pids > 0 && !j->cg.pids;
    bool mem_rlimit = o->mem_mib > 0 && !j->cg.memory;
    uid_t host_uid = o->host_uid >= 0 ? (uid_t)o->host_uid : geteuid();
    bool nproc_effective = host_uid != 0; /* the kernel exempts host root from RLIMIT_NPROC */
    if (o->mem_mib > 0)
        r->memory_enforcement = j->cg.memory ? "cgroup" : "rlimit";
    if (o->pids > 0)
        r->pids_enforcement = j->cg.pids ? "cgroup" : nproc_effective ? "rlimit" : "pid_max";
    if (mem_rlimit)
        note_add(r, "memory: RLIMIT_DATA per process (heap and private mappings).");

    char err[256] = "";
    if (kf_plan_build(&j->plan, o, pids_rlimit, mem_rlimit, err, sizeof(err)) != 0) {
        setup_failed(r, "%s", err);
        goto out;
    }
    uint64_t disk_files = o->disk_files > 0 ? o->disk_files
                          : o->disk_mib > 0 ? KF_JAIL_DISK_FILES_DEFAULT
                                            : 0;
    bool disk = o->disk_mib > 0 || disk_files > 0;
    uint64_t disk_bytes = o->disk_mib > (UINT64_MAX >> 20) ? UINT64_MAX : o->disk_mib << 20;
    if (disk && kf_disk_open(&j->disk, &j->plan, disk_bytes, disk_files,
                             host_uid != 0 ? (int64_t)host_uid : -1, err, sizeof(err)) != 0) {
        setup_failed(r, "%s", err);
        goto out;
    }
    if (disk)
        kf_disk_baseline(&j->disk);
    j->plan.record = o->record_path != NULL;
    if (kf_seccomp_build(o->profile, j->plan.record, disk, &j->plan.filter, err, sizeof(err)) !=
        0) {
        setup_failed(r, "%s", err);
        goto out;
    }
    if (j->plan.record) {
        j->rec = malloc(sizeof(*j->rec));
        if (j->rec == NULL) {
            setup_failed(r, "%s", "out of memory");
            goto out;
        }
        kf_record_init(j->rec);
    }
    if (start(j, o, r) != 0)
        goto out;

    struct kf_super *s = &j->sup;
    s->pid = j->pid;
    s->pidfd = j->pidfd;
    s->out_fd = j->jp.out[0];
    s->err_fd = j->jp.err[0];
    s->msg_fd = j->jp.msg[0];
    s->record_sock = j->jp.rec[0];
    s->start_ms = start_ms;
    s->time_ms = o->time_ms;
    s->output_limit = o->output_limit_kib * 1024;
    s->cg = &j->cg;
    s->rec = j->rec;
    s->disk = disk ? &j->disk : NULL;
    if (kf_supervise(s) != 0) {
        setup_failed(r, "%s", "supervisor: poll or wait failed; the jail was killed");
        goto out;
    }
    fill_status(r, s);
    if (s->setup_error) {
        setup_failed(r, "setup: %s", s->error_text);
        goto out;
    }
    if (!s->ready && !s->killed_time && !s->killed_output && !s->killed_disk) {
        setup_failed(r, "%s", "setup: the jail's PID 1 ended before the command started");
        goto out;
    }
    r->limit = classify(o, s, &j->cg, &j->plan, r, nproc_effective);
    if (disk) {
        r->disk_measured = true;
        r->disk_kib = (j->disk.peak_bytes + 1023) / 1024;
        r->disk_files = j->disk.peak_files;
        if (r->limit == KF_LIMIT_DISK)
            r->disk_over = j->disk.over;
        if (r->disk_over == KF_DISK_UNMEASURABLE)
            note_add(r, "disk: a directory in the writable paths could not be read, or lay "
                        "deeper than the walk goes: counted as over the quota.");
    }
    if (pids_rlimit && !nproc_effective && !s->pid_max_ok)
        r->pids_enforcement = "none";
    if (pids_rlimit && !nproc_effective)
        note_add(r, s->pid_max_ok ? "pids: host root is exempt from RLIMIT_NPROC; the PID "
                                    "namespace's pid_max caps the jail instead."
                                  : "pids: host root is exempt from RLIMIT_NPROC and this "
                                    "kernel has no per-namespace pid_max: no pids limit.");
    else if (pids_rlimit)
        note_add(r, "pids: RLIMIT_NPROC in the jail's user namespace.");
    r->output_truncated = s->truncated;
    r->out = s->out.data ? s->out.data : calloc(1, 1);
    r->err = s->err.data ? s->err.data : calloc(1, 1);
    r->out_len = s->out.len;
    r->err_len = s->err.len;
    s->out.data = s->err.data = NULL;
    if (j->rec != NULL && kf_record_write(j->rec, o->record_path) != 0) {
        setup_failed(r, "record: cannot write %s", o->record_path);
        goto out;
    }
    rc = 0;
out:
    if (r->setup_failed)
        r->wall_ms = kf_now_ms() - start_ms;
    cleanup(j);
    free(j);
    return rc;
}
