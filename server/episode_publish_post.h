/* episode_publish_post.h: POST /v1/episodes/{id}/publish {"publish": "none|results|sources"}:
 * its owner changes what it publishes of an episode (access.h), at any time */
#ifndef KF_SERVER_EPISODE_PUBLISH_POST_H
#define KF_SERVER_EPISODE_PUBLISH_POST_H

#include "server.h"

/* POST /v1/episodes/{id}/publish */
enum MHD_Result kf_episode_publish_post(struct kf_req *r);

#endif
