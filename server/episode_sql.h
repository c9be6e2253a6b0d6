/* episode_sql.h: the prepared statements of the episode, candidate and export reads
 * (GET /v1/episodes/{id}, GET /v1/candidates/{id}[/download], GET /v1/export). pools.c
 * prepares them on every pooled connection after sql.c's table. */
#ifndef KF_SERVER_EPISODE_SQL_H
#define KF_SERVER_EPISODE_SQL_H

#include <stddef.h>

#include "db.h"

/* The table and its length. */
const struct kf_stmt *kf_episode_sql_stmts(size_t *n);

/* kf_db_exec of the statement `name` of this table. Same result and error rules as kf_db_exec
 * (the caller PQclears). */
PGresult *kf_episode_sql_exec(struct kf_db *db, const char *name, int nparams,
                              const char *const *params);

#endif
