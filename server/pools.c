/* pools.c: the server's database pool (opened lazily, so the server starts and answers 503
 * while PostgreSQL is down) and its small pool of Redis connections. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include <stdlib.h>

#include "episode_sql.h"
#include "server.h"
#include "sql.h"
#include "util.h"

#define KF_POOL_WAIT_MS 1000

int kf_srv_pools_init(struct kf_server *srv) {
    memset(&srv->q, 0, sizeof srv->q);
    srv->q.n = (int)srv->cfg->threads + 2;
    if (srv->q.n > KF_QPOOL_MAX)
        srv->q.n = KF_QPOOL_MAX;
    if (pthread_mutex_init(&srv->q.lock, NULL) != 0)
        return -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&srv->q.cond, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return -1;
    if (pthread_mutex_init(&srv->db_lock, NULL) != 0)
        return -1;
    srv->db = NULL;
    srv->db_retry_ms = 0;
    size_t n1 = 0, n2 = 0;
    const struct kf_stmt *t1 = kf_sql_stmts(&n1), *t2 = kf_episode_sql_stmts(&n2);
    srv->stmts = calloc(n1 + n2, sizeof *srv->stmts);
    if (!srv->stmts)
        return -1;
    memcpy(srv->stmts, t1, n1 * sizeof *t1);
    memcpy(srv->stmts + n1, t2, n2 * sizeof *t2);
    srv->n_stmts = n1 + n2;
    return 0;
}

void kf_srv_pools_free(struct kf_server *srv) {
    for (int i = 0; i < srv->q.n; i++)
        if (srv->q.conns[i])
            kf_queue_close(srv->q.conns[i]);
    pthread_cond_destroy(&srv->q.cond);
    pthread_mutex_destroy(&srv->q.lock);
    if (srv->db)
        kf_db_pool_close(srv->db);
    pthread_mutex_destroy(&srv->db_lock);
    free(srv->stmts);
    srv->stmts = NULL;
}

static struct kf_db_pool *db_pool(struct kf_server *srv) {
    struct kf_db_pool *pool = __atomic_load_n(&srv->db, __ATOMIC_ACQUIRE);
    if (pool)
        return pool; /* the hot path: opened once, never replaced */
    pthread_mutex_lock(&srv->db_lock);
    pool = srv->db;
    if (!pool && kf_now_ms() >= srv->db_retry_ms) {
        char err[256];
        pool = kf_db_pool_open(srv->cfg->database_url, srv->stmts, srv->n_stmts,
                               (int)srv->cfg->db_pool, err, sizeof err);
        if (pool)
            __atomic_store_n(&srv->db, pool, __ATOMIC_RELEASE);
        else {
            srv->db_retry_ms = kf_now_ms() + 1000;
            kf_log(&srv->log, KF_LOG_WARN, "database pool: %s", err);
        }
    }
    pthread_mutex_unlock(&srv->db_lock);
    return pool;
}

struct kf_db *kf_srv_db_get(struct kf_server *srv) {
    struct kf_db_pool *pool = db_pool(srv);
    if (!pool)
        return NULL;
    struct kf_db *db = kf_db_pool_get(pool, KF_POOL_WAIT_MS);
    if (db && !kf_db_ok(db)) {
        /* a connection that dropped is re-opened by the next exec; try it once now so that a
         * dead server is reported here rather than as a failed statement */
        PGresult *res = kf_db_exec_sql(db, "SELECT 1");
        if (!res) {
            kf_db_pool_put(pool, db);
            return NULL;
        }
        PQclear(res);
    }
    return db;
}

void kf_srv_db_put(struct kf_server *srv, struct kf_db *db) {
    if (db)
        kf_db_pool_put(srv->db, db);
}

struct kf_queue *kf_srv_queue_get(struct kf_server *srv) {
    struct kf_qpool *p = &srv->q;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += KF_POOL_WAIT_MS / 1000;
    pthread_mutex_lock(&p->lock);
    int slot = -1;
    for (;;) {
        for (int i = 0; i < p->n && slot < 0; i++)
            if (!p->busy[i])
                slot = i;
        if (slot >= 0)
            break;
        if (pthread_cond_timedwait(&p->cond, &p->lock, &until) == ETIMEDOUT)
            break;
    }
    if (slot < 0) {
        pthread_mutex_unlock(&p->lock);
        return NULL;
    }
    p->busy[slot] = true;
    struct kf_queue *q = p->conns[slot];
    pthread_mutex_unlock(&p->lock);
    if (!q) {
        char err[256];
        q = kf_queue_open(srv->cfg->redis_url, KF_POOL_WAIT_MS, err, sizeof err);
        if (!q)
            kf_log(&srv->log, KF_LOG_WARN, "redis: %s", err);
        pthread_mutex_lock(&p->lock);
        p->conns[slot] = q;
        if (!q) {
            p->busy[slot] = false;
            pthread_cond_signal(&p->cond);
        }
        pthread_mutex_unlock(&p->lock);
    }
    return q;
}

void kf_srv_queue_put(struct kf_server *srv, struct kf_queue *q) {
    struct kf_qpool *p = &srv->q;
    if (!q)
        return;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n; i++)
        if (p->conns[i] == q) {
            p->busy[i] = false;
            break;
        }
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

const char *kf_srv_class(const struct kf_server *srv, const char *backend) {
    if (strcmp(backend, "cpu") == 0)
        return "cpu";
    return srv->cfg->gpu_class && srv->cfg->gpu_class[0] ? srv->cfg->gpu_class : "cuda";
}
