/* task_get.c: GET /v1/tasks/{id}: the task, its source and its baselines. Its submitters (and
 * admin keys) see everything; anyone else reaches a task only through a published episode
 * (access.h), and sees its check verdict never and its source only when published with it. */
#include "access.h"
#include "reply.h"
#include "task_get.h"

enum MHD_Result kf_task_get(struct kf_req *r) {
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *params[] = {r->id, r->access >= KF_ACCESS_OWNER ? "true" : "false",
                            r->access >= KF_ACCESS_SOURCES ? "true" : "false"};
    PGresult *res = kf_db_exec(db, "task_get", 3, params);
    enum MHD_Result ret;
    if (!res)
        ret = kf_reply_db_error(r, db);
    else if (PQntuples(res) < 1)
        ret = kf_reply_error(r, KF_E_TASK_NOT_FOUND, NULL, NULL);
    else
        ret = kf_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    return ret;
}
