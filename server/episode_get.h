/* episode_get.h: GET /v1/episodes/{id}: one agent episode, its result, and its turns (the
 * messages and reward components; token ids and logprobs are in GET /v1/export). */
#ifndef KF_SERVER_EPISODE_GET_H
#define KF_SERVER_EPISODE_GET_H

#include "server.h"

/* GET /v1/episodes/{id}[?turns=false][&after=N] */
enum MHD_Result kf_episode_get(struct kf_req *r);

#endif
