#!/usr/bin/env bash
# The whole service on the GPU host, from the bundle (make bundle; carry build/kforge-bundle.tar.gz):
# unpacks it, `kforge up` with one worker on GPU 0, evaluates every CUDA example through the API
# (scripts/run_examples.py, timing budget 1 s, no torch.compile: the settings of
# tests/harness/test_examples.py::test_cuda_example, so that the rewards compare with the harness
# alone), prints the table, and stops the stack. Logs under $OUT/service.
set -u
. scripts/gpu_unpack.sh svc
mkdir -p "$OUT/service"
{
  echo "host: $(id -un), zoneinfo UTC: $(ls /usr/share/zoneinfo/UTC 2>&1), postgres user: $(id postgres 2>&1 | head -c 60)"
  "$dir/kforge/bin/kforge" up --var "$dir/var" --port 0 --gpus "${GPU:-0}"
  echo "up exit $?"
  # locked down (docs/security.md): private socket folder and secrets, passwords asked
  ls -ld "$dir/var" "$dir/var/run/pg" "$dir/var/secrets" "$dir/var/api-key" "$dir"/var/secrets/*
  echo "psql as nobody: $(runuser -u nobody -- env LD_LIBRARY_PATH="$dir/kforge/lib" \
    "$dir"/kforge/pg/usr/lib/postgresql/*/bin/psql \
    "host=$dir/var/run/pg port=5432 user=kforge dbname=kforge" -w -c 'SELECT 1' 2>&1 | tail -n 1)"
} 2>&1 | tee "$OUT/service/up.txt"
timeout "${LIMIT:-480}" python3 scripts/run_examples.py --evaluations --backend cuda --kforge "$dir/kforge/bin/kforge" \
  --var "$dir/var" --budget 1.0 --no-compile --json "$OUT/service/verdicts.json" 2>&1 | tee "$OUT/service/table.txt"
"$dir/kforge/bin/kforge" status --var "$dir/var" >"$OUT/service/status.txt" 2>&1
"$dir/kforge/bin/kforge" down --var "$dir/var" >>"$OUT/service/up.txt" 2>&1
cp "$dir"/var/log/*.log "$OUT/service/" 2>/dev/null
tail -n 5 "$OUT"/service/worker-*.log 2>/dev/null
