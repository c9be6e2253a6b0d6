/* tasks_get.c: GET /v1/tasks: keyset pagination, newest first. The cursor is the last row's
 * "CREATED_MICROSECONDS_ID"; clients treat it as opaque. The caller sees the tasks its owner
 * submitted (with their checks) and those with a published episode (without); admin keys see
 * all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "reply.h"
#include "tasks_get.h"
#include "util.h"

/* Splits a cursor into its microseconds and id; false when malformed. */
static bool parse_cursor(const char *s, char micros[24], char id[37]) {
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 18 || s[n] != '_' || !kf_uuid_valid(s + n + 1))
        return false;
    memcpy(micros, s, n);
    micros[n] = '\0';
    snprintf(id, 37, "%s", s + n + 1);
    return true;
}

static bool parse_limit(const char *s, long *out) {
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 4 || s[n] != '\0')
        return false;
    *out = strtol(s, NULL, 10);
    return *out >= 1 && *out <= 200;
}

static enum MHD_Result reply_page(struct kf_req *r, PGresult *res, long limit) {
    int rows = PQntuples(res);
    int shown = rows > limit ? (int)limit : rows;
    size_t cap = 64;
    for (int i = 0; i < shown; i++)
        cap += (size_t)PQgetlength(res, i, 0) + 1;
    char *out = malloc(cap + 128);
    if (!out)
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    size_t len = (size_t)sprintf(out, "{\"tasks\":[");
    for (int i = 0; i < shown; i++) {
        if (i)
            out[len++] = ',';
        size_t n = (size_t)PQgetlength(res, i, 0);
        memcpy(out + len, PQgetvalue(res, i, 0), n);
        len += n;
    }
    if (rows > limit)
        len +=
            (size_t)snprintf(out + len, 128, "],\"next\":\"%s\"}", PQgetvalue(res, shown - 1, 1));
    else
        len += (size_t)snprintf(out + len, 128, "],\"next\":null}");
    enum MHD_Result ret = kf_reply_text(r, MHD_HTTP_OK, out, len);
    free(out);
    return ret;
}

enum MHD_Result kf_tasks_get(struct kf_req *r) {
    long limit = 50;
    const char *ls = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "limit");
    if (ls && !parse_limit(ls, &limit))
        return kf_reply_error(r, KF_E_INVALID_QUERY, "limit",
                              "limit: must be an integer from 1 to 200");
    char micros[24], id[37];
    const char *after = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "after");
    if (after && !parse_cursor(after, micros, id))
        return kf_reply_error(r, KF_E_INVALID_QUERY, "after",
                              "after: not a cursor this server gave");
    char lim[16];
    snprintf(lim, sizeof lim, "%ld", limit + 1);
    const char *admin, *owner;
    kf_access_viewer(r, &admin, &owner);
    const char *params[] = {after ? micros : NULL, after ? id : NULL, lim, admin, owner};
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    PGresult *res = kf_db_exec(db, "task_list", 5, params);
    enum MHD_Result ret = res ? reply_page(r, res, limit) : kf_reply_db_error(r, db);
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    return ret;
}
