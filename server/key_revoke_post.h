/* key_revoke_post.h: POST /v1/keys/{id}/revoke: an admin key revokes a key (idempotent) */
#ifndef KF_SERVER_KEY_REVOKE_POST_H
#define KF_SERVER_KEY_REVOKE_POST_H

#include "server.h"

/* POST /v1/keys/{id}/revoke */
enum MHD_Result kf_key_revoke_post(struct kf_req *r);

#endif
