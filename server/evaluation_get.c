/* evaluation_get.c: GET /v1/evaluations/{id}: the evaluation and its candidate. */
#include "evaluation_get.h"
#include "reply.h"

enum MHD_Result kf_evaluation_get(struct kf_req *r) {
    return kf_reply_row(r, "evaluation_get", r->id, KF_E_EVALUATION_NOT_FOUND);
}
