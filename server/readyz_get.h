/* readyz_get.h: GET /readyz: readiness (PostgreSQL and Redis answer) */
#ifndef KF_SERVER_READYZ_GET_H
#define KF_SERVER_READYZ_GET_H

#include "server.h"

/* GET /readyz */
enum MHD_Result kf_readyz_get(struct kf_req *r);

#endif
