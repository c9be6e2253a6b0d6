/* liveness.h: which job classes a live worker serves. A worker's heartbeat (lib/queue.h,
 * kforge:hb:WORKER, with its class) says it is alive; kforge:classes lists the classes workers
 * registered (kept until the last worker of a class stops on purpose, or class_forget_s after
 * the last heartbeat when workers crashed). The answer is read from Redis at most once a
 * second and shared by the server's threads. Used by GET /readyz, by the writes that create
 * jobs (a `warnings` entry when no live worker serves the job's class) and by /metrics. */
#ifndef KF_SERVER_LIVENESS_H
#define KF_SERVER_LIVENESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "server.h"

#define KF_LIVE_CLASSES 64 /* classes tracked; more are left out */

struct kf_live_class {
    char name[64];
    long workers;    /* live heartbeats of the class */
    bool registered; /* in kforge:classes (a worker beat for it within class_forget_s) */
};

struct kf_live {
    bool ok; /* Redis answered */
    int n;
    struct kf_live_class c[KF_LIVE_CLASSES];
};

/* The shared state: the cached answer and the count of jobs accepted for a class that no live
 * worker served at the time. NULL when out of memory; free with kf_liveness_free. */
struct kf_liveness *kf_liveness_new(void);
void kf_liveness_free(struct kf_liveness *l);

/* The classes and their live workers into *out, at most a second old (fresh: read now). */
void kf_liveness_get(struct kf_server *srv, bool fresh, struct kf_live *out);

/* Live workers of klass in out; 0 when none is listed. */
long kf_live_workers(const struct kf_live *live, const char *klass);

/* After COMMIT of a job for klass (kf_job_dispatch): when no live worker serves klass (and
 * Redis answered: else nobody knows), counts the job for /metrics and adds {"name":
 * "no_live_worker", "class", "message"} to r->warnings (once per class), which the 2xx reply
 * carries as its "warnings" member. */
void kf_liveness_note(struct kf_req *r, const char *klass);

/* The reply text json (len bytes, a JSON object) with "warnings": warnings added; a new
 * string the caller frees, or NULL when warnings is NULL (the text stays as it is) or out of
 * memory. Does not take warnings. */
char *kf_liveness_annotate(const char *json, size_t len, json_t *warnings, size_t *out_len);

/* /metrics: kforge_jobs_unserved_total{class}, jobs accepted while no live worker served
 * their class. */
void kf_liveness_write_unserved(struct kf_server *srv, FILE *out);

#endif
