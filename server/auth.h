/* auth.h: API keys (Authorization: Bearer KEY), their owners and scopes, and the per-key rate
 * limit of writes. */
#ifndef KF_SERVER_AUTH_H
#define KF_SERVER_AUTH_H

#include <stdbool.h>

#include "server.h"

/* A key's scopes, as bits of struct kf_req's scopes. Each implies the ones before it: read
 * sees its owner's objects; submit also writes (POST) and cancels its owner's jobs; admin sees
 * and cancels every owner's objects, uses the keys API and has no quota. */
enum kf_scope {
    KF_SCOPE_READ = 1 << 0,
    KF_SCOPE_SUBMIT = 1 << 1,
    KF_SCOPE_ADMIN = 1 << 2,
};

/* Checks the request's key against what the route's flags (routes.h) need: any valid key;
 * the submit scope for KF_RT_WRITE (which also counts against the key's rate limit); the admin
 * scope for KF_RT_ADMIN. Returns true and fills r->key_id, r->owner and r->scopes, or false
 * with the error reply queued (401 no or malformed key, 403 unknown or revoked key or a scope
 * it lacks, 429, 503). */
bool kf_auth_check(struct kf_req *r, unsigned route_flags);

/* true when the request's key has the admin scope. */
bool kf_auth_admin(const struct kf_req *r);

/* The scopes named in text ("read,submit"; unknown names ignored), as KF_SCOPE_* bits with
 * what each implies. */
unsigned kf_scopes_parse(const char *text);

#endif
