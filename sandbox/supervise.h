/*
 * supervise.h: the supervisor's loop, outside the jail. It reads the command's stdout and
 * stderr as they come (so the command never blocks on a full pipe) up to the output limit,
 * reads PID 1's messages, enforces the wall clock and the disk quota, serves the record mode's
 * listener, and returns once the jail's PID 1, and with it the whole PID namespace, is gone.
 */
#ifndef KFORGE_SANDBOX_SUPERVISE_H
#define KFORGE_SANDBOX_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "cgroup.h"
#include "disk.h"
#include "record.h"

struct kf_buf {
    char *data; /* NUL-terminated, malloc'd; owned by whoever owns the kf_buf */
    size_t len, cap;
};

struct kf_super {
    /* in */
    pid_t pid;  /* the jail's PID 1 */
    int pidfd;  /* its pidfd */
    int out_fd; /* read ends, non-blocking */
    int err_fd;
    int msg_fd;      /* kf_msg packets */
    int record_sock; /* record mode: where the listener arrives, else -1 */
    uint64_t start_ms;
    uint64_t time_ms;      /* wall clock, 0 for none */
    uint64_t output_limit; /* bytes, 0 for none */
    const struct kf_cgroup *cg;
    struct kf_record *rec; /* record mode, else NULL */
    struct kf_disk *disk;  /* the disk quota, measured every KF_DISK_INTERVAL_MS, else NULL */

    /* out */
    struct kf_buf out, err;
    bool truncated;
    bool killed_time, killed_output, killed_disk;
    bool disk_over_at_end; /* the walk after the command ended found the quota passed */
    bool ready;            /* PID 1 built the view and started the command */
    bool pid_max_ok;
    bool got_exit; /* the command's status is known */
    int status;    /* the command's wait status */
    bool setup_error;
    int errnum;
    char error_text[200];
    int init_status;  /* PID 1's wait status */
    struct rusage ru; /* PID 1 and all it reaped */
    uint64_t end_ms;
    int tasks_at_kill;     /* processes in the jail when the wall clock fired, -1 unknown */
    bool supervise_failed; /* poll or wait failed: the jail was killed */
};

/* Runs the loop; fills the out fields. The caller owns s->out.data and s->err.data
 * afterwards. Returns 0, or -1 when the supervisor itself failed (it then killed the jail). */
int kf_supervise(struct kf_super *s);

#endif
