#!/usr/bin/env bash
# The GPU suites and the harness bench, for the GPU host (no apt, its own python3 with torch):
# run from the repository root with build/ carried (kforge-jail built on Debian 12).
# Writes logs under $OUT (default /tmp/kforge-gpu); stops itself after LIMIT seconds.
set -u
OUT=${OUT:-/tmp/kforge-gpu}
LIMIT=${LIMIT:-420}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KFORGE_NO_DEPS=1 KFORGE_JAIL_PREBUILT=1 PYTHONPATH="$PWD/workers/harness"
export KFORGE_TEST_VERDICTS="$OUT/verdicts.ndjson"
{
  nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
  nvcc --version | tail -1
} >"$OUT/env.txt" 2>&1
# One worker by default: large examples in parallel share one GPU's memory and /dev/shm (four
# workers failed there with reasons that the cut-off log did not keep).
XDIST=""
if [ "${WORKERS:-1}" -gt 1 ] && python3 -c "import xdist" 2>/dev/null; then XDIST="-n $WORKERS"; fi
timeout $((LIMIT - 20)) python3 bench/harness_bench.py --only build --json "$OUT/bench-build.json" >"$OUT/bench.log" 2>&1 &
timeout "$LIMIT" python3 -m pytest -m gpu $XDIST -v --tb=short -p no:cacheprovider -o addopts=-ra tests/harness tests/sandbox \
  >"$OUT/test-gpu.log" 2>&1
echo "pytest exit status $?" >>"$OUT/test-gpu.log"
wait
timeout 60 python3 bench/harness_bench.py --only stability --json "$OUT/bench-stability.json" >>"$OUT/bench.log" 2>&1
cat "$OUT/env.txt"
tail -n 40 "$OUT/test-gpu.log"
python3 -c "
import json, sys
for line in open(sys.argv[1]):
    v = json.loads(line)
    if v.get('status') not in (None, 'ok') or v.get('exit'):
        print(v.get('status'), v.get('flags'), ' '.join(a for a in v['args'] if '/' in a)[-120:], v.get('message', '')[:200])
" "$KFORGE_TEST_VERDICTS" 2>/dev/null | tail -n 30
cat "$OUT/bench.log"
