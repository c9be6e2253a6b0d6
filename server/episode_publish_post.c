/* episode_publish_post.c: POST /v1/episodes/{id}/publish. The route lets only the episode's
 * owner (or an admin) on; anyone else gets the 404 of an episode that does not exist. The level
 * is the one POST /v1/optimize's `publish` sets (none, results, sources): it may be raised or
 * lowered whatever the episode's status, and the reply is the episode (without its turns) as its
 * owner sees it, `publish` included. */
#include <string.h>

#include "enqueue.h"
#include "episode_publish_post.h"
#include "episode_sql.h"
#include "jspec.h"
#include "reply.h"

static const char *const publish_levels[] = {"none", "results", "sources", NULL};

struct publish {
    const char *id, *level;
    bool found;
};

static int tx(struct kf_db *db, void *arg) {
    struct publish *p = arg;
    const char *params[] = {p->id, p->level};
    PGresult *res = kf_episode_sql_exec(db, "ep_publish", 2, params);
    if (!res)
        return kf_tx_fail(db);
    p->found = PQntuples(res) == 1;
    PQclear(res);
    return 0;
}

enum MHD_Result kf_episode_publish_post(struct kf_req *r) {
    struct publish p = {.id = r->id};
    struct kf_jfield fields[] = {
        {.name = "publish",
         .type = KF_J_ENUM,
         .required = true,
         .out = &p.level,
         .choices = publish_levels},
    };
    struct kf_jerr err;
    if (kf_jspec_parse(r->json, fields, sizeof fields / sizeof fields[0], NULL, false, &err))
        return kf_reply_error(r, err.code, err.field, "%s", err.message);
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    enum MHD_Result ret;
    if (kf_db_tx(db, tx, &p, KF_SRV_TX_TRIES) != 0) {
        ret = kf_reply_db_error(r, db);
    } else if (!p.found) { /* deleted since the access check */
        ret = kf_reply_error(r, KF_E_EPISODE_NOT_FOUND, NULL, NULL);
    } else {
        const char *params[] = {r->id, NULL, "false", "true"};
        PGresult *res = kf_episode_sql_exec(db, "ep_episode_get", 4, params);
        if (!res)
            ret = kf_reply_db_error(r, db);
        else if (PQntuples(res) < 1)
            ret = kf_reply_error(r, KF_E_EPISODE_NOT_FOUND, NULL, NULL);
        else
            ret = kf_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0),
                                (size_t)PQgetlength(res, 0, 0));
        PQclear(res);
    }
    kf_srv_db_put(r->srv, db);
    return ret;
}
