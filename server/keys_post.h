/* keys_post.h: POST /v1/keys: an admin key creates a key for an owner; the secret is in this
 * reply only */
#ifndef KF_SERVER_KEYS_POST_H
#define KF_SERVER_KEYS_POST_H

#include <stdbool.h>

#include "server.h"

/* POST /v1/keys */
enum MHD_Result kf_keys_post(struct kf_req *r);

/* true when s is an owner's name: ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$ */
bool kf_owner_valid(const char *s);

#endif
