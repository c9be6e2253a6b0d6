/* auth.c: a key is "kf_" PREFIX "_" SECRET; its row is found by prefix and the SHA-256 of the
 * whole key is compared in constant time. The row gives the key's owner and scopes. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "reply.h"
#include "routes.h"
#include "util.h"

static bool same_hex(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static bool rate_ok(struct kf_req *r) {
    long limit = r->srv->cfg->rate_limit;
    if (limit <= 0)
        return true;
    struct kf_queue *q = kf_srv_queue_get(r->srv);
    if (!q) {
        kf_reply_error(r, KF_E_QUEUE_UNAVAILABLE, NULL, NULL);
        return false;
    }
    int retry_after = 60;
    long n = kf_queue_rate_hit(q, r->key_id, &retry_after);
    kf_srv_queue_put(r->srv, q);
    if (n < 0) {
        kf_reply_error(r, KF_E_QUEUE_UNAVAILABLE, NULL, NULL);
        return false;
    }
    if (n > limit) {
        snprintf(r->retry_after, sizeof r->retry_after, "%d", retry_after > 0 ? retry_after : 1);
        kf_reply_error(r, KF_E_RATE_LIMITED, NULL, "more than %ld writes this minute", limit);
        return false;
    }
    return true;
}

unsigned kf_scopes_parse(const char *text) {
    unsigned bits = 0;
    while (*text) {
        size_t n = strcspn(text, ",");
        if (n == 5 && strncmp(text, "admin", 5) == 0)
            bits |= KF_SCOPE_ADMIN | KF_SCOPE_SUBMIT | KF_SCOPE_READ;
        else if (n == 6 && strncmp(text, "submit", 6) == 0)
            bits |= KF_SCOPE_SUBMIT | KF_SCOPE_READ;
        else if (n == 4 && strncmp(text, "read", 4) == 0)
            bits |= KF_SCOPE_READ;
        text += n + (text[n] == ',');
    }
    return bits;
}

bool kf_auth_admin(const struct kf_req *r) {
    return (r->scopes & KF_SCOPE_ADMIN) != 0;
}

bool kf_auth_check(struct kf_req *r, unsigned route_flags) {
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
        kf_reply_error(r, KF_E_UNAUTHORIZED, NULL, NULL);
        return false;
    }
    const char *key = h + 7;
    while (*key == ' ')
        key++;
    char prefix[9];
    if (strlen(key) >= 64 || !kf_apikey_prefix(key, prefix)) {
        kf_reply_error(r, KF_E_UNAUTHORIZED, NULL, "the key is malformed");
        return false;
    }
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db) {
        kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
        return false;
    }
    const char *params[] = {prefix};
    PGresult *res = kf_db_exec(db, "api_key", 1, params);
    if (!res) {
        kf_reply_db_error(r, db);
        kf_srv_db_put(r->srv, db);
        return false;
    }
    kf_srv_db_put(r->srv, db);
    char hash[65];
    kf_sha256_hex(key, strlen(key), hash);
    bool ok = PQntuples(res) == 1 && same_hex(hash, PQgetvalue(res, 0, 1)) &&
              strcmp(PQgetvalue(res, 0, 2), "f") == 0;
    if (ok) {
        snprintf(r->key_id, sizeof r->key_id, "%s", PQgetvalue(res, 0, 0));
        snprintf(r->owner, sizeof r->owner, "%s", PQgetvalue(res, 0, 3));
        r->scopes = kf_scopes_parse(PQgetvalue(res, 0, 4));
    }
    PQclear(res);
    if (!ok) {
        kf_reply_error(r, KF_E_FORBIDDEN, NULL, "unknown or revoked key");
        return false;
    }
    if ((route_flags & KF_RT_ADMIN) && !(r->scopes & KF_SCOPE_ADMIN)) {
        kf_reply_error(r, KF_E_FORBIDDEN, NULL, "this needs a key with the admin scope");
        return false;
    }
    if ((route_flags & KF_RT_WRITE) && !(r->scopes & KF_SCOPE_SUBMIT)) {
        kf_reply_error(r, KF_E_FORBIDDEN, NULL, "this needs a key with the submit scope");
        return false;
    }
    return !(route_flags & KF_RT_WRITE) || rate_ok(r);
}
