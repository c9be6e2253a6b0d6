/* leaderboard_get.c: GET /v1/leaderboard. The query is checked here, parameter by parameter
 * (400 invalid_query naming the first bad one); the ranking, the summary, the facets and the
 * echo of the filter all come from the one statement "leaderboard" of sql.c, so that the API
 * and the web UI, which shows this reply, cannot disagree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leaderboard_get.h"
#include "reply.h"
#include "tasks_post.h"
#include "util.h"

#define KF_LB_TEXT_MAX 256 /* device and model names */
#define KF_LB_LIMIT_MAX 1000

static const char *const backends[] = {"cuda", "cpu", NULL};
static const char *const policies[] = {"expert", "openai", NULL};
static const char *const pers[] = {"task", "entry", NULL};
static const char *const sorts[] = {"eager", "compile", "reward", "task", "recent", NULL};
static const char *const orders[] = {"desc", "asc", NULL};

/* 1..KF_LB_TEXT_MAX bytes of UTF-8 without control characters (an exact device or model) */
static bool text_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > KF_LB_TEXT_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return false;
    json_t *utf8 = json_string(s); /* NULL unless valid UTF-8 */
    json_decref(utf8);
    return utf8 != NULL;
}

static bool uuid_ok(const char *s) {
    return kf_uuid_valid(s);
}

static bool limit_ok(const char *s) {
    size_t n = strspn(s, "0123456789");
    long v = n >= 1 && n <= 4 && s[n] == '\0' ? strtol(s, NULL, 10) : 0;
    return v >= 1 && v <= KF_LB_LIMIT_MAX;
}

/* The parameters in the statement's order ($1..$10). */
static const struct {
    const char *name;
    const char *const *choices; /* one of these, or else check() */
    bool (*check)(const char *);
    const char *def; /* NULL: absent means any */
    const char *rule;
} params[] = {
    {"backend", backends, NULL, NULL, "must be one of cuda, cpu"},
    {"device", NULL, text_ok, NULL, "must be a device name of 1 to 256 bytes"},
    {"policy", policies, NULL, NULL, "must be one of expert, openai"},
    {"model", NULL, text_ok, NULL, "must be a model name of 1 to 256 bytes"},
    {"suite", NULL, kf_suite_valid, NULL, "must match ^[a-z0-9][a-z0-9._-]{0,63}$"},
    {"task_id", NULL, uuid_ok, NULL, "must be a UUID"},
    {"per", pers, NULL, "task", "must be one of task, entry"},
    {"sort", sorts, NULL, "eager", "must be one of eager, compile, reward, task, recent"},
    {"order", orders, NULL, "desc", "must be one of desc, asc"},
    {"limit", NULL, limit_ok, "200", "must be an integer from 1 to 1000"},
};

#define N_PARAMS (sizeof params / sizeof params[0])

static bool one_of(const char *v, const char *const *choices) {
    for (; *choices; choices++)
        if (strcmp(v, *choices) == 0)
            return true;
    return false;
}

enum MHD_Result kf_leaderboard_get(struct kf_req *r) {
    const char *values[N_PARAMS];
    for (size_t i = 0; i < N_PARAMS; i++) {
        const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, params[i].name);
        values[i] = v ? v : params[i].def;
        if (v && !(params[i].choices ? one_of(v, params[i].choices) : params[i].check(v)))
            return kf_reply_error(r, KF_E_INVALID_QUERY, params[i].name, "%s: %s", params[i].name,
                                  params[i].rule);
    }
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    PGresult *res = kf_db_exec(db, "leaderboard", (int)N_PARAMS, values);
    enum MHD_Result ret;
    if (!res)
        ret = kf_reply_db_error(r, db);
    else if (PQntuples(res) != 1)
        ret = kf_reply_error(r, KF_E_INTERNAL, NULL, "the leaderboard query gave no row");
    else
        ret = kf_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    return ret;
}
