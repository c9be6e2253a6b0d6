/* job_get.h: GET /v1/jobs/{id}: one job */
#ifndef KF_SERVER_JOB_GET_H
#define KF_SERVER_JOB_GET_H

#include "server.h"

/* GET /v1/jobs/{id} */
enum MHD_Result kf_job_get(struct kf_req *r);

#endif
