/* access.c: the access decision of routes whose {id} names an owned object: one statement per
 * kind of object (sql.c's see_*) gives the caller's level. */
#include <stdlib.h>

#include "access.h"
#include "auth.h"
#include "reply.h"
#include "routes.h"

void kf_access_viewer(const struct kf_req *r, const char **admin, const char **owner) {
    *admin = kf_auth_admin(r) ? "true" : "false";
    *owner = r->owner[0] ? r->owner : NULL;
}

/* The statement, the least level that lets the caller on, and the 404 of a kind. */
struct kind {
    const char *stmt;
    enum kf_access least;
    enum kf_err notfound;
};

static struct kind kind_of(enum kf_see see) {
    switch (see) {
    case KF_SEE_TASK:
        return (struct kind){"see_task", KF_ACCESS_RESULTS, KF_E_TASK_NOT_FOUND};
    case KF_SEE_JOB:
        return (struct kind){"see_job", KF_ACCESS_RESULTS, KF_E_JOB_NOT_FOUND};
    case KF_SEE_JOB_OWNER:
        return (struct kind){"see_job", KF_ACCESS_OWNER, KF_E_JOB_NOT_FOUND};
    case KF_SEE_EVALUATION:
        return (struct kind){"see_evaluation", KF_ACCESS_OWNER, KF_E_EVALUATION_NOT_FOUND};
    case KF_SEE_EPISODE:
        return (struct kind){"see_episode", KF_ACCESS_RESULTS, KF_E_EPISODE_NOT_FOUND};
    case KF_SEE_EPISODE_OWNER:
        return (struct kind){"see_episode", KF_ACCESS_OWNER, KF_E_EPISODE_NOT_FOUND};
    case KF_SEE_CANDIDATE:
        return (struct kind){"see_candidate", KF_ACCESS_SOURCES, KF_E_CANDIDATE_NOT_FOUND};
    case KF_SEE_NONE:
        break;
    }
    return (struct kind){NULL, KF_ACCESS_NONE, KF_E_NOT_FOUND};
}

enum MHD_Result kf_access_decide(struct kf_req *r) {
    r->access_done = true;
    r->access = KF_ACCESS_NONE;
    struct kind k = kind_of(r->route->see);
    if (!k.stmt)
        return MHD_YES;
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *admin, *owner;
    kf_access_viewer(r, &admin, &owner);
    const char *params[] = {r->id, admin, owner};
    PGresult *res = kf_db_exec(db, k.stmt, 3, params);
    if (!res) {
        enum MHD_Result ret = kf_reply_db_error(r, db);
        kf_srv_db_put(r->srv, db);
        return ret;
    }
    kf_srv_db_put(r->srv, db);
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
        r->access = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (r->access < (int)k.least)
        return kf_reply_error(r, k.notfound, NULL, NULL);
    return MHD_YES;
}
