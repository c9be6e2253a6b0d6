/* supervise.c: the poll loop over the jail's pipes, PID 1's pidfd, the wall clock and the
 * disk quota's walks. */
#include "supervise.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "util.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static int buf_append(struct kf_buf *b, const char *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (d == NULL)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static void kill_jail(struct kf_super *s) {
    if (syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0) != 0)
        kill(s->pid, SIGKILL);
    if (s->cg != NULL)
        kf_cgroup_kill(s->cg);
}

/* Processes in the jail, read from its own /proc; -1 when unknown. */
static int count_tasks(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/root/proc", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
            n++;
    closedir(d);
    return n;
}

/* Reads what is there on fd (one of the command's streams). Returns 1 at EOF, else 0. */
static int read_stream(struct kf_super *s, int fd, struct kf_buf *b) {
    char chunk[65536];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0)
            return errno == EINTR ? 0 : (errno == EAGAIN ? 0 : 1);
        if (r == 0)
            return 1;
        size_t n = (size_t)r;
        size_t total = s->out.len + s->err.len;
        if (s->output_limit > 0 && total + n > s->output_limit) {
            n = s->output_limit > total ? (size_t)(s->output_limit - total) : 0;
            if (!s->truncated) {
                s->truncated = true;
                s->killed_output = true;
                kill_jail(s);
            }
        }
        if (n > 0 && buf_append(b, chunk, n) != 0 && !s->truncated) {
            s->truncated = true; /* out of memory: keep what we have, stop the flood */
            s->killed_output = true;
            kill_jail(s);
        }
    }
}

/* Reads PID 1's messages. Returns 1 at EOF, else 0. */
static int read_msgs(struct kf_super *s) {
    for (;;) {
        struct kf_msg m;
        ssize_t r = read(s->msg_fd, &m, sizeof(m));
        if (r < 0)
            return errno == EINTR || errno == EAGAIN ? 0 : 1;
        if (r == 0)
            return 1;
        if ((size_t)r != sizeof(m))
            continue;
        m.text[sizeof(m.text) - 1] = '\0';
        switch (m.type) {
        case KF_MSG_ERROR:
            if (!s->setup_error) {
                s->setup_error = true;
                s->errnum = m.errnum;
                kf_strlcpy(s->error_text, m.text, sizeof(s->error_text));
            }
            break;
        case KF_MSG_READY:
            s->ready = true;
            s->pid_max_ok = m.pid_max_ok != 0;
            break;
        case KF_MSG_EXIT:
            s->got_exit = true;
            s->status = m.status;
            break;
        default:
            break;
        }
    }
}

struct disk_clock {
    uint64_t next; /* the next walk, at the latest */
    uint64_t last; /* when the last walk ended */
};

/* Measures the disk quota when its time has come (once nothing else killed the jail), kills
 * the jail when it is passed, and returns the milliseconds until it wants to look again (-1:
 * never). A walk comes KF_DISK_INTERVAL_MS after the last one ended, or twice the walk's own
 * time when that is longer, so that a large tree does not keep the supervisor busy; and
 * sooner (but no sooner than a walk's time after the last) when the filesystems' free space
 * says that the quota may have been passed. */
static int disk_check(struct kf_super *s, struct disk_clock *c) {
    if (s->disk == NULL || s->killed_disk || s->killed_time || s->killed_output)
        return -1;
    uint64_t now = kf_now_ms();
    bool due = now >= c->next;
    if (!due && now >= c->last + s->disk->walk_ms)
        due = kf_disk_grew(s->disk);
    if (due) {
        /* the jail's /proc is read only once PID 1 has built the view: before, /proc/PID/root
         * is the host's own root */
        if (kf_disk_measure(s->disk, s->ready ? s->pid : -1) != KF_DISK_UNDER) {
            s->killed_disk = true;
            kill_jail(s);
            return -1;
        }
        uint64_t wait = s->disk->walk_ms * 2;
        now = c->last = kf_now_ms();
        c->next = now + (wait > KF_DISK_INTERVAL_MS ? wait : KF_DISK_INTERVAL_MS);
    }
    uint64_t left = c->next - now;
    return (int)(left < KF_DISK_PROBE_MS ? left : KF_DISK_PROBE_MS);
}

enum { SP_OUT, SP_ERR, SP_MSG, SP_PID, SP_SOCK, SP_LISTEN, SP_N };

int kf_supervise(struct kf_super *s) {
    s->tasks_at_kill = -1;
    bool out_eof = false, err_eof = false, msg_eof = false, exited = false;
    struct disk_clock disk_clock = {0, 0}; /* the first walk at once: what is there counts */
    while (!exited) {
        struct pollfd p[SP_N];
        int fds[SP_N] = {out_eof ? -1 : s->out_fd,
                         err_eof ? -1 : s->err_fd,
                         msg_eof ? -1 : s->msg_fd,
                         s->pidfd,
                         s->rec && s->rec->listener < 0 ? s->record_sock : -1,
                         s->rec ? s->rec->listener : -1};
        for (int i = 0; i < SP_N; i++)
            p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        int timeout = -1;
        if (s->time_ms > 0 && !s->killed_time) {
            uint64_t now = kf_now_ms(), deadline = s->start_ms + s->time_ms;
            if (now >= deadline) {
                s->killed_time = true;
                s->tasks_at_kill = count_tasks(s->pid);
                kill_jail(s);
                continue;
            }
            timeout = (int)(deadline - now);
        }
        int disk_wait = disk_check(s, &disk_clock);
        if (disk_wait >= 0 && (timeout < 0 || disk_wait < timeout))
            timeout = disk_wait;
        int n = poll(p, SP_N, timeout);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            s->supervise_failed = true;
            kill_jail(s);
            break;
        }
        if (p[SP_OUT].revents)
            out_eof = read_stream(s, s->out_fd, &s->out) != 0;
        if (p[SP_ERR].revents)
            err_eof = read_stream(s, s->err_fd, &s->err) != 0;
        if (p[SP_MSG].revents)
            msg_eof = read_msgs(s) != 0;
        if (p[SP_SOCK].revents && kf_record_take_listener(s->rec, s->record_sock) != 0)
            s->rec->listener = -1;
        if (p[SP_LISTEN].revents & POLLIN)
            (void)kf_record_handle(s->rec);
        else if (p[SP_LISTEN].revents & (POLLHUP | POLLERR | POLLNVAL))
            kf_record_close(s->rec);
        if (p[SP_PID].revents)
            exited = true;
    }
    int status = 0;
    pid_t w;
    do {
        w = wait4(s->pid, &status, __WALL, &s->ru);
    } while (w < 0 && errno == EINTR);
    s->init_status = status;
    s->end_ms = kf_now_ms();
    /* the namespace is gone, so are the writers: drain what the pipes still hold */
    if (!out_eof)
        (void)read_stream(s, s->out_fd, &s->out);
    if (!err_eof)
        (void)read_stream(s, s->err_fd, &s->err);
    if (!msg_eof)
        (void)read_msgs(s);
    /* once more now that nothing writes: what the last interval added counts too */
    if (s->disk != NULL && !s->killed_disk && kf_disk_measure(s->disk, -1) != KF_DISK_UNDER)
        s->disk_over_at_end = true;
    if (w < 0 && errno == ECHILD) /* the caller ignores SIGCHLD: PID 1 was reaped for us; the
                                   * command's status came on the message pipe */
        memset(&s->ru, 0, sizeof(s->ru));
    else if (w < 0)
        s->supervise_failed = true;
    return s->supervise_failed ? -1 : 0;
}
