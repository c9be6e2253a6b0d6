/* routes.h: the one static route table. The dispatcher matches a path against the patterns
 * (a "{id}" segment captures a UUID), then the method. */
#ifndef KF_SERVER_ROUTES_H
#define KF_SERVER_ROUTES_H

#include <stddef.h>

#include "server.h"

enum {
    KF_RT_BODY = 1 << 0,  /* takes a JSON body (parsed before the handler runs) */
    KF_RT_WRITE = 1 << 1, /* needs an API key (and counts against its rate limit) */
    KF_RT_READ = 1 << 2,  /* needs an API key when public_reads is off */
};

struct kf_route {
    const char *method;
    const char *pattern; /* also the metrics label */
    kf_handler handler;
    unsigned flags;
};

/* The table and its length. */
const struct kf_route *kf_routes(size_t *n);

#endif
