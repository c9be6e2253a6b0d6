/* optimize_post.h: POST /v1/optimize: enqueues an optimize job and its agent episode */
#ifndef KF_SERVER_OPTIMIZE_POST_H
#define KF_SERVER_OPTIMIZE_POST_H

#include "server.h"

/* POST /v1/optimize */
enum MHD_Result kf_optimize_post(struct kf_req *r);

#endif
