/* quota_routes.h: GET /v1/quota[?owner=O] (an owner's quotas and what it uses of them) and
 * POST /v1/quota (an admin key sets an owner's own quotas) */
#ifndef KF_SERVER_QUOTA_ROUTES_H
#define KF_SERVER_QUOTA_ROUTES_H

#include "server.h"

/* GET /v1/quota: the caller's owner's, or with ?owner=O an admin key's choice */
enum MHD_Result kf_quota_get(struct kf_req *r);

/* POST /v1/quota {"owner", "active_jobs"?, "gpu_seconds_per_day"?} (admin keys) */
enum MHD_Result kf_quota_post(struct kf_req *r);

#endif
