/* heartbeat.c: the heartbeat thread. Every heartbeat_s it renews the running job's lease under
 * the fence (lib/README.md, step 3): no row means the job was taken over or cancelled, so the
 * main thread is told to kill the harness (sh.lost); cancel_requested sets sh.cancel. It also
 * writes kforge:hb:WORKER = {"gpu","class","job","pid","host"} for /metrics, expiring after
 * three periods, and registers its class in kforge:classes (/readyz then needs a live worker of
 * it). When the worker stops on purpose it deletes its heartbeat, and the class is forgotten
 * when no other live worker serves it; a crashed worker leaves the class registered. Own
 * database and Redis connections. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Renews the lease of job/attempt; flags the shared state when the fence is gone or a cancel
 * was requested. */
static void renew(struct kfw *w, struct kf_db *db, const char *job, long attempt) {
    struct kf_log_ctx lc = w->log;
    lc.job_id = job;
    char att[24], lease[24];
    snprintf(att, sizeof(att), "%ld", attempt);
    snprintf(lease, sizeof(lease), "%ld", w->cfg.lease_s);
    const char *p[] = {job, att, lease};
    PGresult *r = kf_db_exec(db, "renew", 3, p);
    if (r == NULL) {
        kf_log(&lc, KF_LOG_WARN, "lease renewal failed: %s", kf_db_error(db));
        return;
    }
    bool lost = PQntuples(r) == 0;
    bool cancel = !lost && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    pthread_mutex_lock(&w->sh.mu);
    if (w->sh.active && w->sh.attempt == attempt && strcmp(w->sh.job_id, job) == 0) {
        if (lost && !w->sh.lost)
            kf_log(&lc, KF_LOG_WARN, "lease renewal touched no row: the fence is gone");
        if (cancel && !w->sh.cancel)
            kf_log(&lc, KF_LOG_INFO, "cancel requested");
        w->sh.lost |= lost;
        w->sh.cancel |= cancel;
    }
    pthread_mutex_unlock(&w->sh.mu);
}

static void beat(struct kfw *w, struct kf_queue *q, const char *job) {
    json_t *hb = json_pack("{s:o, s:s, s:o, s:I, s:s}", "gpu",
                           w->gpu >= 0 ? json_integer(w->gpu) : json_null(), "class", w->klass,
                           "job", job[0] ? json_string(job) : json_null(), "pid",
                           (json_int_t)getpid(), "host", w->host);
    char *text = json_dumps(hb, JSON_COMPACT);
    json_decref(hb);
    if (text && (kf_queue_heartbeat(q, w->name, text, (int)(3 * w->cfg.heartbeat_s)) != 0 ||
                 kf_queue_class_beat(q, w->klass) != 0))
        kf_log(&w->log, KF_LOG_WARN, "heartbeat: %s", kf_queue_error(q));
    free(text);
}

struct same_class {
    const char *klass;
    long n;
};

static void count_class(const char *worker, const char *json, void *arg) {
    struct same_class *sc = arg;
    (void)worker;
    json_t *hb = json_loads(json ? json : "{}", 0, NULL);
    const char *k = json_string_value(json_object_get(hb, "class"));
    if (k && strcmp(k, sc->klass) == 0)
        sc->n++;
    json_decref(hb);
}

/* The worker stops on purpose: its heartbeat goes, and its class when no live worker is left. */
static void leave(struct kfw *w, struct kf_queue *q) {
    struct same_class sc = {w->klass, 0};
    if (kf_queue_heartbeat_end(q, w->name) != 0 || kf_queue_heartbeats(q, count_class, &sc) < 0)
        return;
    if (sc.n == 0 && kf_queue_class_forget(q, w->klass) == 0)
        kf_log(&w->log, KF_LOG_INFO, "the last worker of class %s left", w->klass);
}

void *kfw_heartbeat_main(void *arg) {
    struct kfw *w = arg;
    struct kf_db *db = kfw_db_connect(w, true);
    struct kf_queue *q = db ? kfw_queue_connect(w, true) : NULL;
    while (q) {
        char job[40] = "";
        long attempt = 0;
        pthread_mutex_lock(&w->sh.mu);
        if (w->sh.active && !w->sh.lost) {
            snprintf(job, sizeof(job), "%s", w->sh.job_id);
            attempt = w->sh.attempt;
        }
        pthread_mutex_unlock(&w->sh.mu);
        if (job[0])
            renew(w, db, job, attempt);
        beat(w, q, job);
        if (kfw_thread_sleep(w, w->cfg.heartbeat_s * 1000))
            break;
    }
    if (q) {
        leave(w, q);
        kf_queue_close(q);
    }
    if (db)
        kf_db_close(db);
    return NULL;
}
