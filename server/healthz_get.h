/* healthz_get.h: GET /healthz: liveness (no dependency) */
#ifndef KF_SERVER_HEALTHZ_GET_H
#define KF_SERVER_HEALTHZ_GET_H

#include "server.h"

/* GET /healthz */
enum MHD_Result kf_healthz_get(struct kf_req *r);

#endif
