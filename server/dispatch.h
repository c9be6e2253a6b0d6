/* dispatch.h: the shared work before any handler runs (URL cap, routing with {id} capture,
 * 404/405, body accumulation under max_body_bytes, Content-Type, JSON parse, auth, rate limit,
 * X-Request-Id) and after each request (access log line, metrics). */
#ifndef KF_SERVER_DISPATCH_H
#define KF_SERVER_DISPATCH_H

#include "server.h"

/* MHD's access handler; cls is the struct kf_server. */
enum MHD_Result kf_dispatch(void *cls, struct MHD_Connection *conn, const char *url,
                            const char *method, const char *version, const char *upload_data,
                            size_t *upload_data_size, void **req_cls);

/* MHD's MHD_OPTION_NOTIFY_COMPLETED callback: logs, counts and frees the request. */
void kf_dispatch_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                           enum MHD_RequestTerminationCode toe);

/* Fills srv->labels: the routes' patterns, then "static", then "none". */
void kf_dispatch_init(struct kf_server *srv);

#endif
