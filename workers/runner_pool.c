/* runner_pool.c: the worker's pool of warm runners (python -m kforge_harness pool, see
 * workers/harness/kforge_harness/pool.py). Its evaluations take a runner that has already
 * imported PyTorch and made its CUDA context, seconds off each; the harness finds the pool
 * through KFORGE_RUNNER_POOL, which job_run.c sets for it. Owned by the main thread: started
 * with the worker, started again when it dies (at most every POOL_RESTART_MS), stopped last.
 * The pool also dies with the worker (it asks for SIGTERM on its parent's death). */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define POOL_RESTART_MS 10000
#define POOL_STOP_MS 10000

static void pool_child(struct kfw *w, const char *log_path) {
    int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    kfw_python_child(w, log, log);
    char size[16], gpu[16], disk[24];
    snprintf(size, sizeof(size), "%ld", w->cfg.pool_runners);
    snprintf(gpu, sizeof(gpu), "%ld", w->gpu);
    snprintf(disk, sizeof(disk), "%ld", w->cfg.disk_mib);
    const char *argv[20]; /* 16 at most, and the NULL */
    int n = 0;
    argv[n++] = w->cfg.python;
    argv[n++] = "-m";
    argv[n++] = "kforge_harness";
    argv[n++] = "pool";
    argv[n++] = "--sock";
    argv[n++] = w->pool_sock;
    argv[n++] = "--backend";
    argv[n++] = w->backend;
    argv[n++] = "--size";
    argv[n++] = size;
    if (w->cfg.jail[0]) { /* the options job_run.c gives evaluate, so that the kinds match */
        argv[n++] = "--jail";
        argv[n++] = w->cfg.jail;
        if (w->gpu >= 0) {
            argv[n++] = "--gpu";
            argv[n++] = gpu;
        }
        argv[n++] = "--disk-mib";
        argv[n++] = disk;
    } else {
        argv[n++] = "--no-jail"; /* a worker configured without one (logged at its start) */
    }
    argv[n] = NULL;
    if (chdir(w->cfg.harness_dir) == 0)
        execvp(argv[0], (char *const *)argv);
    _exit(127);
}

void kfw_pool_start(struct kfw *w) {
    w->pool_pid = 0;
    w->pool_sock[0] = '\0';
    if (w->cfg.pool_runners <= 0)
        return;
    /* a Unix socket's path is at most 107 bytes: var_dir's when it fits, else /tmp's */
    int len = snprintf(w->pool_sock, sizeof(w->pool_sock), "%s/pool-%d.sock", w->cfg.var_dir,
                       (int)getpid());
    if (len < 0 || (size_t)len >= sizeof(w->pool_sock))
        snprintf(w->pool_sock, sizeof(w->pool_sock), "/tmp/kforge-pool-%d.sock", (int)getpid());
    char log_path[PATH_MAX];
    snprintf(log_path, sizeof(log_path), "%s/pool-%d.log", w->cfg.var_dir, (int)getpid());
    pid_t pid = fork();
    if (pid < 0) {
        kf_log(&w->log, KF_LOG_WARN, "runner pool: fork: %s", strerror(errno));
        w->pool_sock[0] = '\0';
        return;
    }
    if (pid == 0)
        pool_child(w, log_path);
    setpgid(pid, pid);
    w->pool_pid = pid;
    w->pool_next_ms = kf_now_ms() + POOL_RESTART_MS;
    kf_log(&w->log, KF_LOG_INFO, "runner pool: pid %d, %ld in standby, %s (log %s)", (int)pid,
           w->cfg.pool_runners, w->pool_sock, log_path);
}

void kfw_pool_tend(struct kfw *w) {
    if (w->cfg.pool_runners <= 0)
        return;
    if (w->pool_pid > 0) {
        int status;
        if (waitpid(w->pool_pid, &status, WNOHANG) != w->pool_pid)
            return;
        kf_log(&w->log, KF_LOG_WARN, "runner pool exited (status %d): evaluations start their own",
               status);
        w->pool_pid = 0;
    }
    if (kf_now_ms() >= w->pool_next_ms)
        kfw_pool_start(w);
}

void kfw_pool_stop(struct kfw *w) {
    if (w->pool_pid <= 0)
        return;
    kill(w->pool_pid, SIGTERM); /* the pool kills its runners on the way out */
    int64_t deadline = kf_now_ms() + POOL_STOP_MS;
    while (waitpid(w->pool_pid, NULL, WNOHANG) == 0) {
        if (kf_now_ms() >= deadline) {
            kill(-w->pool_pid, SIGKILL);
            waitpid(w->pool_pid, NULL, 0);
            break;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    w->pool_pid = 0;
}
