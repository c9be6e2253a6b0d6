/* sql.h: every prepared statement of the server, in one table (prepared on each pooled
 * connection by kf_db_pool_open). Handlers run them by the names below. */
#ifndef KF_SERVER_SQL_H
#define KF_SERVER_SQL_H

#include <stddef.h>

#include "db.h"

/* The table and its length. */
const struct kf_stmt *kf_sql_stmts(size_t *n);

#endif
