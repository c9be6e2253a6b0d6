/* job_run.c: one harness run for a claimed job. Writes the workspace, starts
 *   $python -m kforge_harness evaluate|check-task ... (PYTHONPATH=harness_dir)
 * as a child in its own process group, turns its `{"progress": PHASE}` stderr lines into
 * events, and ends it early on the wall-clock limit (job_timeout_s), a cancel, a lost fence or
 * a stop signal (after a grace of STOP_GRACE_MS). The last stdout line is the verdict.
 *
 * Killing: SIGINT to the group first, so that the judge's `finally` kills its runner (which
 * lives in a session of its own), then SIGKILL after KILL_GRACE_MS. */
#include "worker.h"

#include "buf.h"
#include "workspace.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STOP_GRACE_MS 10000
#define KILL_GRACE_MS 8000
#define OUT_MAX (8 << 20)    /* stdout kept; beyond it the front is dropped */
#define LINE_MAX_ (64 << 10) /* a stderr line longer than this is cut */
#define TAIL_MAX 2048        /* stderr kept for error messages */

/* What the run loop tracks. */
struct child {
    struct kfw *w;
    const struct kfw_job *job;
    struct kf_log_ctx lc;
    pid_t pid;
    int out_fd, err_fd;
    struct kf_buf out, err_line; /* the child's output as it arrives */
    char tail[TAIL_MAX];         /* the last non-progress stderr lines */
    int64_t kill_at;             /* when SIGKILL follows the SIGINT; 0: not killing */
    bool lost;                   /* a progress event found the fence gone */
};

static void tail_add(struct child *c, const char *line) {
    size_t have = strlen(c->tail), add = strlen(line);
    if (add + 2 > sizeof(c->tail)) {
        line += add - (sizeof(c->tail) - 2);
        add = sizeof(c->tail) - 2;
    }
    if (have + add + 2 > sizeof(c->tail)) {
        size_t drop = have + add + 2 - sizeof(c->tail);
        memmove(c->tail, c->tail + drop, have - drop + 1);
        have -= drop;
    }
    memcpy(c->tail + have, line, add);
    c->tail[have + add] = '\n';
    c->tail[have + add + 1] = '\0';
}

/* The last non-empty line of the stderr tail, for error messages. */
static void tail_last(const struct child *c, char *out, size_t n) {
    char tmp[TAIL_MAX];
    snprintf(tmp, sizeof(tmp), "%s", c->tail);
    size_t len = strlen(tmp);
    while (len > 0 && (tmp[len - 1] == '\n' || tmp[len - 1] == ' '))
        tmp[--len] = '\0';
    char *nl = strrchr(tmp, '\n');
    snprintf(out, n, "%s", nl ? nl + 1 : tmp);
}

static void on_stderr_line(struct child *c, char *line) {
    json_t *j = NULL;
    if (strncmp(line, "{\"progress\"", 11) == 0)
        j = json_loads(line, 0, NULL);
    const char *phase = j ? json_string_value(json_object_get(j, "progress")) : NULL;
    if (phase && (strcmp(phase, "building") == 0 || strcmp(phase, "verifying") == 0 ||
                  strcmp(phase, "timing") == 0)) {
        int r = kfw_event(c->w->db, c->job->id, c->job->attempt, phase, NULL);
        if (r == 0)
            c->lost = true;
        else if (r < 0)
            kf_log(&c->lc, KF_LOG_WARN, "event %s: %s", phase, kf_db_error(c->w->db));
        kf_log(&c->lc, KF_LOG_DEBUG, "phase %s", phase);
    } else {
        tail_add(c, line);
        kf_log(&c->lc, KF_LOG_DEBUG, "harness: %s", line);
    }
    json_decref(j);
}

/* Reads what is there; returns false at end of file. */
static bool drain(struct child *c, int fd) {
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN;
    if (n == 0)
        return false;
    if (fd == c->out_fd) {
        kf_buf_append(&c->out, buf, (size_t)n); /* out of memory: lost; the verdict check says so */
        if (c->out.len > OUT_MAX)
            kf_buf_keep_tail(&c->out, OUT_MAX / 2);
        return true;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || c->err_line.len >= LINE_MAX_) {
            kf_buf_append(&c->err_line, "", 0);
            if (c->err_line.data)
                on_stderr_line(c, c->err_line.data);
            c->err_line.len = 0;
            if (buf[i] == '\n')
                continue;
        }
        kf_buf_append(&c->err_line, &buf[i], 1);
    }
    return true;
}

static void start_kill(struct child *c, const char *why) {
    if (c->kill_at)
        return;
    kf_log(&c->lc, KF_LOG_INFO, "stopping the harness: %s", why);
    kill(-c->pid, SIGINT);
    c->kill_at = kf_now_ms() + KILL_GRACE_MS;
}

void kfw_python_child(const struct kfw *w, int out_fd, int err_fd) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL); /* an ignored SIGINT (a background shell's) would be inherited */
    signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
        dup2(devnull, 0);
    if (out_fd >= 0)
        dup2(out_fd, 1);
    if (err_fd >= 0)
        dup2(err_fd, 2);
    setenv("PYTHONPATH", w->cfg.harness_dir, 1);
    setenv("PYTHONUNBUFFERED", "1", 1);
    if (w->pool_sock[0]) /* evaluate takes a warm runner there (runner_pool.c) */
        setenv("KFORGE_RUNNER_POOL", w->pool_sock, 1);
    /* from a bundle (scripts/bundle.sh), the loader path names the bundle's Debian 12
     * libraries, which the host's Python and PyTorch must not load: give back the host's */
    const char *host_ld = getenv("KFORGE_HOST_LD_LIBRARY_PATH");
    if (host_ld != NULL && host_ld[0] != '\0')
        setenv("LD_LIBRARY_PATH", host_ld, 1);
    else if (host_ld != NULL)
        unsetenv("LD_LIBRARY_PATH");
}

/* Starts the harness; -1 with a reason when it could not be executed. */
static int spawn(struct child *c, char *const argv[], const char *cwd, char *err, size_t n) {
    int po[2], pe[2], px[2];
    if (pipe2(po, O_CLOEXEC) != 0)
        goto fail0;
    if (pipe2(pe, O_CLOEXEC) != 0)
        goto fail1;
    if (pipe2(px, O_CLOEXEC) != 0)
        goto fail2;
    pid_t pid = fork();
    if (pid < 0)
        goto fail3;
    if (pid == 0) {
        /* the child: pipes on 1 and 2 */
        kfw_python_child(c->w, po[1], pe[1]);
        if (chdir(cwd) == 0)
            execvp(argv[0], argv);
        int e = errno;
        if (write(px[1], &e, sizeof(e)) < 0)
            _exit(127);
        _exit(127);
    }
    setpgid(pid, pid);
    close(po[1]);
    close(pe[1]);
    close(px[1]);
    int e = 0;
    ssize_t got;
    do {
        got = read(px[0], &e, sizeof(e));
    } while (got < 0 && errno == EINTR);
    close(px[0]);
    if (got == (ssize_t)sizeof(e)) {
        snprintf(err, n, "cannot run %s: %s", argv[0], strerror(e));
        waitpid(pid, NULL, 0);
        close(po[0]);
        close(pe[0]);
        return -1;
    }
    c->pid = pid;
    c->out_fd = po[0];
    c->err_fd = pe[0];
    return 0;
fail3:
    close(px[0]);
    close(px[1]);
fail2:
    close(pe[0]);
    close(pe[1]);
fail1:
    close(po[0]);
    close(po[1]);
fail0:
    snprintf(err, n, "cannot start the harness: %s", strerror(errno));
    return -1;
}

/* Supervises the child until it exits or timeout_ms passed; returns its wait status, sets *why
 * for early ends. */
static int supervise(struct child *c, int64_t timeout_ms, enum kfw_outcome *why) {
    struct kfw *w = c->w;
    int64_t deadline = kf_now_ms() + timeout_ms;
    int64_t stop_at = w->stopping ? kf_now_ms() + STOP_GRACE_MS : 0;
    bool out_open = true, err_open = true;
    *why = KFW_RESULT;
    for (;;) {
        struct pollfd p[2] = {{out_open ? c->out_fd : -1, POLLIN, 0},
                              {err_open ? c->err_fd : -1, POLLIN, 0}};
        if (poll(p, 2, 200) > 0) {
            if (p[0].revents && !drain(c, c->out_fd))
                out_open = false;
            if (p[1].revents && !drain(c, c->err_fd))
                err_open = false;
        }
        siginfo_t si = {0};
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) {
            /* leader gone: stragglers of its group go too, then the pipes are read out */
            kill(-c->pid, SIGKILL);
            int64_t until = kf_now_ms() + 2000;
            while ((out_open || err_open) && kf_now_ms() < until) {
                struct pollfd q[2] = {{out_open ? c->out_fd : -1, POLLIN, 0},
                                      {err_open ? c->err_fd : -1, POLLIN, 0}};
                if (poll(q, 2, 100) <= 0)
                    continue;
                if (q[0].revents && !drain(c, c->out_fd))
                    out_open = false;
                if (q[1].revents && !drain(c, c->err_fd))
                    err_open = false;
            }
            int status = 0;
            waitpid(c->pid, &status, 0);
            return status;
        }
        int64_t now = kf_now_ms();
        if (c->kill_at && now >= c->kill_at) {
            kill(-c->pid, SIGKILL);
            c->kill_at = now + 1000;
        }
        if (!w->stopping && kfw_pause(w, 0))
            stop_at = now + STOP_GRACE_MS;
        if (stop_at && now >= stop_at && *why == KFW_RESULT) {
            *why = KFW_HANDBACK;
            start_kill(c, "the worker is stopping");
        }
        pthread_mutex_lock(&w->sh.mu);
        bool lost = w->sh.lost || c->lost, cancel = w->sh.cancel;
        pthread_mutex_unlock(&w->sh.mu);
        if (lost && *why != KFW_LOST) {
            *why = KFW_LOST;
            c->kill_at = 0;
            start_kill(c, "the job's fence is gone");
        } else if (cancel && *why == KFW_RESULT) {
            *why = KFW_CANCELLED;
            start_kill(c, "cancel requested");
        } else if (now >= deadline && *why == KFW_RESULT) {
            *why = KFW_INFRA;
            start_kill(c, "job_timeout_s passed");
        }
    }
}

/* The harness's command line into argv (strings in store). */
static void build_argv(struct kfw *w, const struct kfw_job *job, const char *format, json_t *files,
                       const char *argv[32], char store[5][512]) {
    int n = 0;
    argv[n++] = w->cfg.python;
    argv[n++] = "-m";
    argv[n++] = "kforge_harness";
    bool eval = strcmp(job->kind, "evaluate") == 0;
    argv[n++] = eval ? "evaluate" : "check-task";
    argv[n++] = "--task";
    argv[n++] = "task.py";
    argv[n++] = "--backend";
    argv[n++] = job->backend;
    if (eval) {
        /* a kernelbench candidate is one .py file; the others are folders */
        const char *only = NULL;
        if (format && strcmp(format, "kernelbench") == 0 && json_object_size(files) == 1) {
            void *it = json_object_iter(files);
            only = json_object_iter_key(it);
        }
        snprintf(store[0], sizeof(store[0]), "candidate%s%s", only ? "/" : "", only ? only : "");
        argv[n++] = "--candidate";
        argv[n++] = store[0];
        json_t *opts = json_object_get(job->payload, "options");
        if (!json_is_object(opts))
            opts = job->payload;
        if (json_is_true(json_object_get(opts, "no_compile")))
            argv[n++] = "--no-compile";
        json_t *budget = json_object_get(opts, "budget_s");
        if (json_is_number(budget)) {
            snprintf(store[1], sizeof(store[1]), "%g", json_number_value(budget));
            argv[n++] = "--budget";
            argv[n++] = store[1];
        }
        argv[n++] = "--progress";
    }
    /* the task's code runs in the jail too (check-task's and evaluate's task process) */
    if (w->cfg.jail[0]) {
        argv[n++] = "--jail";
        argv[n++] = w->cfg.jail;
        if (w->gpu >= 0) {
            snprintf(store[2], sizeof(store[2]), "%ld", w->gpu);
            argv[n++] = "--gpu";
            argv[n++] = store[2];
        }
        snprintf(store[3], sizeof(store[3]), "%ld", w->cfg.disk_mib);
        argv[n++] = "--disk-mib";
        argv[n++] = store[3];
    } else {
        argv[n++] = "--no-jail"; /* a worker configured without one (logged at its start) */
    }
    if (w->gpu >= 0) {
        /* the workers of one GPU (kforge up --slots) build side by side, one at a time on it */
        snprintf(store[4], sizeof(store[4]), "%s/gpu%ld.lock", w->cfg.var_dir, w->gpu);
        argv[n++] = "--gpu-lock";
        argv[n++] = store[4];
    }
    argv[n] = NULL;
}

/* The verdict from the last non-empty stdout line; NULL when it is not a JSON object. */
static json_t *last_json_line(struct kf_buf *out) {
    if (out->data == NULL)
        return NULL;
    size_t end = out->len;
    while (end > 0 &&
           (out->data[end - 1] == '\n' || out->data[end - 1] == '\r' || out->data[end - 1] == ' '))
        end--;
    size_t start = end;
    while (start > 0 && out->data[start - 1] != '\n')
        start--;
    json_t *j = json_loadb(out->data + start, end - start, 0, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static void classify(struct child *c, int status, struct kfw_run *run) {
    char last[400];
    tail_last(c, last, sizeof(last));
    if (WIFSIGNALED(status)) {
        run->outcome = KFW_INFRA;
        snprintf(run->reason, sizeof(run->reason), "harness killed by signal %d: %s",
                 WTERMSIG(status), last);
        return;
    }
    int code = WEXITSTATUS(status);
    if (code != 0) {
        run->outcome = KFW_INFRA;
        snprintf(run->reason, sizeof(run->reason), "%s exited %d: %s",
                 code == 125 ? "the jail" : "the harness", code, last);
        return;
    }
    json_t *v = last_json_line(&c->out);
    if (v == NULL) {
        run->outcome = KFW_INFRA;
        snprintf(run->reason, sizeof(run->reason), "the harness printed no JSON verdict: %s", last);
        return;
    }
    const char *st = json_string_value(json_object_get(v, "status"));
    if (st && strcmp(st, "infra_error") == 0) {
        run->outcome = KFW_INFRA;
        snprintf(run->reason, sizeof(run->reason), "infra_error: %s",
                 json_string_value(json_object_get(v, "message"))
                     ? json_string_value(json_object_get(v, "message"))
                     : "");
        json_decref(v);
        return;
    }
    run->outcome = KFW_RESULT;
    run->verdict = v;
}

/* Reads the job's task source, candidate format and files. 0 or -1 (reason in run). */
static int load_inputs(struct kfw *w, const struct kfw_job *job, char **source, char **format,
                       json_t **files, struct kfw_run *run) {
    const char *p[] = {job->id};
    PGresult *r = kf_db_exec(w->db, "inputs", 1, p);
    if (r == NULL || PQntuples(r) != 1) {
        snprintf(run->reason, sizeof(run->reason), "reading the job's inputs: %s",
                 r ? "no such job" : kf_db_error(w->db));
        if (r)
            PQclear(r);
        return -1;
    }
    *source = strdup(PQgetvalue(r, 0, 0));
    *format = PQgetisnull(r, 0, 1) ? NULL : strdup(PQgetvalue(r, 0, 1));
    *files = PQgetisnull(r, 0, 2) ? NULL : json_loads(PQgetvalue(r, 0, 2), 0, NULL);
    PQclear(r);
    if (strcmp(job->kind, "evaluate") == 0 && !json_is_object(*files)) {
        snprintf(run->reason, sizeof(run->reason), "the evaluation has no candidate files");
        return -1;
    }
    return 0;
}

void kfw_harness_exec(struct kfw *w, const struct kfw_job *job, const char *const *argv,
                      const char *cwd, int64_t timeout_ms, struct kfw_run *run) {
    memset(run, 0, sizeof(*run));
    run->outcome = KFW_INFRA;
    struct child c = {.w = w, .job = job, .lc = w->log, .pid = -1, .out_fd = -1, .err_fd = -1};
    c.lc.job_id = job->id;
    if (spawn(&c, (char *const *)argv, cwd, run->reason, sizeof(run->reason)) != 0)
        goto out;
    kf_log(&c.lc, KF_LOG_INFO, "harness started pid=%d: %s", (int)c.pid, argv[3]);
    int64_t t0 = kf_now_ms();
    enum kfw_outcome why;
    int status = supervise(&c, timeout_ms, &why);
    close(c.out_fd);
    close(c.err_fd);
    if (c.err_line.len > 0)
        on_stderr_line(&c, c.err_line.data);
    kf_log(&c.lc, KF_LOG_INFO, "harness ended status=%d after %lld ms", status,
           (long long)(kf_now_ms() - t0));
    if (why == KFW_RESULT) {
        classify(&c, status, run);
    } else {
        run->outcome = why;
        snprintf(run->reason, sizeof(run->reason), "%s",
                 why == KFW_INFRA       ? "timeout: the harness ran past its time limit"
                 : why == KFW_HANDBACK  ? "the worker stopped"
                 : why == KFW_CANCELLED ? "cancel requested"
                                        : "the job was taken over or cancelled");
    }
out:
    kf_buf_free(&c.out);
    kf_buf_free(&c.err_line);
}

void kfw_job_run(struct kfw *w, const struct kfw_job *job, struct kfw_run *run) {
    memset(run, 0, sizeof(*run));
    run->outcome = KFW_INFRA;
    struct kf_log_ctx lc = w->log;
    lc.job_id = job->id;
    char *source = NULL, *format = NULL;
    json_t *files = NULL;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/work/%s", w->cfg.var_dir, job->id);
    if (load_inputs(w, job, &source, &format, &files, run) != 0)
        goto out;
    if (kfw_ws_create(dir, source, files, run->reason, sizeof(run->reason)) != 0)
        goto out;

    const char *argv[32];
    char store[5][512];
    build_argv(w, job, format, files, argv, store);
    kfw_harness_exec(w, job, argv, dir, w->cfg.job_timeout_s * 1000, run);
out:
    if (run->outcome == KFW_INFRA)
        kf_log(&lc, KF_LOG_WARN, "infrastructure failure: %s", run->reason);
    kfw_ws_remove(dir);
    free(source);
    free(format);
    json_decref(files);
}
