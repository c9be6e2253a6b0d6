/* task_get.h: GET /v1/tasks/{id}: one task with its source */
#ifndef KF_SERVER_TASK_GET_H
#define KF_SERVER_TASK_GET_H

#include "server.h"

/* GET /v1/tasks/{id} */
enum MHD_Result kf_task_get(struct kf_req *r);

#endif
