/* export_get.h: GET /v1/export: finished episodes as NDJSON for trainers, keyset-paginated on
 * episodes.export_seq, streamed (and gzipped when the client takes it).
 *
 * Why paging by export_seq has no gaps: the worker finishes an episode in one transaction that
 * first takes the transaction-scoped advisory lock KF_EXPORT_LOCK_KEY (lib/db.h) and then sets
 *
 *     SELECT pg_advisory_xact_lock(8127346001);
 *     UPDATE episodes SET status = 'finished', finished_at = now(),
 *            export_seq = nextval('episodes_export_seq') WHERE id = $1;
 *     COMMIT;
 *
 * so the sequence is drawn and committed one transaction at a time: every snapshot sees a
 * prefix of export_seq (holes only where a transaction rolled back), and a cursor "after N"
 * can never skip a row that commits later with a smaller number. Any writer that sets
 * export_seq must do it this way. */
#ifndef KF_SERVER_EXPORT_GET_H
#define KF_SERVER_EXPORT_GET_H

#include "server.h"

/* GET /v1/export?cursor&limit&since&until&task_id&policy&min_reward&rft&format */
enum MHD_Result kf_export_get(struct kf_req *r);

#endif
