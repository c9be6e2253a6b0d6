-- 0003_leaderboard.sql: the collection a task comes from, and the index of the leaderboard
-- (GET /v1/leaderboard: finished episodes whose best candidate stayed correct under the
-- fresh-seed re-validation, best per task or per task, device, policy and model).
BEGIN;

ALTER TABLE tasks ADD COLUMN suite text NOT NULL DEFAULT 'user'
    CHECK (suite ~ '^[a-z0-9][a-z0-9._-]{0,63}$');
COMMENT ON COLUMN tasks.suite IS 'The collection the task comes from (examples, kernelbench-l1, user, ...); the first creation of a source sets it: the same source again keeps it.';

CREATE INDEX episodes_leaderboard_idx ON episodes (task_id, speedup_vs_eager DESC NULLS LAST)
    WHERE status = 'finished' AND final_reward >= 1 AND best_candidate_id IS NOT NULL;
COMMENT ON INDEX episodes_leaderboard_idx IS 'The entries of GET /v1/leaderboard (a partial index: only finished, correct episodes with a best candidate), by task, fastest first.';

INSERT INTO schema_migrations (version, name) VALUES (3, '0003_leaderboard.sql');
COMMIT;
