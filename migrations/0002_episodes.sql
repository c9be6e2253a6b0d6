-- 0002_episodes.sql: agent episodes (POST /v1/optimize) and their turns, the trajectories that
-- GET /v1/export streams to trainers.
BEGIN;

ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('check_task', 'evaluate', 'optimize'));

ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check;
ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check
    CHECK (kind IN ('queued', 'claimed', 'building', 'verifying', 'timing', 'done', 'retry', 'cancelled',
                    'turn', 'revalidating'));
COMMENT ON COLUMN job_events.kind IS 'turn: one agent turn stored (data: index, tools called, rewards); revalidating: the best candidate is judged again with a fresh seed.';

CREATE TABLE episodes (
    id            uuid PRIMARY KEY,
    job_id        uuid NOT NULL UNIQUE REFERENCES jobs (id),
    task_id       uuid NOT NULL REFERENCES tasks (id),
    backend       text NOT NULL CHECK (backend IN ('cuda', 'cpu')),
    policy        text NOT NULL CHECK (policy IN ('openai', 'expert')),
    policy_config jsonb NOT NULL DEFAULT '{}',
    limits        jsonb NOT NULL DEFAULT '{}',
    status        text NOT NULL DEFAULT 'queued'
                  CHECK (status IN ('queued', 'running', 'finished', 'failed', 'cancelled')),
    end_reason    text,
    attempt       integer NOT NULL DEFAULT 0,
    prompt        jsonb NOT NULL DEFAULT '[]',
    tools         jsonb NOT NULL DEFAULT '[]',
    env           jsonb,
    n_turns       integer NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    gpu_seconds   double precision NOT NULL DEFAULT 0,
    best_candidate_id uuid REFERENCES candidates (id),
    final_verdict jsonb,
    final_reward  integer,
    reward_version text,
    speedup_vs_eager   double precision,
    speedup_vs_compile double precision,
    device        text,
    export_seq    bigint UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz
);
COMMENT ON TABLE episodes IS 'One task, one policy, one workspace: the agent loop of an optimize job.';
COMMENT ON COLUMN episodes.policy_config IS 'The job''s policy settings (endpoint URL, model, sampling parameters, api_key_name); never an API key itself: the worker looks the key up by name in its own configuration.';
COMMENT ON COLUMN episodes.limits IS 'The limits in force: max_turns, max_context_tokens, max_wall_s, max_gpu_s, max_tool_output_bytes (the job''s values merged over the defaults).';
COMMENT ON COLUMN episodes.end_reason IS 'Why the loop ended: submitted, policy_stopped, max_turns, max_context_tokens, max_wall_s, max_gpu_s, cancelled, policy_unreachable, policy_bad_response, unsupported, nothing_verified, infra.';
COMMENT ON COLUMN episodes.attempt IS 'The job attempt that wrote the turns. A reclaimed episode restarts cleanly: the new attempt deletes the old turns and starts from an empty workspace (the old workspace lived on the dead worker''s disk).';
COMMENT ON COLUMN episodes.prompt IS 'The OpenAI-format messages before the first turn: the system prompt (the skill guide) and the user message with the task.';
COMMENT ON COLUMN episodes.tools IS 'The OpenAI-format tool definitions offered to the policy.';
COMMENT ON COLUMN episodes.env IS 'Where it ran: gpu, driver, torch, cuda, harness version (from the judge''s verdicts).';
COMMENT ON COLUMN episodes.best_candidate_id IS 'The fastest candidate that verify or submit found correct; it counts only if final_verdict (a fresh-seed evaluation) is correct too.';
COMMENT ON COLUMN episodes.final_verdict IS 'The re-validation of the best candidate with a fresh secret seed: the episode''s result.';
COMMENT ON COLUMN episodes.export_seq IS 'Set when the episode finishes, under a transaction-scoped advisory lock (KF_EXPORT_LOCK_KEY in lib/db.h), so that its order is the order of commits: GET /v1/export pages by it without gaps under concurrent finishes.';
CREATE INDEX episodes_task_idx ON episodes (task_id, final_reward DESC);
CREATE SEQUENCE episodes_export_seq;

CREATE TABLE turns (
    episode_id    uuid NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    idx           integer NOT NULL,
    assistant     jsonb NOT NULL,
    tool_results  jsonb NOT NULL DEFAULT '[]',
    finish_reason text,
    rewards       jsonb NOT NULL DEFAULT '[]',
    malformed     boolean NOT NULL DEFAULT false,
    prompt_token_ids     jsonb,
    completion_token_ids jsonb,
    logprobs      jsonb,
    prompt_tokens     integer,
    completion_tokens integer,
    policy_ms     double precision,
    tools_ms      double precision,
    overhead_ms   double precision,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (episode_id, idx)
);
COMMENT ON TABLE turns IS 'One policy reply and the results of the tools it called.';
COMMENT ON COLUMN turns.assistant IS 'The OpenAI-format assistant message: role, content, tool_calls (id, type function, function {name, arguments as a JSON string}).';
COMMENT ON COLUMN turns.tool_results IS 'The OpenAI-format tool messages answering assistant.tool_calls, in order: role tool, tool_call_id, content.';
COMMENT ON COLUMN turns.rewards IS 'The reward components of each verify, profile or submit in the turn: tool, tool_call_id, status, correct, reward, speedup_vs_eager, speedup_vs_compile, candidate_ms, eager_ms, compile_ms, flags, candidate_id.';
COMMENT ON COLUMN turns.malformed IS 'A tool call had an unknown tool name or arguments that were not a JSON object of the right fields.';
COMMENT ON COLUMN turns.prompt_token_ids IS 'vLLM return_token_ids: the prompt''s token ids, when the endpoint sent them.';
COMMENT ON COLUMN turns.completion_token_ids IS 'The reply''s token ids, when the endpoint sent them.';
COMMENT ON COLUMN turns.logprobs IS 'The reply''s per-token log-probabilities as the endpoint sent them (choices[0].logprobs).';
COMMENT ON COLUMN turns.overhead_ms IS 'The loop''s own time in the turn: everything but the policy''s answer and the tools'' work.';

INSERT INTO schema_migrations (version, name) VALUES (2, '0002_episodes.sql');
COMMIT;
