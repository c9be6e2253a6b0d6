/* metrics_get.h: GET /metrics: Prometheus text */
#ifndef KF_SERVER_METRICS_GET_H
#define KF_SERVER_METRICS_GET_H

#include "server.h"

/* GET /metrics */
enum MHD_Result kf_metrics_get(struct kf_req *r);

#endif
