/* server.h: the server's context (struct kf_server) and one request's state (struct kf_req),
 * shared by the dispatcher and the endpoint handlers. There are no program-wide mutable
 * globals: main() owns one struct kf_server and hands it to every callback. */
#ifndef KF_SERVER_H
#define KF_SERVER_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "db.h"
#include "log.h"
#include "queue.h"

struct kf_metrics;
struct kf_route;
struct kf_park;
struct kf_guard;
struct kf_slots;
struct kf_liveness;

#define KF_QPOOL_MAX 16
/* tries of a write transaction before 503 contention (SERIALIZABLE inserts under heavy
 * concurrency fail serialization now and then: bench/service_bench.sh saw ~165 in 10 s) */
#define KF_SRV_TX_TRIES 20
#define KF_MAX_LABELS 34

/* A small pool of Redis connections, opened lazily (a slot holds NULL until first used). */
struct kf_qpool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kf_queue *conns[KF_QPOOL_MAX];
    bool busy[KF_QPOOL_MAX];
    int n;
};

struct kf_server {
    const struct kf_config *cfg;
    struct kf_log_ctx log;   /* min_level only; requests copy it and add their id */
    pthread_mutex_t db_lock; /* guards db and db_retry_ms (the pool opens lazily) */
    struct kf_db_pool *db;
    int64_t db_retry_ms;
    struct kf_stmt
        *stmts; /* owned: sql.c's table then episode_sql.c's, prepared on each connection */
    size_t n_stmts;
    struct kf_qpool q;
    struct kf_metrics *metrics;
    struct kf_park *park;
    struct kf_guard *guard;       /* the front door: the socket, per-client counts, deadlines */
    struct kf_slots *streams_by;  /* open event streams per key ("" for the keyless) */
    struct kf_liveness *liveness; /* the classes' live workers (cached) and unserved jobs */
    struct MHD_Daemon *daemon;
    const char *labels[KF_MAX_LABELS]; /* metrics labels: routes' patterns, "static", "none" */
    int nlabels;
    int route_label[KF_MAX_LABELS]; /* a route's index -> its label's */
    atomic_bool stopping;
    char openapi_path[4096]; /* openapi/openapi.yaml next to build/ ("" if unknown) */
};

/* One request, from its first header callback to its completion. */
struct kf_req {
    struct kf_server *srv;
    struct MHD_Connection *conn;
    struct kf_log_ctx log;
    char request_id[65];
    char method[16];
    char url[256];                /* the path, for the log (truncated) */
    const struct kf_route *route; /* NULL: no route (404, 405 or a static file) */
    const char *route_label;      /* the metrics/log label: a pattern, "static" or "none" */
    char id[40];                  /* the {id} of the path, when the route has one */
    int64_t t0_us;
    unsigned status;      /* the status queued, for the access log and metrics */
    bool started;         /* the first call (headers) was handled */
    bool replied;         /* a response was queued */
    bool too_large;       /* the body passed max_body_bytes: drained, answered 413 */
    struct kf_buf body;   /* the request body so far */
    json_t *json;         /* the parsed body (routes that take one) */
    json_t *warnings;     /* owned: the 2xx reply's "warnings" (liveness.h), or NULL */
    char key_id[40];      /* the API key's id when authenticated ("" anonymous) */
    char owner[72];       /* the key's owner ("" anonymous) */
    unsigned scopes;      /* the key's scopes (auth.h's KF_SCOPE_* bits; 0 anonymous) */
    int access;           /* what the caller may see of the path's object (access.h) */
    bool access_done;     /* access was decided (the handler may run again after a park) */
    char retry_after[16]; /* a Retry-After header for the reply ("" none) */
    char allow[64];       /* an Allow header for the reply ("" none) */
    int label;            /* the metrics label: a route's index, or after the routes */
    void *hstate;         /* a handler's state across suspensions (freed by hstate_free) */
    void (*hstate_free)(void *);
};

/* A route's handler: queues exactly one response (through reply.h) and returns MHD's result,
 * or parks the request (kf_park_request) and returns MHD_YES to be called again. */
typedef enum MHD_Result (*kf_handler)(struct kf_req *r);

/* The database pool, opened on first need (and re-tried at most once a second while PostgreSQL
 * is down). Returns a connection to give back with kf_srv_db_put, or NULL (503). */
struct kf_db *kf_srv_db_get(struct kf_server *srv);
void kf_srv_db_put(struct kf_server *srv, struct kf_db *db);

/* Redis connections: a free one of the pool within ~1 s, connected, or NULL (503). */
struct kf_queue *kf_srv_queue_get(struct kf_server *srv);
void kf_srv_queue_put(struct kf_server *srv, struct kf_queue *q);

int kf_srv_pools_init(struct kf_server *srv);
void kf_srv_pools_free(struct kf_server *srv);

/* The job class of a backend: "cpu" for cpu, the gpu_class setting for cuda. */
const char *kf_srv_class(const struct kf_server *srv, const char *backend);

#endif
