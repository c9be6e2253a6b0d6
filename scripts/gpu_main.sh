#!/usr/bin/env bash
# The main job on the GPU host, from the bundle (make bundle; carry build/kforge-bundle.tar.gz):
# unpacks it, `kforge up` with SLOTS workers on GPU 0 (default 8: their builds overlap, the GPU
# lock lets one time at a time), then bench/expert_bench.py over run_examples.py's default mode
# (the README's first command's): every task of TASKS (default: all of examples/tasks) POSTed to
# /v1/optimize with the expert policy, episodes with tuning, torch.compile baseline included.
# Episodes not ended after LIMIT seconds count as timeouts. Writes the table to
# $OUT/main/table.txt, its rows to bench.json, and the service's logs; stops the stack.
set -u
. scripts/gpu_unpack.sh main
mkdir -p "$OUT/main"
LIMIT=${LIMIT:-480}
"$dir/kforge/bin/kforge" up --var "$dir/var" --port 0 --gpus "${GPU:-0}" --slots "${SLOTS:-8}" \
  >"$OUT/main/up.txt" 2>&1
echo "up exit $?" >>"$OUT/main/up.txt"
tasks=()
# shellcheck disable=SC2206
[ -n "${TASKS:-}" ] && tasks=(--tasks $TASKS)
# the stack that is up (--var): bench/expert_bench.py runs run_examples.py's episodes on it and
# measures the copy bandwidth and mm peak before and after them, for the table's fractions
timeout "$((LIMIT + 200))" python3 bench/expert_bench.py --backend cuda --var "$dir/var" \
  --kforge "$dir/kforge/bin/kforge" --deadline "$LIMIT" --json "$OUT/main/bench.json" "${tasks[@]}" \
  >"$OUT/main/table.txt" 2>"$OUT/main/progress.txt"
echo "expert_bench exit $?" >>"$OUT/main/table.txt"
"$dir/kforge/bin/kforge" status --var "$dir/var" >"$OUT/main/status.txt" 2>&1
"$dir/kforge/bin/kforge" down --var "$dir/var" >>"$OUT/main/up.txt" 2>&1
cp "$dir"/var/log/*.log "$OUT/main/" 2>/dev/null
cat "$OUT/main/up.txt" "$OUT/main/table.txt"
tail -n 5 "$OUT/main/progress.txt"
