/* tasks_get.h: GET /v1/tasks?limit=N&after=CURSOR: the tasks, newest first */
#ifndef KF_SERVER_TASKS_GET_H
#define KF_SERVER_TASKS_GET_H

#include "server.h"

/* GET /v1/tasks?limit=N&after=CURSOR */
enum MHD_Result kf_tasks_get(struct kf_req *r);

#endif
