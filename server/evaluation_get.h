/* evaluation_get.h: GET /v1/evaluations/{id}: one evaluation with its candidate */
#ifndef KF_SERVER_EVALUATION_GET_H
#define KF_SERVER_EVALUATION_GET_H

#include "server.h"

/* GET /v1/evaluations/{id} */
enum MHD_Result kf_evaluation_get(struct kf_req *r);

#endif
