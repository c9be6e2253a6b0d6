/*
 * plan.h: everything the jail's child needs, computed in the parent before clone().
 *
 * The child runs between clone() and execve() in a copy of a possibly multi-threaded
 * caller, so it must not allocate memory: the parent resolves paths, builds the mount list,
 * the environment, the rlimits and the seccomp program here, and the child only reads them.
 */
#ifndef KFORGE_SANDBOX_PLAN_H
#define KFORGE_SANDBOX_PLAN_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>

#include "jail.h"

enum kf_mnt_kind {
    KF_MNT_BIND,    /* bind the host path src (recursively) at dst */
    KF_MNT_SYMLINK, /* a symbolic link dst -> data */
    KF_MNT_TMPFS,   /* a tmpfs at dst with the mount options data */
    KF_MNT_PROC,    /* a fresh procfs of the jail's PID namespace */
    KF_MNT_SYSFS,   /* a fresh sysfs, or the host's /sys bound when that is refused */
    KF_MNT_FILE,    /* a new file at dst holding data, bound over what is there */
    KF_MNT_MASK,    /* hide dst, when it exists, under an empty file or directory */
};

#define KF_MNT_F_RO 0x1u       /* read-only */
#define KF_MNT_F_OPTIONAL 0x2u /* skip when the source is missing */
#define KF_MNT_F_DEV 0x4u      /* a device node: keep device access (no nodev) */
#define KF_MNT_F_FILE 0x8u     /* the source is not a directory */
#define KF_MNT_F_NOEXEC 0x10u  /* noexec */
#define KF_MNT_F_USER                                                                              \
    0x20u /* a path the caller named: resolved by realpath() in the parent,                        \
             so the child refuses it if it has become a symlink since */

struct kf_mnt_op {
    enum kf_mnt_kind kind;
    unsigned flags;
    const char *src;   /* host path (KF_MNT_BIND), or NULL */
    const char *dst;   /* absolute path inside the jail */
    const char *stage; /* the same path under the staging directory (dst prefixed) */
    const char *data;  /* tmpfs options, symlink target or file content, or NULL */
};

#define KF_PLAN_MAX_RLIMITS 10

struct kf_plan_rlimit {
    int resource;
    struct rlimit lim;
};

struct kf_plan {
    enum kf_jail_profile profile;
    const char *staging;   /* host directory the new root is assembled on */
    struct kf_mnt_op *ops; /* in mount order: parents before children */
    size_t n_ops;
    const char *workdir;  /* the command's cwd inside the jail */
    char **argv;          /* NULL-terminated */
    char **envp;          /* NULL-terminated */
    const char *path_env; /* the jail's PATH, for looking argv[0] up */
    struct sock_fprog filter;
    bool record; /* pass a seccomp listener to the supervisor */
    struct kf_plan_rlimit rlimits[KF_PLAN_MAX_RLIMITS];
    size_t n_rlimits;
    bool drop_groups; /* setgroups(0) is allowed (the parent is root) */
    int cap_last_cap;
    int pid_max; /* > 0: write it to the namespace's pid_max (pids fallback) */
    const char *hostname;
    void **owned; /* everything above that the plan allocated, for kf_plan_free */
    size_t n_owned, cap_owned;
    size_t cap_ops;
};

/* Builds plan from opts. profile filters, limits and paths are checked; on failure returns -1
 * with a one-line reason in err. pids_rlimit says whether the pids limit goes to
 * RLIMIT_NPROC (no cgroup), mem_rlimit likewise for RLIMIT_DATA.
 * The plan owns all it points to except plan->filter (set by the caller); free it with
 * kf_plan_free(). */
int kf_plan_build(struct kf_plan *plan, const struct kf_jail_opts *opts, bool pids_rlimit,
                  bool mem_rlimit, char *err, size_t errlen);

/* Frees what kf_plan_build allocated (not plan->filter). */
void kf_plan_free(struct kf_plan *plan);

#endif
