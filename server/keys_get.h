/* keys_get.h: GET /v1/keys: an admin key lists the keys (?owner=O: of one owner), never their
 * secrets */
#ifndef KF_SERVER_KEYS_GET_H
#define KF_SERVER_KEYS_GET_H

#include "server.h"

/* GET /v1/keys */
enum MHD_Result kf_keys_get(struct kf_req *r);

#endif
