/* sql.c: the server's prepared statements. Objects are built as JSON text by PostgreSQL
 * (json_build_object), so the hot paths copy one value into the response without parsing it.
 * Times come out as RFC 3339 (the session runs in UTC). */
#include "sql.h"

#define TS(x) "to_char((" x ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

#define JOB_JSON                                                                                   \
    "json_build_object('id', j.id, 'kind', j.kind, 'status', j.status, 'class', j.class,"          \
    " 'backend', j.backend, 'task_id', j.task_id, 'attempt', j.attempt,"                           \
    " 'cancel_requested', j.cancel_requested, 'created_at', " TS(                                  \
        "j.created_at") ","                                                                        \
                        " 'claimed_at', " TS("j.claimed_at") ", 'finished_at', " TS(               \
                            "j.finished_at") ","                                                   \
                                             " 'result', j.result, 'error', j.error, 'device', "   \
                                             "j.device,"                                           \
                                             " 'evaluation_id', (SELECT e2.id FROM evaluations "   \
                                             "e2 WHERE e2.job_id = j.id))"

#define TASK_FIELDS                                                                                \
    "'id', t.id, 'name', t.name, 'sha256', t.sha256, 'backend', t.backend, 'status', t.status,"    \
    " 'check', t.check_result, 'created_at', " TS(                                                 \
        "t.created_at") ","                                                                        \
                        " 'check_job_id', (SELECT j2.id FROM jobs j2 WHERE j2.task_id = t.id"      \
                        " AND j2.kind = 'check_task' ORDER BY j2.created_at LIMIT 1)"

#define EVAL_FIELDS                                                                                \
    "'id', e.id, 'job_id', e.job_id, 'task_id', e.task_id, 'candidate_id', e.candidate_id,"        \
    " 'backend', e.backend, 'job_status', (SELECT j3.status FROM jobs j3 WHERE j3.id = e.job_id)," \
    " 'status', e.status, 'reward', e.reward, 'speedup_vs_eager', e.speedup_vs_eager,"             \
    " 'speedup_vs_compile', e.speedup_vs_compile, 'verdict', e.verdict, 'device', e.device,"       \
    " 'created_at', " TS("e.created_at") ", 'finished_at', " TS("e.finished_at")

#define FINISHED "j.status IN ('succeeded', 'failed', 'cancelled', 'dead')"

static const struct kf_stmt stmts[] = {
    {"api_key", "SELECT id, hash, revoked_at IS NOT NULL FROM api_keys WHERE prefix = $1"},
    {"ping", "SELECT 1"},
    {"job_get", "SELECT " JOB_JSON "::text FROM jobs j WHERE j.id = $1"},
    {"job_state", "SELECT " FINISHED " FROM jobs j WHERE j.id = $1"},
    {"task_get", "SELECT json_build_object(" TASK_FIELDS ", 'source', t.source)::text, t.status"
                 " FROM tasks t WHERE t.id = $1"},
    {"task_status", "SELECT status FROM tasks WHERE id = $1"},
    {"task_by_sha", "SELECT json_build_object(" TASK_FIELDS ")::text, t.id, t.status"
                    " FROM tasks t WHERE t.sha256 = $1"},
    {"task_json", "SELECT json_build_object(" TASK_FIELDS ")::text FROM tasks t WHERE t.id = $1"},
    /* newest first; the cursor is "MICROSECONDS_ID" of the last row given */
    {"task_list", "SELECT json_build_object(" TASK_FIELDS ")::text,"
                  " (extract(epoch FROM t.created_at) * 1000000)::bigint || '_' || t.id"
                  " FROM tasks t WHERE $1::bigint IS NULL OR"
                  " ((extract(epoch FROM t.created_at) * 1000000)::bigint, t.id)"
                  " < ($1::bigint, $2::uuid)"
                  " ORDER BY t.created_at DESC, t.id DESC LIMIT $3::int"},
    {"task_insert", "INSERT INTO tasks (id, sha256, name, source, backend)"
                    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING RETURNING id"},
    {"job_insert", "INSERT INTO jobs (id, kind, class, backend, task_id, payload)"
                   " VALUES ($1, $2, $3, $4, $5, $6::jsonb)"},
    {"event_add", "INSERT INTO job_events (job_id, seq, kind, data) VALUES ($1,"
                  " COALESCE((SELECT max(seq) FROM job_events WHERE job_id = $1), 0) + 1,"
                  " $2, COALESCE($3::jsonb, '{}'))"},
    {"candidate_insert", "INSERT INTO candidates (id, task_id, format, files, sha256)"
                         " VALUES ($1, $2, $3, $4::jsonb, $5)"},
    {"evaluation_insert", "INSERT INTO evaluations (id, job_id, task_id, candidate_id, backend)"
                          " VALUES ($1, $2, $3, $4, $5)"},
    {"evaluation_get",
     "SELECT json_build_object(" EVAL_FIELDS ", 'candidate', json_build_object("
     "'format', c.format, 'files', c.files))::text"
     " FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE e.id = $1"},
    {"evaluation_pair",
     "SELECT json_build_object('evaluation', json_build_object(" EVAL_FIELDS "), 'job', " JOB_JSON
     ")::text, " FINISHED " FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE e.id = $1"},
    {"episode_insert", "INSERT INTO episodes (id, job_id, task_id, backend, policy, policy_config,"
                       " limits) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb)"},
    /* POST /v1/optimize's reply: {"job", "episode": {"id", "status"}} of an episode */
    {"optimize_pair", "SELECT json_build_object('job', " JOB_JSON ", 'episode',"
                      " json_build_object('id', e.id, 'status', e.status))::text"
                      " FROM episodes e JOIN jobs j ON j.id = e.job_id WHERE e.id = $1"},
    {"job_cancel_queued", "UPDATE jobs SET status = 'cancelled', finished_at = now(),"
                          " updated_at = now() WHERE id = $1 AND status = 'queued' RETURNING id"},
    {"job_cancel_running", "UPDATE jobs SET cancel_requested = true, updated_at = now()"
                           " WHERE id = $1 AND status = 'running' RETURNING id"},
    {"job_exists", "SELECT 1 FROM jobs WHERE id = $1"},
    /* one row per new event; one row of NULLs when there is none; no row: no such job; the
     * 4th column says whether the `done` event came at or before $2 (a resume after the end) */
    {"job_events",
     "SELECT ev.seq, ev.kind, ev.doc, EXISTS (SELECT 1 FROM job_events d WHERE d.job_id = j.id"
     " AND d.kind = 'done' AND d.seq <= $2::int) FROM jobs j LEFT JOIN LATERAL (SELECT seq, kind,"
     " json_build_object('job_id', job_id, 'seq', seq, 'kind', kind, 'at', " TS(
         "at") ","
               " 'data', data)::text AS doc FROM job_events WHERE job_id = j.id AND seq > $2::int"
               " ORDER BY seq LIMIT 64) ev ON true WHERE j.id = $1 ORDER BY ev.seq"},
    {"jobs_by_status", "SELECT status, count(*) FROM jobs GROUP BY status"},
    {"job_classes", "SELECT DISTINCT class FROM jobs"},
};

const struct kf_stmt *kf_sql_stmts(size_t *n) {
    *n = sizeof stmts / sizeof stmts[0];
    return stmts;
}
