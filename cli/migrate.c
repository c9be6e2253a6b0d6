/* migrate.c: `kforge migrate`. Applies migrations/NNNN_name.sql in numeric order, each file not
 * yet in schema_migrations; each file is one transaction that records itself, so a file that
 * fails leaves nothing behind. An advisory lock keeps two migrators apart. Idempotent. */
#include "cli.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"

#define MIGRATE_LOCK "1801876077" /* pg_advisory_lock key, shared by every `kforge migrate` */
#define MAX_FILES 1000

struct mfile {
    long version;
    char name[256];
};

static int by_version(const void *a, const void *b) {
    const struct mfile *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

/* The NNNN_*.sql files of dir, sorted by number. Returns the count or -1. */
static int list_files(const char *dir, struct mfile *out, int max) {
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        size_t len = strlen(e->d_name);
        char *end = NULL;
        long v = strtol(e->d_name, &end, 10);
        if (len < 5 || strcmp(e->d_name + len - 4, ".sql") != 0 || end == e->d_name ||
            *end != '_' || len >= sizeof(out[n].name))
            continue;
        out[n].version = v;
        snprintf(out[n].name, sizeof(out[n].name), "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof(out[0]), by_version);
    return n;
}

static bool exec_ok(struct kf_db *db, const char *sql, const char *what) {
    PGresult *r = kf_db_exec_sql(db, sql);
    if (r == NULL) {
        fprintf(stderr, "kforge migrate: %s: %s\n", what, kf_db_error(db));
        return false;
    }
    PQclear(r);
    return true;
}

static bool applied(struct kf_db *db, long version, bool *yes) {
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT 1 FROM schema_migrations WHERE version = %ld", version);
    PGresult *r = kf_db_exec_sql(db, sql);
    if (r == NULL) {
        fprintf(stderr, "kforge migrate: %s\n", kf_db_error(db));
        return false;
    }
    *yes = PQntuples(r) > 0;
    PQclear(r);
    return true;
}

int kfc_migrate(const char *database_url, const char *dir_opt, bool quiet) {
    char dir[PATH_MAX], err[256];
    if (dir_opt)
        snprintf(dir, sizeof(dir), "%s", dir_opt);
    else
        kfc_migrations_dir(dir, sizeof(dir));
    static struct mfile files[MAX_FILES];
    int n = list_files(dir, files, MAX_FILES);
    if (n < 0) {
        fprintf(stderr, "kforge migrate: cannot read %s\n", dir);
        return -1;
    }
    struct kf_db *db = kf_db_open(database_url, NULL, 0, err, sizeof(err));
    if (db == NULL) {
        fprintf(stderr, "kforge migrate: %s\n", err);
        return -1;
    }
    int rc = -1, done = 0;
    if (!exec_ok(db, "SET client_min_messages = warning", "settings") ||
        !exec_ok(db, "SELECT pg_advisory_lock(" MIGRATE_LOCK ")", "lock") ||
        !exec_ok(db,
                 "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
                 " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
                 "schema_migrations"))
        goto out;
    for (int i = 0; i < n; i++) {
        bool yes = false;
        if (!applied(db, files[i].version, &yes))
            goto out;
        if (yes)
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
        char *sql = kfc_read_file(path, NULL);
        if (sql == NULL) {
            fprintf(stderr, "kforge migrate: cannot read %s\n", path);
            goto out;
        }
        bool ok = exec_ok(db, sql, files[i].name);
        free(sql);
        if (!ok) {
            PGresult *r = kf_db_exec_sql(db, "ROLLBACK");
            if (r)
                PQclear(r);
            goto out;
        }
        if (!applied(db, files[i].version, &yes))
            goto out;
        if (!yes) {
            fprintf(stderr, "kforge migrate: %s did not record itself in schema_migrations\n",
                    files[i].name);
            goto out;
        }
        if (!quiet)
            printf("applied %s\n", files[i].name);
        done++;
    }
    if (!quiet && done == 0)
        printf("up to date (%d migrations)\n", n);
    rc = 0;
out:
    kf_db_close(db);
    return rc;
}

int kfc_migrate_main(int argc, char **argv) {
    const char *url_opt = NULL, *var_opt = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--database-url") == 0 && i + 1 < argc) {
            url_opt = argv[++i];
        } else if (strcmp(argv[i], "--var") == 0 && i + 1 < argc) {
            var_opt = argv[++i];
        } else {
            fprintf(stderr, "usage: kforge migrate [--database-url URL] [--var DIR]\n");
            return 2;
        }
    }
    char var[PATH_MAX], url[1024];
    kfc_var_dir(var_opt, var, sizeof(var));
    kfc_database_url(url_opt, var, url, sizeof(url));
    return kfc_migrate(url, NULL, false) == 0 ? 0 : 1;
}
