/* static.h: GET (and HEAD) of paths outside /v1: the web UI's files under web_dir, its
 * single-page routes (ui_routes.h: they serve index.html), and /openapi.yaml. */
#ifndef KF_SERVER_STATIC_H
#define KF_SERVER_STATIC_H

#include "server.h"

/* Queues the file for path (200, or 304 when an asset's If-None-Match matches), or 404:
 * web_dir/404.html as HTML when it exists, else the JSON not_found error. */
enum MHD_Result kf_static_serve(struct kf_req *r, const char *path);

#endif
