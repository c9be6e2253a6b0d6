/* auth.h: API keys (Authorization: Bearer KEY) and the per-key rate limit of writes. */
#ifndef KF_SERVER_AUTH_H
#define KF_SERVER_AUTH_H

#include <stdbool.h>

#include "server.h"

/* Checks the request's key (and, when rate_limited, counts it against the key's limit).
 * Returns true and fills r->key_id, or false with the error reply queued (401, 403, 429, 503). */
bool kf_auth_check(struct kf_req *r, bool rate_limited);

#endif
