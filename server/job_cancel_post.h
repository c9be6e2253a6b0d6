/* job_cancel_post.h: POST /v1/jobs/{id}/cancel: cancels a queued job, or asks a running one to stop
 */
#ifndef KF_SERVER_JOB_CANCEL_POST_H
#define KF_SERVER_JOB_CANCEL_POST_H

#include "server.h"

/* POST /v1/jobs/{id}/cancel */
enum MHD_Result kf_job_cancel_post(struct kf_req *r);

#endif
