/* routes.c: every route of the API, in one table: method, pattern, handler, flags (routes.h:
 * body, key, scope) and the owned object the {id} names (access.h). */
#include "routes.h"
#include "candidate_get.h"
#include "episode_get.h"
#include "episode_publish_post.h"
#include "evaluation_get.h"
#include "evaluations_post.h"
#include "export_get.h"
#include "healthz_get.h"
#include "job_cancel_post.h"
#include "job_events_get.h"
#include "job_get.h"
#include "key_revoke_post.h"
#include "keys_get.h"
#include "keys_post.h"
#include "leaderboard_get.h"
#include "metrics_get.h"
#include "optimize_post.h"
#include "quota_routes.h"
#include "readyz_get.h"
#include "task_get.h"
#include "tasks_get.h"
#include "tasks_post.h"

static const struct kf_route routes[] = {
    {"POST", "/v1/tasks", kf_tasks_post, KF_RT_BODY | KF_RT_WRITE, KF_SEE_NONE},
    {"GET", "/v1/tasks", kf_tasks_get, KF_RT_READ, KF_SEE_NONE},
    {"GET", "/v1/tasks/{id}", kf_task_get, KF_RT_READ, KF_SEE_TASK},
    {"POST", "/v1/evaluations", kf_evaluations_post, KF_RT_BODY | KF_RT_WRITE, KF_SEE_NONE},
    {"GET", "/v1/evaluations/{id}", kf_evaluation_get, KF_RT_READ, KF_SEE_EVALUATION},
    {"POST", "/v1/optimize", kf_optimize_post, KF_RT_BODY | KF_RT_WRITE, KF_SEE_NONE},
    {"GET", "/v1/jobs/{id}", kf_job_get, KF_RT_READ, KF_SEE_NONE}, /* decided in its statement */
    {"POST", "/v1/jobs/{id}/cancel", kf_job_cancel_post, KF_RT_WRITE, KF_SEE_JOB_OWNER},
    {"GET", "/v1/jobs/{id}/events", kf_job_events_get, KF_RT_READ, KF_SEE_JOB},
    {"GET", "/v1/episodes/{id}", kf_episode_get, KF_RT_READ, KF_SEE_EPISODE},
    {"POST", "/v1/episodes/{id}/publish", kf_episode_publish_post, KF_RT_BODY | KF_RT_WRITE,
     KF_SEE_EPISODE_OWNER},
    {"GET", "/v1/candidates/{id}", kf_candidate_get, KF_RT_READ, KF_SEE_CANDIDATE},
    {"GET", "/v1/candidates/{id}/download", kf_candidate_download_get, KF_RT_READ,
     KF_SEE_CANDIDATE},
    {"GET", "/v1/export", kf_export_get, KF_RT_READ | KF_RT_KEY, KF_SEE_NONE},
    {"GET", "/v1/leaderboard", kf_leaderboard_get, KF_RT_READ, KF_SEE_NONE},
    {"POST", "/v1/keys", kf_keys_post, KF_RT_BODY | KF_RT_WRITE | KF_RT_ADMIN, KF_SEE_NONE},
    {"GET", "/v1/keys", kf_keys_get, KF_RT_READ | KF_RT_ADMIN, KF_SEE_NONE},
    {"POST", "/v1/keys/{id}/revoke", kf_key_revoke_post, KF_RT_WRITE | KF_RT_ADMIN, KF_SEE_NONE},
    {"GET", "/v1/quota", kf_quota_get, KF_RT_KEY, KF_SEE_NONE},
    {"POST", "/v1/quota", kf_quota_post, KF_RT_BODY | KF_RT_WRITE | KF_RT_ADMIN, KF_SEE_NONE},
    {"GET", "/healthz", kf_healthz_get, 0, KF_SEE_NONE},
    {"GET", "/readyz", kf_readyz_get, 0, KF_SEE_NONE},
    {"GET", "/metrics", kf_metrics_get, 0, KF_SEE_NONE},
};

const struct kf_route *kf_routes(size_t *n) {
    *n = sizeof routes / sizeof routes[0];
    return routes;
}
