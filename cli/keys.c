/* keys.c: `kforge keys`, the keys of the database on the server's host (the same as the admin
 * API's /v1/keys, for when no admin key exists yet):
 *   create [--owner O] [--name N] [--scope read|submit|admin]...  prints the new key alone: it
 *          is shown once, only its SHA-256 is stored; the owner defaults to the name, the
 *          scope to submit
 *   list [--owner O]                      one key a line: prefix, owner, scopes, name, state
 *   revoke PREFIX                         the 8 hex after "kf_", or the whole key
 *   quota OWNER [--active-jobs N] [--gpu-s-per-day S]   the owner's own quotas ("default":
 *          the server's settings again), then prints them */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "util.h"

static const struct kf_stmt stmts[] = {
    {"owner_add", "INSERT INTO owners (name) VALUES ($1) ON CONFLICT DO NOTHING"},
    {"key_insert", "INSERT INTO api_keys (id, prefix, hash, name, owner, scopes)"
                   " VALUES ($1::uuid, $2, $3, $4, $5, string_to_array($6, ','))"},
    {"key_revoke", "UPDATE api_keys SET revoked_at = now() WHERE prefix = $1"
                   " AND revoked_at IS NULL"},
    {"key_active", "SELECT 1 FROM api_keys WHERE prefix = $1 AND hash = $2"
                   " AND revoked_at IS NULL"},
    {"key_list", "SELECT prefix, owner, array_to_string(scopes, ','), name,"
                 " CASE WHEN revoked_at IS NULL THEN 'active' ELSE 'revoked' END FROM api_keys"
                 " WHERE $1::text IS NULL OR owner = $1::text ORDER BY created_at, id"},
    {"owner_quota", "UPDATE owners SET max_active_jobs = CASE WHEN $2::boolean THEN $3::int"
                    " ELSE max_active_jobs END, gpu_seconds_per_day = CASE WHEN $4::boolean"
                    " THEN $5::float8 ELSE gpu_seconds_per_day END WHERE name = $1"
                    " RETURNING COALESCE(max_active_jobs::text, 'default'),"
                    " COALESCE(gpu_seconds_per_day::text, 'default')"},
};

#define N_STMTS (sizeof(stmts) / sizeof(stmts[0]))

/* true when s is an owner's name: ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$ (as the owners table) */
static bool owner_valid(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64 || strchr("._@-", s[0]))
        return false;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@-") == n;
}

static bool run(struct kf_db *db, const char *stmt, int n, const char *const *params) {
    PGresult *r = kf_db_exec(db, stmt, n, params);
    if (r == NULL) {
        fprintf(stderr, "kforge keys: %s\n", kf_db_error(db));
        return false;
    }
    PQclear(r);
    return true;
}

/* A new key of owner with scopes ("read", "submit,admin"...) named name, into key. */
static int insert_key(struct kf_db *db, const char *owner, const char *name, const char *scopes,
                      char key[64]) {
    char prefix[9], id[37], hash[65];
    if (kf_apikey_new(key, prefix) != 0 || kf_uuid_new(id) != 0) {
        fprintf(stderr, "kforge keys: no randomness\n");
        return -1;
    }
    kf_sha256_hex(key, strlen(key), hash);
    const char *o[] = {owner};
    const char *p[] = {id, prefix, hash, name, owner, scopes};
    return run(db, "owner_add", 1, o) && run(db, "key_insert", 6, p) ? 0 : -1;
}

int kfc_key_create(const char *url, const char *name, char key[64]) {
    char err[256];
    if (!owner_valid(name)) {
        fprintf(stderr, "kforge keys: %s is not an owner's name\n", name);
        return -1;
    }
    struct kf_db *db = kf_db_open(url, stmts, N_STMTS, err, sizeof(err));
    if (db == NULL) {
        fprintf(stderr, "kforge keys: %s\n", err);
        return -1;
    }
    int rc = insert_key(db, name, name, "admin", key);
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

static int list(struct kf_db *db, const char *owner) {
    const char *p[] = {owner};
    PGresult *r = kf_db_exec(db, "key_list", 1, p);
    if (r == NULL) {
        fprintf(stderr, "kforge keys: %s\n", kf_db_error(db));
        return 1;
    }
    for (int i = 0; i < PQntuples(r); i++)
        printf("%s\towner=%s\tscopes=%s\tname=%s\t%s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
               PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
    PQclear(r);
    return 0;
}

/* A quota's value: a non-negative number, or "default" (NULL: the server's setting). */
static bool quota_arg(const char *s, bool integer, const char **out) {
    if (strcmp(s, "default") == 0) {
        *out = NULL;
        return true;
    }
    char *end = NULL;
    double v = strtod(s, &end);
    *out = s;
    return end != s && *end == '\0' && v >= 0 && v <= 1e12 && (!integer || v == (long)v);
}

static int quota(struct kf_db *db, const char *owner, const char *jobs, const char *gpu) {
    const char *vj = NULL, *vg = NULL;
    if ((jobs && !quota_arg(jobs, true, &vj)) || (gpu && !quota_arg(gpu, false, &vg))) {
        fprintf(stderr, "kforge keys: a quota is a number >= 0 (jobs: an integer) or default\n");
        return 2;
    }
    const char *p[] = {owner, jobs ? "true" : "false", vj, gpu ? "true" : "false", vg};
    PGresult *r = kf_db_exec(db, "owner_quota", 5, p);
    if (r == NULL) {
        fprintf(stderr, "kforge keys: %s\n", kf_db_error(db));
        return 1;
    }
    int rc = 0;
    if (PQntuples(r) != 1) {
        fprintf(stderr, "kforge keys: no owner %s\n", owner);
        rc = 1;
    } else {
        printf("%s\tactive_jobs=%s\tgpu_s_per_day=%s\n", owner, PQgetvalue(r, 0, 0),
               PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return rc;
}

/* --scope values (repeated or comma-separated) as "read,submit,admin" in that order; false
 * when one is unknown. */
static bool add_scopes(const char *arg, bool want[3]) {
    static const char *const names[] = {"read", "submit", "admin"};
    while (*arg) {
        size_t n = strcspn(arg, ","), k = 0;
        while (k < 3 && !(strlen(names[k]) == n && strncmp(arg, names[k], n) == 0))
            k++;
        if (k == 3)
            return false;
        want[k] = true;
        arg += n + (arg[n] == ',');
    }
    return true;
}

static int usage(void) {
    fprintf(stderr,
            "usage: kforge keys create [--owner O] [--name N] [--scope read|submit|admin]...\n"
            "       kforge keys list [--owner O]\n"
            "       kforge keys revoke PREFIX\n"
            "       kforge keys quota OWNER [--active-jobs N|default] [--gpu-s-per-day S|default]\n"
            "       (each with [--database-url URL] [--var DIR])\n");
    return 2;
}

int kfc_keys_main(int argc, char **argv) {
    const char *name = NULL, *owner = NULL, *url_opt = NULL, *var_opt = NULL, *action = NULL,
               *target = NULL, *jobs = NULL, *gpu = NULL;
    bool want[3] = {false, false, false}, scoped = false;
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (strcmp(argv[i], "--name") == 0 && more)
            name = argv[++i];
        else if (strcmp(argv[i], "--owner") == 0 && more)
            owner = argv[++i];
        else if (strcmp(argv[i], "--scope") == 0 && more) {
            scoped = true;
            if (!add_scopes(argv[++i], want))
                return usage();
        } else if (strcmp(argv[i], "--active-jobs") == 0 && more)
            jobs = argv[++i];
        else if (strcmp(argv[i], "--gpu-s-per-day") == 0 && more)
            gpu = argv[++i];
        else if (strcmp(argv[i], "--database-url") == 0 && more)
            url_opt = argv[++i];
        else if (strcmp(argv[i], "--var") == 0 && more)
            var_opt = argv[++i];
        else if (action == NULL)
            action = argv[i];
        else if (target == NULL)
            target = argv[i];
        else
            return usage();
    }
    if (action == NULL)
        return usage();
    bool create = strcmp(action, "create") == 0 && target == NULL;
    bool lst = strcmp(action, "list") == 0 && target == NULL;
    bool rev = strcmp(action, "revoke") == 0 && target != NULL;
    bool quo = strcmp(action, "quota") == 0 && target != NULL;
    if (!create && !lst && !rev && !quo)
        return usage();
    if (create) {
        name = name ? name : owner ? owner : "cli";
        owner = owner ? owner : name;
    }
    const char *who = quo ? target : owner;
    if (who && !owner_valid(who)) {
        fprintf(stderr, "kforge keys: the owner must match ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$\n");
        return 2;
    }
    char scopes[32] = "submit";
    if (scoped) {
        scopes[0] = '\0';
        static const char *const names[] = {"read", "submit", "admin"};
        for (int k = 0; k < 3; k++)
            if (want[k])
                snprintf(scopes + strlen(scopes), sizeof(scopes) - strlen(scopes), "%s%s",
                         scopes[0] ? "," : "", names[k]);
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
        rc = insert_key(db, owner, name, scopes, key) == 0 ? 0 : 1;
        if (rc == 0)
            printf("%s\n", key);
    } else if (lst) {
        rc = list(db, owner);
    } else if (rev) {
        rc = revoke(db, target);
    } else {
        rc = quota(db, target, jobs, gpu);
    }
    kf_db_close(db);
    return rc;
}
