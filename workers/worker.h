/* worker.h: the pieces of kforge-worker and the state they share. One worker process serves one
 * class (a GPU or the CPU) and runs one job at a time: the main thread claims, runs and finishes
 * jobs; a heartbeat thread renews the current job's lease and watches for cancellation; a
 * reconcile thread re-enqueues jobs Redis lost. Each thread has its own database and Redis
 * connections (lib's connections are one thread's at a time). */
#ifndef KF_WORKER_H
#define KF_WORKER_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "db.h"
#include "log.h"
#include "queue.h"

/* What the main thread and the heartbeat thread share about the running job (under mu). */
struct kfw_shared {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* signalled on stop, so the threads' sleeps end at once */
    bool quit;           /* the threads end */
    bool active;         /* a job is running: the fields below are set */
    char job_id[40];
    long attempt; /* the fencing token */
    bool lost;    /* the fence failed: taken over or finished elsewhere */
    bool cancel;  /* cancel_requested was seen */
};

/* The worker: settings, identity and the main thread's connections. */
struct kfw {
    struct kf_config cfg;
    char name[256]; /* consumer name, e.g. host:pid:gpu0 */
    char host[128];
    char klass[64];      /* the stream's class: gpu_class or "cpu" */
    char stream[128];    /* kforge:jobs:CLASS */
    const char *backend; /* "cuda" or "cpu" */
    long gpu;            /* -1 for the cpu backend */
    struct kf_log_ctx log;
    sigset_t sigs;      /* SIGTERM, SIGINT: blocked in every thread, polled by the main one */
    bool stopping;      /* a stop signal came (main thread only) */
    struct kf_db *db;   /* main thread's */
    struct kf_queue *q; /* main thread's */
    struct kfw_shared sh;
    pid_t pool_pid;       /* the runner pool (runner_pool.c); 0 when none runs */
    char pool_sock[108];  /* its socket; "" when there is no pool */
    int64_t pool_next_ms; /* the earliest restart */
};

/* A claimed job (claim.c fills it; the strings are owned by the struct, kfw_job_free). */
struct kfw_job {
    char id[40];
    char entry[KF_STREAM_ID_MAX]; /* the stream entry to acknowledge */
    long attempt;
    char kind[16]; /* check_task, evaluate or optimize */
    char backend[8];
    char task_id[40];
    json_t *payload; /* jobs.payload */
};

/* How a harness run ended (job_run.c). */
enum kfw_outcome {
    KFW_RESULT,    /* a verdict to store */
    KFW_INFRA,     /* retry or dead-letter; reason says why */
    KFW_CANCELLED, /* cancel_requested: write cancelled */
    KFW_LOST,      /* the fence is gone: write nothing */
    KFW_HANDBACK,  /* the worker is stopping: queue the job again */
};

struct kfw_run {
    enum kfw_outcome outcome;
    json_t *verdict; /* KFW_RESULT: owned */
    char reason[512];
};

/* worker_db.c: the statements every connection of the worker prepares, and helpers. */
const struct kf_stmt *kfw_stmts(size_t *n);

/* Opens a database / Redis connection for one thread, retrying every second until it works or
 * the worker stops (helper: the caller is a helper thread, else the main one). NULL when
 * stopped. The caller owns the result. */
struct kf_db *kfw_db_connect(struct kfw *w, bool helper);
struct kf_queue *kfw_queue_connect(struct kfw *w, bool helper);

/* Sleeps up to ms on the main thread; returns true when a stop signal came (w->stopping). */
bool kfw_pause(struct kfw *w, long ms);

/* Appends an event to the job under the fence (one statement). data may be NULL ({}); it is
 * borrowed. Returns 1 written, 0 the fence is gone, -1 database error. */
int kfw_event(struct kf_db *db, const char *job_id, long attempt, const char *kind, json_t *data);

/* claim.c: takes the next job of the worker's stream (XAUTOCLAIM of an abandoned entry, else
 * XREADGROUP for up to block_ms) and claims it in PostgreSQL with its `claimed` event. Returns 1
 * with *job filled, 0 nothing to do, -1 error (logged). */
int kfw_claim_next(struct kfw *w, struct kfw_job *job, int block_ms);
void kfw_job_free(struct kfw_job *job);

/* job_run.c: prepares the workspace and runs the harness for job, turning its progress lines
 * into events, until it ends, times out, is cancelled, loses the fence or the worker stops.
 * Fills *run (run->verdict owned by the caller). */
void kfw_job_run(struct kfw *w, const struct kfw_job *job, struct kfw_run *run);

/* job_run.c: runs one harness command line (argv[0] the Python, argv[3] the subcommand) in cwd
 * as kfw_job_run does (progress lines -> the job's events; cancel, lost fence, stop and
 * timeout_ms end it early). Fills *run; run->verdict (owned by the caller) on KFW_RESULT. */
void kfw_harness_exec(struct kfw *w, const struct kfw_job *job, const char *const *argv,
                      const char *cwd, int64_t timeout_ms, struct kfw_run *run);

/* job_run.c: in a forked child about to exec the harness's Python (a job's harness, the runner
 * pool): its own process group, default and unblocked signals, stdin from /dev/null, stdout and
 * stderr onto out_fd and err_fd (unchanged where < 0), PYTHONPATH, PYTHONUNBUFFERED,
 * KFORGE_RUNNER_POOL, and the host's loader path back from a bundle's. */
void kfw_python_child(const struct kfw *w, int out_fd, int err_fd);

/* episode_run.c: the agent episode of an optimize job (episode.h). */
void kfw_episode_run(struct kfw *w, const struct kfw_job *job, struct kfw_run *run);

/* job_finish.c: writes the outcome under the fence (with retries while the database is
 * unreachable) and acknowledges the stream entry. */
void kfw_job_finish(struct kfw *w, const struct kfw_job *job, struct kfw_run *run);

/* runner_pool.c: the pool of warm runners the worker's evaluations take theirs from (main
 * thread only). start: when pool_runners > 0; tend: starts it again once it has died; stop:
 * SIGTERM, then SIGKILL after ten seconds. */
void kfw_pool_start(struct kfw *w);
void kfw_pool_tend(struct kfw *w);
void kfw_pool_stop(struct kfw *w);

/* heartbeat.c, reconcile.c: the threads. arg is the struct kfw. They end when sh.quit is set
 * (under sh.mu, with sh.wake broadcast). */
void *kfw_heartbeat_main(void *arg);
void *kfw_reconcile_main(void *arg);

/* Sleeps up to ms on a helper thread; returns true when the thread should end. */
bool kfw_thread_sleep(struct kfw *w, long ms);

#endif
