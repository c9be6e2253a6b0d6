/* enqueue.c: job and task rows, then the stream entry. */
#include <stdio.h>
#include <string.h>

#include "enqueue.h"
#include "liveness.h"
#include "reply.h"
#include "util.h"

int kf_tx_fail(struct kf_db *db) {
    return kf_db_retryable(db) ? KF_DB_RETRY : -1;
}

static int run(struct kf_db *db, const char *stmt, int n, const char *const *params) {
    PGresult *res = kf_db_exec(db, stmt, n, params);
    if (!res)
        return kf_tx_fail(db);
    PQclear(res);
    return 0;
}

int kf_job_insert(struct kf_db *db, struct kf_new_job *job) {
    if (kf_uuid_new(job->id) != 0)
        return -1;
    const char *p[] = {job->id,      job->kind,    job->klass,
                       job->backend, job->task_id, job->payload ? job->payload : "{}",
                       job->owner};
    int rc = run(db, "job_insert", 7, p);
    if (rc != 0)
        return rc;
    const char *e[] = {job->id};
    return run(db, "event_queued", 1, e);
}

void kf_job_dispatch(struct kf_req *r, const char *klass, const char *job_id) {
    char stream[128];
    kf_queue_stream(klass, stream, sizeof stream);
    struct kf_queue *q = kf_srv_queue_get(r->srv);
    int rc = q ? kf_queue_add(q, stream, job_id, NULL) : -1;
    if (rc != 0) {
        struct kf_log_ctx ctx = r->log;
        ctx.job_id = job_id;
        kf_log(&ctx, KF_LOG_WARN, "XADD %s failed (%s); the reconciler will re-add the job", stream,
               q ? kf_queue_error(q) : "redis unavailable");
    }
    kf_srv_queue_put(r->srv, q);
    kf_liveness_note(r, klass);
}

/* Records t->owner among the owners of the task t->id. */
static int add_owner(struct kf_db *db, const struct kf_new_task *t) {
    if (!t->owner)
        return 0;
    const char *p[] = {t->id, t->owner};
    return run(db, "task_owner_add", 2, p);
}

int kf_task_upsert(struct kf_db *db, struct kf_new_task *t) {
    t->created = false;
    t->job_id[0] = '\0';
    char id[37];
    if (kf_uuid_new(id) != 0)
        return -1;
    const char *p[] = {id, t->sha256, t->name, t->source, t->backend, t->suite};
    PGresult *res = kf_db_exec(db, "task_insert", 6, p);
    if (!res)
        return kf_tx_fail(db);
    t->created = PQntuples(res) == 1;
    PQclear(res);
    if (t->created) {
        snprintf(t->id, sizeof t->id, "%s", id);
        snprintf(t->status, sizeof t->status, "checking");
        struct kf_new_job job = {.kind = "check_task",
                                 .klass = t->klass,
                                 .backend = t->backend,
                                 .task_id = t->id,
                                 .payload = NULL,
                                 .owner = t->owner};
        int rc = kf_job_insert(db, &job);
        if (rc == 0)
            snprintf(t->job_id, sizeof t->job_id, "%s", job.id);
        return rc != 0 ? rc : add_owner(db, t);
    }
    const char *q[] = {t->sha256};
    res = kf_db_exec(db, "task_by_sha", 1, q);
    if (!res)
        return kf_tx_fail(db);
    if (PQntuples(res) != 1) {
        PQclear(res);
        return KF_DB_RETRY; /* the row it conflicted with is not visible yet */
    }
    snprintf(t->id, sizeof t->id, "%s", PQgetvalue(res, 0, 0));
    snprintf(t->status, sizeof t->status, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    return add_owner(db, t);
}

int kf_task_resolve(struct kf_db *db, struct kf_new_task *t, const char **task_id,
                    const char *admin, const char *owner, bool *missing, bool *invalid) {
    *missing = *invalid = false;
    if (t) {
        int rc = kf_task_upsert(db, t);
        if (rc != 0)
            return rc;
        *task_id = t->id;
        *invalid = strcmp(t->status, "invalid") == 0;
    } else {
        const char *p[] = {*task_id, admin, owner};
        PGresult *res = kf_db_exec(db, "task_status", 3, p);
        if (!res)
            return kf_tx_fail(db);
        *missing = PQntuples(res) != 1;
        *invalid = !*missing && strcmp(PQgetvalue(res, 0, 0), "invalid") == 0;
        PQclear(res);
    }
    return *missing || *invalid ? -1 : 0;
}

enum MHD_Result kf_reply_task_invalid(struct kf_req *r, struct kf_db *db, const char *task_id,
                                      const char *field) {
    const char *p[] = {task_id};
    PGresult *res = kf_db_exec(db, "task_check_reasons", 1, p);
    const char *reasons = res && PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "";
    enum MHD_Result ret =
        kf_reply_error(r, KF_E_TASK_INVALID, field, "the task failed its check: %s",
                       reasons[0] ? reasons : "no reason recorded");
    PQclear(res);
    return ret;
}
