/* db.c: libpq connections with their prepared statements, a transaction helper that retries
 * serialization failures, and a pool that connects lazily. */
#include "db.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

/* Added to a URL that does not set them: a dead server answers within ~2 s. */
#define KF_DB_CONNECT_TIMEOUT "connect_timeout=2"
#define KF_DB_KEEPALIVES                                                                           \
    "keepalives=1 keepalives_idle=10 keepalives_interval=2 keepalives_count=3 "                    \
    "tcp_user_timeout=10000"

struct kf_db {
    PGconn *conn;                /* NULL until connected */
    char *conninfo;              /* the URL plus our timeouts; owned */
    const struct kf_stmt *stmts; /* borrowed from the caller */
    size_t nstmts;
    char error[512];
    char sqlstate[6];
    bool lost_tx; /* the connection died inside a transaction that nobody ended yet */
};

struct kf_db_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct kf_db **all;  /* n connections, owned */
    struct kf_db **idle; /* the ones not lent, a stack */
    int n, nidle;
};

static void set_error(struct kf_db *db, const char *sqlstate, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_error(struct kf_db *db, const char *sqlstate, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->error, sizeof(db->error), fmt, ap);
    va_end(ap);
    size_t len = strlen(db->error);
    while (len > 0 && (db->error[len - 1] == '\n' || db->error[len - 1] == ' '))
        db->error[--len] = '\0';
    snprintf(db->sqlstate, sizeof(db->sqlstate), "%s", sqlstate != NULL ? sqlstate : "");
}

static void clear_error(struct kf_db *db) {
    db->error[0] = '\0';
    db->sqlstate[0] = '\0';
}

static bool is_uri(const char *url) {
    return strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
}

/* One "key=value ..." group appended to a URI (as &key=value) or a conninfo string. */
static void append_params(char *out, size_t n, const char *params, bool uri) {
    size_t len = strlen(out);
    if (!uri) {
        snprintf(out + len, n - len, "%s%s", len > 0 ? " " : "", params);
        return;
    }
    char sep = strchr(out, '?') != NULL ? '&' : '?';
    for (const char *p = params; *p != '\0' && len + 2 < n;) {
        size_t w = strcspn(p, " ");
        len += (size_t)snprintf(out + len, n - len, "%c%.*s", sep, (int)w, p);
        sep = '&';
        p += w;
        p += *p == ' ';
    }
}

/* The URL with connect_timeout and TCP keepalives added where it does not set them. Owned by
 * the caller (free); NULL when out of memory. */
static char *build_conninfo(const char *url) {
    size_t len = strlen(url);
    size_t n = len + sizeof(KF_DB_CONNECT_TIMEOUT) + sizeof(KF_DB_KEEPALIVES) + 32;
    char *out = malloc(n);
    if (out == NULL)
        return NULL;
    memcpy(out, url, len + 1);
    bool uri = is_uri(url);
    if (strstr(url, "connect_timeout") == NULL)
        append_params(out, n, KF_DB_CONNECT_TIMEOUT, uri);
    if (strstr(url, "keepalives") == NULL && strstr(url, "tcp_user_timeout") == NULL)
        append_params(out, n, KF_DB_KEEPALIVES, uri);
    return out;
}

static void quiet_notices(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static void disconnect(struct kf_db *db) {
    if (db->conn != NULL)
        PQfinish(db->conn);
    db->conn = NULL;
}

static int prepare_all(struct kf_db *db) {
    for (size_t i = 0; i < db->nstmts; i++) {
        PGresult *r = PQprepare(db->conn, db->stmts[i].name, db->stmts[i].sql, 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            set_error(db, state, "preparing %s: %s", db->stmts[i].name,
                      r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(db->conn));
            PQclear(r);
            return -1;
        }
        PQclear(r);
    }
    return 0;
}

/* (Re)connects and prepares the statements. 0, or -1 with the error set. */
static int db_connect(struct kf_db *db) {
    disconnect(db);
    db->conn = PQconnectdb(db->conninfo);
    if (db->conn == NULL) {
        set_error(db, "", "connecting: out of memory");
        return -1;
    }
    if (PQstatus(db->conn) != CONNECTION_OK) {
        set_error(db, "", "connecting: %s", PQerrorMessage(db->conn));
        disconnect(db);
        return -1;
    }
    PQsetErrorVerbosity(db->conn, PQERRORS_DEFAULT);
    PQsetNoticeProcessor(db->conn, quiet_notices, NULL);
    if (prepare_all(db) != 0) {
        disconnect(db);
        return -1;
    }
    clear_error(db);
    return 0;
}

/* A connection object that has not connected yet. Owned by the caller (db_free). */
static struct kf_db *db_new(const char *url, const struct kf_stmt *stmts, size_t n) {
    struct kf_db *db = calloc(1, sizeof(*db));
    if (db == NULL)
        return NULL;
    db->conninfo = build_conninfo(url);
    if (db->conninfo == NULL) {
        free(db);
        return NULL;
    }
    db->stmts = stmts;
    db->nstmts = n;
    return db;
}

struct kf_db *kf_db_open(const char *url, const struct kf_stmt *stmts, size_t n, char *err,
                         size_t errlen) {
    if (url == NULL || (stmts == NULL && n > 0)) {
        snprintf(err, errlen, "kf_db_open: bad arguments");
        return NULL;
    }
    struct kf_db *db = db_new(url, stmts, n);
    if (db == NULL) {
        snprintf(err, errlen, "kf_db_open: out of memory");
        return NULL;
    }
    if (db_connect(db) != 0) {
        snprintf(err, errlen, "%s", db->error);
        kf_db_close(db);
        return NULL;
    }
    return db;
}

void kf_db_close(struct kf_db *db) {
    if (db == NULL)
        return;
    disconnect(db);
    free(db->conninfo);
    free(db);
}

bool kf_db_ok(const struct kf_db *db) {
    return db != NULL && db->conn != NULL && PQstatus(db->conn) == CONNECTION_OK;
}

const char *kf_db_error(const struct kf_db *db) {
    return db->error;
}

const char *kf_db_sqlstate(const struct kf_db *db) {
    return db->sqlstate;
}

bool kf_db_retryable(const struct kf_db *db) {
    return strcmp(db->sqlstate, "40001") == 0 || strcmp(db->sqlstate, "40P01") == 0;
}

/* What one statement does: prepared (name, params) or plain SQL text. */
struct call {
    const char *name;
    const char *sql;
    int nparams;
    const char *const *params;
};

static PGresult *send_call(struct kf_db *db, const struct call *c) {
    if (c->sql != NULL)
        return PQexec(db->conn, c->sql);
    return PQexecPrepared(db->conn, c->name, c->nparams, c->params, NULL, NULL, 0);
}

/* Keeps a good result; otherwise records why and frees it. */
static PGresult *check_result(struct kf_db *db, PGresult *r) {
    ExecStatusType st = PQresultStatus(r);
    if (r != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
        clear_error(db);
        return r;
    }
    bool down = PQstatus(db->conn) != CONNECTION_OK;
    const char *state = down ? "" : PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *msg = r != NULL ? PQresultErrorMessage(r) : "";
    if (msg[0] == '\0')
        msg = PQerrorMessage(db->conn);
    if (msg[0] == '\0')
        msg = PQresStatus(st);
    set_error(db, state, "%s", msg);
    PQclear(r);
    return NULL;
}

/* true when sql starts with word (case-insensitive, leading blanks skipped). */
static bool starts_with(const char *sql, const char *word) {
    sql += strspn(sql, " \t\r\n");
    return strncasecmp(sql, word, strlen(word)) == 0;
}

/* After the connection died inside a transaction, statements must not run on a new one as if
 * nothing happened: they fail until the caller ends the transaction (ROLLBACK, COMMIT, which
 * then fails, or a new BEGIN). true when c may run. */
static bool tx_gate(struct kf_db *db, const struct call *c) {
    if (!db->lost_tx)
        return true;
    bool ends = c->sql != NULL && (starts_with(c->sql, "ROLLBACK") ||
                                   starts_with(c->sql, "COMMIT") || starts_with(c->sql, "BEGIN"));
    if (ends)
        db->lost_tx = false;
    if (ends && !starts_with(c->sql, "COMMIT"))
        return true;
    set_error(db, "", "the connection was lost inside a transaction, which was rolled back");
    return false;
}

/* Runs c, re-opening the connection once when it is down (before the call, or lost during a
 * call made outside a transaction). */
static PGresult *run_call(struct kf_db *db, const struct call *c) {
    clear_error(db);
    if (!tx_gate(db, c))
        return NULL;
    bool reopened = false;
    if (!kf_db_ok(db)) {
        if (db_connect(db) != 0)
            return NULL;
        reopened = true;
    }
    bool idle = PQtransactionStatus(db->conn) == PQTRANS_IDLE;
    PGresult *r = check_result(db, send_call(db, c));
    if (r != NULL || kf_db_ok(db))
        return r;
    if (!idle && !(c->sql != NULL && starts_with(c->sql, "ROLLBACK")))
        db->lost_tx = true;
    if (reopened || !idle)
        return NULL;
    if (db_connect(db) != 0)
        return NULL;
    return check_result(db, send_call(db, c));
}

PGresult *kf_db_exec(struct kf_db *db, const char *name, int nparams, const char *const *params) {
    struct call c = {.name = name, .sql = NULL, .nparams = nparams, .params = params};
    return run_call(db, &c);
}

PGresult *kf_db_exec_sql(struct kf_db *db, const char *sql) {
    struct call c = {.name = NULL, .sql = sql, .nparams = 0, .params = NULL};
    return run_call(db, &c);
}

/* ---- transactions ---- */

/* Before try number `attempt` (1, 2, ...): a random wait of 1 ms up to 2^attempt ms, at most
 * 100 ms, so that transactions that collided spread out more each time they collide again. */
static void backoff(int attempt) {
    unsigned short b = 0;
    if (getrandom(&b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b))
        b = (unsigned short)(clock() & 0xffff);
    long span = attempt < 7 ? 1L << attempt : 100;
    struct timespec ts = {0, (1 + (long)b % span) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ROLLBACK, keeping the error that caused it. */
static void rollback(struct kf_db *db) {
    char error[sizeof(db->error)], state[sizeof(db->sqlstate)];
    memcpy(error, db->error, sizeof(error));
    memcpy(state, db->sqlstate, sizeof(state));
    if (kf_db_ok(db) && PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        PQclear(kf_db_exec_sql(db, "ROLLBACK"));
    db->lost_tx = false;
    memcpy(db->error, error, sizeof(error));
    memcpy(db->sqlstate, state, sizeof(state));
}

/* COMMIT: 0, or -1 with the error set (a COMMIT of a failed transaction rolls back). */
static int commit(struct kf_db *db) {
    PGresult *r = kf_db_exec_sql(db, "COMMIT");
    if (r == NULL)
        return -1;
    bool rolled_back = strcmp(PQcmdStatus(r), "ROLLBACK") == 0;
    PQclear(r);
    if (rolled_back) {
        set_error(db, "25P02", "the transaction failed and was rolled back");
        return -1;
    }
    return 0;
}

/* One attempt: 0 committed, -1 failed for good, KF_DB_RETRY to try again. */
static int tx_once(struct kf_db *db, kf_db_tx_fn fn, void *arg) {
    PGresult *r = kf_db_exec_sql(db, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    if (r == NULL)
        return -1;
    PQclear(r);
    int rc = fn(db, arg);
    if (rc == 0) {
        if (commit(db) == 0)
            return 0;
        rollback(db);
        return kf_db_retryable(db) ? KF_DB_RETRY : -1;
    }
    if (rc == KF_DB_RETRY && db->sqlstate[0] == '\0')
        set_error(db, "40001", "the transaction asked to be retried");
    rollback(db);
    /* a function that gave up on a serialization failure is retried as if it had asked */
    return rc == KF_DB_RETRY || kf_db_retryable(db) ? KF_DB_RETRY : -1;
}

int kf_db_tx(struct kf_db *db, kf_db_tx_fn fn, void *arg, int max_tries) {
    if (max_tries < 1)
        max_tries = 1;
    for (int i = 0; i < max_tries; i++) {
        if (i > 0)
            backoff(i);
        int rc = tx_once(db, fn, arg);
        if (rc != KF_DB_RETRY)
            return rc;
    }
    return -1;
}

/* ---- the pool ---- */

static int pool_init_sync(struct kf_db_pool *p) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&p->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return -1;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        return -1;
    }
    return 0;
}

static void pool_free(struct kf_db_pool *p) {
    for (int i = 0; p->all != NULL && i < p->n; i++)
        kf_db_close(p->all[i]);
    free(p->all);
    free(p->idle);
    free(p);
}

struct kf_db_pool *kf_db_pool_open(const char *url, const struct kf_stmt *stmts, size_t nstmts,
                                   int n, char *err, size_t errlen) {
    if (url == NULL || n < 1 || (stmts == NULL && nstmts > 0)) {
        snprintf(err, errlen, "kf_db_pool_open: bad arguments");
        return NULL;
    }
    struct kf_db_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        goto oom;
    p->all = calloc((size_t)n, sizeof(*p->all));
    p->idle = calloc((size_t)n, sizeof(*p->idle));
    if (p->all == NULL || p->idle == NULL)
        goto oom;
    for (; p->n < n; p->n++) {
        p->all[p->n] = db_new(url, stmts, nstmts);
        if (p->all[p->n] == NULL)
            goto oom;
        p->idle[p->n] = p->all[p->n];
    }
    p->nidle = n;
    if (pool_init_sync(p) != 0)
        goto oom;
    return p;
oom:
    snprintf(err, errlen, "kf_db_pool_open: out of memory");
    if (p != NULL)
        pool_free(p);
    return NULL;
}

static struct timespec deadline_after(int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static void pool_push(struct kf_db_pool *p, struct kf_db *db) {
    pthread_mutex_lock(&p->mu);
    p->idle[p->nidle++] = db;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

struct kf_db *kf_db_pool_get(struct kf_db_pool *pool, int timeout_ms) {
    struct timespec until = deadline_after(timeout_ms > 0 ? timeout_ms : 0);
    struct kf_db *db = NULL;
    pthread_mutex_lock(&pool->mu);
    while (pool->nidle == 0) {
        if (pthread_cond_timedwait(&pool->cv, &pool->mu, &until) == ETIMEDOUT)
            break;
    }
    if (pool->nidle > 0)
        db = pool->idle[--pool->nidle];
    pthread_mutex_unlock(&pool->mu);
    if (db == NULL || kf_db_ok(db))
        return db;
    if (db_connect(db) == 0)
        return db;
    pool_push(pool, db);
    return NULL;
}

void kf_db_pool_put(struct kf_db_pool *pool, struct kf_db *db) {
    if (pool == NULL || db == NULL)
        return;
    db->lost_tx = false;
    if (kf_db_ok(db) && PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        PQclear(kf_db_exec_sql(db, "ROLLBACK"));
    pool_push(pool, db);
}

void kf_db_pool_close(struct kf_db_pool *pool) {
    if (pool == NULL)
        return;
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    pool_free(pool);
}
