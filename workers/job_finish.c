/* job_finish.c: the finishing transactions (lib/README.md, steps 4, 5 and 8), each under the
 * fence, then the stream work that follows a commit (XACK+XDEL, XADD again, dead letter).
 *   result:    job succeeded + result, evaluation row, episode or task status, baseline
 *              (from an evaluation or an episode's final verdict), `done`; a task found invalid
 *              also fails the evaluate and optimize jobs queued for it (task_invalid)
 *   infra:     queued again + `retry`, or dead + `done` (+ kforge:dead) at max_attempts
 *   cancelled: job cancelled + `cancelled`, `done`
 *   handback:  queued again + `retry` (the worker is stopping; the attempt is not given back,
 *              it is the fencing token)
 *   lost:      nothing is written. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fin {
    struct kfw *w;
    const struct kfw_job *job;
    struct kfw_run *run;
    char att[24];
    bool lost;      /* a fenced UPDATE touched no row */
    bool dead;      /* infra: the job went to the dead letters */
    char klass[64]; /* requeue/dead: the job's class */
};

/* Runs a statement; on failure returns the kf_db_tx code through *rc. */
static PGresult *exec(struct kf_db *db, const char *name, int n, const char *const *p, int *rc) {
    PGresult *r = kf_db_exec(db, name, n, p);
    if (r == NULL)
        *rc = kf_db_retryable(db) ? KF_DB_RETRY : -1;
    return r;
}

static int event(struct kf_db *db, const char *job_id, const char *kind, json_t *data) {
    char *text = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    const char *p[] = {job_id, kind, text ? text : "{}"};
    int rc = 0;
    PGresult *r = exec(db, "event_any", 3, p, &rc);
    free(text);
    if (r)
        PQclear(r);
    return rc;
}

/* A fenced UPDATE ("cancelled" takes no third parameter; "requeue" and "dead" take the error,
 * NULL or not); 0 with f->lost set when it touched no row. RETURNING class goes to f->klass. */
static int fenced(struct fin *f, struct kf_db *db, const char *name, const char *third) {
    const char *p[] = {f->job->id, f->att, third};
    int rc = 0;
    PGresult *r = exec(db, name, strcmp(name, "cancelled") == 0 ? 2 : 3, p, &rc);
    if (r == NULL)
        return rc;
    f->lost = atoi(PQcmdTuples(r)) == 0;
    if (!f->lost && PQnfields(r) == 1 && PQntuples(r) == 1)
        snprintf(f->klass, sizeof(f->klass), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

/* The exact device of a verdict: timing.device, else env.gpu (cuda) or env.cpu. */
static const char *verdict_device(json_t *v, const char *backend) {
    const char *d = json_string_value(json_object_get(json_object_get(v, "timing"), "device"));
    if (d && d[0])
        return d;
    json_t *env = json_object_get(v, "env");
    d = json_string_value(json_object_get(env, strcmp(backend, "cuda") == 0 ? "gpu" : "cpu"));
    return d && d[0] ? d : NULL;
}

/* The eager and torch.compile medians of a verdict (an evaluation's, or an episode's final
 * re-validation) as the task's baseline on the verdict's device; nothing when it has none. */
static int baseline(struct kf_db *db, const struct kfw_job *job, json_t *v) {
    const char *device = verdict_device(v, job->backend);
    json_t *timing = json_object_get(v, "timing");
    json_t *eager = json_object_get(json_object_get(timing, "eager"), "median_ms");
    json_t *comp = json_object_get(json_object_get(timing, "compile"), "median_ms");
    if (!device || !json_is_number(eager))
        return 0;
    char em[32], cm[32];
    snprintf(em, sizeof(em), "%.17g", json_number_value(eager));
    snprintf(cm, sizeof(cm), "%.17g", json_number_value(comp));
    const char *b[] = {job->task_id, job->backend, device, em, json_is_number(comp) ? cm : NULL};
    int rc = 0;
    PGresult *r = exec(db, "baseline", 5, b, &rc);
    if (r)
        PQclear(r);
    return rc;
}

/* The task failed its check (verdict v): the jobs queued for it fail with the check's reasons
 * instead of running an episode or an evaluation that cannot mean anything. */
static int fail_dependents(struct kf_db *db, const struct kfw_job *job, json_t *v) {
    char detail[2048] = "";
    size_t used = 0, i;
    json_t *reason;
    json_array_foreach(json_object_get(v, "reasons"), i, reason) {
        const char *s = json_string_value(reason);
        if (s && used < sizeof(detail))
            used +=
                (size_t)snprintf(detail + used, sizeof(detail) - used, "%s%s", used ? "; " : "", s);
    }
    if (!detail[0])
        snprintf(detail, sizeof(detail), "the task failed its check");
    json_t *err = json_pack("{s:s, s:s, s:O?}", "reason", "task_invalid", "message", detail,
                            "reasons", json_object_get(v, "reasons"));
    char *text = err ? json_dumps(err, JSON_COMPACT) : NULL;
    json_decref(err);
    if (!text)
        return -1;
    const char *p[] = {job->task_id, text, detail};
    int rc = 0;
    PGresult *r = exec(db, "fail_dependents", 3, p, &rc);
    free(text);
    if (r)
        PQclear(r);
    return rc;
}

static int result_fn(struct kf_db *db, void *arg) {
    struct fin *f = arg;
    const struct kfw_job *job = f->job;
    json_t *v = f->run->verdict;
    const char *device = verdict_device(v, job->backend);
    char *text = json_dumps(v, JSON_COMPACT);
    if (text == NULL)
        return -1;
    int rc = 0;
    const char *p[] = {job->id, f->att, text, device};
    PGresult *r = exec(db, "succeed", 4, p, &rc);
    if (r == NULL)
        goto out;
    f->lost = atoi(PQcmdTuples(r)) == 0;
    PQclear(r);
    if (f->lost) {
        rc = -1;
        goto out;
    }
    const char *status = json_string_value(json_object_get(v, "status"));
    if (strcmp(job->kind, "optimize") == 0) {
        /* v is the episode's summary (episode_run.c); export_seq is drawn under the lock */
        char key[24];
        snprintf(key, sizeof(key), "%lld", (long long)KF_EXPORT_LOCK_KEY);
        const char *lk[] = {key};
        if ((r = exec(db, "export_lock", 1, lk, &rc)) == NULL)
            goto out;
        PQclear(r);
        const char *e[] = {job->id, text, device};
        if ((r = exec(db, "episode_finish", 3, e, &rc)) == NULL)
            goto out;
        PQclear(r);
        if ((rc = baseline(db, job, json_object_get(v, "final_verdict"))) != 0)
            goto out;
        rc = event(db, job->id, "done",
                   json_pack("{s:s, s:O?, s:O?}", "status", "succeeded", "result",
                             json_object_get(v, "end_reason"), "reward",
                             json_object_get(v, "final_reward")));
        goto out;
    }
    if (strcmp(job->kind, "evaluate") == 0) {
        const char *e[] = {job->id, text, device};
        if ((r = exec(db, "eval_done", 3, e, &rc)) == NULL)
            goto out;
        PQclear(r);
        if ((rc = baseline(db, job, v)) != 0)
            goto out;
    } else {
        /* check-task: {"fit": bool, ...}; a "status" of "ok" counts as fit too */
        bool ok = json_is_true(json_object_get(v, "fit")) || (status && !strcmp(status, "ok"));
        const char *t[] = {job->task_id, ok ? "ok" : "invalid", text};
        if ((r = exec(db, "task_checked", 3, t, &rc)) == NULL)
            goto out;
        PQclear(r);
        status = ok ? "ok" : "invalid";
        if (!ok && (rc = fail_dependents(db, job, v)) != 0)
            goto out;
    }
    json_t *reward = json_object_get(v, "reward");
    rc = event(
        db, job->id, "done",
        json_pack("{s:s, s:s?, s:O?}", "status", "succeeded", "result", status, "reward", reward));
out:
    free(text);
    return rc;
}

/* The episode of an optimize job follows its job (other kinds have none: no row changes). */
static int episode_follows(struct fin *f, struct kf_db *db, const char *status) {
    if (strcmp(f->job->kind, "optimize") != 0)
        return 0;
    const char *p[] = {f->job->id, status, f->run->reason};
    int rc = 0;
    PGresult *r = exec(db, "episode_status", 3, p, &rc);
    if (r)
        PQclear(r);
    return rc;
}

static int infra_fn(struct kf_db *db, void *arg) {
    struct fin *f = arg;
    f->dead = f->job->attempt >= f->w->cfg.max_attempts;
    json_t *err = json_pack("{s:s, s:I, s:s}", "reason", f->run->reason, "attempt",
                            (json_int_t)f->job->attempt, "worker", f->w->name);
    char *text = json_dumps(err, JSON_COMPACT);
    json_decref(err);
    int rc = fenced(f, db, f->dead ? "dead" : "requeue", text);
    free(text);
    if (rc != 0 || f->lost)
        return f->lost ? -1 : rc;
    if ((rc = episode_follows(f, db, f->dead ? "failed" : "queued")) != 0)
        return rc;
    if (f->dead)
        return event(db, f->job->id, "done",
                     json_pack("{s:s, s:s}", "status", "dead", "error", f->run->reason));
    return event(
        db, f->job->id, "retry",
        json_pack("{s:I, s:s}", "attempt", (json_int_t)f->job->attempt, "reason", f->run->reason));
}

static int cancel_fn(struct kf_db *db, void *arg) {
    struct fin *f = arg;
    int rc = fenced(f, db, "cancelled", NULL);
    if (rc != 0 || f->lost)
        return f->lost ? -1 : rc;
    if ((rc = episode_follows(f, db, "cancelled")) != 0)
        return rc;
    if ((rc = event(db, f->job->id, "cancelled", json_object())) != 0)
        return rc;
    return event(db, f->job->id, "done", json_pack("{s:s}", "status", "cancelled"));
}

static int handback_fn(struct kf_db *db, void *arg) {
    struct fin *f = arg;
    int rc = fenced(f, db, "requeue", NULL);
    if (rc != 0 || f->lost)
        return f->lost ? -1 : rc;
    if ((rc = episode_follows(f, db, "queued")) != 0)
        return rc;
    return event(db, f->job->id, "retry",
                 json_pack("{s:I, s:s}", "attempt", (json_int_t)f->job->attempt, "reason",
                           "the worker stopped"));
}

/* After a lost fence: the entry is acknowledged when the job is finished; when another worker
 * holds it, the entry is its business. */
static void after_lost(struct kfw *w, const struct kfw_job *job, const struct kf_log_ctx *lc) {
    const char *p[] = {job->id};
    PGresult *r = kf_db_exec(w->db, "job_state", 1, p);
    if (r == NULL || PQntuples(r) != 1) {
        if (r)
            PQclear(r);
        return;
    }
    const char *st = PQgetvalue(r, 0, 0);
    bool finished = strcmp(st, "queued") != 0 && strcmp(st, "running") != 0;
    kf_log(lc, KF_LOG_WARN, "fence lost: the job is %s at attempt %s (ours %ld)", st,
           PQgetvalue(r, 0, 1), job->attempt);
    PQclear(r);
    if (finished)
        kf_queue_ack(w->q, w->stream, job->entry, job->id);
}

void kfw_job_finish(struct kfw *w, const struct kfw_job *job, struct kfw_run *run) {
    struct kf_log_ctx lc = w->log;
    lc.job_id = job->id;
    struct fin f = {.w = w, .job = job, .run = run};
    snprintf(f.att, sizeof(f.att), "%ld", job->attempt);
    kf_db_tx_fn fn = run->outcome == KFW_RESULT      ? result_fn
                     : run->outcome == KFW_INFRA     ? infra_fn
                     : run->outcome == KFW_CANCELLED ? cancel_fn
                     : run->outcome == KFW_HANDBACK  ? handback_fn
                                                     : NULL;
    if (fn == NULL) {
        after_lost(w, job, &lc);
        return;
    }
    /* the database may be away for a while: keep trying for about a lease */
    int rc = -1;
    for (long i = 0; i <= w->cfg.lease_s; i++) {
        f.lost = false;
        rc = kf_db_tx(w->db, fn, &f, 5);
        if (rc == 0 || f.lost)
            break;
        const char *state = kf_db_sqlstate(w->db);
        if (kf_db_ok(w->db) &&
            (!strncmp(state, "22", 2) || !strncmp(state, "23", 2) || !strncmp(state, "42", 2))) {
            /* a data or program error: trying again writes the same thing (a bug; the lease
             * expires and the job is retried, then dead-lettered) */
            kf_log(&lc, KF_LOG_ERROR, "finishing failed for good (SQLSTATE %s): %s", state,
                   kf_db_error(w->db));
            break;
        }
        if (i % 10 == 0)
            kf_log(&lc, KF_LOG_WARN, "finishing failed, retrying: %s", kf_db_error(w->db));
        struct timespec s = {1, 0};
        nanosleep(&s, NULL);
    }
    if (f.lost) {
        after_lost(w, job, &lc);
        return;
    }
    if (rc != 0) {
        kf_log(&lc, KF_LOG_ERROR, "could not finish; the lease will expire: %s",
               kf_db_error(w->db));
        return;
    }
    if (run->outcome == KFW_INFRA && f.dead) {
        kf_log(&lc, KF_LOG_WARN, "dead after %ld attempts: %s", job->attempt, run->reason);
        if (kf_queue_dead_letter(w->q, job->id, f.klass, run->reason) != 0)
            kf_log(&lc, KF_LOG_WARN, "dead letter: %s", kf_queue_error(w->q));
    } else if (run->outcome == KFW_INFRA || run->outcome == KFW_HANDBACK) {
        char stream[128];
        kf_queue_stream(f.klass[0] ? f.klass : w->klass, stream, sizeof(stream));
        if (kf_queue_add(w->q, stream, job->id, NULL) != 0)
            kf_log(&lc, KF_LOG_WARN, "XADD %s: %s (the reconciler will)", stream,
                   kf_queue_error(w->q));
        kf_log(&lc, KF_LOG_INFO, "queued again (%s)", run->reason);
    } else if (run->outcome == KFW_RESULT) {
        kf_log(&lc, KF_LOG_INFO, "succeeded: %s",
               json_string_value(json_object_get(run->verdict, "status"))
                   ? json_string_value(json_object_get(run->verdict, "status"))
                   : "(check)");
    } else {
        kf_log(&lc, KF_LOG_INFO, "cancelled");
    }
    if (kf_queue_ack(w->q, w->stream, job->entry, job->id) != 0)
        kf_log(&lc, KF_LOG_WARN, "XACK: %s", kf_queue_error(w->q));
}
