/* evaluations_post.h: POST /v1/evaluations: enqueues one candidate's evaluation (optionally waits)
 */
#ifndef KF_SERVER_EVALUATIONS_POST_H
#define KF_SERVER_EVALUATIONS_POST_H

#include "server.h"

/* POST /v1/evaluations */
enum MHD_Result kf_evaluations_post(struct kf_req *r);

#endif
