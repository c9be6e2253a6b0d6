/* reconcile.c: the reconciler thread (lib/README.md, step 7). Every reconcile_s, one worker at a
 * time (pg_try_advisory_lock on this thread's own connection) puts back on their streams the
 * queued jobs not enqueued for reconcile_s and the running jobs whose lease expired, and sets
 * their enqueued_at: Redis losing its data loses no job. A job that still has an entry (the set
 * kforge:jobs:CLASS:ids, kept by kf_queue_add and kf_queue_ack) is left alone, so a long backlog
 * does not fill the stream with copies; a duplicate that does arise is harmless (the claim
 * UPDATE decides). */
#include "worker.h"

#include <stdio.h>

/* The advisory lock's key: "kfrc" as a number, shared by every worker. */
#define RECONCILE_LOCK "1801876067"

static void pass(struct kfw *w, struct kf_db *db, struct kf_queue *q) {
    const char *k[] = {RECONCILE_LOCK};
    PGresult *r = kf_db_exec(db, "try_lock", 1, k);
    if (r == NULL) {
        kf_log(&w->log, KF_LOG_WARN, "reconcile: %s", kf_db_error(db));
        return;
    }
    bool got = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!got)
        return; /* another worker is at it */
    char secs[24];
    snprintf(secs, sizeof(secs), "%ld", w->cfg.reconcile_s);
    const char *p[] = {secs};
    r = kf_db_exec(db, "reconcile", 1, p);
    if (r == NULL) {
        kf_log(&w->log, KF_LOG_WARN, "reconcile: %s", kf_db_error(db));
    } else {
        for (int i = 0; i < PQntuples(r); i++) {
            char stream[128];
            struct kf_log_ctx lc = w->log;
            lc.job_id = PQgetvalue(r, i, 0);
            kf_queue_stream(PQgetvalue(r, i, 1), stream, sizeof(stream));
            kf_queue_ensure_group(q, stream);
            int has = kf_queue_has_job(q, stream, lc.job_id);
            if (has == 1)
                continue; /* its entry waits its turn, or a dead worker's is XAUTOCLAIMed */
            if (kf_queue_add(q, stream, lc.job_id, NULL) != 0)
                kf_log(&lc, KF_LOG_WARN, "reconcile: XADD %s: %s", stream, kf_queue_error(q));
            else
                kf_log(&lc, KF_LOG_INFO, "reconcile: enqueued again on %s", stream);
        }
        PQclear(r);
    }
    r = kf_db_exec(db, "unlock", 1, k);
    if (r)
        PQclear(r);
}

void *kfw_reconcile_main(void *arg) {
    struct kfw *w = arg;
    struct kf_db *db = kfw_db_connect(w, true);
    struct kf_queue *q = db ? kfw_queue_connect(w, true) : NULL;
    while (q && !kfw_thread_sleep(w, w->cfg.reconcile_s * 1000))
        pass(w, db, q);
    if (q)
        kf_queue_close(q);
    if (db)
        kf_db_close(db);
    return NULL;
}
