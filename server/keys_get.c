/* keys_get.c: GET /v1/keys[?owner=O] -> {"keys": [ApiKey...]}, newest first: ids, prefixes,
 * names, owners, scopes and dates; the secrets are not stored, so never shown. */
#include <stdlib.h>
#include <string.h>

#include "keys_get.h"
#include "keys_post.h"
#include "reply.h"

enum MHD_Result kf_keys_get(struct kf_req *r) {
    const char *owner = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "owner");
    if (owner && !kf_owner_valid(owner))
        return kf_reply_error(r, KF_E_INVALID_QUERY, "owner",
                              "owner: must match ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$");
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *params[] = {owner};
    PGresult *res = kf_db_exec(db, "key_list", 1, params);
    if (!res) {
        enum MHD_Result ret = kf_reply_db_error(r, db);
        kf_srv_db_put(r->srv, db);
        return ret;
    }
    kf_srv_db_put(r->srv, db);
    int rows = PQntuples(res);
    size_t cap = 32;
    for (int i = 0; i < rows; i++)
        cap += (size_t)PQgetlength(res, i, 0) + 1;
    char *out = malloc(cap);
    enum MHD_Result ret;
    if (!out) {
        ret = kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    } else {
        size_t len = 0;
        memcpy(out, "{\"keys\":[", 9);
        len = 9;
        for (int i = 0; i < rows; i++) {
            if (i)
                out[len++] = ',';
            size_t n = (size_t)PQgetlength(res, i, 0);
            memcpy(out + len, PQgetvalue(res, i, 0), n);
            len += n;
        }
        memcpy(out + len, "]}", 2);
        len += 2;
        ret = kf_reply_text(r, MHD_HTTP_OK, out, len);
        free(out);
    }
    PQclear(res);
    return ret;
}
