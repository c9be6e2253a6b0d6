#!/usr/bin/env bash
# The expert's plans judged on the GPU host without the service: tests/agent/test_expert_gpu.py
# (every task of examples/tasks, or TASKS="a b": the expert's cuda plan, variant 0, judged by the
# harness's full `evaluate`, torch.compile baseline included), PAR at once (builds and checks
# overlap; timings never do: one GPU lock), stopped after LIMIT seconds. Writes the verdicts to
# $OUT/expert.jsonl and a table to stdout and $OUT/expert.txt (bench/README.md's figures).
# TASKS_DIR=bench/tasks_extra: that folder's tasks instead of examples/tasks. HALF=1 or 2: half
# of them (see below).
# VARIANTS="0 1 2": each task judged in each variant, its table row the fastest correct one.
# POOL (default 4): runners kept warm by a runner pool (`python -m kforge_harness pool`) that the
# evaluations take theirs from; 0: each starts its own.
# Needs build/kforge-bundle.tar.gz (the probe's libjansson) and build/agent-probes carried.
set -u
OUT=${OUT:-/tmp/kforge-gpu}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/kforge-expert-XXXXXX)
tar xzf build/kforge-bundle.tar.gz -C "$work" kforge/lib
# one GPU lock with whatever else runs on this GPU (KFORGE_GPU_LOCK set by the caller)
export PYTHONPATH="$PWD/workers/harness" KFORGE_GPU_LOCK="${KFORGE_GPU_LOCK:-$work/gpu0.lock}" PYTHONUNBUFFERED=1
export KFORGE_PROBE_LIBS="$work/kforge/lib" KFORGE_EXPERT_VERDICTS="$OUT/expert.jsonl"
export KFORGE_EXPERT_BUDGET=${BUDGET:-0.6} KFORGE_EXPERT_VARIANTS="${VARIANTS:-0}"
[ -n "${TASKS_DIR:-}" ] && export KFORGE_EXPERT_TASKS_DIR="$PWD/$TASKS_DIR"
sel=()
# "-k" and its expression as two words ("a or b"): unquoted, the expression split into paths
[ -n "${TASKS:-}" ] && sel=(-k "$(echo "$TASKS" | sed 's/ / or /g')")
# HALF=1 or 2: the first or second half of the folder's tasks in name order, by test id (no
# GPU edges), so that two calls of the device tool judge all of them
targets=(tests/agent/test_expert_gpu.py)
if [ -n "${HALF:-}" ] && [ -z "${TASKS:-}" ]; then
  mapfile -t names < <(find "${TASKS_DIR:-examples/tasks}" -maxdepth 1 -name '*.py' -printf '%f\n' | sed 's/\.py$//' | sort)
  half=$((${#names[@]} / 2))
  if [ "$HALF" = 1 ]; then names=("${names[@]:0:half}"); else names=("${names[@]:half}"); fi
  targets=()
  for n in "${names[@]}"; do
    for v in ${VARIANTS:-0}; do targets+=("tests/agent/test_expert_gpu.py::test_expert_plan_is_correct_on_the_gpu[$n-$v]"); done
  done
fi
pool_pid=
if [ "${POOL:-4}" -gt 0 ]; then
  python3 -m kforge_harness pool --sock "$work/pool.sock" --backend cuda --size "$POOL" >"$work/pool.log" 2>&1 &
  pool_pid=$!
  export KFORGE_RUNNER_POOL="$work/pool.sock"
fi
timeout "${LIMIT:-480}" python3 -m pytest -m gpu -n "${PAR:-4}" -q -p no:cacheprovider -o addopts= \
    "${targets[@]}" "${sel[@]}" >"$OUT/expert-pytest.log" 2>&1
echo "pytest exit status $?" >>"$OUT/expert-pytest.log"
[ -n "$pool_pid" ] && kill "$pool_pid"
tail -n 15 "$OUT/expert-pytest.log"
python3 bench/expert_table.py "$OUT/expert.jsonl" | tee "$OUT/expert.txt"
