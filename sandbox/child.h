/*
 * child.h: the jail's side of the clone(): PID 1 of the new namespaces, which builds the
 * filesystem view and then starts and reaps the command. Nothing here allocates memory.
 */
#ifndef KFORGE_SANDBOX_CHILD_H
#define KFORGE_SANDBOX_CHILD_H

#include <sys/resource.h>

#include "plan.h"

/* Messages from the jail's PID 1 to the supervisor, one write() each (< PIPE_BUF). */
enum kf_msg_type {
    KF_MSG_ERROR = 1, /* setup failed: errnum, text */
    KF_MSG_READY,     /* the view is built, the command is starting: pid_max_ok */
    KF_MSG_EXIT,      /* the command ended: status (as from wait4), ru */
};

struct kf_msg {
    int type;
    int errnum;
    int status;
    int pid_max_ok;
    struct rusage ru;
    char text[200];
};

struct kf_child_fds {
    int msg_w;       /* kf_msg to the supervisor */
    int sync_r;      /* one byte from the supervisor once the id maps are written */
    int out_w;       /* the command's stdout */
    int err_w;       /* the command's stderr */
    int stdin_fd;    /* the command's stdin, -1 for /dev/null */
    int record_sock; /* record mode: a socket to pass the seccomp listener on, else -1 */
};

/* Runs in the child of clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|...): waits for the
 * supervisor, builds the view, starts plan->argv and reaps until it ends. Never returns. */
_Noreturn void kf_child_main(const struct kf_plan *plan, const struct kf_child_fds *fds);

/* Sends a KF_MSG_ERROR "what: strerror(errnum)" on fd (best effort). */
void kf_child_report_error(int fd, const char *what, int errnum);

#endif
