/*
 * child.c: PID 1 of the jail, and the command process it forks.
 *
 * PID 1 waits for the supervisor to write the id maps, names the host, brings up loopback,
 * builds the view (mounts.c), then forks the command and reaps every process of the
 * namespace until the command ends. When PID 1 exits the kernel kills whatever is left in
 * the PID namespace, so no process of the jail outlives it.
 *
 * The command process takes its stdio, becomes the inside user, sets the rlimits, drops every
 * capability, sets no_new_privs, loads the seccomp filter (passing the listener to the
 * supervisor in record mode) and executes argv[0], looked up in the jail's PATH.
 *
 * Runs in a copy of a possibly multi-threaded caller: no malloc, no stdio, no locks.
 */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mounts.h"
#include "util.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static void send_msg(int fd, const struct kf_msg *m) {
    (void)kf_write_all(fd, m, sizeof(*m));
}

void kf_child_report_error(int fd, const char *what, int errnum) {
    struct kf_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KF_MSG_ERROR;
    m.errnum = errnum;
    kf_strlcpy(m.text, what, sizeof(m.text));
    kf_strlcat(m.text, ": ", sizeof(m.text));
    kf_strlcat(m.text, strerrordesc_np(errnum) ? strerrordesc_np(errnum) : "error", sizeof(m.text));
    send_msg(fd, &m);
}

static _Noreturn void die(int msg_fd, const char *what, int errnum) {
    kf_child_report_error(msg_fd, what, errnum);
    _exit(KF_JAIL_EXIT_SETUP);
}

/* Signal dispositions and the mask survive fork and execve: start from the defaults. */
static void reset_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        (void)sigaction(s, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static void loopback_up(void) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    kf_strlcpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
    if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        (void)ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    close(s);
}

static int close_from(unsigned first) {
    if (syscall(SYS_close_range, first, ~0u, 0) == 0)
        return 0;
    for (int fd = (int)first; fd < 65536; fd++)
        close(fd);
    return 0;
}

/* Closes every fd but the n in keep: a multi-threaded caller may have had other jails'
 * pipes open when it cloned this process. */
static void close_except(const int *keep, size_t n) {
    int sorted[8];
    size_t m = 0;
    for (size_t i = 0; i < n && m < 8; i++)
        if (keep[i] >= 0)
            sorted[m++] = keep[i];
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    unsigned next = 0;
    for (size_t i = 0; i < m; i++) {
        if ((unsigned)sorted[i] > next)
            (void)syscall(SYS_close_range, next, (unsigned)sorted[i] - 1, 0);
        next = (unsigned)sorted[i] + 1;
    }
    close_from(next);
}

static int drop_caps(const struct kf_plan *plan) {
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return -1;
    for (int c = 0; c <= plan->cap_last_cap; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
            return -1;
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    return (int)syscall(SYS_capset, &hdr, data);
}

static int send_fd(int sock, int fd) {
    char byte = 'L';
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* execve() argv[0], looked up in the jail's PATH when it has no '/'. Returns errno. */
static int exec_command(const struct kf_plan *plan) {
    const char *name = plan->argv[0];
    if (strchr(name, '/') != NULL) {
        execve(name, plan->argv, plan->envp);
        return errno;
    }
    int err = ENOENT;
    const char *p = plan->path_env;
    while (*p) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char path[PATH_MAX];
        if (len > 0 && len + 1 + strlen(name) < sizeof(path)) {
            memcpy(path, p, len);
            path[len] = '/';
            kf_strlcpy(path + len + 1, name, sizeof(path) - len - 1);
            execve(path, plan->argv, plan->envp);
            if (errno == EACCES || (errno != ENOENT && errno != ENOTDIR))
                err = errno;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    return err;
}

static void exec_failed(const char *name, int err) {
    char line[PATH_MAX + 128] = "kforge-jail: ";
    kf_strlcat(line, name, sizeof(line));
    kf_strlcat(line, ": ", sizeof(line));
    kf_strlcat(line, strerrordesc_np(err) ? strerrordesc_np(err) : "cannot execute", sizeof(line));
    kf_strlcat(line, "\n", sizeof(line));
    (void)kf_write_all(2, line, strlen(line));
}

/* The command process: never returns. The fds: 0-2 stdio, 3 the record socket (or none),
 * 4 the message pipe (close-on-exec). */
static _Noreturn void command_main(const struct kf_plan *plan, const struct kf_child_fds *f) {
    int msg = f->msg_w;
    if (setsid() < 0)
        die(msg, "setsid", errno);
    /* move every fd we keep above the numbers they go to, then into place */
    int in = f->stdin_fd >= 0 ? f->stdin_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
    int src[4] = {in, f->out_w, f->err_w, f->record_sock}, high[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++)
        if (src[i] >= 0 && (high[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 10)) < 0)
            die(msg, "stdio", errno);
    if (high[0] < 0 || high[1] < 0 || high[2] < 0)
        die(msg, "stdio", EBADF);
    int msg_high = fcntl(msg, F_DUPFD_CLOEXEC, 10);
    if (msg_high < 0)
        die(msg, "message pipe", errno);
    msg = msg_high;
    for (int i = 0; i < 3; i++)
        if (dup2(high[i], i) < 0)
            die(msg, "stdio", errno);
    int keep = 3;
    if (high[3] >= 0) {
        if (dup3(high[3], 3, O_CLOEXEC) < 0)
            die(msg, "record socket", errno);
        keep = 4;
    }
    if (dup3(msg_high, keep, O_CLOEXEC) < 0)
        die(msg, "message pipe", errno);
    msg = keep;
    close_from((unsigned)keep + 1);

    /* raw syscalls: glibc's wrappers would signal the caller's other threads, which do not
     * exist in this copy, and wait for them forever */
    if (plan->drop_groups)
        (void)syscall(SYS_setgroups, 0, NULL);
    if (syscall(SYS_setresgid, KF_JAIL_INSIDE_GID, KF_JAIL_INSIDE_GID, KF_JAIL_INSIDE_GID) != 0)
        die(msg, "setresgid", errno);
    if (syscall(SYS_setresuid, KF_JAIL_INSIDE_UID, KF_JAIL_INSIDE_UID, KF_JAIL_INSIDE_UID) != 0)
        die(msg, "setresuid", errno);
    for (size_t i = 0; i < plan->n_rlimits; i++)
        if (setrlimit((__rlimit_resource_t)plan->rlimits[i].resource, &plan->rlimits[i].lim))
            die(msg, "setrlimit", errno);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        die(msg, "no_new_privs", errno);
    if (drop_caps(plan) != 0)
        die(msg, "drop capabilities", errno);
    unsigned flags = plan->record ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
    long lfd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &plan->filter);
    if (lfd < 0)
        die(msg, "seccomp", errno);
    if (plan->record) {
        if (send_fd(3, (int)lfd) != 0)
            die(msg, "pass the seccomp listener", errno);
        close((int)lfd);
        close(3);
    }
    int err = exec_command(plan);
    exec_failed(plan->argv[0], err);
    _exit(err == ENOENT ? 127 : 126);
}

_Noreturn void kf_child_main(const struct kf_plan *plan, const struct kf_child_fds *f) {
    int msg = f->msg_w;
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    reset_signals();
    const int keep[] = {f->msg_w, f->sync_r, f->out_w, f->err_w, f->stdin_fd, f->record_sock};
    close_except(keep, sizeof(keep) / sizeof(keep[0]));
    char go = 0;
    ssize_t r;
    do {
        r = read(f->sync_r, &go, 1);
    } while (r < 0 && errno == EINTR);
    if (r != 1 || go != 'G')
        _exit(KF_JAIL_EXIT_SETUP); /* the supervisor gave up or died */
    close(f->sync_r);

    if (sethostname(plan->hostname, strlen(plan->hostname)) != 0)
        die(msg, "sethostname", errno);
    loopback_up();
    char what[160];
    bool pid_max_ok = false;
    if (kf_mounts_apply(plan, what, sizeof(what), &pid_max_ok) != 0)
        die(msg, what, errno);
    /* PID 1 stays dumpable, so that the supervisor can count the jail's processes through
     * /proc/PID/root; the command cannot touch it: PID 1 holds capabilities it lacks */

    struct kf_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KF_MSG_READY;
    m.pid_max_ok = pid_max_ok;
    send_msg(msg, &m);

    /* a raw clone: glibc's fork() would run the caller's atfork handlers and take locks */
    long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid < 0)
        die(msg, "fork the command", errno);
    if (pid == 0)
        command_main(plan, f);

    close(f->out_w);
    close(f->err_w);
    if (f->record_sock >= 0)
        close(f->record_sock);
    for (;;) {
        int status;
        struct rusage ru;
        pid_t w = wait4(-1, &status, __WALL, &ru);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            _exit(0);
        if (w == pid) {
            memset(&m, 0, sizeof(m));
            m.type = KF_MSG_EXIT;
            m.status = status;
            m.ru = ru;
            send_msg(msg, &m);
            _exit(0); /* the kernel now kills what is left of the namespace */
        }
    }
}
