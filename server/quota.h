/* quota.h: the quotas of an owner: its queued and running jobs at once, and the judge's
 * GPU-seconds of its jobs over the last 24 hours (an optimize job's episode gpu_seconds, an
 * evaluation's gpu_lock_held_s, else the harness's wall time). Defaults are the settings
 * quota_active_jobs and quota_gpu_s_per_day; the owners row may set its own; 0 is no limit.
 * Admin keys have no quota. A write checks them inside its transaction, after it inserted its
 * jobs, and the writes of one owner take turns (kf_quota_write): under SERIALIZABLE, two of its
 * writes at once would each read what the other inserts, and one of them would fail. */
#ifndef KF_SERVER_QUOTA_H
#define KF_SERVER_QUOTA_H

#include "kf_errors.h"
#include "server.h"

struct kf_quota {
    char owner[72]; /* "" : no quota (an admin key) */
    long max_jobs;  /* the settings' defaults */
    double max_gpu_s;
    /* set by kf_quota_tx when the write goes over */
    enum kf_err over; /* KF_E_OK, KF_E_JOB_QUOTA_EXCEEDED or KF_E_GPU_QUOTA_EXCEEDED */
    char detail[200];
    long retry_after; /* seconds */
};

/* The quota of the request's key's owner (none for an admin key). */
void kf_quota_init(struct kf_quota *q, const struct kf_req *r);

/* Inside the write's transaction, after its new jobs were inserted: 0 when the owner is within
 * its quotas, -1 with q->over set when not (the transaction rolls back), -1 or KF_DB_RETRY
 * when a statement failed (kf_db_tx's convention). */
int kf_quota_tx(struct kf_db *db, struct kf_quota *q);

/* Runs kf_db_tx(db, fn, arg, tries) (whose fn calls kf_quota_tx) holding the owner's advisory
 * lock on db's session, so that the owner's writes run one after another and their quota
 * checks never conflict; without a quota (an admin key) just kf_db_tx. Returns kf_db_tx's
 * result, or -1 when the lock could not be taken. */
int kf_quota_write(struct kf_db *db, const struct kf_quota *q, kf_db_tx_fn fn, void *arg,
                   int tries);

/* The 429 of q->over, with Retry-After. */
enum MHD_Result kf_quota_reply(struct kf_req *r, const struct kf_quota *q);

#endif
