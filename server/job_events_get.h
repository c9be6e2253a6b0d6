/* job_events_get.h: GET /v1/jobs/{id}/events: the job's events as server-sent events */
#ifndef KF_SERVER_JOB_EVENTS_GET_H
#define KF_SERVER_JOB_EVENTS_GET_H

#include "server.h"

/* GET /v1/jobs/{id}/events */
enum MHD_Result kf_job_events_get(struct kf_req *r);

#endif
