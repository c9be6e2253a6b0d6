/*
 * disk.h: the disk quota, measured from outside the jail. The supervisor walks the writable
 * host paths (the workdir and the --rw paths) at an interval, summing what they allocate and
 * counting their entries, plus the files that the jail's processes hold open or mapped after
 * unlinking them; it kills the jail once either limit is passed (see README.md, Disk quota).
 */
#ifndef KFORGE_SANDBOX_DISK_H
#define KFORGE_SANDBOX_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail.h"
#include "plan.h"

#define KF_DISK_INTERVAL_MS 100 /* between two walks, at most (unless a walk is slow) */
#define KF_DISK_PROBE_MS 10     /* between two looks at the filesystems' free space */
#define KF_DISK_MAX_DEPTH 128   /* a deeper tree cannot be measured: it counts as over */
#define KF_DISK_MAX_FDS 65536   /* open files and mappings looked at per walk, at most */

struct kf_disk_root {
    int fd;    /* O_PATH, not following symlinks; owned */
    dev_t dev; /* its filesystem: the walk does not leave it */
    bool dir;
};

struct kf_disk {
    struct kf_disk_root *roots; /* owned; none of them inside another on the same device */
    size_t n_roots;
    uint64_t max_bytes; /* 0: no limit on bytes */
    uint64_t max_files; /* 0: no limit on entries */
    int64_t owner;      /* only unlinked files of this host uid count, -1: any owner */
    /* across measurements */
    uint64_t peak_bytes, peak_files;
    enum kf_jail_disk_over over;     /* of the last measurement */
    uint64_t walk_ms;                /* how long the last measurement took */
    uint64_t last_bytes, last_files; /* what the last measurement counted */
    uint64_t fs_bytes, fs_files;     /* in use on the roots' filesystems when it began */
};

/* Prepares a quota over the plan's writable paths (its read-write binds of user paths: the
 * workdir and the --rw paths), opening each one now. max_bytes and max_files as in
 * struct kf_disk; owner: the host uid the command runs as, or -1 when any uid may own its
 * files (host root). Returns 0, or -1 with a one-line reason in err. Free with
 * kf_disk_close() whatever the result. */
int kf_disk_open(struct kf_disk *d, const struct kf_plan *plan, uint64_t max_bytes,
                 uint64_t max_files, int64_t owner, char *err, size_t errlen);

/* Measures once: walks every root (not following symlinks, not leaving its filesystem) and,
 * when jail_pid > 0, the unlinked files that the processes of jail_pid's PID namespace hold
 * open or mapped (read through its /proc: only once the jail's view is built). Stops as soon
 * as a limit is passed. Updates the peaks, d->over and d->walk_ms; returns d->over. */
enum kf_jail_disk_over kf_disk_measure(struct kf_disk *d, pid_t jail_pid);

/* Measures what the writable paths hold before the command starts and, where that is over a
 * limit, raises the limit to it: a folder already over its quota (an agent's workspace after a
 * command that was killed for it) may shrink but not grow. Leaves the limits as they were when
 * the folder cannot be measured (too many entries, unreadable). */
void kf_disk_baseline(struct kf_disk *d);

/* Whether the roots' filesystems, as a whole (statfs: anyone's writes), took on more blocks
 * or inodes since the last measurement began than the quota had left then: a cheap sign that
 * the next walk should not wait for its interval. */
bool kf_disk_grew(const struct kf_disk *d);

/* Closes the roots. */
void kf_disk_close(struct kf_disk *d);

#endif
