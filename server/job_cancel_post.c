/* job_cancel_post.c: POST /v1/jobs/{id}/cancel. A queued job is cancelled at once (with its
 * cancelled and done events, and its episode, when it has one, ends `cancelled`); a running
 * one gets cancel_requested, and its worker stops it under the fence and ends its episode; a
 * finished one is 409 job_finished. */
#include <string.h>

#include "enqueue.h"
#include "job_cancel_post.h"
#include "reply.h"

enum outcome { CANCELLED, REQUESTED, FINISHED, MISSING };

struct cancel {
    const char *id;
    enum outcome outcome;
};

static int changed(struct kf_db *db, const char *stmt, const char *id, bool *hit) {
    const char *p[] = {id};
    PGresult *res = kf_db_exec(db, stmt, 1, p);
    if (!res)
        return kf_tx_fail(db);
    *hit = PQntuples(res) > 0;
    PQclear(res);
    return 0;
}

static int tx(struct kf_db *db, void *arg) {
    struct cancel *c = arg;
    bool hit = false;
    int rc = changed(db, "job_cancel_queued", c->id, &hit);
    if (rc != 0)
        return rc;
    if (hit) {
        c->outcome = CANCELLED;
        const char *ep[] = {c->id};
        PGresult *er = kf_db_exec(db, "episode_cancel", 1, ep);
        if (!er)
            return kf_tx_fail(db);
        PQclear(er);
        static const char *const kinds[] = {"cancelled", "done"};
        for (int i = 0; i < 2; i++) {
            const char *p[] = {c->id, kinds[i], "{\"status\":\"cancelled\"}"};
            PGresult *res = kf_db_exec(db, "event_add", 3, p);
            if (!res)
                return kf_tx_fail(db);
            PQclear(res);
        }
        return 0;
    }
    if ((rc = changed(db, "job_cancel_running", c->id, &hit)) != 0)
        return rc;
    if (hit) {
        c->outcome = REQUESTED;
        return 0;
    }
    if ((rc = changed(db, "job_exists", c->id, &hit)) != 0)
        return rc;
    c->outcome = hit ? FINISHED : MISSING;
    return 0;
}

enum MHD_Result kf_job_cancel_post(struct kf_req *r) {
    struct cancel c = {.id = r->id, .outcome = MISSING};
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    enum MHD_Result ret = MHD_YES;
    bool ok = kf_db_tx(db, tx, &c, KF_SRV_TX_TRIES) == 0;
    if (!ok)
        ret = kf_reply_db_error(r, db);
    kf_srv_db_put(r->srv, db);
    if (!ok)
        return ret;
    if (c.outcome == MISSING)
        return kf_reply_error(r, KF_E_JOB_NOT_FOUND, NULL, NULL);
    if (c.outcome == FINISHED)
        return kf_reply_error(r, KF_E_JOB_FINISHED, NULL, NULL);
    return kf_reply_row(r, "job_get", r->id, KF_E_JOB_NOT_FOUND);
}
