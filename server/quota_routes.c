/* quota_routes.c: the quotas of an owner over the API (quota.h says what they are).
 *
 * GET /v1/quota answers the Quota object: for each quota its owner's own value (null: the
 * server's setting), the limit in force (0: none) and what the owner uses of it now. A key sees
 * its own owner's; an admin key any owner's with ?owner=O. Another owner's name asked by a key
 * that is not an admin's is owner_not_found, as a name that does not exist: nothing says
 * whether it does.
 *
 * POST /v1/quota {"owner", "active_jobs"?, "gpu_seconds_per_day"?} sets an owner's own values
 * (an admin key's): a number (0: no limit), "default" for the server's setting again (as
 * `kforge keys quota`; a body holds no null), absent to leave it. The reply is the Quota object
 * after the change. */
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "enqueue.h"
#include "jspec.h"
#include "keys_post.h"
#include "quota_routes.h"
#include "reply.h"

/* The Quota object of owner, read on db; 404 owner_not_found when there is no such owner. */
static enum MHD_Result reply_quota(struct kf_req *r, struct kf_db *db, const char *owner) {
    char jobs[24], gpu[40];
    snprintf(jobs, sizeof jobs, "%ld", r->srv->cfg->quota_active_jobs);
    snprintf(gpu, sizeof gpu, "%.17g", r->srv->cfg->quota_gpu_s_per_day);
    const char *p[] = {owner, jobs, gpu};
    PGresult *res = kf_db_exec(db, "owner_quota_get", 3, p);
    enum MHD_Result ret;
    if (!res)
        ret = kf_reply_db_error(r, db);
    else if (PQntuples(res) != 1)
        ret = kf_reply_error(r, KF_E_OWNER_NOT_FOUND, "owner", NULL);
    else
        ret = kf_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
    PQclear(res);
    return ret;
}

enum MHD_Result kf_quota_get(struct kf_req *r) {
    const char *owner = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "owner");
    if (owner && !kf_owner_valid(owner))
        return kf_reply_error(r, KF_E_INVALID_QUERY, "owner",
                              "owner: must match ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$");
    if (!owner)
        owner = r->owner;
    else if (!kf_auth_admin(r) && strcmp(owner, r->owner) != 0)
        return kf_reply_error(r, KF_E_OWNER_NOT_FOUND, "owner", NULL);
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    enum MHD_Result ret = reply_quota(r, db, owner);
    kf_srv_db_put(r->srv, db);
    return ret;
}

struct quota_set {
    const char *owner;
    bool has_jobs, has_gpu; /* given, as a number or null */
    char jobs[24], gpu[40];
    bool jobs_null, gpu_null;
    bool found;
};

static int set_tx(struct kf_db *db, void *arg) {
    struct quota_set *q = arg;
    const char *p[] = {q->owner, q->has_jobs ? "true" : "false", q->jobs_null ? NULL : q->jobs,
                       q->has_gpu ? "true" : "false", q->gpu_null ? NULL : q->gpu};
    PGresult *res = kf_db_exec(db, "owner_quota_set", 5, p);
    if (!res)
        return kf_tx_fail(db);
    q->found = PQntuples(res) == 1;
    PQclear(res);
    return 0;
}

/* Whether obj's key is the string "default", which it then loses. */
static bool is_default(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || strcmp(json_string_value(v), "default") != 0)
        return false;
    json_object_del(obj, key);
    return true;
}

enum MHD_Result kf_quota_post(struct kf_req *r) {
    struct quota_set q = {0};
    int64_t jobs = 0;
    double gpu = 0;
    struct kf_jfield fields[] = {
        {.name = "owner", .type = KF_J_STRING, .required = true, .out = &q.owner, .max_len = 64},
        {.name = "active_jobs",
         .type = KF_J_INT,
         .out = &jobs,
         .present = &q.has_jobs,
         .min = 0,
         .max = 1000000},
        {.name = "gpu_seconds_per_day",
         .type = KF_J_NUMBER,
         .out = &gpu,
         .present = &q.has_gpu,
         .min = 0,
         .max = 1e12},
    };
    /* "default": back to the server's setting (taken out before the spec, which wants numbers) */
    q.jobs_null = is_default(r->json, "active_jobs");
    q.gpu_null = is_default(r->json, "gpu_seconds_per_day");
    struct kf_jerr err;
    if (kf_jspec_parse(r->json, fields, sizeof fields / sizeof fields[0], NULL, false, &err))
        return kf_reply_error(r, err.code, err.field, "%s", err.message);
    if (!kf_owner_valid(q.owner))
        return kf_reply_error(r, KF_E_INVALID_FIELD, "owner",
                              "owner: must match ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$");
    q.has_jobs = q.has_jobs || q.jobs_null;
    q.has_gpu = q.has_gpu || q.gpu_null;
    snprintf(q.jobs, sizeof q.jobs, "%lld", (long long)jobs);
    snprintf(q.gpu, sizeof q.gpu, "%.17g", gpu);
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    enum MHD_Result ret;
    if (kf_db_tx(db, set_tx, &q, KF_SRV_TX_TRIES) != 0)
        ret = kf_reply_db_error(r, db);
    else if (!q.found)
        ret = kf_reply_error(r, KF_E_OWNER_NOT_FOUND, "owner", NULL);
    else
        ret = reply_quota(r, db, q.owner);
    kf_srv_db_put(r->srv, db);
    return ret;
}
