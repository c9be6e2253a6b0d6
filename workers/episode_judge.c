/* episode_judge.c: the protected tools compile, verify, profile and submit. Each snapshots the
 * candidate files of the workspace (model_new.py and kernels/, regular files only), writes them
 * with the task into the judge's folder (outside the workspace, so nothing of the agent's can
 * change what is judged), runs the harness there as the judge (in the jail, on the worker's
 * GPU, under its GPU lock), stores a correct candidate, keeps the best, and answers the policy
 * with the verdict as text. */
#include "episode.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "util.h"
#include "workspace.h"

#define SNAP_DEPTH 6

bool kfw_judge_tool(const char *name) {
    return !strcmp(name, "compile") || !strcmp(name, "verify") || !strcmp(name, "profile") ||
           !strcmp(name, "submit");
}

/* Adds the regular file rel (under dirfd as name) to files. 0, or -1 with err. */
static int snap_file(struct kfw_episode *ep, int dirfd, const char *name, const char *rel,
                     json_t *files, char *err, size_t errlen) {
    if (!kfw_ws_name_ok(rel)) {
        snprintf(err, errlen, "%s: a file name outside [A-Za-z0-9._/-]", rel);
        return -1;
    }
    if ((long)json_object_size(files) >= ep->w->cfg.max_files) {
        snprintf(err, errlen, "more than %ld candidate files", ep->w->cfg.max_files);
        return -1;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return 0; /* not a regular file: not part of the candidate */
    }
    if (st.st_size > ep->w->cfg.max_file_bytes) {
        close(fd);
        snprintf(err, errlen, "%s is larger than %ld bytes", rel, ep->w->cfg.max_file_bytes);
        return -1;
    }
    char *data = malloc((size_t)st.st_size + 1);
    ssize_t got = data ? read(fd, data, (size_t)st.st_size) : -1;
    close(fd);
    json_t *s = got == st.st_size ? json_stringn(data, (size_t)got) : NULL;
    free(data);
    if (s == NULL) {
        snprintf(err, errlen, "%s is not UTF-8 text (or could not be read)", rel);
        return -1;
    }
    json_object_set_new(files, rel, s);
    return 0;
}

static int snap_dir(struct kfw_episode *ep, int at, const char *rel, int depth, json_t *files,
                    char *err, size_t errlen) {
    if (depth > SNAP_DEPTH)
        return 0;
    int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[1024];
        snprintf(sub, sizeof(sub), "%s/%s", rel, e->d_name);
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int sfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd >= 0) {
                rc = snap_dir(ep, sfd, sub, depth + 1, files, err, errlen);
                close(sfd);
            }
        } else if (S_ISREG(st.st_mode)) {
            rc = snap_file(ep, dirfd(d), e->d_name, sub, files, err, errlen);
        }
    }
    closedir(d);
    return rc;
}

/* The candidate files of the workspace (a new object) or NULL with err. */
static json_t *snapshot(struct kfw_episode *ep, char *err, size_t errlen) {
    json_t *files = json_object();
    int ws = open(ep->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (files == NULL || ws < 0) {
        snprintf(err, errlen, "the workspace is gone");
        if (ws >= 0)
            close(ws);
        json_decref(files);
        return NULL;
    }
    int rc = snap_file(ep, ws, "model_new.py", "model_new.py", files, err, errlen);
    int kd = openat(ws, "kernels", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rc == 0 && kd >= 0)
        rc = snap_dir(ep, kd, "kernels", 1, files, err, errlen);
    if (kd >= 0)
        close(kd);
    close(ws);
    if (rc != 0) {
        json_decref(files);
        return NULL;
    }
    return files;
}

/* SHA-256 over the sorted names and contents (as the server computes candidates.sha256). */
static void files_sha(json_t *files, char out[65]) {
    struct kf_buf b = {0};
    const char *key;
    json_t *val;
    void *tmp;
    const char **names = calloc(json_object_size(files) + 1, sizeof(*names));
    size_t n = 0;
    json_object_foreach_safe(files, tmp, key, val) {
        names[n++] = key;
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(files, names[i]);
        kf_buf_append(&b, names[i], strlen(names[i]) + 1);
        kf_buf_append(&b, json_string_value(v), json_string_length(v));
        kf_buf_append(&b, "", 1);
    }
    kf_sha256_hex(b.data ? b.data : "", b.len, out);
    kf_buf_free(&b);
    free(names);
}

/* Stores a correct candidate; its id goes to out ("" on failure). */
static void store_candidate(struct kfw_episode *ep, json_t *files, char out[37]) {
    out[0] = '\0';
    char id[37], sha[65];
    char *text = json_dumps(files, JSON_COMPACT);
    if (text == NULL || kf_uuid_new(id) != 0) {
        free(text);
        return;
    }
    files_sha(files, sha);
    const char *p[] = {id, ep->task_id, text, sha};
    PGresult *r = kf_db_exec(ep->w->db, "cand_insert", 4, p);
    if (r != NULL) {
        snprintf(out, 37, "%s", id);
        PQclear(r);
    } else {
        kf_log(&ep->lc, KF_LOG_WARN, "storing a candidate: %s", kf_db_error(ep->w->db));
    }
    free(text);
}

/* The harness's command line (strings in store). */
static void judge_argv(struct kfw_episode *ep, const char *phase, bool reference,
                       const char *argv[40], char store[4][512]) {
    struct kfw *w = ep->w;
    int n = 0;
    argv[n++] = w->cfg.python;
    argv[n++] = "-m";
    argv[n++] = "kforge_harness";
    argv[n++] = reference ? "profile-reference" : "evaluate";
    argv[n++] = "--task";
    argv[n++] = "task.py";
    argv[n++] = "--backend";
    argv[n++] = ep->job->backend;
    if (json_is_true(json_object_get(ep->options, "no_compile")))
        argv[n++] = "--no-compile";
    json_t *budget = json_object_get(ep->options, "budget_s");
    if (json_is_number(budget)) {
        snprintf(store[0], sizeof(store[0]), "%g", json_number_value(budget));
        argv[n++] = "--budget";
        argv[n++] = store[0];
    }
    if (!reference) {
        argv[n++] = "--candidate";
        argv[n++] = "candidate";
        argv[n++] = "--phase";
        argv[n++] = phase;
        argv[n++] = "--progress";
    }
    /* the task's code runs in the jail too (profile-reference's and evaluate's task process) */
    if (w->cfg.jail[0]) {
        argv[n++] = "--jail";
        argv[n++] = w->cfg.jail;
        if (w->gpu >= 0) {
            snprintf(store[1], sizeof(store[1]), "%ld", w->gpu);
            argv[n++] = "--gpu";
            argv[n++] = store[1];
        }
        snprintf(store[3], sizeof(store[3]), "%ld", w->cfg.disk_mib);
        argv[n++] = "--disk-mib";
        argv[n++] = store[3];
    } else {
        argv[n++] = "--no-jail"; /* a worker configured without one (logged at its start) */
    }
    if (w->gpu >= 0) {
        snprintf(store[2], sizeof(store[2]), "%s/gpu%ld.lock", w->cfg.var_dir, w->gpu);
        argv[n++] = "--gpu-lock";
        argv[n++] = store[2];
    }
    argv[n] = NULL;
}

/* Runs the harness in the judge's folder; the verdict (owned) or NULL with text in err. */
static json_t *run_harness(struct kfw_episode *ep, json_t *files, const char *phase, bool reference,
                           char *err, size_t errlen) {
    if (kfw_ws_create(ep->judge_dir, ep->source, files, err, errlen) != 0)
        return NULL;
    const char *argv[40];
    char store[4][512];
    judge_argv(ep, phase, reference, argv, store);
    int64_t left_ms = ep->lim.max_wall_s * 1000 - (kf_now_ms() - ep->t0_ms);
    int64_t limit = ep->w->cfg.job_timeout_s * 1000;
    if (left_ms < limit)
        limit = left_ms > 1000 ? left_ms : 1000;
    struct kfw_run run;
    int64_t t0 = kf_now_ms();
    kfw_harness_exec(ep->w, ep->job, argv, ep->judge_dir, limit, &run);
    double wall = (double)(kf_now_ms() - t0) / 1000.0;
    if (run.outcome == KFW_RESULT) {
        /* GPU time: what the judge held the GPU lock for (cuda); else its wall time less
         * any wait (cpu, or a verdict that never took the lock) */
        json_t *held = json_object_get(run.verdict, "gpu_lock_held_s");
        json_t *wait = json_object_get(run.verdict, "gpu_lock_wait_s");
        ep->gpu_s += json_is_number(held)
                         ? json_number_value(held)
                         : wall - (json_is_number(wait) ? json_number_value(wait) : 0.0);
        const char *rv = json_string_value(json_object_get(run.verdict, "reward_version"));
        if (rv)
            snprintf(ep->reward_version, sizeof(ep->reward_version), "%s", rv);
        json_t *env = json_object_get(run.verdict, "env");
        if (json_is_object(env)) {
            json_decref(ep->env);
            ep->env = json_incref(env);
        }
        return run.verdict;
    }
    ep->gpu_s += wall;
    if (run.outcome != KFW_INFRA) {
        ep->stop = run.outcome;
        snprintf(ep->stop_reason, sizeof(ep->stop_reason), "%s", run.reason);
    }
    snprintf(err, errlen, "the judge could not finish: %s", run.reason);
    return NULL;
}

static json_t *component(const char *tool, const char *call_id, const json_t *v,
                         const char *cand_id) {
    json_t *t = json_object_get(v, "timing");
    return json_pack(
        "{s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:s?}", "tool", tool,
        "tool_call_id", call_id, "status", json_object_get(v, "status"), "correct",
        json_object_get(v, "correct"), "reward", json_object_get(v, "reward"), "speedup_vs_eager",
        json_object_get(v, "speedup_vs_eager"), "speedup_vs_compile",
        json_object_get(v, "speedup_vs_compile"), "candidate_ms",
        json_object_get(json_object_get(t, "candidate"), "median_ms"), "eager_ms",
        json_object_get(json_object_get(t, "eager"), "median_ms"), "compile_ms",
        json_object_get(json_object_get(t, "compile"), "median_ms"), "flags",
        json_object_get(v, "flags"), "candidate_id", cand_id && cand_id[0] ? cand_id : NULL);
}

/* A correct candidate: stored; the best when faster (a timed one beats an untimed one). */
static void consider(struct kfw_episode *ep, json_t *files, const json_t *v, char cand_id[37]) {
    store_candidate(ep, files, cand_id);
    if (!cand_id[0])
        return;
    json_t *se = json_object_get(v, "speedup_vs_eager");
    double speed = json_is_number(se) ? json_number_value(se) : 0.0;
    if (ep->best.candidate_id[0]) {
        bool timed = speed > 0.0, best_timed = ep->best.speedup > 0.0;
        if (best_timed && (!timed || speed <= ep->best.speedup))
            return; /* slower, or untimed: a timed best stays; an untimed best yields to the latest
                     */
    }
    snprintf(ep->best.candidate_id, sizeof(ep->best.candidate_id), "%s", cand_id);
    json_decref(ep->best.files);
    ep->best.files = json_incref(files);
    ep->best.speedup = speed;
}

static char *text_of(const char *fmt, const char *arg) {
    size_t n = strlen(fmt) + strlen(arg) + 1;
    char *t = malloc(n);
    if (t)
        snprintf(t, n, fmt, arg);
    return t;
}

char *kfw_judge_run(struct kfw_episode *ep, const char *name, const char *call_id, json_t **comp) {
    *comp = NULL;
    char err[600];
    json_t *files = snapshot(ep, err, sizeof(err));
    if (files == NULL)
        return text_of("the candidate cannot be judged: %s", err);
    bool reference = !strcmp(name, "profile") && !json_object_get(files, "model_new.py");
    const char *phase = !strcmp(name, "compile")  ? "build"
                        : !strcmp(name, "verify") ? "verify"
                                                  : "full";
    json_t *v = run_harness(ep, files, phase, reference, err, sizeof(err));
    if (v == NULL) {
        json_decref(files);
        return text_of("%s", err);
    }
    json_decref(ep->last_verdict);
    ep->last_verdict = json_incref(v);
    char *text = kfw_verdict_text(v, name, (size_t)ep->lim.max_tool_output_bytes);
    if (!reference && strcmp(name, "compile") != 0) {
        char cand_id[37] = "";
        if (json_is_true(json_object_get(v, "correct")))
            consider(ep, files, v, cand_id);
        *comp = component(name, call_id, v, cand_id);
    }
    json_decref(v);
    json_decref(files);
    return text;
}

json_t *kfw_judge_revalidate(struct kfw_episode *ep) {
    char err[600];
    json_t *v = run_harness(ep, ep->best.files, "full", false, err, sizeof(err));
    if (v == NULL)
        snprintf(ep->end_detail, sizeof(ep->end_detail), "re-validation: %.480s", err);
    return v;
}
