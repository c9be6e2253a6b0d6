/* leaderboard_get.h: GET /v1/leaderboard?backend&device&policy&model&suite&task_id&per&sort&
 * order&limit: the best finished, correct episodes (per task, or per task, device, policy and
 * model), ranked, with a summary, the filter menus' values and the filter in force */
#ifndef KF_SERVER_LEADERBOARD_GET_H
#define KF_SERVER_LEADERBOARD_GET_H

#include "server.h"

/* GET /v1/leaderboard */
enum MHD_Result kf_leaderboard_get(struct kf_req *r);

#endif
