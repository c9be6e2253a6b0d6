/* job_get.c: GET /v1/jobs/{id}, the hot path: one prepared SELECT whose JSON is the reply. The
 * statement decides who sees the job (its owner, an admin key, anyone when its episode is
 * published: access.h's rule for jobs) in the same round trip, so the route needs no access
 * step before it; any other caller gets 404 job_not_found, as for an unknown id. */
#include "access.h"
#include "job_get.h"
#include "reply.h"

enum MHD_Result kf_job_get(struct kf_req *r) {
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *admin, *owner;
    kf_access_viewer(r, &admin, &owner);
    const char *params[] = {r->id, admin, owner};
    PGresult *res = kf_db_exec(db, "job_get_seen", 3, params);
    enum MHD_Result ret;
    if (!res)
        ret = kf_reply_db_error(r, db);
    else if (PQntuples(res) < 1)
        ret = kf_reply_error(r, KF_E_JOB_NOT_FOUND, NULL, NULL);
    else
        ret = kf_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    return ret;
}
