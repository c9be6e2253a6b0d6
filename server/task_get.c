/* task_get.c: GET /v1/tasks/{id}: the task and its source. */
#include "reply.h"
#include "task_get.h"

enum MHD_Result kf_task_get(struct kf_req *r) {
    return kf_reply_row(r, "task_get", r->id, KF_E_TASK_NOT_FOUND);
}
