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
# Several workers overlap their builds and Python start-ups, never their timings: every harness
# call takes the one GPU lock (KFORGE_GPU_LOCK) from the end of its build on, as in the service.
if [ "${WORKERS:-1}" -gt 1 ] && python3 -c "import xdist" 2>/dev/null; then
  XDIST="-n $WORKERS"
  export KFORGE_GPU_LOCK="${KFORGE_GPU_LOCK:-$OUT/gpu0.lock}"
fi
# the jail's tests first, the long example runs last (a cut-off run still says the most)
TESTS=${TESTS:-tests/harness/test_devshare_gpu.py tests/sandbox/test_gpu.py tests/harness/test_examples.py::test_cuda_example_in_jail
  tests/harness/test_hacks_gpu.py tests/harness/test_gpu_robustness.py
  tests/harness/test_examples.py::test_cuda_example}
[ "${BENCH:-1}" = 1 ] && timeout $((LIMIT - 20)) python3 bench/harness_bench.py --only build --json "$OUT/bench-build.json" >"$OUT/bench.log" 2>&1 &
# shellcheck disable=SC2086
timeout "$LIMIT" python3 -m pytest -m gpu $XDIST -v --durations=0 --tb=short -p no:cacheprovider -o addopts=-ra $TESTS \
  >"$OUT/test-gpu.log" 2>&1
echo "pytest exit status $?" >>"$OUT/test-gpu.log"
wait
[ "${BENCH:-1}" = 1 ] && timeout 60 python3 bench/harness_bench.py --only stability --json "$OUT/bench-stability.json" >>"$OUT/bench.log" 2>&1
cat "$OUT/env.txt"
grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|exit status|^[0-9.]+s (call|setup)" "$OUT/test-gpu.log" | head -n 80
python3 -c "
import json, sys
for line in open(sys.argv[1]):
    v = json.loads(line)
    if v.get('status') not in (None, 'ok') or v.get('exit'):
        print(v.get('status'), v.get('flags'), ' '.join(a for a in v['args'] if '/' in a)[-120:], v.get('message', '')[:200])
    elif 'examples/tasks/' in ' '.join(v['args']) and v.get('ms', {}).get('candidate'):
        print('timing', [a.split('/')[-1] for a in v['args'] if 'tasks/' in a][0], v['ms'], v.get('wall_s'), 'jail' if '--jail' in v['args'] else '')
" "$KFORGE_TEST_VERDICTS" 2>/dev/null | tail -n 30
if [ -f "$OUT/bench.log" ]; then cat "$OUT/bench.log"; fi
