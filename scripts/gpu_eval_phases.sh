#!/usr/bin/env bash
# Where an evaluate's wall time goes on the GPU host: each TASKS example's candidate evaluated
# alone RUNS times (the first fills the build and baseline caches), with the verdict's phases
# (seconds from the judge's start to the end of each phase) and a cProfile of the judge's last
# run. MODES: "cold" (each evaluation starts its runner), "pooled" (a runner pool, size 1,
# started first: `python -m kforge_harness pool`), or both in turn. Run from the repository
# root; prints a summary (also in $OUT/phases.txt); the verdicts, caches and profiles stay
# under RAW (the device tool brings back few files).
set -u
OUT=${OUT:-/tmp/kforge-phases}
TASKS=${TASKS:-gelu softmax_rows}
RUNS=${RUNS:-3}
BUDGET=${BUDGET:-1.0}
RAW=${RAW:-/tmp/kforge-phases-raw}
MODES=${MODES:-cold}
mkdir -p "$OUT" "$RAW"
exec > >(tee "$OUT/phases.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/workers/harness" KFORGE_CACHE="$RAW/cache"
python3 -X importtime -c "import torch; torch.zeros(1, device='cuda')" 2>"$RAW/importtime.txt"
pool_pid=
for mode in $MODES; do
pool=()
if [ "$mode" = pooled ]; then
  python3 -m kforge_harness pool --sock "$RAW/pool.sock" --backend cuda --size 1 >"$RAW/pool.log" 2>&1 &
  pool_pid=$!
  pool=(--pool "$RAW/pool.sock")
  sleep 10  # its first runner warms up
fi
for t in $TASKS; do
  for i in $(seq 1 "$RUNS"); do
    prof=()
    [ "$i" = "$RUNS" ] && [ "$mode" = cold ] && prof=(-m cProfile -o "$RAW/$t.prof")
    start=$(date +%s.%N)
    python3 "${prof[@]}" -m kforge_harness evaluate --task "examples/tasks/$t.py" \
      --candidate "examples/candidates/$t/cuda" --backend cuda --no-compile --budget "$BUDGET" \
      "${pool[@]}" >"$RAW/$t-$mode-$i.json" 2>"$RAW/$t-$mode-$i.err"
    end=$(date +%s.%N)
    python3 - "$RAW/$t-$mode-$i.json" "$t" "$i" "$start" "$end" <<'PY'
import json, sys
path, task, i, start, end = sys.argv[1:]
v = json.load(open(path))
t = v.get("timing") or {}
checks = [c.get("seconds") for c in v.get("checks", [])]
print(f"{task} run {i} ({v.get('runner_start')}): wall {float(end) - float(start):.2f} s, {v['status']}, "
      f"cached baseline {t.get('baseline_cached')}, phases {json.dumps(v.get('phases'))}, checks {checks}, "
      f"timing wall {t.get('wall_seconds')} trials {(t.get('candidate') or {}).get('trials')}")
PY
  done
done
[ -n "$pool_pid" ] && kill "$pool_pid" && wait "$pool_pid" 2>/dev/null
pool_pid=
done
for t in $TASKS; do
  [ -f "$RAW/$t.prof" ] && python3 -c "
import pstats, sys
pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(30)" "$RAW/$t.prof" \
    | grep -E "cumtime|kforge_harness|torch/__init__|select|sleep" | head -n 30
done
sort -t'|' -k2 -n "$RAW/importtime.txt" | tail -n 4
