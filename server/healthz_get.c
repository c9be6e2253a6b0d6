/* healthz_get.c: GET /healthz: the process answers; no dependency is asked. */
#include "healthz_get.h"
#include "reply.h"

enum MHD_Result kf_healthz_get(struct kf_req *r) {
    return kf_reply_text(r, MHD_HTTP_OK, "{\"status\":\"ok\"}", 0);
}
