/* readyz_get.c: GET /readyz. Ready when PostgreSQL and Redis answer and every class that needs
 * a worker has a live one. A class needs one when it is
 *   - named in the ready_classes setting (the fleet the operator runs),
 *   - registered by a worker (kforge:classes: until its last worker stops on purpose, or for
 *     class_forget_s after the last heartbeat when the workers crashed), or
 *   - the class of a queued or running job (work that waits for a worker).
 * 200 {"status": "ready", "database": "ok", "redis": "ok", "classes": {CLASS: {"workers",
 * "waiting"}}}; else 503 with the error shape: database_unavailable, queue_unavailable, or
 * no_live_worker naming the classes without one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "liveness.h"
#include "readyz_get.h"
#include "reply.h"

/* A class the check covers, with the jobs waiting for it. */
struct need {
    char name[64];
    long waiting;
    bool needed;
};

struct needs {
    int n;
    struct need c[KF_LIVE_CLASSES];
};

static struct need *need_of(struct needs *ns, const char *name, size_t len) {
    if (len == 0 || len >= sizeof ns->c[0].name)
        return NULL;
    for (int i = 0; i < ns->n; i++)
        if (strlen(ns->c[i].name) == len && strncmp(ns->c[i].name, name, len) == 0)
            return &ns->c[i];
    if (ns->n == KF_LIVE_CLASSES)
        return NULL;
    struct need *c = &ns->c[ns->n++];
    memset(c, 0, sizeof *c);
    memcpy(c->name, name, len);
    return c;
}

/* The ready_classes setting, "a,b" (blanks around names ignored). */
static void configured(struct needs *ns, const char *list) {
    for (const char *p = list ? list : ""; *p;) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, ",");
        size_t trim = len;
        while (trim > 0 && p[trim - 1] == ' ')
            trim--;
        struct need *c = need_of(ns, p, trim);
        if (c)
            c->needed = true;
        p += len;
    }
}

enum MHD_Result kf_readyz_get(struct kf_req *r) {
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    PGresult *res = kf_db_exec(db, "jobs_waiting", 0, NULL);
    kf_srv_db_put(r->srv, db);
    if (!res)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    struct needs ns = {.n = 0};
    for (int i = 0; i < PQntuples(res); i++) {
        struct need *c = need_of(&ns, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
        if (c) {
            c->waiting = strtol(PQgetvalue(res, i, 1), NULL, 10);
            c->needed = c->waiting > 0;
        }
    }
    PQclear(res);
    struct kf_live live;
    kf_liveness_get(r->srv, true, &live);
    if (!live.ok)
        return kf_reply_error(r, KF_E_QUEUE_UNAVAILABLE, NULL, NULL);
    configured(&ns, r->srv->cfg->ready_classes);
    for (int i = 0; i < live.n; i++) {
        struct need *c = need_of(&ns, live.c[i].name, strlen(live.c[i].name));
        if (c)
            c->needed |= live.c[i].registered || live.c[i].workers > 0;
    }
    char missing[512] = "";
    size_t used = 0;
    int n_missing = 0;
    json_t *classes = json_object();
    for (int i = 0; i < ns.n; i++) {
        const struct need *c = &ns.c[i];
        long workers = kf_live_workers(&live, c->name);
        if (!c->needed)
            continue;
        json_object_set_new(classes, c->name,
                            json_pack("{s:I, s:I}", "workers", (json_int_t)workers, "waiting",
                                      (json_int_t)c->waiting));
        if (workers > 0 || used + 80 >= sizeof missing)
            continue;
        int w = snprintf(missing + used, sizeof missing - used, "%s%s (%ld jobs waiting)",
                         n_missing ? ", " : "", c->name, c->waiting);
        used += w > 0 ? (size_t)w : 0;
        n_missing++;
    }
    if (n_missing > 0) {
        json_decref(classes);
        return kf_reply_error(
            r, KF_E_NO_LIVE_WORKER, NULL, "no live worker serves class%s %s; start a worker of %s",
            n_missing > 1 ? "es" : "", missing, n_missing > 1 ? "each" : "that class");
    }
    return kf_reply_json(r, MHD_HTTP_OK,
                         json_pack("{s:s, s:s, s:s, s:o}", "status", "ready", "database", "ok",
                                   "redis", "ok", "classes", classes ? classes : json_object()));
}
