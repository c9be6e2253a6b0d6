/*
 * cgroup.h: a cgroup v2 per jail, where the host delegates one: memory.max (with swap off
 * and the whole group killed on OOM), pids.max and cpu.max. Where it does not, the caller
 * falls back to rlimits and says so in the result's notes.
 */
#ifndef KFORGE_SANDBOX_CGROUP_H
#define KFORGE_SANDBOX_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "jail.h"

struct kf_cgroup {
    bool active; /* a cgroup was made: path */
    bool memory; /* memory.max is set in it */
    bool pids;   /* pids.max is set in it */
    bool cpu;    /* cpu.max is set in it */
    char path[PATH_MAX];
};

/* Makes a cgroup for one jail under opts->cgroup_parent (or the caller's cgroup) with the
 * limits of opts that a controller can enforce. Never fails: when a limit cannot go to a
 * cgroup, the flag stays false and a sentence saying why is appended to note (size n). */
void kf_cgroup_create(struct kf_cgroup *cg, const struct kf_jail_opts *opts, char *note, size_t n);

/* Moves pid into the cgroup. Returns 0 or -1 with errno set. */
int kf_cgroup_attach(const struct kf_cgroup *cg, pid_t pid);

/* Reads the events: *oom when the OOM killer killed in it, *pids_max when a fork was refused
 * at pids.max. */
void kf_cgroup_events(const struct kf_cgroup *cg, bool *oom, bool *pids_max);

/* Kills every process in the cgroup (cgroup.kill, Linux 5.14+); best effort. */
void kf_cgroup_kill(const struct kf_cgroup *cg);

/* Removes the cgroup (it must be empty: call after the jail's PID 1 was reaped). */
void kf_cgroup_destroy(struct kf_cgroup *cg);

#endif
