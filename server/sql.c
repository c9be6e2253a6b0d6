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
                                             "e2 WHERE e2.job_id = j.id),"                         \
                                             " 'episode_id', (SELECT p2.id FROM episodes p2 WHERE" \
                                             " p2.job_id = j.id))"

#define T_CREATED TS("t.created_at")

/* a task's fields; its check verdict and check job only where full (an SQL condition) holds:
 * for the owners that submitted it, and for admin keys */
#define TASK_FIELDS_IF(full)                                                                       \
    "'id', t.id, 'name', t.name, 'sha256', t.sha256, 'backend', t.backend, 'suite', t.suite,"      \
    " 'status', t.status, 'check', CASE WHEN " full " THEN t.check_result END,"                    \
    " 'created_at', " T_CREATED ", 'check_job_id', CASE WHEN " full " THEN (SELECT j2.id"          \
    " FROM jobs j2 WHERE j2.task_id = t.id AND j2.kind = 'check_task'"                             \
    " ORDER BY j2.created_at LIMIT 1) END"

#define TASK_FIELDS TASK_FIELDS_IF("true")
#define TASK_GET_FIELDS TASK_FIELDS_IF("$2::boolean")

/* the caller ($A admin, $O its owner, NULL when anonymous) submitted task t, or is admin */
#define TASK_OWNED(A, O)                                                                           \
    "(" A "::boolean OR EXISTS (SELECT 1 FROM task_owners o WHERE o.task_id = t.id"                \
    " AND o.owner = " O "::text))"

#define TASK_OWNED_23 TASK_OWNED("$2", "$3")
#define TASK_OWNED_45 TASK_OWNED("$4", "$5")
#define TASK_LIST_FIELDS TASK_FIELDS_IF(TASK_OWNED_45)

/* an episode of task t is published (with its sources, where only sources count) */
#define TASK_PUBLISHED                                                                             \
    "EXISTS (SELECT 1 FROM episodes p3 WHERE p3.task_id = t.id AND p3.publish <> 'none')"
#define TASK_SOURCES                                                                               \
    "EXISTS (SELECT 1 FROM episodes p3 WHERE p3.task_id = t.id AND p3.publish = 'sources')"

/* the GPU-seconds of job j: its episode's judge time (optimize), else the GPU lock its verdict
 * says it held, else (cpu, a check) its harness's wall time */
#define JOB_GPU_S                                                                                  \
    "CASE WHEN j.kind = 'optimize' THEN COALESCE((SELECT ep.gpu_seconds FROM episodes ep"          \
    " WHERE ep.job_id = j.id), 0) WHEN jsonb_typeof(j.result -> 'gpu_lock_held_s') = 'number'"     \
    " THEN (j.result ->> 'gpu_lock_held_s')::float8"                                               \
    " ELSE COALESCE(extract(epoch FROM j.finished_at - j.claimed_at)::float8, 0) END"

/* job j's episode is published (then anyone sees the job and its events) */
#define JOB_PUBLISHED                                                                              \
    "EXISTS (SELECT 1 FROM episodes p4 WHERE p4.job_id = j.id AND p4.publish <> 'none')"

#define DAY "interval '24 hours'"

#define K_CREATED TS("k.created_at")
#define K_REVOKED TS("k.revoked_at")

#define KEY_FIELDS                                                                                 \
    "'id', k.id, 'prefix', k.prefix, 'name', k.name, 'owner', k.owner,"                            \
    " 'scopes', to_json(k.scopes), 'created_at', " K_CREATED ", 'revoked_at', " K_REVOKED

#define B_MEASURED TS("b.measured_at")

/* a task's baselines, by device */
#define BASELINES                                                                                  \
    "COALESCE((SELECT json_agg(json_build_object('backend', b.backend, 'device', b.device,"        \
    " 'eager_ms', b.eager_ms, 'compile_ms', b.compile_ms, 'measured_at', " B_MEASURED ")"          \
    " ORDER BY b.device, b.backend) FROM baselines b WHERE b.task_id = t.id), '[]'::json)"

#define EVAL_FIELDS                                                                                \
    "'id', e.id, 'job_id', e.job_id, 'task_id', e.task_id, 'candidate_id', e.candidate_id,"        \
    " 'backend', e.backend, 'job_status', (SELECT j3.status FROM jobs j3 WHERE j3.id = e.job_id)," \
    " 'status', e.status, 'reward', e.reward, 'speedup_vs_eager', e.speedup_vs_eager,"             \
    " 'speedup_vs_compile', e.speedup_vs_compile, 'verdict', e.verdict, 'device', e.device,"       \
    " 'created_at', " TS("e.created_at") ", 'finished_at', " TS("e.finished_at")

#define FINISHED "j.status IN ('succeeded', 'failed', 'cancelled', 'dead')"

/* ---- GET /v1/leaderboard: one statement gives the rows, the summary, the facets and the filter.
 * $1 backend, $2 device, $3 policy, $4 model, $5 suite, $6 task_id (NULL: any), $7 per (task |
 * entry), $8 sort (eager | compile | reward | task | recent), $9 order (asc | desc), $10 limit.
 * An entry is a finished episode whose best candidate was correct again under the fresh-seed
 * re-validation (final_reward >= 1). Each CTE calls its input x, so the orders below serve both
 * windows. */

/* the medians of the final verdict's timing, where they are numbers */
#define LB_MEDIAN "median_ms ? (@.type() == \"number\")')::float8"

#define LB_ENTRIES                                                                                 \
    "SELECT ep.id, ep.task_id, t.name AS task_name, t.suite, ep.backend, ep.device, ep.policy,"    \
    " ep.policy_config ->> 'model' AS model, ep.best_candidate_id, ep.final_reward AS reward,"     \
    " ep.speedup_vs_eager AS se, ep.speedup_vs_compile AS sc, ep.n_turns, ep.finished_at,"         \
    " jsonb_path_query_first(ep.final_verdict, '$.timing.candidate." LB_MEDIAN " AS candidate_ms," \
    " jsonb_path_query_first(ep.final_verdict, '$.timing.eager." LB_MEDIAN " AS eager_ms,"         \
    " jsonb_path_query_first(ep.final_verdict, '$.timing.compile." LB_MEDIAN " AS compile_ms"      \
    " FROM episodes ep JOIN tasks t ON t.id = ep.task_id WHERE ep.status = 'finished'"             \
    " AND ep.final_reward >= 1 AND ep.best_candidate_id IS NOT NULL AND ep.publish <> 'none'"

#define LB_FILTER                                                                                  \
    "($1::text IS NULL OR x.backend = $1::text) AND ($2::text IS NULL OR x.device = $2::text)"     \
    " AND ($3::text IS NULL OR x.policy = $3::text) AND ($4::text IS NULL OR x.model = $4::text)"  \
    " AND ($5::text IS NULL OR x.suite = $5::text) AND ($6::uuid IS NULL OR x.task_id = $6::uuid)"

/* per=task: one group per task; per=entry: per task, device, policy and model */
#define LB_GROUP                                                                                   \
    "x.task_id, CASE WHEN $7::text = 'entry' THEN x.device END,"                                   \
    " CASE WHEN $7::text = 'entry' THEN x.policy END,"                                             \
    " CASE WHEN $7::text = 'entry' THEN x.model END"

/* the best first: fastest against eager, then against torch.compile, then the earliest */
#define LB_BEST "x.se DESC NULLS LAST, x.sc DESC NULLS LAST, x.finished_at ASC NULLS LAST, x.id"

#define LB_KEY                                                                                     \
    "CASE $8::text WHEN 'eager' THEN x.se WHEN 'compile' THEN x.sc WHEN 'reward' THEN"             \
    " x.reward::float8 WHEN 'recent' THEN extract(epoch FROM x.finished_at)::float8 END"

#define LB_NAME "CASE WHEN $8::text = 'task' THEN x.task_name COLLATE \"C\" END"

/* the sort asked for (missing values last either way), then the best first */
#define LB_SORT                                                                                    \
    "CASE WHEN $9::text = 'asc' THEN " LB_KEY " END ASC NULLS LAST,"                               \
    " CASE WHEN $9::text = 'desc' THEN " LB_KEY " END DESC NULLS LAST,"                            \
    " CASE WHEN $9::text = 'asc' THEN " LB_NAME " END ASC,"                                        \
    " CASE WHEN $9::text = 'desc' THEN " LB_NAME " END DESC, " LB_BEST

#define LB_FINISHED TS("x.finished_at")

#define LB_ROW                                                                                     \
    "json_build_object('rank', x.rank, 'task_id', x.task_id, 'task_name', x.task_name,"            \
    " 'suite', x.suite, 'backend', x.backend, 'device', x.device, 'policy', x.policy,"             \
    " 'model', x.model, 'episode_id', x.id, 'candidate_id', x.best_candidate_id,"                  \
    " 'reward', x.reward, 'speedup_vs_eager', x.se, 'speedup_vs_compile', x.sc,"                   \
    " 'candidate_ms', x.candidate_ms, 'eager_ms', x.eager_ms, 'compile_ms', x.compile_ms,"         \
    " 'turns', x.n_turns, 'finished_at', " LB_FINISHED ")"

/* over the ranked rows, summed in a fixed order so that neither sort nor limit moves a last digit;
 * 1.05 is the reward's margin (workers/harness/kforge_harness/reward.py) */
#define LB_SUMMARY                                                                                 \
    "SELECT json_build_object('entries', count(*), 'tasks', count(DISTINCT x.task_id),"            \
    " 'geomean_speedup_vs_eager', exp(avg(ln(x.se) ORDER BY x.id) FILTER (WHERE x.se > 0)),"       \
    " 'geomean_speedup_vs_compile', exp(avg(ln(x.sc) ORDER BY x.id) FILTER (WHERE x.sc > 0)),"     \
    " 'share_faster_than_eager', (count(*) FILTER (WHERE x.se > 1.05))::float8"                    \
    " / NULLIF(count(*), 0), 'share_faster_than_compile',"                                         \
    " (count(*) FILTER (WHERE x.sc > 1.05))::float8 / NULLIF(count(*), 0)) FROM r x"

/* the distinct values of five columns over every entry (unfiltered), each list sorted */
#define LB_FACETS                                                                                  \
    "SELECT '{\"backends\": [], \"devices\": [], \"policies\": [], \"models\": [],"                \
    " \"suites\": []}'::jsonb || COALESCE(jsonb_object_agg(g.k, g.vs), '{}'::jsonb) FROM"          \
    " (SELECT d.k, jsonb_agg(d.v ORDER BY d.v COLLATE \"C\") AS vs FROM (SELECT DISTINCT u.k, u.v" \
    " FROM e x, LATERAL (VALUES ('backends', x.backend), ('devices', x.device),"                   \
    " ('policies', x.policy), ('models', x.model), ('suites', x.suite)) u (k, v)"                  \
    " WHERE u.v IS NOT NULL) d GROUP BY d.k) g"

#define LB_FILTER_JSON                                                                             \
    "json_build_object('backend', $1::text, 'device', $2::text, 'policy', $3::text,"               \
    " 'model', $4::text, 'suite', $5::text, 'task_id', $6::uuid, 'per', $7::text,"                 \
    " 'sort', $8::text, 'order', $9::text, 'limit', $10::int)"

#define LEADERBOARD                                                                                \
    "WITH e AS (" LB_ENTRIES "), f AS (SELECT x.*, row_number() OVER (PARTITION BY " LB_GROUP      \
    " ORDER BY " LB_BEST ") AS pick FROM e x WHERE " LB_FILTER "),"                                \
    " r AS (SELECT x.*, row_number() OVER (ORDER BY " LB_SORT ") AS rank FROM f x"                 \
    " WHERE x.pick = 1)"                                                                           \
    " SELECT json_build_object('rows', COALESCE((SELECT json_agg(" LB_ROW " ORDER BY x.rank)"      \
    " FROM r x WHERE x.rank <= $10::int), '[]'::json), 'summary', (" LB_SUMMARY "),"               \
    " 'facets', (" LB_FACETS "), 'filter', " LB_FILTER_JSON ")::text"

static const struct kf_stmt stmts[] = {
    {"api_key", "SELECT id, hash, revoked_at IS NOT NULL, owner, array_to_string(scopes, ',')"
                " FROM api_keys WHERE prefix = $1"},
    {"ping", "SELECT 1"},
    {"job_get", "SELECT " JOB_JSON "::text FROM jobs j WHERE j.id = $1"},
    /* GET /v1/jobs/{id}: the job when $2 (admin) or $3 (the caller's owner) may see it */
    {"job_get_seen", "SELECT " JOB_JSON "::text FROM jobs j WHERE j.id = $1"
                     " AND ($2::boolean OR j.owner = $3::text OR " JOB_PUBLISHED ")"},
    {"job_state", "SELECT " FINISHED " FROM jobs j WHERE j.id = $1"},
    /* the task, its source ($3: shown) and its baselines (one per backend and device); $2: its
     * check shown */
    {"task_get", "SELECT json_build_object(" TASK_GET_FIELDS ", 'source', CASE WHEN $3::boolean"
                 " THEN t.source END, 'baselines', " BASELINES ")::text, t.status FROM tasks t"
                 " WHERE t.id = $1"},
    /* a task that a write names by id: one its caller submitted, or whose source is published */
    {"task_status",
     "SELECT t.status FROM tasks t WHERE t.id = $1 AND (" TASK_OWNED_23 " OR " TASK_SOURCES ")"},
    {"task_owner_add", "INSERT INTO task_owners (task_id, owner) VALUES ($1, $2)"
                       " ON CONFLICT DO NOTHING"},
    /* only the id and status: reading the task's jobs here (its check job) made concurrent
     * writes of one task conflict with each other's job inserts under SERIALIZABLE */
    {"task_by_sha", "SELECT t.id, t.status FROM tasks t WHERE t.sha256 = $1"},
    {"task_json", "SELECT json_build_object(" TASK_FIELDS ")::text FROM tasks t WHERE t.id = $1"},
    /* newest first; the cursor is "MICROSECONDS_ID" of the last row given; the tasks the caller
     * ($4 admin, $5 owner) submitted and those with a published episode */
    {"task_list", "SELECT json_build_object(" TASK_LIST_FIELDS ")::text,"
                  " (extract(epoch FROM t.created_at) * 1000000)::bigint || '_' || t.id"
                  " FROM tasks t WHERE ($1::bigint IS NULL OR"
                  " ((extract(epoch FROM t.created_at) * 1000000)::bigint, t.id)"
                  " < ($1::bigint, $2::uuid)) AND (" TASK_OWNED_45 " OR " TASK_PUBLISHED ")"
                  " ORDER BY t.created_at DESC, t.id DESC LIMIT $3::int"},
    {"task_insert", "INSERT INTO tasks (id, sha256, name, source, backend, suite)"
                    " VALUES ($1, $2, $3, $4, $5, COALESCE($6, 'user'))"
                    " ON CONFLICT (sha256) DO NOTHING RETURNING id"},
    {"job_insert", "INSERT INTO jobs (id, kind, class, backend, task_id, payload, owner)"
                   " VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)"},
    /* a new job's first event: seq 1 is known, so nothing is read (under SERIALIZABLE a read of
     * job_events' index page made concurrent enqueues conflict with each other) */
    {"event_queued", "INSERT INTO job_events (job_id, seq, kind, data) VALUES ($1, 1, 'queued',"
                     " '{}')"},
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
                       " limits, publish) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8)"},
    /* POST /v1/optimize's reply: {"job", "episode": {"id", "status"}} of an episode */
    {"optimize_pair", "SELECT json_build_object('job', " JOB_JSON ", 'episode',"
                      " json_build_object('id', e.id, 'status', e.status))::text"
                      " FROM episodes e JOIN jobs j ON j.id = e.job_id WHERE e.id = $1"},
    /* the reasons of a task's failed check, one text ("" when it gave none) */
    {"task_check_reasons", "SELECT COALESCE((SELECT string_agg(x, '; ') FROM"
                           " jsonb_array_elements_text(CASE WHEN jsonb_typeof("
                           "t.check_result -> 'reasons') = 'array' THEN t.check_result -> 'reasons'"
                           " ELSE '[]'::jsonb END) x), '') FROM tasks t WHERE t.id = $1"},
    {"job_cancel_queued", "UPDATE jobs SET status = 'cancelled', finished_at = now(),"
                          " updated_at = now() WHERE id = $1 AND status = 'queued' RETURNING id"},
    /* a queued optimize job's episode ends with its job (a running one's worker ends it) */
    {"episode_cancel",
     "UPDATE episodes SET status = 'cancelled', end_reason = 'cancelled',"
     " finished_at = now() WHERE job_id = $1 AND status IN ('queued', 'running')"},
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
    /* GET /readyz: the classes with jobs that need a worker (jobs_status_idx) */
    {"jobs_waiting", "SELECT class, count(*) FROM jobs WHERE status IN ('queued', 'running')"
                     " GROUP BY class"},
    {"leaderboard", LEADERBOARD},
    /* access.c: the caller's level (access.h: 3 owner, 2 sources, 1 results, 0 none) on the
     * object $1, from $2 (admin) and $3 (its owner, NULL when anonymous) */
    {"see_task", "SELECT CASE WHEN " TASK_OWNED_23 " THEN 3 WHEN " TASK_SOURCES
                 " THEN 2 WHEN " TASK_PUBLISHED " THEN 1 ELSE 0 END FROM tasks t WHERE t.id = $1"},
    {"see_job", "SELECT CASE WHEN $2::boolean OR j.owner = $3::text THEN 3 WHEN " JOB_PUBLISHED
                " THEN 1 ELSE 0 END FROM jobs j WHERE j.id = $1"},
    {"see_evaluation", "SELECT CASE WHEN $2::boolean OR j.owner = $3::text THEN 3 ELSE 0 END"
                       " FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE e.id = $1"},
    {"see_episode", "SELECT CASE WHEN $2::boolean OR j.owner = $3::text THEN 3 ELSE CASE ep.publish"
                    " WHEN 'sources' THEN 2 WHEN 'results' THEN 1 ELSE 0 END END"
                    " FROM episodes ep JOIN jobs j ON j.id = ep.job_id WHERE ep.id = $1"},
    /* a candidate: of an evaluation, or the best or a judged one (in its turns' rewards) of an
     * episode of its task */
    {"see_candidate",
     "SELECT CASE WHEN $2::boolean THEN 3 ELSE COALESCE(GREATEST((SELECT max(CASE WHEN j.owner ="
     " $3::text THEN 3 ELSE 0 END) FROM evaluations e JOIN jobs j ON j.id = e.job_id"
     " WHERE e.candidate_id = c.id), (SELECT max(CASE WHEN j.owner = $3::text THEN 3"
     " WHEN ep.publish = 'sources' THEN 2 ELSE 0 END) FROM episodes ep JOIN jobs j"
     " ON j.id = ep.job_id WHERE ep.task_id = c.task_id AND (ep.best_candidate_id = c.id"
     " OR EXISTS (SELECT 1 FROM turns u WHERE u.episode_id = ep.id AND u.rewards @>"
     " jsonb_build_array(jsonb_build_object('candidate_id', c.id::text)))))), 0) END"
     " FROM candidates c WHERE c.id = $1"},
    /* the quotas of owner $1 ($2, $3: the settings, for an owner without its own), its queued and
     * running jobs, its GPU-seconds of the last 24 hours, and the seconds until the oldest
     * finished job of those leaves the window */
    {"quota_usage",
     "SELECT COALESCE(o.max_active_jobs, $2::int), COALESCE(o.gpu_seconds_per_day, $3::float8),"
     " (SELECT count(*) FROM jobs j WHERE j.owner = $1::text AND j.status IN ('queued',"
     " 'running')), (SELECT COALESCE(sum(" JOB_GPU_S "), 0) FROM jobs j WHERE j.owner = $1::text"
     " AND (j.status = 'running' OR j.finished_at >= now() - " DAY ")), (SELECT ceil(extract("
     "epoch FROM min(j.finished_at) + " DAY " - now()))::bigint FROM jobs j"
     " WHERE j.owner = $1::text AND j.finished_at >= now() - " DAY ")"
     " FROM (SELECT $1::text AS name) x LEFT JOIN owners o ON o.name = x.name"},
    /* owner $1's quotas as the Quota object of GET /v1/quota ($2, $3: the settings) */
    {"owner_quota_get",
     "SELECT json_build_object('owner', o.name, 'active_jobs', json_build_object('own',"
     " o.max_active_jobs, 'limit', COALESCE(o.max_active_jobs, $2::int), 'used', (SELECT count(*)"
     " FROM jobs j WHERE j.owner = o.name AND j.status IN ('queued', 'running'))),"
     " 'gpu_seconds_per_day', json_build_object('own', o.gpu_seconds_per_day, 'limit',"
     " COALESCE(o.gpu_seconds_per_day, $3::float8), 'used', (SELECT COALESCE(sum(" JOB_GPU_S
     "), 0) FROM jobs j WHERE j.owner = o.name AND (j.status = 'running' OR j.finished_at >= now()"
     " - " DAY "))))::text FROM owners o WHERE o.name = $1::text"},
    /* owner $1's own quotas: each changed when $2 / $4, to $3 / $5 (NULL: the setting's) */
    {"owner_quota_set",
     "UPDATE owners SET max_active_jobs = CASE WHEN $2::boolean THEN $3::int ELSE"
     " max_active_jobs END, gpu_seconds_per_day = CASE WHEN $4::boolean THEN $5::float8 ELSE"
     " gpu_seconds_per_day END WHERE name = $1::text RETURNING name"},
    /* one owner's writes one at a time (quota.c's kf_quota_write): a session lock */
    {"quota_lock", "SELECT pg_advisory_lock(hashtextextended('kforge-owner:' || $1::text, 0))"},
    {"quota_unlock", "SELECT pg_advisory_unlock(hashtextextended('kforge-owner:' || $1::text, 0))"},
    /* the keys API (keys_*.c, key_revoke_post.c) */
    {"owner_add", "INSERT INTO owners (name) VALUES ($1) ON CONFLICT DO NOTHING"},
    {"key_insert", "INSERT INTO api_keys (id, prefix, hash, name, owner, scopes)"
                   " VALUES ($1, $2, $3, $4, $5, string_to_array($6, ','))"},
    {"key_get", "SELECT json_build_object(" KEY_FIELDS ")::text FROM api_keys k WHERE k.id = $1"},
    {"key_list", "SELECT json_build_object(" KEY_FIELDS ")::text FROM api_keys k"
                 " WHERE $1::text IS NULL OR k.owner = $1::text ORDER BY k.created_at DESC, k.id"},
    {"key_revoke", "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1"
                   " RETURNING id"},
};

const struct kf_stmt *kf_sql_stmts(size_t *n) {
    *n = sizeof stmts / sizeof stmts[0];
    return stmts;
}
