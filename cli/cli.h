/* cli.h: the subcommands of build/kforge and the helpers they share (stack.c). */
#ifndef KF_CLI_H
#define KF_CLI_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Subcommands: argv[0] is the subcommand's name. Each returns the exit status. */
int kfc_migrate_main(int argc, char **argv);
int kfc_keys_main(int argc, char **argv);
int kfc_up_main(int argc, char **argv);
int kfc_down_main(int argc, char **argv);
int kfc_status_main(int argc, char **argv);
int kfc_eval_main(int argc, char **argv);

/* Applies the migrations/NNNN_name.sql files not yet recorded in schema_migrations, in numeric
 * order, under an advisory lock; prints each file it applied (unless quiet). 0, or -1 with the
 * reason on stderr. dir NULL: kfc_migrations_dir(). */
int kfc_migrate(const char *database_url, const char *dir, bool quiet);

/* A new admin API key (the operator's: `kforge up` makes one for var/api-key) named name and
 * owned by the owner of that name, stored (prefix and SHA-256 of the whole key) into key.
 * 0 or -1. */
int kfc_key_create(const char *url, const char *name, char key[64]);
/* true when key is stored and not revoked. */
bool kfc_key_active(const char *url, const char *key);

/* PostgreSQL's binaries: KFORGE_PG_BIN, else `pg_config --bindir`. */
void kfc_pg_bindir(char *out, size_t n);

/* Stops what var/ holds (down.c): workers (SIGTERM, they finish or hand back their job),
 * the server, Redis, then PostgreSQL (`pg_ctl stop -m fast`). Messages unless quiet. */
void kfc_stack_stop(const char *var, const char *pgbin, bool quiet);
/* Stops the workers and the server of var/ only (down.c). */
void kfc_programs_stop(const char *var, bool quiet);

/* The local stack's PostgreSQL and Redis (services.c; docs/security.md has the layout). The
 * strings in are borrowed; the URLs out name password files, never a password. */
struct kfc_services {
    const char *var;       /* in: the var folder, absolute */
    const char *pgbin;     /* in: PostgreSQL's binaries */
    const char *redis_bin; /* in: redis-server */
    const char *pg_user;   /* in: the user PostgreSQL runs as (kfc_pg_user()), NULL: ours */
    const char *pg_listen; /* in: listen_addresses (TCP), NULL: the Unix socket only */
    int pg_port;           /* in: the last run's, 0: none; out: the one in use */
    int redis_port;        /* in: the last run's, 0: none; out: the one in use */
    char db_url[2 * PATH_MAX + 128];
    char redis_url[PATH_MAX + 128];
};

/* Makes var/'s folders and gives them and the files already there their owners and modes
 * (services.c's layout), which also locks down a var/ of an older kforge. 0, or -1 with the
 * reason on stderr. */
int kfc_var_lockdown(const char *var, const char *pg_user);
/* PostgreSQL answers on s->db_url when this returns 0: started when it did not answer (then
 * *started), its password made on the first run, an older kforge's trusting cluster given the
 * password, the database kforge made and migrated. -1 with the reason on stderr. */
int kfc_pg_ensure(struct kfc_services *s, bool *started);
/* Redis answers on s->redis_url with its password when this returns 0: started when it did
 * not (then *started; on the last run's port where it is free, else another). */
int kfc_redis_ensure(struct kfc_services *s, bool *started);

/* The repository root: the folder above the executable's build/ (from /proc/self/exe). */
void kfc_repo_root(char *out, size_t n);
/* KFORGE_MIGRATIONS, else ROOT/migrations. */
void kfc_migrations_dir(char *out, size_t n);

/* The var folder: --var DIR if given, else KFORGE_VAR, else "var"; made absolute. */
void kfc_var_dir(const char *opt, char *out, size_t n);

/* Reads KEY from DIR/stack.env into out; false when absent. */
bool kfc_stack_get(const char *var, const char *key, char *out, size_t n);

/* The database URL: opt, else KFORGE_DATABASE_URL, else var/stack.env, else the default. */
void kfc_database_url(const char *opt, const char *var, char *out, size_t n);

/* Reads a whole file (NUL-terminated; *len may be NULL). NULL when it cannot. Caller frees. */
char *kfc_read_file(const char *path, size_t *len);
/* Writes text to path with mode (replacing it atomically). 0 or -1. */
int kfc_write_file(const char *path, const char *text, int mode);

/* An HTTP exchange (libcurl). body may be NULL (GET); key may be NULL. Returns the status
 * code, or -1 when no answer came (reason on stderr unless quiet). *resp (may be NULL) gets
 * the body, which the caller frees. */
long kfc_http(const char *method, const char *url, const char *key, const char *body, char **resp,
              long timeout_s, bool quiet);

/* A free TCP port on 127.0.0.1 (bound and released), or -1. */
int kfc_free_port(void);
/* true when port can be bound on 127.0.0.1 now (with SO_REUSEADDR, as servers bind). */
bool kfc_port_free(int port);

/* true when pid is alive and its executable's name ends with name. */
bool kfc_pid_is(pid_t pid, const char *name);
/* The pid in a pid file, or -1. */
pid_t kfc_read_pid(const char *path);

/* Runs argv (as user `as_user`, by setuid in the child, when non-NULL) and waits; returns the exit
 * status (-1 when it could not start). Output goes where ours goes unless log is non-NULL
 * (appended). */
int kfc_run(const char *as_user, const char *const argv[], const char *log);

/* The user PostgreSQL runs as: NULL when not root, else "postgres" or, where the host has no
 * such user, "nobody". Static storage. */
const char *kfc_pg_user(void);

/* The folder of this executable, where kforge-server, kforge-worker and kforge-jail sit
 * beside it (build/ in a checkout, libexec/ in a bundle). */
void kfc_bin_dir(char *out, size_t n);

#endif
