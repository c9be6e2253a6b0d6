/* reply.c: JSON responses and the one error-reply function. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "liveness.h"
#include "reply.h"

enum MHD_Result kf_reply_queue(struct kf_req *r, unsigned status, struct MHD_Response *resp) {
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    if (r->retry_after[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, r->retry_after);
    if (r->allow[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    /* one request per connection unless keep_alive: the next head comes on a new connection,
     * through the front door's check (conn_guard.h), never to libmicrohttpd's own parser */
    if (!r->srv->cfg->keep_alive)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    r->status = status;
    r->replied = true;
    enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result kf_reply_text(struct kf_req *r, unsigned status, const char *json, size_t len) {
    if (len == 0)
        len = strlen(json);
    size_t wlen = 0;
    char *with = status / 100 == 2 ? kf_liveness_annotate(json, len, r->warnings, &wlen) : NULL;
    struct MHD_Response *resp =
        with ? MHD_create_response_from_buffer(wlen, with, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(len, (void *)json, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        free(with);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return kf_reply_queue(r, status, resp);
}

enum MHD_Result kf_reply_json(struct kf_req *r, unsigned status, json_t *obj) {
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!text)
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "could not encode the reply");
    enum MHD_Result ret = kf_reply_text(r, status, text, 0);
    free(text);
    return ret;
}

enum MHD_Result kf_reply_error(struct kf_req *r, enum kf_err e, const char *field, const char *fmt,
                               ...) {
    const struct kf_err_info *info = kf_err_info(e);
    if (!info)
        info = kf_err_info(KF_E_INTERNAL);
    char msg[512];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    } else
        snprintf(msg, sizeof msg, "%s", info->hint);
    json_t *err =
        json_pack("{s:i, s:s, s:s}", "code", info->code, "name", info->name, "message", msg);
    if (err && field && field[0])
        json_object_set_new(err, "field", json_string(field));
    if (err)
        json_object_set_new(err, "request_id", json_string(r->request_id));
    json_t *body = err ? json_pack("{s:o}", "error", err) : NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    const char *out = text ? text
                           : "{\"error\":{\"code\":5000,\"name\":\"internal\","
                             "\"message\":\"out of memory\",\"request_id\":\"\"}}";
    unsigned status = text ? (unsigned)info->http_status : 500;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(out), (void *)out, MHD_RESPMEM_MUST_COPY);
    free(text);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == 503 && !r->retry_after[0])
        snprintf(r->retry_after, sizeof r->retry_after, "1");
    return kf_reply_queue(r, status, resp);
}

bool kf_db_down(struct kf_db *db) {
    const char *st = kf_db_sqlstate(db);
    return !st || !st[0] || strncmp(st, "08", 2) == 0 || strncmp(st, "57P", 3) == 0 ||
           !kf_db_ok(db);
}

enum MHD_Result kf_reply_db_error(struct kf_req *r, struct kf_db *db) {
    if (kf_db_down(db))
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    if (kf_db_retryable(db)) {
        /* a transaction that kept failing serialization (kf_db_tx gave up): the client retries */
        kf_log(&r->log, KF_LOG_WARN, "database: gave up after serialization failures (%s)",
               kf_db_sqlstate(db));
        return kf_reply_error(r, KF_E_CONTENTION, NULL, NULL);
    }
    kf_log(&r->log, KF_LOG_ERROR, "database: %s (%s)", kf_db_error(db), kf_db_sqlstate(db));
    return kf_reply_error(r, KF_E_INTERNAL, NULL, NULL);
}

enum MHD_Result kf_reply_row(struct kf_req *r, const char *stmt, const char *param,
                             enum kf_err notfound) {
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *params[] = {param};
    PGresult *res = kf_db_exec(db, stmt, 1, params);
    enum MHD_Result ret;
    if (!res)
        ret = kf_reply_db_error(r, db);
    else if (PQntuples(res) < 1)
        ret = kf_reply_error(r, notfound, NULL, NULL);
    else
        ret = kf_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    return ret;
}
