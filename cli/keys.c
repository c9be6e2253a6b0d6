/* keys.c: `kforge keys create [--name N]` (prints the new key alone: it is shown once, only its
 * SHA-256 is stored) and `kforge keys revoke PREFIX` (the 8 hex after "kf_", or the whole key). */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "db.h"
#include "util.h"

static const struct kf_stmt stmts[] = {
    {"key_insert", "INSERT INTO api_keys (id, prefix, hash, name) VALUES ($1::uuid, $2, $3, $4)"},
    {"key_revoke", "UPDATE api_keys SET revoked_at = now() WHERE prefix = $1"
                   " AND revoked_at IS NULL"},
    {"key_active", "SELECT 1 FROM api_keys WHERE prefix = $1 AND hash = $2"
                   " AND revoked_at IS NULL"},
};

#define N_STMTS (sizeof(stmts) / sizeof(stmts[0]))

static int insert_key(struct kf_db *db, const char *name, char key[64]) {
    char prefix[9], id[37], hash[65];
    if (kf_apikey_new(key, prefix) != 0 || kf_uuid_new(id) != 0) {
        fprintf(stderr, "kforge keys: no randomness\n");
        return -1;
    }
    kf_sha256_hex(key, strlen(key), hash);
    const char *p[] = {id, prefix, hash, name};
    PGresult *r = kf_db_exec(db, "key_insert", 4, p);
    if (r == NULL) {
        fprintf(stderr, "kforge keys: %s\n", kf_db_error(db));
        return -1;
    }
    PQclear(r);
    return 0;
}

int kfc_key_create(const char *url, const char *name, char key[64]) {
    char err[256];
    struct kf_db *db = kf_db_open(url, stmts, N_STMTS, err, sizeof(err));
    if (db == NULL) {
        fprintf(stderr, "kforge keys: %s\n", err);
        return -1;
    }
    int rc = insert_key(db, name, key);
    kf_db_close(db);
    return rc;
}

bool kfc_key_active(const char *url, const char *key) {
    char prefix[9], hash[65], err[256];
    if (!kf_apikey_prefix(key, prefix))
        return false;
    kf_sha256_hex(key, strlen(key), hash);
    struct kf_db *db = kf_db_open(url, stmts, N_STMTS, err, sizeof(err));
    if (db == NULL)
        return false;
    const char *p[] = {prefix, hash};
    PGresult *r = kf_db_exec(db, "key_active", 2, p);
    bool yes = r && PQntuples(r) == 1;
    if (r)
        PQclear(r);
    kf_db_close(db);
    return yes;
}

static int revoke(struct kf_db *db, const char *arg) {
    char prefix[9];
    if (!kf_apikey_prefix(arg, prefix))
        snprintf(prefix, sizeof(prefix), "%s", arg);
    const char *p[] = {prefix};
    PGresult *r = kf_db_exec(db, "key_revoke", 1, p);
    if (r == NULL) {
        fprintf(stderr, "kforge keys: %s\n", kf_db_error(db));
        return 1;
    }
    bool hit = strcmp(PQcmdTuples(r), "0") != 0;
    PQclear(r);
    if (!hit) {
        fprintf(stderr, "kforge keys: no active key with prefix %s\n", prefix);
        return 1;
    }
    printf("revoked %s\n", prefix);
    return 0;
}

int kfc_keys_main(int argc, char **argv) {
    const char *name = "cli", *url_opt = NULL, *var_opt = NULL, *action = NULL, *target = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
            name = argv[++i];
        else if (strcmp(argv[i], "--database-url") == 0 && i + 1 < argc)
            url_opt = argv[++i];
        else if (strcmp(argv[i], "--var") == 0 && i + 1 < argc)
            var_opt = argv[++i];
        else if (action == NULL)
            action = argv[i];
        else if (target == NULL)
            target = argv[i];
        else
            action = "";
    }
    bool create = action && strcmp(action, "create") == 0 && target == NULL;
    bool rev = action && strcmp(action, "revoke") == 0 && target != NULL;
    if (!create && !rev) {
        fprintf(stderr, "usage: kforge keys create [--name N] | kforge keys revoke PREFIX\n"
                        "       [--database-url URL] [--var DIR]\n");
        return 2;
    }
    char var[PATH_MAX], url[1024], err[256];
    kfc_var_dir(var_opt, var, sizeof(var));
    kfc_database_url(url_opt, var, url, sizeof(url));
    struct kf_db *db = kf_db_open(url, stmts, N_STMTS, err, sizeof(err));
    if (db == NULL) {
        fprintf(stderr, "kforge keys: %s\n", err);
        return 1;
    }
    int rc;
    if (create) {
        char key[64];
        rc = insert_key(db, name, key) == 0 ? 0 : 1;
        if (rc == 0)
            printf("%s\n", key);
    } else {
        rc = revoke(db, target);
    }
    kf_db_close(db);
    return rc;
}
