/* episode_sql.c: the statements of the episode, candidate and export reads. As in sql.c, the
 * objects are built as JSON text by PostgreSQL, and times come out as RFC 3339 in UTC. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "episode_sql.h"

#define TS(x) "to_char((" x ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* A jsonb value as an array ('[]' when it is anything else), so that odd rows never fail. */
#define ARRAY(x) "(CASE WHEN jsonb_typeof(" x ") = 'array' THEN (" x ") ELSE '[]'::jsonb END)"

/* policy_config with the policy's name over it */
#define POLICY_JSON                                                                                \
    "(CASE WHEN jsonb_typeof(e.policy_config) = 'object' THEN e.policy_config ELSE '{}'::jsonb"    \
    " END || jsonb_build_object('name', e.policy))"

/* the times and arrays the objects below use, named so each line stays plain text */
#define E_CREATED TS("e.created_at")
#define E_STARTED TS("e.started_at")
#define E_FINISHED TS("e.finished_at")
#define T_CREATED TS("t.created_at")
#define C_CREATED TS("c.created_at")
#define PROMPT_ARRAY ARRAY("e.prompt")
#define RESULTS_ARRAY ARRAY("u.tool_results")
#define CALLS_ARRAY ARRAY("u.assistant -> 'tool_calls'")

/* the policy as anyone but the owner sees it: its name and model (no endpoint) */
#define POLICY_PUBLIC                                                                              \
    "jsonb_strip_nulls(jsonb_build_object('name', e.policy, 'model',"                              \
    " CASE WHEN jsonb_typeof(e.policy_config) = 'object' THEN e.policy_config -> 'model' END))"

/* $4: the caller is the episode's owner (else the policy shows no endpoint) */
#define EPISODE_FIELDS                                                                             \
    "'id', e.id, 'job_id', e.job_id, 'task_id', e.task_id, 'backend', e.backend,"                  \
    " 'task_name', (SELECT k.name FROM tasks k WHERE k.id = e.task_id),"                           \
    " 'status', e.status, 'end_reason', e.end_reason,"                                             \
    " 'end_detail', (SELECT jd.result ->> 'end_detail' FROM jobs jd WHERE jd.id = e.job_id),"      \
    " 'policy', CASE WHEN $4::boolean THEN " POLICY_JSON " ELSE " POLICY_PUBLIC " END,"            \
    " 'limits', e.limits, 'attempt', e.attempt, 'n_turns', e.n_turns,"                             \
    " 'tokens', json_build_object('prompt', e.prompt_tokens, 'completion', e.completion_tokens),"  \
    " 'gpu_seconds', e.gpu_seconds, 'env', e.env, 'best_candidate_id', e.best_candidate_id,"       \
    " 'result', CASE WHEN e.final_verdict IS NULL AND e.final_reward IS NULL THEN NULL ELSE"       \
    " json_build_object('reward', e.final_reward, 'reward_version', e.reward_version,"             \
    " 'speedup_vs_eager', e.speedup_vs_eager, 'speedup_vs_compile', e.speedup_vs_compile,"         \
    " 'device', e.device, 'verdict', e.final_verdict) END,"                                        \
    " 'publish', e.publish,"                                                                       \
    " 'created_at', " E_CREATED ", 'started_at', " E_STARTED ", 'finished_at', " E_FINISHED

#define TURN_VIEW                                                                                  \
    "json_build_object('idx', t.idx, 'assistant', t.assistant, 'tool_results', t.tool_results,"    \
    " 'finish_reason', t.finish_reason, 'rewards', t.rewards, 'malformed', t.malformed,"           \
    " 'prompt_tokens', t.prompt_tokens, 'completion_tokens', t.completion_tokens,"                 \
    " 'policy_ms', t.policy_ms, 'tools_ms', t.tools_ms, 'overhead_ms', t.overhead_ms,"             \
    " 'created_at', " T_CREATED ")"

/* The OpenAI-format conversation: the prompt, then each turn's assistant message and its tool
 * messages, in turn order. */
#define MESSAGES_JSON                                                                              \
    "(SELECT COALESCE(jsonb_agg(m.msg ORDER BY m.grp, m.idx, m.ord), '[]'::jsonb) FROM ("          \
    " SELECT 0 AS grp, 0 AS idx, p.ord, p.msg"                                                     \
    " FROM jsonb_array_elements(" PROMPT_ARRAY ") WITH ORDINALITY p (msg, ord)"                    \
    " UNION ALL SELECT 1, u.idx, 0, u.assistant FROM turns u WHERE u.episode_id = e.id"            \
    " UNION ALL SELECT 1, u.idx, r.ord, r.msg"                                                     \
    " FROM turns u, jsonb_array_elements(" RESULTS_ARRAY ") WITH ORDINALITY r (msg, ord)"          \
    " WHERE u.episode_id = e.id) m)"

#define TURN_TRAINING                                                                              \
    "json_build_object('idx', u.idx, 'prompt_token_ids', u.prompt_token_ids,"                      \
    " 'completion_token_ids', u.completion_token_ids, 'logprobs', u.logprobs,"                     \
    " 'finish_reason', u.finish_reason, 'rewards', u.rewards, 'malformed', u.malformed,"           \
    " 'prompt_tokens', u.prompt_tokens, 'completion_tokens', u.completion_tokens)"

#define TRAJECTORY_JSON                                                                            \
    "json_build_object('schema_version', 1, 'episode_id', e.id, 'job_id', e.job_id,"               \
    " 'task', json_build_object('id', t.id, 'name', t.name, 'sha256', t.sha256,"                   \
    " 'backend', e.backend), 'policy', " POLICY_JSON ", 'limits', e.limits, 'env', e.env,"         \
    " 'tools', e.tools, 'messages', " MESSAGES_JSON ","                                            \
    " 'turns', COALESCE((SELECT json_agg(" TURN_TRAINING " ORDER BY u.idx) FROM turns u"           \
    " WHERE u.episode_id = e.id), '[]'::json),"                                                    \
    " 'final', json_build_object('reward', e.final_reward, 'reward_version', e.reward_version,"    \
    " 'speedup_vs_eager', e.speedup_vs_eager, 'speedup_vs_compile', e.speedup_vs_compile,"         \
    " 'device', e.device, 'end_reason', e.end_reason, 'status', e.status),"                        \
    " 'created_at', " E_CREATED ", 'finished_at', " E_FINISHED ")"

#define SFT_JSON "json_build_object('messages', " MESSAGES_JSON ", 'tools', e.tools)"

/* A turn's tool calls as [[name, arguments], ...] (arguments compared as the strings the
 * policy sent), NULL when it called none. */
#define CALLS_SIG                                                                                  \
    "(SELECT jsonb_agg(jsonb_build_array(c.v -> 'function' -> 'name',"                             \
    " c.v -> 'function' -> 'arguments') ORDER BY c.ord)"                                           \
    " FROM jsonb_array_elements(" CALLS_ARRAY ") WITH ORDINALITY c (v, ord))"

/* Rejection fine-tuning: a positive reward, no malformed turn, and no two consecutive turns
 * with the same tool calls (a policy repeating itself). */
#define RFT                                                                                        \
    "(e.final_reward > 0"                                                                          \
    " AND NOT EXISTS (SELECT 1 FROM turns mt WHERE mt.episode_id = e.id AND mt.malformed)"         \
    " AND NOT EXISTS (SELECT 1 FROM (SELECT s.sig, lag(s.sig) OVER (ORDER BY s.idx) AS prev"       \
    " FROM (SELECT u.idx, " CALLS_SIG " AS sig FROM turns u WHERE u.episode_id = e.id) s) w"       \
    " WHERE w.sig IS NOT NULL AND w.sig = w.prev))"

/* $1 after export_seq, $2 since, $3 until, $4 task_id, $5 policy, $6 min_reward, $7 rft, $9 the
 * owner whose episodes they are (NULL: every owner's, for an admin key) */
#define EXPORT_WHERE                                                                               \
    "e.export_seq IS NOT NULL AND e.export_seq > $1::bigint"                                       \
    " AND ($9::text IS NULL OR EXISTS (SELECT 1 FROM jobs jo WHERE jo.id = e.job_id"               \
    " AND jo.owner = $9::text))"                                                                   \
    " AND ($2::timestamptz IS NULL OR e.finished_at >= $2::timestamptz)"                           \
    " AND ($3::timestamptz IS NULL OR e.finished_at < $3::timestamptz)"                            \
    " AND ($4::uuid IS NULL OR e.task_id = $4::uuid)"                                              \
    " AND ($5::text IS NULL OR e.policy = $5::text)"                                               \
    " AND ($6::int IS NULL OR e.final_reward >= $6::int)"                                          \
    " AND (NOT $7::boolean OR " RFT ")"

static const struct kf_stmt stmts[] = {
    /* the episode without its turns, and its turns after $2 (all when NULL) when $3; $4: seen
     * by its owner */
    {"ep_episode_get",
     "SELECT json_build_object(" EPISODE_FIELDS ")::text, CASE WHEN $3::boolean THEN"
     " COALESCE((SELECT json_agg(" TURN_VIEW " ORDER BY t.idx) FROM turns t"
     " WHERE t.episode_id = e.id AND ($2::int IS NULL OR t.idx > $2::int)), '[]'::json)::text"
     " END FROM episodes e WHERE e.id = $1::uuid"},
    /* what its owner publishes of episode $1 (POST /v1/episodes/{id}/publish) */
    {"ep_publish", "UPDATE episodes SET publish = $2::text WHERE id = $1::uuid RETURNING id"},
    {"ep_candidate_get",
     "SELECT json_build_object('id', c.id, 'task_id', c.task_id, 'format', c.format,"
     " 'sha256', c.sha256, 'files', c.files, 'created_at', " C_CREATED ")::text"
     " FROM candidates c WHERE c.id = $1::uuid"},
    {"ep_candidate_files", "SELECT c.files::text, floor(extract(epoch FROM c.created_at))::bigint"
                           " FROM candidates c WHERE c.id = $1::uuid"},
    /* one page of records in export_seq order: (export_seq, record) */
    {"ep_export_trajectory", "SELECT e.export_seq, " TRAJECTORY_JSON "::text FROM episodes e"
                             " JOIN tasks t ON t.id = e.task_id WHERE " EXPORT_WHERE
                             " ORDER BY e.export_seq LIMIT $8::int"},
    {"ep_export_sft", "SELECT e.export_seq, " SFT_JSON "::text FROM episodes e WHERE " EXPORT_WHERE
                      " ORDER BY e.export_seq LIMIT $8::int"},
    /* whether a record follows $1 (the next page would not be empty) */
    {"ep_export_more",
     "SELECT EXISTS (SELECT 1 FROM episodes e WHERE " EXPORT_WHERE " LIMIT $8::int)"},
};

const struct kf_stmt *kf_episode_sql_stmts(size_t *n) {
    *n = sizeof stmts / sizeof stmts[0];
    return stmts;
}

PGresult *kf_episode_sql_exec(struct kf_db *db, const char *name, int nparams,
                              const char *const *params) {
    return kf_db_exec(db, name, nparams, params);
}
