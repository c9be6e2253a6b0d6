#!/usr/bin/env bash
# service_bench.sh: the service's throughput and dispatch latency on this machine.
#
#   bash bench/service_bench.sh [--duration S] [--claims N] [--keep]
#
# Starts its own stack in a temporary directory, from the same pieces as tests/service (a
# PostgreSQL 15 cluster, redis-server without persistence, build/kforge migrate and keys create,
# build/kforge-server --port 0 with rate_limit 0, and a build/kforge-worker --cpu when needed),
# then measures, with wrk and 2 threads / 64 connections:
#   1. GET /v1/jobs/{id}: requests/s and p99 latency          goal: >= 10,000 req/s, p99 < 10 ms
#   2. enqueue to claim: median of claimed_at - created_at over N jobs posted one at a time to an
#      idle cpu worker (a candidate that fails to compile, so each job ends in about a second)
#                                                              goal: median < 5 ms
#   3. POST /v1/evaluations: enqueues/s (a Lua script posting a small candidate with the key; no
#      worker runs, so nothing is evaluated)
# It prints the figures beside the goals and writes nothing outside its temporary directory
# (removed at the end unless --keep).
# Run as root (PostgreSQL then runs as the postgres user) or as a user who may run initdb.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DURATION=10
CLAIMS=50
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --claims) CLAIMS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: $0 [--duration S] [--claims N] [--keep]" >&2; exit 2 ;;
    esac
done
for b in build/kforge build/kforge-server build/kforge-worker build/kforge-jail; do
    [ -x "$b" ] || { echo "service_bench: $b is missing (make build)" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "service_bench: wrk is missing (make deps)" >&2; exit 1; }
PGBIN=${KFORGE_PG_BIN:-$(pg_config --bindir)}
PY=$ROOT/.venv/bin/python

TMP=$(mktemp -d /tmp/kforge-bench.XXXXXX)
chmod 711 "$TMP" # the postgres user must reach pg/ below it
PIDS=()
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    as_pg "$PGBIN/pg_ctl" -D "$TMP/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
    if [ "$KEEP" = 1 ]; then echo "service_bench: kept $TMP (logs, wrk output)"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

echo "service_bench: stack in $TMP"
mkdir -p "$TMP/pg/run" "$TMP/redis" "$TMP/worker"
[ "$(id -u)" = 0 ] && chown -R postgres:postgres "$TMP/pg"
PGPORT=$(free_port)
as_pg "$PGBIN/initdb" -D "$TMP/pg/data" -U postgres --auth=trust -E UTF8 >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$TMP/pg/data" -l "$TMP/pg/log" -w \
    -o "-p $PGPORT -k $TMP/pg/run -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
as_pg "$PGBIN/createdb" -h "$TMP/pg/run" -p "$PGPORT" -U postgres kforge
RPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/redis" \
    --logfile "$TMP/redis/log" &
PIDS+=($!)
until redis-cli -p "$RPORT" ping >/dev/null 2>&1; do sleep 0.05; done

export KFORGE_DATABASE_URL="postgresql://postgres@127.0.0.1:$PGPORT/kforge"
export KFORGE_REDIS_URL="redis://127.0.0.1:$RPORT"
export KFORGE_RATE_LIMIT=0 KFORGE_LOG_LEVEL=warn KFORGE_DEFAULT_BACKEND=cpu
export KFORGE_PYTHON=$PY KFORGE_HARNESS_DIR=$ROOT/workers/harness KFORGE_JAIL=$ROOT/build/kforge-jail
export KFORGE_VAR=$TMP/worker KFORGE_CACHE=$TMP/worker/cache
psql_() { psql "$KFORGE_DATABASE_URL" -X -At -v ON_ERROR_STOP=1 -c "$1"; }
build/kforge migrate >/dev/null
KEY=$(build/kforge keys create --name bench --scope admin)  # no quota: the bench enqueues thousands

build/kforge-server --port 0 >"$TMP/server.out" 2>"$TMP/server.err" &
PIDS+=($!)
for _ in $(seq 200); do grep -q 'listening on' "$TMP/server.out" 2>/dev/null && break; sleep 0.05; done
URL=$(sed -n 's/^kforge-server: listening on \(http:[^ ]*\)$/\1/p' "$TMP/server.out" | head -1)
[ -n "$URL" ] || { echo "service_bench: the server did not start:"; tail "$TMP/server.err"; exit 1; }
echo "service_bench: server at $URL"

# the bodies: one task (its check job runs first), a candidate that fails to compile
"$PY" - "$TMP" <<'EOF'
import json, sys
from pathlib import Path
tmp = Path(sys.argv[1])
task = Path("examples/tasks/sum_dim.py").read_text() + "\n# service_bench\n"
(tmp / "task.json").write_text(json.dumps({"source": task, "backend": "cpu"}))
files = {"model_new.py": Path("tests/harness/cases/compile_error/model_new.py").read_text(),
         "kernels/k.cpp": Path("tests/harness/cases/compile_error/kernels/k.cpp").read_text()}
(tmp / "candidate.json").write_text(json.dumps({"format": "native", "files": files}))
EOF
post() { curl -sS -X POST -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "@$2" "$URL$1"; }
jget() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }
TASK_JSON=$(post /v1/tasks "$TMP/task.json")
TASK_ID=$(echo "$TASK_JSON" | jget '["task"]["id"]')
CHECK_JOB=$(echo "$TASK_JSON" | jget '["job"]["id"]')
"$PY" -c "import json,sys; c=json.load(open(sys.argv[1])); print(json.dumps({'task_id': sys.argv[2], 'candidate': c, 'backend': 'cpu', 'options': {'no_compile': True, 'budget_s': 0.2}}))" \
    "$TMP/candidate.json" "$TASK_ID" >"$TMP/eval.json"
JOB=$(post /v1/evaluations "$TMP/eval.json" | jget '["job"]["id"]')

wrk_figures() { # wrk output -> "REQ_PER_S P99_MS NON2XX"
    "$PY" -c '
import re, sys
t = sys.stdin.read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", t, re.M)
p99 = float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", t)
print(f"{rps:.0f} {p99:.2f} {bad.group(1) if bad else 0}")'
}

echo "== 1. GET /v1/jobs/{id}: wrk -t2 -c64 -d${DURATION}s --latency"
wrk -t2 -c64 -d"${DURATION}s" --latency -H "Authorization: Bearer $KEY" "$URL/v1/jobs/$JOB" >"$TMP/wrk-get.txt"
read -r GET_RPS GET_P99 GET_BAD < <(wrk_figures <"$TMP/wrk-get.txt")

echo "== 2. enqueue to claim, $CLAIMS jobs one at a time, an idle cpu worker"
build/kforge-worker --cpu >"$TMP/worker.out" 2>"$TMP/worker.err" &
WPID=$!
PIDS+=($WPID)
wait_done() { # job id: polls until it finished
    for _ in $(seq 1200); do
        s=$(psql_ "SELECT status FROM jobs WHERE id = '$1'")
        case "$s" in succeeded | failed | cancelled | dead) return 0 ;; esac
        kill -0 "$WPID" 2>/dev/null || { echo "the worker died:"; tail "$TMP/worker.err"; exit 1; }
        sleep 0.05
    done
    echo "service_bench: job $1 did not finish"; exit 1
}
wait_done "$JOB"
wait_done "$CHECK_JOB"
CLAIM_IDS=()
for _ in $(seq "$CLAIMS"); do
    sleep 0.2 # the worker is back in XREADGROUP BLOCK
    id=$(post /v1/evaluations "$TMP/eval.json" | jget '["job"]["id"]')
    CLAIM_IDS+=("'$id'")
    wait_done "$id"
done
IN=$(IFS=,; echo "${CLAIM_IDS[*]}")
read -r CLAIM_MED CLAIM_P90 CLAIM_MAX < <(psql_ "SELECT
    round(percentile_cont(0.5) WITHIN GROUP (ORDER BY d)::numeric, 2),
    round(percentile_cont(0.9) WITHIN GROUP (ORDER BY d)::numeric, 2), round(max(d)::numeric, 2)
  FROM (SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS d FROM jobs WHERE id IN ($IN)) x" | tr '|' ' ')
EV_MED=$(psql_ "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY d)::numeric, 2) FROM (
    SELECT extract(epoch FROM c.at - q.at) * 1000 AS d FROM job_events q JOIN job_events c USING (job_id)
     WHERE q.kind = 'queued' AND c.kind = 'claimed' AND job_id IN ($IN)) x")
kill "$WPID"
wait "$WPID" || true

echo "== 3. POST /v1/evaluations: wrk -t2 -c64 -d${DURATION}s, no worker"
cat >"$TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
local f = io.open("$TMP/eval.json", "r")
wrk.body = f:read("*a")
f:close()
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) statuses = {} end
function response(status, headers, body) statuses[status] = (statuses[status] or 0) + 1 end
function done(summary, latency, requests)
    local total = {}
    for _, t in ipairs(threads) do
        for k, v in pairs(t:get("statuses")) do total[k] = (total[k] or 0) + v end
    end
    for k, v in pairs(total) do io.write(string.format("status %d: %d\n", k, v)) end
end
EOF
BEFORE=$(psql_ "SELECT count(*) FROM jobs")
XBEFORE=$(redis-cli -p "$RPORT" XLEN kforge:jobs:cpu)
wrk -t2 -c64 -d"${DURATION}s" --latency -s "$TMP/post.lua" "$URL/v1/evaluations" >"$TMP/wrk-post.txt"
read -r POST_RPS POST_P99 POST_BAD < <(wrk_figures <"$TMP/wrk-post.txt")
AFTER=$(psql_ "SELECT count(*) FROM jobs")
POST_STATUSES=$(grep '^status ' "$TMP/wrk-post.txt" | sort | paste -sd, - | sed 's/,/, /g')
XLEN=$(redis-cli -p "$RPORT" XLEN kforge:jobs:cpu)

cat <<EOF

service_bench: $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), wrk -t2 -c64 -d${DURATION}s on the same machine
| figure | measured | goal |
| --- | --- | --- |
| GET /v1/jobs/{id} throughput | $GET_RPS req/s (non-2xx: $GET_BAD) | >= 10000 req/s |
| GET /v1/jobs/{id} p99 latency | $GET_P99 ms | < 10 ms |
| enqueue to claim, median of $CLAIMS (jobs.claimed_at - created_at) | $CLAIM_MED ms (p90 $CLAIM_P90, max $CLAIM_MAX) | < 5 ms |
| the same from the queued and claimed events | $EV_MED ms | |
| POST /v1/evaluations enqueue throughput | $POST_RPS req/s, p99 $POST_P99 ms (non-2xx: $POST_BAD) | |
| jobs stored by that run / stream entries added | $((AFTER - BEFORE)) / $((XLEN - XBEFORE)) ($POST_STATUSES) | |
EOF
