/* claim.c: from a stream entry to a claimed job (lib/README.md, steps 2 and 6). An entry only
 * says "look at job J"; the claim UPDATE decides, and its attempt is the fencing token. */
#include "worker.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kfw_job_free(struct kfw_job *job) {
    json_decref(job->payload);
    job->payload = NULL;
}

struct claim_tx {
    struct kfw *w;
    struct kfw_job *job;
    bool got;
};

/* The claim UPDATE and the `claimed` event in one transaction. */
static int claim_fn(struct kf_db *db, void *arg) {
    struct claim_tx *c = arg;
    struct kfw *w = c->w;
    char lease[24];
    snprintf(lease, sizeof(lease), "%ld", w->cfg.lease_s);
    const char *p[] = {c->job->id, w->name, lease};
    c->got = false;
    PGresult *r = kf_db_exec(db, "claim", 3, p);
    if (r == NULL)
        return kf_db_retryable(db) ? KF_DB_RETRY : -1;
    if (PQntuples(r) == 1) {
        c->got = true;
        c->job->attempt = strtol(PQgetvalue(r, 0, 0), NULL, 10);
        snprintf(c->job->kind, sizeof(c->job->kind), "%s", PQgetvalue(r, 0, 1));
        snprintf(c->job->backend, sizeof(c->job->backend), "%s", PQgetvalue(r, 0, 2));
        snprintf(c->job->task_id, sizeof(c->job->task_id), "%s", PQgetvalue(r, 0, 3));
        json_decref(c->job->payload);
        c->job->payload = json_loads(PQgetvalue(r, 0, 4), 0, NULL);
    }
    PQclear(r);
    if (!c->got)
        return 0;
    json_t *data = json_pack("{s:s, s:I, s:s}", "worker", w->name, "attempt",
                             (json_int_t)c->job->attempt, "host", w->host);
    char *text = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    const char *e[] = {c->job->id, "claimed", text ? text : "{}"};
    r = kf_db_exec(db, "event_any", 3, e);
    free(text);
    if (r == NULL)
        return kf_db_retryable(db) ? KF_DB_RETRY : -1;
    PQclear(r);
    return 0;
}

/* The next entry: an abandoned one first (its consumer went quiet for a lease), else a new
 * one. 1, 0 or -1; a missing group (Redis restarted) is created again. */
static int next_entry(struct kfw *w, struct kfw_job *job, int block_ms) {
    long idle_ms = w->cfg.lease_s * 1000;
    int r = kf_queue_autoclaim(w->q, w->stream, w->name, idle_ms, job->id, job->entry);
    if (r == 0)
        r = kf_queue_read(w->q, w->stream, w->name, block_ms, job->id, job->entry);
    if (r < 0) {
        kf_log(&w->log, KF_LOG_WARN, "reading %s: %s", w->stream, kf_queue_error(w->q));
        kf_queue_ensure_group(w->q, w->stream);
    }
    return r;
}

int kfw_claim_next(struct kfw *w, struct kfw_job *job, int block_ms) {
    memset(job, 0, sizeof(*job));
    int r = next_entry(w, job, block_ms);
    if (r <= 0)
        return r;
    struct kf_log_ctx lc = w->log;
    lc.job_id = job->id;
    if (!kf_uuid_valid(job->id)) {
        kf_log(&lc, KF_LOG_WARN, "stream entry %s has no job id: dropped", job->entry);
        kf_queue_ack(w->q, w->stream, job->entry, job->id);
        return 0;
    }
    struct claim_tx c = {w, job, false};
    if (kf_db_tx(w->db, claim_fn, &c, 5) != 0) {
        kf_log(&lc, KF_LOG_ERROR, "claim failed: %s", kf_db_error(w->db));
        kfw_job_free(job);
        return -1; /* the entry stays pending: XAUTOCLAIM brings it back after a lease */
    }
    if (!c.got) {
        kf_log(&lc, KF_LOG_DEBUG, "entry %s: job finished, cancelled or leased: dropped",
               job->entry);
        kf_queue_ack(w->q, w->stream, job->entry, job->id);
        kfw_job_free(job);
        return 0;
    }
    kf_log(&lc, KF_LOG_INFO, "claimed %s attempt=%ld task=%s", job->kind, job->attempt,
           job->task_id);
    return 1;
}
