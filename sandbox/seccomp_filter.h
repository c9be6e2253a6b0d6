/*
 * seccomp_filter.h: the libseccomp allow-list of each profile, compiled to a BPF program in
 * the parent (so that the child only loads it). The lists live in sandbox/syscalls/, one file per
 * profile.
 */
#ifndef KFORGE_SANDBOX_SECCOMP_FILTER_H
#define KFORGE_SANDBOX_SECCOMP_FILTER_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

#include "jail.h"

/* Builds the filter of profile: the allow-list, argument checks (clone without namespace
 * flags, socket families, personality), clone3 answering ENOSYS, anything else EPERM.
 * record: anything else is passed to a user-notification listener instead (see README.md).
 * disk_quota: inotify_init and inotify_init1 answer ENOSYS (see seccomp_filter.c).
 * On success fills prog (prog->filter is malloc'd, free it with kf_seccomp_free) and
 * returns 0; otherwise -1 with a reason in err. */
int kf_seccomp_build(enum kf_jail_profile profile, bool record, bool disk_quota,
                     struct sock_fprog *prog, char *err, size_t errlen);

/* Frees prog->filter. */
void kf_seccomp_free(struct sock_fprog *prog);

/* The syscalls that the record mode reports with their first argument (socket's family,
 * clone's flags, personality's persona), since the filter checks it. */
bool kf_seccomp_arg_checked(int nr);

#endif
