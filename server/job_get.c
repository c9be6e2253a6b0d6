/* job_get.c: GET /v1/jobs/{id}, the hot path: one prepared SELECT whose JSON is the reply. */
#include "job_get.h"
#include "reply.h"

enum MHD_Result kf_job_get(struct kf_req *r) {
    return kf_reply_row(r, "job_get", r->id, KF_E_JOB_NOT_FOUND);
}
