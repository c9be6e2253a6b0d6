/* key_revoke_post.c: POST /v1/keys/{id}/revoke -> 200 ApiKey with its revoked_at (the first
 * revocation's: revoking again changes nothing); an unknown id 404 key_not_found. A revoked
 * key is refused from its next request on (403 forbidden). */
#include "key_revoke_post.h"
#include "reply.h"

enum MHD_Result kf_key_revoke_post(struct kf_req *r) {
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *params[] = {r->id};
    PGresult *res = kf_db_exec(db, "key_revoke", 1, params);
    enum MHD_Result ret = MHD_YES;
    bool hit = res && PQntuples(res) == 1;
    if (!res)
        ret = kf_reply_db_error(r, db);
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    if (!res)
        return ret;
    if (!hit)
        return kf_reply_error(r, KF_E_KEY_NOT_FOUND, NULL, NULL);
    return kf_reply_row(r, "key_get", r->id, KF_E_KEY_NOT_FOUND);
}
