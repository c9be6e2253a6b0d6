/* routes.h: the one static route table. The dispatcher matches a path against the patterns
 * (a "{id}" segment captures a UUID), then the method. */
#ifndef KF_SERVER_ROUTES_H
#define KF_SERVER_ROUTES_H

#include <stddef.h>

#include "server.h"

enum {
    KF_RT_BODY = 1 << 0,  /* takes a JSON body (parsed before the handler runs) */
    KF_RT_WRITE = 1 << 1, /* needs an API key (and counts against its rate limit) */
    KF_RT_READ = 1 << 2,  /* a key is checked when sent, and needed when public_reads is off */
    KF_RT_KEY = 1 << 3,   /* needs an API key (of any scope), whatever public_reads says */
    KF_RT_ADMIN = 1 << 4, /* needs an API key with the admin scope */
};

/* The owned object a route's {id} names: the dispatcher decides what the caller may see of it
 * (access.h) before the handler runs, and answers its not-found error when nothing. */
enum kf_see {
    KF_SEE_NONE = 0,
    KF_SEE_TASK,          /* its submitters; anyone, when an episode of it is published */
    KF_SEE_JOB,           /* its owner; anyone, when its episode is published */
    KF_SEE_JOB_OWNER,     /* its owner only (cancel) */
    KF_SEE_EVALUATION,    /* its owner only */
    KF_SEE_EPISODE,       /* its owner; anyone, when published */
    KF_SEE_EPISODE_OWNER, /* its owner only (publish) */
    KF_SEE_CANDIDATE,     /* its owner; anyone, when its episode is published with sources */
};

struct kf_route {
    const char *method;
    const char *pattern; /* also the metrics label */
    kf_handler handler;
    unsigned flags;
    enum kf_see see;
};

/* The table and its length. */
const struct kf_route *kf_routes(size_t *n);

#endif
