/* worker_db.c: the SQL of the worker in one table (every connection prepares all of it), the
 * fenced event insert, connecting with retries, and the two ways of sleeping. */
#include "worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Fenced writes carry `id=$1 AND attempt=$2 AND status='running'`: a write that touches no row
 * means the job was taken over or cancelled (lib/README.md, step 3). */
#define FENCE "id = $1::uuid AND attempt = $2::int AND status = 'running'"

static const struct kf_stmt stmts[] = {
    {"claim", "UPDATE jobs SET status = 'running', attempt = attempt + 1, lease_owner = $2,"
              " lease_expires = now() + make_interval(secs => $3::int), claimed_at = now(),"
              " updated_at = now()"
              " WHERE id = $1::uuid AND (status = 'queued' OR (status = 'running' AND"
              " lease_expires < now())) AND NOT cancel_requested"
              " RETURNING attempt, kind, backend, task_id, payload::text"},
    /* an event under the fence; seq = max + 1 of the job's events */
    {"event", "INSERT INTO job_events (job_id, seq, kind, data)"
              " SELECT $1::uuid, (SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events"
              " WHERE job_id = $1::uuid), $3, $4::jsonb"
              " WHERE EXISTS (SELECT 1 FROM jobs WHERE " FENCE ")"},
    /* an event inside a finishing transaction, after its fenced UPDATE succeeded */
    {"event_any", "INSERT INTO job_events (job_id, seq, kind, data)"
                  " SELECT $1::uuid, COALESCE(MAX(seq), 0) + 1, $2, $3::jsonb"
                  " FROM job_events WHERE job_id = $1::uuid"},
    {"renew", "UPDATE jobs SET lease_expires = now() + make_interval(secs => $3::int),"
              " updated_at = now() WHERE " FENCE " RETURNING cancel_requested"},
    {"inputs", "SELECT t.source, c.format, c.files::text, j.payload::text"
               " FROM jobs j JOIN tasks t ON t.id = j.task_id"
               " LEFT JOIN evaluations e ON e.job_id = j.id"
               " LEFT JOIN candidates c ON c.id = e.candidate_id WHERE j.id = $1::uuid"},
    {"succeed", "UPDATE jobs SET status = 'succeeded', result = $3::jsonb, device = $4,"
                " error = NULL, finished_at = now(), lease_owner = NULL, lease_expires = NULL,"
                " updated_at = now() WHERE " FENCE},
    /* $2 is the verdict; the columns come out of it */
    {"eval_done", "UPDATE evaluations SET status = $2::jsonb->>'status',"
                  " reward = round(($2::jsonb->>'reward')::numeric)::int,"
                  " speedup_vs_eager = ($2::jsonb->>'speedup_vs_eager')::float8,"
                  " speedup_vs_compile = ($2::jsonb->>'speedup_vs_compile')::float8,"
                  " verdict = $2::jsonb, device = $3, finished_at = now()"
                  " WHERE job_id = $1::uuid"},
    {"baseline", "INSERT INTO baselines (task_id, backend, device, eager_ms, compile_ms)"
                 " VALUES ($1::uuid, $2, $3, $4::float8, $5::float8)"
                 " ON CONFLICT (task_id, backend, device) DO UPDATE SET"
                 " eager_ms = EXCLUDED.eager_ms,"
                 " compile_ms = COALESCE(EXCLUDED.compile_ms, baselines.compile_ms),"
                 " measured_at = now()"},
    {"task_checked", "UPDATE tasks SET status = $2, check_result = $3::jsonb"
                     " WHERE id = $1::uuid"},
    /* a task found invalid: the evaluate and optimize jobs queued for it fail now, their
     * episodes end task_invalid with the check's reasons ($2 the error, $3 the reasons) */
    {"fail_dependents",
     "WITH f AS (UPDATE jobs SET status = 'failed', error = $2::jsonb,"
     " result = jsonb_build_object('end_reason', 'task_invalid', 'end_detail', $3::text),"
     " finished_at = now(), lease_owner = NULL, lease_expires = NULL, updated_at = now()"
     " WHERE task_id = $1::uuid AND status = 'queued' AND kind IN ('evaluate', 'optimize')"
     " RETURNING id), e AS (UPDATE episodes SET status = 'failed', end_reason = 'task_invalid',"
     " finished_at = now() WHERE job_id IN (SELECT id FROM f))"
     " INSERT INTO job_events (job_id, seq, kind, data) SELECT f.id, COALESCE((SELECT"
     " max(x.seq) FROM job_events x WHERE x.job_id = f.id), 0) + 1, 'done',"
     " jsonb_build_object('status', 'failed', 'error', $2::jsonb) FROM f"},
    {"requeue", "UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_expires = NULL,"
                " error = $3::jsonb, enqueued_at = now(), updated_at = now()"
                " WHERE " FENCE " RETURNING class"},
    {"dead", "UPDATE jobs SET status = 'dead', error = $3::jsonb, finished_at = now(),"
             " lease_owner = NULL, lease_expires = NULL, updated_at = now()"
             " WHERE " FENCE " RETURNING class"},
    {"cancelled", "UPDATE jobs SET status = 'cancelled', finished_at = now(),"
                  " lease_owner = NULL, lease_expires = NULL, updated_at = now()"
                  " WHERE " FENCE},
    /* episodes (episode_*.c) */
    {"episode_load", "SELECT e.id, e.task_id, e.policy, e.policy_config::text, e.limits::text,"
                     " t.source, t.name, j.payload::text FROM episodes e"
                     " JOIN tasks t ON t.id = e.task_id JOIN jobs j ON j.id = e.job_id"
                     " WHERE e.job_id = $1::uuid"},
    /* a new attempt starts cleanly: the old attempt's turns go */
    {"episode_start", "WITH ok AS (SELECT 1 FROM jobs WHERE " FENCE "),"
                      " d AS (DELETE FROM turns WHERE episode_id = $3::uuid"
                      " AND EXISTS (SELECT 1 FROM ok))"
                      " UPDATE episodes SET status = 'running', attempt = $2::int,"
                      " started_at = now(), n_turns = 0, prompt_tokens = 0,"
                      " completion_tokens = 0, gpu_seconds = 0, best_candidate_id = NULL,"
                      " final_verdict = NULL, final_reward = NULL, end_reason = NULL,"
                      " prompt = $4::jsonb, tools = $5::jsonb"
                      " WHERE id = $3::uuid AND EXISTS (SELECT 1 FROM ok)"},
    {"turn_insert", "WITH ok AS (SELECT 1 FROM jobs WHERE " FENCE "),"
                    " t AS (INSERT INTO turns (episode_id, idx, assistant, tool_results,"
                    " finish_reason, rewards, malformed, prompt_token_ids, completion_token_ids,"
                    " logprobs, prompt_tokens, completion_tokens, policy_ms, tools_ms,"
                    " overhead_ms) SELECT $3::uuid, $4::int, $5::jsonb, $6::jsonb, $7,"
                    " $8::jsonb, $9::bool, $10::jsonb, $11::jsonb, $12::jsonb, $13::int,"
                    " $14::int, $15::float8, $16::float8, $17::float8 FROM ok RETURNING idx)"
                    " UPDATE episodes SET n_turns = $4::int + 1, prompt_tokens = $18::bigint,"
                    " completion_tokens = $19::bigint, gpu_seconds = $20::float8,"
                    " best_candidate_id = $21::uuid"
                    " WHERE id = $3::uuid AND EXISTS (SELECT 1 FROM t)"},
    {"cand_insert", "INSERT INTO candidates (id, task_id, format, files, sha256)"
                    " VALUES ($1::uuid, $2::uuid, 'native', $3::jsonb, $4)"},
    /* inside the finishing transaction: export_seq in commit order (lib/db.h) */
    {"export_lock", "SELECT pg_advisory_xact_lock($1::bigint)"},
    {"episode_finish", "UPDATE episodes SET status = 'finished',"
                       " end_reason = $2::jsonb->>'end_reason',"
                       " final_verdict = $2::jsonb->'final_verdict',"
                       " final_reward = ($2::jsonb->>'final_reward')::int,"
                       " reward_version = $2::jsonb->>'reward_version',"
                       " speedup_vs_eager = ($2::jsonb->>'speedup_vs_eager')::float8,"
                       " speedup_vs_compile = ($2::jsonb->>'speedup_vs_compile')::float8,"
                       " best_candidate_id = ($2::jsonb->>'best_candidate_id')::uuid,"
                       " env = $2::jsonb->'env', device = $3,"
                       " gpu_seconds = ($2::jsonb->>'gpu_seconds')::float8,"
                       " n_turns = ($2::jsonb->>'n_turns')::int, finished_at = now(),"
                       " export_seq = nextval('episodes_export_seq') WHERE job_id = $1::uuid"},
    /* the episode follows its job: queued again (retry, hand-back), failed (dead), cancelled */
    {"episode_status", "UPDATE episodes SET status = $2,"
                       " finished_at = CASE WHEN $2 IN ('failed', 'cancelled') THEN now() END,"
                       " end_reason = CASE WHEN $2 IN ('failed', 'cancelled') THEN $3"
                       " ELSE end_reason END WHERE job_id = $1::uuid"},
    {"job_state", "SELECT status, attempt FROM jobs WHERE id = $1::uuid"},
    {"try_lock", "SELECT pg_try_advisory_lock($1::bigint)"},
    {"unlock", "SELECT pg_advisory_unlock($1::bigint)"},
    /* step 7: queued jobs whose stream entry may be lost, running ones whose lease expired */
    {"reconcile", "UPDATE jobs SET enqueued_at = now() WHERE id IN (SELECT id FROM jobs"
                  " WHERE enqueued_at < now() - make_interval(secs => $1::int)"
                  " AND (status = 'queued' OR (status = 'running' AND lease_expires < now()))"
                  " ORDER BY enqueued_at LIMIT 500 FOR UPDATE SKIP LOCKED)"
                  " RETURNING id, class"},
};

const struct kf_stmt *kfw_stmts(size_t *n) {
    *n = sizeof(stmts) / sizeof(stmts[0]);
    return stmts;
}

int kfw_event(struct kf_db *db, const char *job_id, long attempt, const char *kind, json_t *data) {
    char att[24];
    snprintf(att, sizeof(att), "%ld", attempt);
    char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
    const char *p[] = {job_id, att, kind, text ? text : "{}"};
    PGresult *r = kf_db_exec(db, "event", 4, p);
    free(text);
    if (r == NULL)
        return -1;
    int n = atoi(PQcmdTuples(r));
    PQclear(r);
    return n > 0 ? 1 : 0;
}

static bool wait_retry(struct kfw *w, bool helper) {
    return helper ? kfw_thread_sleep(w, 1000) : kfw_pause(w, 1000);
}

struct kf_db *kfw_db_connect(struct kfw *w, bool helper) {
    size_t n;
    const struct kf_stmt *s = kfw_stmts(&n);
    for (int tries = 0;; tries++) {
        char err[256];
        struct kf_db *db = kf_db_open(w->cfg.database_url, s, n, err, sizeof(err));
        if (db)
            return db;
        if (tries % 30 == 0)
            kf_log(&w->log, KF_LOG_WARN, "database unreachable, retrying: %s", err);
        if (wait_retry(w, helper))
            return NULL;
    }
}

struct kf_queue *kfw_queue_connect(struct kfw *w, bool helper) {
    for (int tries = 0;; tries++) {
        char err[256];
        struct kf_queue *q = kf_queue_open(w->cfg.redis_url, 5000, err, sizeof(err));
        if (q)
            return q;
        if (tries % 30 == 0)
            kf_log(&w->log, KF_LOG_WARN, "redis unreachable, retrying: %s", err);
        if (wait_retry(w, helper))
            return NULL;
    }
}

bool kfw_pause(struct kfw *w, long ms) {
    if (w->stopping)
        return true;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    int sig;
    do {
        sig = sigtimedwait(&w->sigs, NULL, &ts);
    } while (sig < 0 && errno == EINTR);
    if (sig > 0) {
        kf_log(&w->log, KF_LOG_INFO, "signal %d: stopping", sig);
        w->stopping = true;
    }
    return w->stopping;
}

bool kfw_thread_sleep(struct kfw *w, long ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->sh.mu);
    while (!w->sh.quit) {
        if (pthread_cond_timedwait(&w->sh.wake, &w->sh.mu, &until) == ETIMEDOUT)
            break;
    }
    bool quit = w->sh.quit;
    pthread_mutex_unlock(&w->sh.mu);
    return quit;
}
