/* access.h: who sees what. Objects belong to the owner of the key that made them (a task to
 * every owner that submitted it); admin keys see everything; an episode its owner published is
 * seen by anyone, with its sources only when published with them. The dispatcher calls
 * kf_access_decide before the handler of a route whose {id} names an owned object (routes.h's
 * enum kf_see): a caller that may see nothing of it gets the object's 404, the same answer as
 * for an id that does not exist, so that nobody learns what others own. */
#ifndef KF_SERVER_ACCESS_H
#define KF_SERVER_ACCESS_H

#include "server.h"

/* What the caller may see of an object (struct kf_req's access), each level more than the one
 * before. */
enum kf_access {
    KF_ACCESS_NONE = 0,
    KF_ACCESS_RESULTS = 1, /* published: results, no sources (turns, files, the task's source) */
    KF_ACCESS_SOURCES = 2, /* published with sources: all but its owner's private details */
    KF_ACCESS_OWNER = 3,   /* its owner's key, or an admin key: everything */
};

/* Decides r->access for the object r->id of the route's kind (r->access_done set). Returns
 * MHD's result of the 404 or 503/500 it queued (r->replied), or MHD_YES with nothing queued
 * when the caller may go on. */
enum MHD_Result kf_access_decide(struct kf_req *r);

/* The caller as two statement parameters: *admin "true" or "false"; *owner its key's owner,
 * NULL when anonymous (both point into static text or into r). */
void kf_access_viewer(const struct kf_req *r, const char **admin, const char **owner);

#endif
