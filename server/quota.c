/* quota.c: an owner's usage against its quotas, in one statement (sql.c's quota_usage). */
#include <stdio.h>
#include <stdlib.h>

#include "auth.h"
#include "enqueue.h"
#include "quota.h"
#include "reply.h"

void kf_quota_init(struct kf_quota *q, const struct kf_req *r) {
    *q = (struct kf_quota){.max_jobs = r->srv->cfg->quota_active_jobs,
                           .max_gpu_s = r->srv->cfg->quota_gpu_s_per_day};
    if (!kf_auth_admin(r))
        snprintf(q->owner, sizeof q->owner, "%s", r->owner);
}

int kf_quota_tx(struct kf_db *db, struct kf_quota *q) {
    q->over = KF_E_OK;
    if (!q->owner[0])
        return 0;
    char jobs[24], gpu[40];
    snprintf(jobs, sizeof jobs, "%ld", q->max_jobs);
    snprintf(gpu, sizeof gpu, "%.17g", q->max_gpu_s);
    const char *p[] = {q->owner, jobs, gpu};
    PGresult *res = kf_db_exec(db, "quota_usage", 3, p);
    if (!res)
        return kf_tx_fail(db);
    if (PQntuples(res) != 1) {
        PQclear(res);
        return -1;
    }
    long max_jobs = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    double max_gpu = strtod(PQgetvalue(res, 0, 1), NULL);
    long active = strtol(PQgetvalue(res, 0, 2), NULL, 10);
    double used = strtod(PQgetvalue(res, 0, 3), NULL);
    long ages_out = PQgetisnull(res, 0, 4) ? 60 : strtol(PQgetvalue(res, 0, 4), NULL, 10);
    PQclear(res);
    if (max_jobs > 0 && active > max_jobs) {
        q->over = KF_E_JOB_QUOTA_EXCEEDED;
        q->retry_after = 30;
        snprintf(q->detail, sizeof q->detail,
                 "owner %.64s would have %ld queued or running jobs, more than its quota of %ld;"
                 " retry when one ends",
                 q->owner, active, max_jobs);
        return -1;
    }
    if (max_gpu > 0 && used >= max_gpu) {
        q->over = KF_E_GPU_QUOTA_EXCEEDED;
        q->retry_after = ages_out > 0 ? ages_out : 60;
        snprintf(q->detail, sizeof q->detail,
                 "owner %.64s used %.0f GPU-seconds in the last 24 hours (quota %.0f)", q->owner,
                 used, max_gpu);
        return -1;
    }
    return 0;
}

int kf_quota_write(struct kf_db *db, const struct kf_quota *q, kf_db_tx_fn fn, void *arg,
                   int tries) {
    if (!q->owner[0])
        return kf_db_tx(db, fn, arg, tries);
    const char *p[] = {q->owner};
    PGresult *res = kf_db_exec(db, "quota_lock", 1, p);
    if (!res)
        return -1;
    PQclear(res);
    int rc = kf_db_tx(db, fn, arg, tries);
    res = kf_db_exec(db, "quota_unlock", 1, p);
    PQclear(res); /* a failed unlock: the session's end releases it */
    return rc;
}

enum MHD_Result kf_quota_reply(struct kf_req *r, const struct kf_quota *q) {
    snprintf(r->retry_after, sizeof r->retry_after, "%ld", q->retry_after);
    return kf_reply_error(r, q->over, NULL, "%s", q->detail);
}
