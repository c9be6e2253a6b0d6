/*
 * jail.h: kforge-jail as a library, for the worker.
 *
 * kf_jail_run() runs one command in a fresh jail (user, mount, PID, network, IPC, UTS and
 * cgroup namespaces; a minimal read-only filesystem view; no capabilities; a libseccomp
 * allow-list per profile; rlimits and, where the host delegates one, a cgroup v2) and waits
 * for it. It captures standard output and error up to a limit and says which limit, if any,
 * stopped the command. The binary kforge-jail (main.c) is a thin wrapper over it.
 *
 * Thread safety: kf_jail_run() may be called from several threads at once. It changes no
 * process-wide state of the caller (signal dispositions, credentials, cwd, rlimits).
 */
#ifndef KFORGE_SANDBOX_JAIL_H
#define KFORGE_SANDBOX_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status of kforge-jail when the jail itself failed (could not set up, bad arguments).
 * A command may exit with 125 too: the report's "error" field tells the two apart. */
#define KF_JAIL_EXIT_SETUP 125

/* The user and group that the command sees itself as, inside the jail. */
#define KF_JAIL_INSIDE_UID 1000
#define KF_JAIL_INSIDE_GID 1000

enum kf_jail_profile {
    KF_JAIL_BUILD, /* nvcc, g++: toolchains readable, no GPU, no network */
    KF_JAIL_SHELL, /* the agent's bash tool: no GPU, no network */
    KF_JAIL_RUN,   /* a candidate's runner: GPU N's device nodes only, no network */
};

enum kf_jail_limit {
    KF_LIMIT_NONE = 0,
    KF_LIMIT_TIME,   /* wall clock */
    KF_LIMIT_MEMORY, /* cgroup memory.max (OOM kill) or, without a cgroup, RLIMIT_DATA */
    KF_LIMIT_PIDS,   /* cgroup pids.max, or RLIMIT_NPROC / the PID namespace's pid_max */
    KF_LIMIT_OUTPUT, /* captured output passed its limit: the jail killed the command */
    KF_LIMIT_CPU,    /* RLIMIT_CPU (SIGXCPU, then SIGKILL) */
    KF_LIMIT_FSIZE,  /* RLIMIT_FSIZE (SIGXFSZ) */
    KF_LIMIT_DISK,   /* the writable paths held more than the disk quota: the jail killed it */
};

/* Entries the writable paths may hold when a disk quota is set without disk_files. */
#define KF_JAIL_DISK_FILES_DEFAULT 100000

/* Why the disk quota fired (kf_jail_result.disk_over). */
enum kf_jail_disk_over {
    KF_DISK_UNDER = 0,    /* it did not */
    KF_DISK_OVER_BYTES,   /* more than disk_mib allocated */
    KF_DISK_OVER_FILES,   /* more than disk_files entries */
    KF_DISK_UNMEASURABLE, /* a directory the supervisor cannot read, or too deep to walk */
};

struct kf_jail_opts {
    enum kf_jail_profile profile;
    int gpu;                     /* GPU index (profile run only), -1 for none */
    const char *workdir;         /* required: writable, and the command's cwd */
    const char *const *ro_paths; /* extra paths mounted read-only at the same place */
    size_t n_ro;
    const char *const *rw_paths; /* extra paths mounted read-write at the same place */
    size_t n_rw;
    const char *const *argv; /* required, NULL-terminated; argv[0] is looked up in PATH */
    const char *const *env;  /* extra NAME=VALUE entries for the command, or NULL */
    size_t n_env;
    uint64_t time_ms;          /* wall-clock limit, 0 for none */
    uint64_t cpu_s;            /* CPU-time limit per process (RLIMIT_CPU), 0 for none */
    uint64_t mem_mib;          /* memory limit, 0 for none */
    uint64_t pids;             /* process (and thread) limit, 0 for none */
    uint64_t output_limit_kib; /* stdout + stderr captured, 0 for no limit */
    uint64_t fsize_mib;        /* largest file the command may write (RLIMIT_FSIZE), 0: none */
    uint64_t disk_mib;         /* the most the workdir and the rw paths may hold, 0: no quota */
    uint64_t disk_files;       /* the most entries they may hold, 0: KF_JAIL_DISK_FILES_DEFAULT
                                  when disk_mib is set, else none */
    uint64_t nofile;           /* open files (RLIMIT_NOFILE), 0: keep the caller's */
    uint64_t tmp_mib;          /* size of the tmpfs at /tmp */
    uint64_t shm_mib;          /* size of the tmpfs at /dev/shm */
    double cpus;               /* cgroup cpu.max in CPUs, 0 for none */
    int stdin_fd;              /* the command's stdin, or -1 for /dev/null; not closed */
    int64_t host_uid;          /* host uid the command runs as, -1: the caller's (root only) */
    int64_t host_gid;          /* likewise for the group */
    const char *cgroup_parent; /* cgroup v2 directory to create the jail's cgroup in, NULL:
                                  the caller's own cgroup */
    const char *record_path;   /* record mode: syscalls outside the allow-list are let through
                                  and written to this file (see README.md) */
    bool no_auto_python;       /* do not add the interpreter's prefix read-only (see README) */
};

struct kf_jail_result {
    int exit_code; /* the command's exit status, 128+signal, or KF_JAIL_EXIT_SETUP */
    int signal;    /* the signal that ended the command, 0 if it exited */
    enum kf_jail_limit limit;
    bool setup_failed; /* the jail could not set up; error says why */
    bool output_truncated;
    uint64_t wall_ms;    /* from the start of setup to the end of the whole tree */
    uint64_t cpu_ms;     /* user + system CPU time of the command and its descendants */
    uint64_t maxrss_kib; /* largest resident set of one process of the tree */
    char *out;           /* captured stdout, NUL-terminated; owned by the result */
    size_t out_len;
    char *err; /* captured stderr, NUL-terminated; owned by the result */
    size_t err_len;
    char error[256]; /* one line: why the jail failed, "" when it did not */
    char notes[512]; /* how limits were enforced on this host, e.g. no delegated cgroup */
    const char *memory_enforcement; /* "cgroup", "rlimit" or "none" (static strings) */
    const char *pids_enforcement;   /* "cgroup", "rlimit", "pid_max" or "none" */
    bool disk_measured;             /* a disk quota was set: the fields below mean something */
    uint64_t disk_kib;   /* the most the writable paths held at one walk (a walk stops counting
                            once past the quota, so on a disk kill this is a lower bound) */
    uint64_t disk_files; /* likewise, the most entries */
    enum kf_jail_disk_over disk_over; /* why limit is KF_LIMIT_DISK */
};

/* Fills opts with the defaults (profile shell, no GPU, limits as README.md lists them).
 * The caller then sets workdir and argv at least. */
void kf_jail_opts_init(struct kf_jail_opts *opts);

/* Runs opts->argv in a jail and waits for the whole process tree to end.
 * Returns 0 when the command ran (whatever its outcome: see result->exit_code, ->signal and
 * ->limit), -1 when the jail failed (result->setup_failed, result->error).
 * result is always filled; the caller owns it and frees it with kf_jail_result_free(). */
int kf_jail_run(const struct kf_jail_opts *opts, struct kf_jail_result *result);

/* Frees the buffers that result owns; result may be reused afterwards. */
void kf_jail_result_free(struct kf_jail_result *result);

/* "time", "memory", ... for a limit, NULL for KF_LIMIT_NONE. Static strings. */
const char *kf_jail_limit_name(enum kf_jail_limit limit);

/* "build", "shell", "run". Static strings. */
const char *kf_jail_profile_name(enum kf_jail_profile profile);

/* Parses "build", "shell" or "run"; returns 0, or -1 for an unknown name. */
int kf_jail_profile_parse(const char *name, enum kf_jail_profile *profile);

/* Writes the one-line JSON report of result to path (created or truncated).
 * Returns 0, or -1 with errno set. */
int kf_jail_write_report(const char *path, const struct kf_jail_result *result);

#endif
