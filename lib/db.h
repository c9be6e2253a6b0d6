/* db.h: the PostgreSQL layer on libpq. One struct kf_db is one connection, used by one thread
 * at a time; struct kf_db_pool lends connections to the server's threads. Statements are
 * prepared once per connection from a caller's table and run by name; a lost connection is
 * re-opened (and its statements re-prepared) on the next call. */
#ifndef KF_DB_H
#define KF_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

struct kf_db;
struct kf_db_pool;

/* A prepared statement: its name and SQL ($1, $2, ... with text parameters). */
struct kf_stmt {
    const char *name;
    const char *sql;
};

/* Opens a connection and prepares stmts[0..n) (the table must outlive the connection).
 * Returns NULL with a reason in err. The caller owns the result (kf_db_close). */
struct kf_db *kf_db_open(const char *url, const struct kf_stmt *stmts, size_t n, char *err,
                         size_t errlen);
void kf_db_close(struct kf_db *db);

/* Runs the prepared statement `name` with nparams text parameters (NULL = SQL NULL). Returns
 * the result, which the caller frees with PQclear, or NULL when the connection is down (after
 * one attempt to re-open it) or the statement failed: kf_db_error says why and
 * kf_db_sqlstate gives the SQLSTATE ("" when the connection failed). */
PGresult *kf_db_exec(struct kf_db *db, const char *name, int nparams, const char *const *params);

/* Runs SQL text without parameters (migrations, BEGIN/COMMIT). Same result rules. */
PGresult *kf_db_exec_sql(struct kf_db *db, const char *sql);

const char *kf_db_error(const struct kf_db *db);
const char *kf_db_sqlstate(const struct kf_db *db);

/* true when the connection is up (a cheap check, no round trip). */
bool kf_db_ok(const struct kf_db *db);

/* Runs fn(db, arg) in a SERIALIZABLE transaction: BEGIN, fn, COMMIT. fn returns 0 to commit,
 * -1 to roll back (an error the caller reports), or KF_DB_RETRY (it saw a statement fail with
 * a serialization failure 40001 or a deadlock 40P01). A failed COMMIT with those states, or
 * KF_DB_RETRY, rolls back and runs fn again, up to max_tries times after a random backoff
 * that grows with each try (up to 100 ms). Returns 0 committed, -1 failed (kf_db_error/sqlstate say
 * why). */
#define KF_DB_RETRY 1

/* The advisory lock key under which episodes.export_seq is drawn: whoever finishes an episode
 * takes pg_advisory_xact_lock(KF_EXPORT_LOCK_KEY) in that transaction before nextval, so that
 * export_seq follows commit order (server/export_get.h says why GET /v1/export needs it). */
#define KF_EXPORT_LOCK_KEY 8127346001LL
typedef int (*kf_db_tx_fn)(struct kf_db *db, void *arg);
int kf_db_tx(struct kf_db *db, kf_db_tx_fn fn, void *arg, int max_tries);

/* true when the last failure was a serialization failure or deadlock (retryable). */
bool kf_db_retryable(const struct kf_db *db);

/* A pool of n connections. kf_db_pool_get waits up to timeout_ms for a free one and returns
 * NULL when none came (or none can connect); give it back with kf_db_pool_put. */
struct kf_db_pool *kf_db_pool_open(const char *url, const struct kf_stmt *stmts, size_t nstmts,
                                   int n, char *err, size_t errlen);
struct kf_db *kf_db_pool_get(struct kf_db_pool *pool, int timeout_ms);
void kf_db_pool_put(struct kf_db_pool *pool, struct kf_db *db);
void kf_db_pool_close(struct kf_db_pool *pool);

#endif
