/* tasks_post.h: POST /v1/tasks: creates a task (or returns the one with the same source) */
#ifndef KF_SERVER_TASKS_POST_H
#define KF_SERVER_TASKS_POST_H

#include <stdbool.h>

#include "enqueue.h"
#include "server.h"

/* POST /v1/tasks */
enum MHD_Result kf_tasks_post(struct kf_req *r);

/* Shared with POST /v1/evaluations and POST /v1/optimize ("task": {...}): checks t->source,
 * t->name and t->suite (prefix names the object, NULL at the top), sets t->sha256 (into sha)
 * and the default name (into name_buf). Returns true, or false with the error reply queued. */
bool kf_task_fields_ok(struct kf_req *r, const char *prefix, struct kf_new_task *t,
                       char name_buf[16], char sha[65]);

/* true when s is a suite's name: ^[a-z0-9][a-z0-9._-]{0,63}$ */
bool kf_suite_valid(const char *s);

/* true for "cuda" and "cpu"; else false with 400 unsupported_backend queued. */
bool kf_backend_ok(struct kf_req *r, const char *backend);

#endif
