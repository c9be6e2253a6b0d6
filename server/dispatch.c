/* dispatch.c: the dispatcher. MHD calls kf_dispatch several times per request: first with the
 * headers (routing, auth and the early errors happen there), then with pieces of the body,
 * then once more with nothing left, when the handler runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "access.h"
#include "auth.h"
#include "conn_guard.h"
#include "dispatch.h"
#include "jspec.h"
#include "metrics.h"
#include "reply.h"
#include "routes.h"
#include "static.h"
#include "util.h"

#define KF_URL_MAX 2048

void kf_dispatch_init(struct kf_server *srv) {
    size_t nr = 0;
    const struct kf_route *rt = kf_routes(&nr);
    if (nr > KF_MAX_LABELS - 2)
        nr = KF_MAX_LABELS - 2;
    int n = 0;
    for (size_t i = 0; i < nr; i++) {
        int l = 0;
        while (l < n && strcmp(srv->labels[l], rt[i].pattern) != 0)
            l++;
        if (l == n)
            srv->labels[n++] = rt[i].pattern;
        srv->route_label[i] = l;
    }
    srv->labels[n] = "static";
    srv->labels[n + 1] = "none";
    srv->nlabels = n + 2;
}

/* true when path matches pattern; a "{id}" segment matches any non-empty segment, copied into
 * id (up to 39 bytes; longer ones are kept long enough to fail UUID validation). */
static bool match(const char *pattern, const char *path, char id[40]) {
    const char *p = pattern, *u = path;
    while (*p && *u) {
        if (strncmp(p, "{id}", 4) == 0) {
            size_t n = strcspn(u, "/");
            if (n == 0)
                return false;
            size_t c = n < 39 ? n : 39;
            memcpy(id, u, c);
            id[c] = '\0';
            p += 4;
            u += n;
            continue;
        }
        if (*p != *u)
            return false;
        p++;
        u++;
    }
    return *p == '\0' && *u == '\0';
}

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static bool valid_request_id(const char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return n >= 1 && n <= 64;
}

static bool json_content_type(const char *ct) {
    if (!ct)
        return true;
    while (*ct == ' ')
        ct++;
    size_t n = strcspn(ct, "; ");
    return n == strlen("application/json") && strncasecmp(ct, "application/json", n) == 0;
}

/* Routes the request: sets r->route, r->id and r->label, or queues 404/405/400. */
static enum MHD_Result route(struct kf_req *r, const char *url, const char *method) {
    size_t nr = 0;
    const struct kf_route *rt = kf_routes(&nr);
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    bool path_known = false;
    for (size_t i = 0; i < nr; i++) {
        char id[40] = "";
        if (!match(rt[i].pattern, url, id))
            continue;
        if (!path_known)
            r->label = r->srv->route_label[i];
        path_known = true;
        size_t used = strlen(r->allow);
        if (!strstr(r->allow, rt[i].method) && used + 8 < sizeof r->allow)
            snprintf(r->allow + used, sizeof r->allow - used, "%s%s", used ? ", " : "",
                     rt[i].method);
        if (strcmp(rt[i].method, m) == 0) {
            r->route = &rt[i];
            r->label = r->srv->route_label[i];
            snprintf(r->id, sizeof r->id, "%s", id);
        }
    }
    if (r->route) {
        r->allow[0] = '\0';
        if (strstr(r->route->pattern, "{id}") && !kf_uuid_valid(r->id))
            return kf_reply_error(r, KF_E_INVALID_ID, "id", "the id in the path is not a UUID");
        return MHD_YES;
    }
    if (path_known)
        return kf_reply_error(r, KF_E_METHOD_NOT_ALLOWED, NULL, "%s is not allowed here; use %s",
                              method, r->allow);
    r->label = r->srv->nlabels - 1;
    if (strncmp(url, "/v1/", 4) != 0 && strcmp(url, "/v1") != 0) {
        r->label--;
        if (strcmp(m, "GET") == 0)
            return kf_static_serve(r, url);
        snprintf(r->allow, sizeof r->allow, "GET, HEAD");
        return kf_reply_error(r, KF_E_METHOD_NOT_ALLOWED, NULL, "%s is not allowed here; use GET",
                              method);
    }
    return kf_reply_error(r, KF_E_NOT_FOUND, NULL, "no route for %s", url);
}

/* The first call: everything decided from the request line and headers. */
static enum MHD_Result start(struct kf_req *r, const char *url, const char *method) {
    const struct kf_config *cfg = r->srv->cfg;
    if (strlen(url) > KF_URL_MAX)
        return kf_reply_error(r, KF_E_NOT_FOUND, NULL, "the URL is longer than %d bytes",
                              KF_URL_MAX);
    enum MHD_Result ret = route(r, url, method);
    if (r->replied || !r->route)
        return ret;
    if (strcmp(method, "POST") == 0) {
        const char *ct =
            MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        if ((r->route->flags & KF_RT_BODY) && !json_content_type(ct))
            return kf_reply_error(r, KF_E_UNSUPPORTED_MEDIA_TYPE, NULL,
                                  "the body must be application/json");
        const char *cl =
            MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)cfg->max_body_bytes)
            return kf_reply_error(r, KF_E_BODY_TOO_LARGE, NULL, "the body passed %ld bytes",
                                  cfg->max_body_bytes);
    }
    /* a read checks a key when one is sent (its owner sees its private objects), and needs one
     * when public_reads is off; on failure, the error is queued */
    unsigned fl = r->route->flags;
    bool sent = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization") != NULL;
    if ((fl & (KF_RT_WRITE | KF_RT_KEY | KF_RT_ADMIN)) ||
        ((fl & KF_RT_READ) && (sent || !cfg->public_reads)))
        kf_auth_check(r, fl);
    return MHD_YES;
}

static void body_append(struct kf_req *r, const char *data, size_t n) {
    size_t max = (size_t)r->srv->cfg->max_body_bytes;
    if (r->too_large)
        return;
    if (r->body.len + n > max) {
        r->too_large = true; /* decided now; the rest is drained unread */
        kf_buf_free(&r->body);
        return;
    }
    if (!kf_buf_append(&r->body, data, n))
        r->too_large = true;
}

/* The path of the first null in v (request bodies take no nulls: an optional field is left
 * out, not set to null) into path; false when there is none. */
static bool find_null(json_t *v, char *path, size_t n) {
    size_t len = strlen(path);
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        snprintf(path + len, n - len, "%s%s", len ? "." : "", key);
        if (json_is_null(val) || (json_is_object(val) && find_null(val, path, n)))
            return true;
        path[len] = '\0';
    }
    return false;
}

static struct kf_req *req_new(struct kf_server *srv, struct MHD_Connection *conn, const char *url,
                              const char *method) {
    struct kf_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->srv = srv;
    r->conn = conn;
    snprintf(r->url, sizeof r->url, "%s", url);
    snprintf(r->method, sizeof r->method, "%s", method);
    r->t0_us = now_us();
    r->label = -1;
    const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    if (rid && valid_request_id(rid))
        snprintf(r->request_id, sizeof r->request_id, "%s", rid);
    else if (kf_uuid_new(r->request_id) != 0)
        snprintf(r->request_id, sizeof r->request_id, "%p", (void *)r);
    r->log = srv->log;
    r->log.request_id = r->request_id;
    return r;
}

enum MHD_Result kf_dispatch(void *cls, struct MHD_Connection *conn, const char *url,
                            const char *method, const char *version, const char *upload_data,
                            size_t *upload_data_size, void **req_cls) {
    (void)version;
    struct kf_req *r = *req_cls;
    if (!r) {
        kf_guard_request_begins(((struct kf_server *)cls)->guard, conn);
        r = req_new(cls, conn, url, method);
        if (!r)
            return MHD_NO;
        *req_cls = r;
        return start(r, url, method);
    }
    if (*upload_data_size > 0) {
        if (!r->replied)
            body_append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->replied)
        return MHD_YES;
    if (r->too_large)
        return kf_reply_error(r, KF_E_BODY_TOO_LARGE, NULL, "the body passed %ld bytes",
                              r->srv->cfg->max_body_bytes);
    if ((r->route->flags & KF_RT_BODY) && !r->json) {
        struct kf_jerr err;
        r->json = kf_jspec_load_body(r->body.data ? r->body.data : "", r->body.len, &err);
        if (!r->json)
            return kf_reply_error(r, err.code ? err.code : KF_E_INVALID_JSON, NULL, "%s",
                                  err.message[0] ? err.message : "the body is not a JSON object");
        char path[256] = "";
        if (find_null(r->json, path, sizeof path))
            return kf_reply_error(r, KF_E_INVALID_FIELD, path, "%s: must not be null", path);
    }
    if (r->route->see != KF_SEE_NONE && !r->access_done) {
        enum MHD_Result ret = kf_access_decide(r);
        if (r->replied)
            return ret;
    }
    return r->route->handler(r);
}

void kf_dispatch_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                           enum MHD_RequestTerminationCode toe) {
    struct kf_server *srv = cls;
    struct kf_req *r = *req_cls;
    kf_guard_request_ends(srv->guard, conn); /* the next head's deadline starts now */
    if (!r)
        return;
    *req_cls = NULL;
    double secs = (double)(now_us() - r->t0_us) / 1e6;
    int label = r->label >= 0 && r->label < srv->nlabels ? r->label : srv->nlabels - 1;
    unsigned status = r->status ? r->status : 499; /* closed before an answer */
    kf_metrics_observe(srv->metrics, label, r->method, status, secs);
    kf_log(&r->log, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? KF_LOG_INFO : KF_LOG_WARN,
           "%s %s route=%s status=%u ms=%.2f%s", r->method, r->url, srv->labels[label], status,
           secs * 1000.0, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection lost)");
    if (r->hstate_free)
        r->hstate_free(r->hstate);
    json_decref(r->json);
    json_decref(r->warnings);
    kf_buf_free(&r->body);
    free(r);
}
