/*
 * mounts.h: builds the jail's filesystem view from a plan and pivots into it. Runs in the
 * child, after clone() into new user and mount namespaces; allocates nothing.
 */
#ifndef KFORGE_SANDBOX_MOUNTS_H
#define KFORGE_SANDBOX_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>

#include "plan.h"

/* Makes the mount tree private, assembles the new root on plan->staging, pivots into it,
 * makes it read-only and changes to plan->workdir. On failure returns -1, with what failed
 * in what (size n) and errno set. *pid_max_ok says whether plan->pid_max was applied. */
int kf_mounts_apply(const struct kf_plan *plan, char *what, size_t n, bool *pid_max_ok);

#endif
