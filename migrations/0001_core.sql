-- 0001_core.sql: tasks, jobs and their events, candidates, evaluations, baselines, API keys.
-- Each migration is one transaction that records itself in schema_migrations (build/kforge
-- migrate runs the files it has not recorded yet, in order).
BEGIN;

CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE schema_migrations IS 'One row per applied file of migrations/, by its number.';

CREATE TABLE tasks (
    id         uuid PRIMARY KEY,
    sha256     text NOT NULL UNIQUE,
    name       text NOT NULL,
    source     text NOT NULL,
    backend    text NOT NULL CHECK (backend IN ('cuda', 'cpu')),
    status     text NOT NULL DEFAULT 'checking' CHECK (status IN ('checking', 'ok', 'invalid')),
    check_result jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE tasks IS 'KernelBench-format modules (Model, get_inputs, get_init_inputs).';
COMMENT ON COLUMN tasks.sha256 IS 'SHA-256 of source: creating the same source twice returns the first task.';
COMMENT ON COLUMN tasks.check_result IS 'The verdict of kforge_harness check-task, when its job finished.';

CREATE TABLE jobs (
    id         uuid PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('check_task', 'evaluate')),
    status     text NOT NULL DEFAULT 'queued'
               CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'dead')),
    class      text NOT NULL,
    backend    text NOT NULL CHECK (backend IN ('cuda', 'cpu')),
    task_id    uuid NOT NULL REFERENCES tasks (id),
    payload    jsonb NOT NULL DEFAULT '{}',
    attempt    integer NOT NULL DEFAULT 0,
    lease_owner   text,
    lease_expires timestamptz,
    cancel_requested boolean NOT NULL DEFAULT false,
    result     jsonb,
    error      jsonb,
    device     text,
    created_at timestamptz NOT NULL DEFAULT now(),
    claimed_at timestamptz,
    finished_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    enqueued_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobs IS 'Work for the workers; the system of record (Redis streams only dispatch).';
COMMENT ON COLUMN jobs.class IS 'The class of worker that may run it: its Redis stream is kforge:jobs:CLASS.';
COMMENT ON COLUMN jobs.attempt IS 'Raised by each claim; the fencing token: a worker writes only while attempt is the one it claimed.';
COMMENT ON COLUMN jobs.lease_expires IS 'A running job whose lease passed may be claimed again (its worker died or hung).';
COMMENT ON COLUMN jobs.status IS 'failed: an infrastructure failure on the last allowed attempt or a bad job; a wrong kernel is a succeeded job with a negative verdict. dead: sent to kforge:dead after max attempts.';
COMMENT ON COLUMN jobs.enqueued_at IS 'When the job was last put on its stream (the reconciler re-enqueues queued rows older than this).';
CREATE INDEX jobs_status_idx ON jobs (status, class);
COMMENT ON INDEX jobs_status_idx IS 'The reconciler''s and /metrics'' scans by status.';
CREATE INDEX jobs_task_idx ON jobs (task_id);

CREATE TABLE job_events (
    job_id  uuid NOT NULL REFERENCES jobs (id),
    seq     integer NOT NULL,
    kind    text NOT NULL CHECK (kind IN ('queued', 'claimed', 'building', 'verifying', 'timing', 'done', 'retry', 'cancelled')),
    data    jsonb NOT NULL DEFAULT '{}',
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, seq)
);
COMMENT ON TABLE job_events IS 'The progress of a job in order, replayed by GET /v1/jobs/{id}/events (seq is the SSE id).';

CREATE TABLE candidates (
    id         uuid PRIMARY KEY,
    task_id    uuid NOT NULL REFERENCES tasks (id),
    format     text NOT NULL CHECK (format IN ('native', 'kernelbench', 'cuda-agent')),
    files      jsonb NOT NULL,
    sha256     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON COLUMN candidates.files IS 'An object: relative file name -> content (text).';
COMMENT ON COLUMN candidates.sha256 IS 'SHA-256 over the sorted names and contents; not unique (the same kernel may be evaluated again).';

CREATE TABLE evaluations (
    id           uuid PRIMARY KEY,
    job_id       uuid NOT NULL UNIQUE REFERENCES jobs (id),
    task_id      uuid NOT NULL REFERENCES tasks (id),
    candidate_id uuid NOT NULL REFERENCES candidates (id),
    backend      text NOT NULL,
    status       text,
    reward       integer,
    speedup_vs_eager   double precision,
    speedup_vs_compile double precision,
    verdict      jsonb,
    device       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
COMMENT ON TABLE evaluations IS 'One candidate judged once; status/reward/verdict are null until its job finished.';
COMMENT ON COLUMN evaluations.status IS 'The harness verdict''s status (ok, incorrect, compile_error, rejected, ...).';
CREATE INDEX evaluations_task_idx ON evaluations (task_id, reward DESC);

CREATE TABLE baselines (
    task_id    uuid NOT NULL REFERENCES tasks (id),
    backend    text NOT NULL,
    device     text NOT NULL,
    eager_ms   double precision,
    compile_ms double precision,
    measured_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, backend, device)
);
COMMENT ON TABLE baselines IS 'The latest eager and torch.compile medians of a task on one exact device (from verdicts).';

CREATE TABLE api_keys (
    id         uuid PRIMARY KEY,
    prefix     text NOT NULL UNIQUE,
    hash       text NOT NULL,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
COMMENT ON TABLE api_keys IS 'Keys kf_PREFIX_SECRET; only the SHA-256 of the whole key is kept.';
COMMENT ON COLUMN api_keys.prefix IS 'The public part, to find the row without scanning hashes.';

INSERT INTO schema_migrations (version, name) VALUES (1, '0001_core.sql');
COMMIT;
