/* keys_post.c: POST /v1/keys {"owner", "name"?, "scopes"?}. One transaction records the owner
 * (new or not) and the key (its prefix and the SHA-256 of the whole key); the reply is 201
 * {"key": ApiKey, "secret": "kf_PREFIX_SECRET"}, the only time the secret is shown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "enqueue.h"
#include "jspec.h"
#include "keys_post.h"
#include "reply.h"
#include "util.h"

#define KF_KEY_NAME_MAX 128

static const char *const scope_names[] = {"read", "submit", "admin"};
#define N_SCOPES (sizeof scope_names / sizeof scope_names[0])

struct key_in {
    const char *owner, *name;
    char scopes[32]; /* "read,submit" */
    char id[37], prefix[9], hash[65];
};

bool kf_owner_valid(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64 || strchr("._@-", s[0]))
        return false;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@-") == n;
}

/* The scopes array (NULL: submit) as "a,b" in scope_names' order; false with 400 queued. */
static bool scopes_ok(struct kf_req *r, json_t *arr, char out[32]) {
    bool want[N_SCOPES] = {false, arr == NULL, false};
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        size_t k = 0;
        while (k < N_SCOPES &&
               !(json_is_string(v) && strcmp(json_string_value(v), scope_names[k]) == 0))
            k++;
        if (k == N_SCOPES) {
            kf_reply_error(r, KF_E_INVALID_FIELD, "scopes",
                           "scopes: each must be one of read, submit, admin");
            return false;
        }
        want[k] = true;
    }
    if (arr && json_array_size(arr) == 0) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "scopes",
                       "scopes: at least one of read, submit, admin");
        return false;
    }
    out[0] = '\0';
    for (size_t k = 0; k < N_SCOPES; k++)
        if (want[k])
            snprintf(out + strlen(out), 32 - strlen(out), "%s%s", out[0] ? "," : "",
                     scope_names[k]);
    return true;
}

static int tx(struct kf_db *db, void *arg) {
    const struct key_in *in = arg;
    const char *o[] = {in->owner};
    PGresult *res = kf_db_exec(db, "owner_add", 1, o);
    if (!res)
        return kf_tx_fail(db);
    PQclear(res);
    const char *k[] = {in->id, in->prefix, in->hash, in->name, in->owner, in->scopes};
    res = kf_db_exec(db, "key_insert", 6, k);
    if (!res)
        return kf_tx_fail(db);
    PQclear(res);
    return 0;
}

/* 201 {"key": the stored row, "secret": key}, read back on db. */
static enum MHD_Result reply(struct kf_req *r, struct kf_db *db, const char *id, const char *key) {
    const char *p[] = {id};
    PGresult *res = kf_db_exec(db, "key_get", 1, p);
    if (!res)
        return kf_reply_db_error(r, db);
    json_error_t jerr;
    json_t *row = PQntuples(res) == 1 ? json_loads(PQgetvalue(res, 0, 0), 0, &jerr) : NULL;
    PQclear(res);
    json_t *out = row ? json_pack("{s:o, s:s}", "key", row, "secret", key) : NULL;
    if (!out)
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "the key just stored could not be read");
    return kf_reply_json(r, MHD_HTTP_CREATED, out);
}

enum MHD_Result kf_keys_post(struct kf_req *r) {
    struct key_in in = {0};
    json_t *scopes = NULL;
    struct kf_jfield fields[] = {
        {.name = "owner", .type = KF_J_STRING, .required = true, .out = &in.owner, .max_len = 64},
        {.name = "name", .type = KF_J_STRING, .out = &in.name, .max_len = KF_KEY_NAME_MAX},
        {.name = "scopes", .type = KF_J_ARRAY, .out = &scopes, .max_len = N_SCOPES},
    };
    struct kf_jerr err;
    if (kf_jspec_parse(r->json, fields, sizeof fields / sizeof fields[0], NULL, false, &err))
        return kf_reply_error(r, err.code, err.field, "%s", err.message);
    if (!kf_owner_valid(in.owner))
        return kf_reply_error(r, KF_E_INVALID_FIELD, "owner",
                              "owner: must match ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$");
    if (in.name && !in.name[0])
        return kf_reply_error(r, KF_E_INVALID_FIELD, "name", "name: must not be empty");
    if (!in.name)
        in.name = in.owner;
    if (!scopes_ok(r, scopes, in.scopes))
        return MHD_YES;
    char key[64];
    if (kf_apikey_new(key, in.prefix) != 0 || kf_uuid_new(in.id) != 0)
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "no randomness");
    kf_sha256_hex(key, strlen(key), in.hash);
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    enum MHD_Result ret = kf_db_tx(db, tx, &in, KF_SRV_TX_TRIES) == 0 ? reply(r, db, in.id, key)
                                                                      : kf_reply_db_error(r, db);
    kf_srv_db_put(r->srv, db);
    memset(key, 0, sizeof key);
    return ret;
}
