/* reply.h: queuing responses. Every response gets X-Request-Id; every error goes through
 * kf_reply_error, which writes lib/README.md's shape with the registry's code, name and
 * HTTP status. Each function queues one response and returns MHD's result. */
#ifndef KF_SERVER_REPLY_H
#define KF_SERVER_REPLY_H

#include <jansson.h>
#include <stddef.h>

#include "kf_errors.h"
#include "server.h"

/* Queues resp with status (adds X-Request-Id, records the status) and destroys it. */
enum MHD_Result kf_reply_queue(struct kf_req *r, unsigned status, struct MHD_Response *resp);

/* A JSON reply from text (copied; len may be 0 to use strlen). A 2xx reply of a request that
 * has r->warnings gets them as its "warnings" member (json must then be an object). */
enum MHD_Result kf_reply_text(struct kf_req *r, unsigned status, const char *json, size_t len);

/* A JSON reply from an object; steals the reference. */
enum MHD_Result kf_reply_json(struct kf_req *r, unsigned status, json_t *obj);

/* The error reply: {"error":{"code","name","message","field"?,"request_id"}}. field may be
 * NULL; fmt NULL uses the registry's hint. */
enum MHD_Result kf_reply_error(struct kf_req *r, enum kf_err e, const char *field, const char *fmt,
                               ...) __attribute__((format(printf, 4, 5)));

/* The error for a failed statement on db: 503 database_unavailable when the connection is
 * down, else 500 internal (logged). */
enum MHD_Result kf_reply_db_error(struct kf_req *r, struct kf_db *db);

/* true when the last failure on db was the connection (PostgreSQL unreachable). */
bool kf_db_down(struct kf_db *db);

/* Runs the one-parameter statement stmt with param and answers 200 with its first column (a
 * JSON text), notfound when there is no row, 503/500 when the database fails. */
enum MHD_Result kf_reply_row(struct kf_req *r, const char *stmt, const char *param,
                             enum kf_err notfound);
#endif
