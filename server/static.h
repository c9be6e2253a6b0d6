/* static.h: GET of paths outside /v1: the web UI's files under web_dir ("/" is index.html)
 * and /openapi.yaml. */
#ifndef KF_SERVER_STATIC_H
#define KF_SERVER_STATIC_H

#include "server.h"

/* Queues the file for path, or 404 not_found. */
enum MHD_Result kf_static_serve(struct kf_req *r, const char *path);

#endif
