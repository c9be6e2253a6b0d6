/* workspace.h: a job's folder on disk (workspace.c). */
#ifndef KF_WORKSPACE_H
#define KF_WORKSPACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* true when name is a safe relative file name: [A-Za-z0-9._/-], no leading "/", no empty,
 * "." or ".." parts. */
bool kfw_ws_name_ok(const char *name);

/* Creates dir afresh (removing what was there) with task.py = source and candidate/NAME for
 * each entry of files (an object name -> text; may be NULL). 0, or -1 with a reason in err. */
int kfw_ws_create(const char *dir, const char *source, json_t *files, char *err, size_t errlen);

/* Removes dir and everything under it (no error when it is missing). 0 or -1. */
int kfw_ws_remove(const char *dir);

#endif
