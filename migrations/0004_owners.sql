-- 0004_owners.sql: keys have owners and scopes; jobs (and through them evaluations, episodes
-- and their candidates) belong to the owner of the key that made them; tasks record every owner
-- that submitted them; episodes say what their owner published on the leaderboard.
-- docs/service-contract.md ("Owners, scopes, publishing, quotas") says who sees what.
BEGIN;

CREATE TABLE owners (
    name       text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
    max_active_jobs     integer CHECK (max_active_jobs >= 0),
    gpu_seconds_per_day double precision CHECK (gpu_seconds_per_day >= 0),
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE owners IS 'Who API keys belong to: a person, a team or a trainer. Several keys may share an owner; an owner sees and cancels only its own objects.';
COMMENT ON COLUMN owners.max_active_jobs IS 'This owner''s quota of queued and running jobs; NULL: the server''s quota_active_jobs setting; 0: no limit.';
COMMENT ON COLUMN owners.gpu_seconds_per_day IS 'This owner''s quota of judge GPU-seconds over the last 24 hours; NULL: the server''s quota_gpu_s_per_day setting; 0: no limit.';

-- every key gets an owner: its name, made fit for an owner's name (a key made before owners
-- existed saw everything; its owner now sees what it makes from now on)
ALTER TABLE api_keys ADD COLUMN owner text;
UPDATE api_keys SET owner = CASE WHEN name = '' THEN 'default' ELSE
    left(regexp_replace(regexp_replace(name, '[^A-Za-z0-9._@-]', '-', 'g'), '^[^A-Za-z0-9]', 'k'), 64)
    END;
INSERT INTO owners (name) SELECT DISTINCT owner FROM api_keys;
ALTER TABLE api_keys ADD FOREIGN KEY (owner) REFERENCES owners (name);
ALTER TABLE api_keys ADD COLUMN scopes text[] NOT NULL DEFAULT '{submit}'
    CHECK (scopes <@ '{read,submit,admin}'::text[] AND cardinality(scopes) >= 1);
-- the local stack's key (`kforge up` names it local) is the operator's
UPDATE api_keys SET scopes = '{admin}' WHERE name = 'local';
ALTER TABLE api_keys ALTER COLUMN owner SET NOT NULL;
COMMENT ON COLUMN api_keys.owner IS 'The owner whose objects this key makes, sees and cancels.';
COMMENT ON COLUMN api_keys.scopes IS 'read: GET its owner''s objects; submit: also POST tasks, evaluations and optimizations and cancel its owner''s jobs; admin: everything, every owner''s objects and the keys API (/v1/keys), no quota.';
CREATE INDEX api_keys_owner_idx ON api_keys (owner, created_at);
COMMENT ON INDEX api_keys_owner_idx IS 'GET /v1/keys?owner=O.';

ALTER TABLE jobs ADD COLUMN owner text REFERENCES owners (name);
COMMENT ON COLUMN jobs.owner IS 'The owner of the key that made the job (a check_task job: of the first submitter); its evaluation, episode and their candidates are that owner''s too. NULL: made before owners existed, seen by admin keys only.';
CREATE INDEX jobs_owner_idx ON jobs (owner, status, finished_at) WHERE owner IS NOT NULL;
COMMENT ON INDEX jobs_owner_idx IS 'The quotas: an owner''s queued and running jobs, and its jobs of the last 24 hours.';

CREATE TABLE task_owners (
    task_id    uuid NOT NULL REFERENCES tasks (id),
    owner      text NOT NULL REFERENCES owners (name),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, owner)
);
COMMENT ON TABLE task_owners IS 'Every owner that submitted a task (tasks are deduplicated by the SHA-256 of their source): these owners see the task with its source and its check verdict.';
CREATE INDEX task_owners_owner_idx ON task_owners (owner, task_id);

ALTER TABLE episodes ADD COLUMN publish text NOT NULL DEFAULT 'none'
    CHECK (publish IN ('none', 'results', 'sources'));
COMMENT ON COLUMN episodes.publish IS 'What the owner published: none (private), results (on the leaderboard; the episode, its job and task readable by anyone, without turns, kernel files or the task''s source), sources (also the turns, the candidates and the task''s source).';
-- episodes that finished before owners existed were public with their sources; they stay on the
-- leaderboard, now without their sources
UPDATE episodes SET publish = 'results' WHERE status = 'finished';

INSERT INTO schema_migrations (version, name) VALUES (4, '0004_owners.sql');
COMMIT;
