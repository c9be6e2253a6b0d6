/* enqueue.h: writing jobs as lib/README.md's protocol says: the job row and its `queued` event
 * inside the caller's kf_db_tx transaction, the XADD after COMMIT (a failed XADD leaves the
 * row queued for the reconciler). Also the creation of a task (deduplicated by the SHA-256 of
 * its source) with its check_task job, shared by POST /v1/tasks, POST /v1/evaluations and
 * POST /v1/optimize. */
#ifndef KF_SERVER_ENQUEUE_H
#define KF_SERVER_ENQUEUE_H

#include <stdbool.h>

#include "server.h"

struct kf_new_job {
    char id[37]; /* filled by kf_job_insert */
    const char *kind, *klass, *backend, *task_id;
    const char *payload; /* JSON text; NULL: {} */
    const char *owner;   /* the owner of the key that makes it (NULL: none) */
};

/* Inside a transaction: inserts the job (queued) and its queued event. Returns 0, -1 or
 * KF_DB_RETRY (kf_db_tx's convention). */
int kf_job_insert(struct kf_db *db, struct kf_new_job *job);

/* After COMMIT: XADD kforge:jobs:CLASS * job ID. A failure is logged, not returned. When no
 * live worker serves klass, the reply gets a warning (liveness.h, kf_liveness_note). */
void kf_job_dispatch(struct kf_req *r, const char *klass, const char *job_id);

struct kf_new_task {
    const char *sha256, *name, *source, *backend, *klass;
    const char *suite; /* NULL: "user" (a stored task keeps the suite it was created with) */
    const char *owner; /* the submitting key's owner, recorded in task_owners (NULL: none) */
    char id[37];       /* the task's id, new or old */
    char job_id[37];   /* the check_task job's, when created */
    char status[16];   /* the task's status */
    bool created;
};

/* Inside a transaction: inserts the task unless one with the same sha256 exists, and then its
 * check_task job (of t->owner); records t->owner among the task's owners either way. Same
 * returns as kf_job_insert. */
int kf_task_upsert(struct kf_db *db, struct kf_new_task *t);

/* Inside a transaction: the task a write names, inline or by id (POST /v1/evaluations and
 * POST /v1/optimize). With t non-NULL, upserts t (kf_task_upsert) and points *task_id at
 * t->id; else looks up the stored *task_id among the tasks the caller may use: admin ("true"
 * or "false"), or one that owner submitted, or one published with its source. Sets *missing
 * (no such task, or not one of those) and *invalid (its status is invalid; a task still
 * checking is fine). Returns 0, -1 (also when missing or invalid) or KF_DB_RETRY. *task_id
 * stays borrowed (from t or from the caller). */
int kf_task_resolve(struct kf_db *db, struct kf_new_task *t, const char **task_id,
                    const char *admin, const char *owner, bool *missing, bool *invalid);

/* 422 task_invalid for the task task_id (blamed on field), its message the reasons of the
 * task's failed check, read on db. */
enum MHD_Result kf_reply_task_invalid(struct kf_req *r, struct kf_db *db, const char *task_id,
                                      const char *field);

/* A failed statement's return for kf_db_tx: KF_DB_RETRY when retryable, else -1. */
int kf_tx_fail(struct kf_db *db);

#endif
