/* readyz_get.c: GET /readyz: 200 when PostgreSQL and Redis both answer, else 503 naming the
 * one that does not. */
#include "readyz_get.h"
#include "reply.h"

enum MHD_Result kf_readyz_get(struct kf_req *r) {
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    PGresult *res = kf_db_exec(db, "ping", 0, NULL);
    bool db_ok = res != NULL;
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    if (!db_ok)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    struct kf_queue *q = kf_srv_queue_get(r->srv);
    bool q_ok = q && kf_queue_ping(q) == 0;
    kf_srv_queue_put(r->srv, q);
    if (!q_ok)
        return kf_reply_error(r, KF_E_QUEUE_UNAVAILABLE, NULL, NULL);
    return kf_reply_text(r, MHD_HTTP_OK,
                         "{\"status\":\"ready\",\"database\":\"ok\",\"redis\":\"ok\"}", 0);
}
