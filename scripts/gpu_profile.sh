#!/usr/bin/env bash
# Where the expert's plans spend their time, on the GPU host (bench/plan_profile.py --kernels):
# each task's plan in VARIANT, its kernels timed, and the GPU's record of eager's and the plan's
# kernels. TASKS names files of TASKS_DIR (default examples/tasks) or edges of
# tests/agent/test_expert_gpu.py (EDGES). Writes $OUT/profile.txt; stops after LIMIT seconds.
# Needs build/kforge-bundle.tar.gz (the probe's libjansson) and build/agent-probes carried.
set -u
OUT=${OUT:-/tmp/kforge-gpu}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/kforge-prof-XXXXXX)
tar xzf build/kforge-bundle.tar.gz -C "$work" kforge/lib
export KFORGE_PROBE_LIBS="$work/kforge/lib" PYTHONUNBUFFERED=1
mkdir -p "$work/edges"
python3 - "$work/edges" <<'PY'
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("edges", "tests/agent/test_expert_gpu.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
for name, (args, body, init, inputs) in m.EDGES.items():
    with open(f"{sys.argv[1]}/{name}.py", "w", encoding="utf-8") as f:
        f.write(m.EDGE_TASK.format(args=args, body=body, init=init, inputs=inputs))
PY
files=()
for t in ${TASKS:?TASKS: the tasks to profile}; do
  f=${TASKS_DIR:-examples/tasks}/$t.py
  [ -f "$f" ] || f=$work/edges/$t.py
  files+=("$f")
done
timeout "${LIMIT:-300}" python3 bench/plan_profile.py "${files[@]}" --variant "${VARIANT:-0}" \
  --kernels "${TOP:-12}" --reps "${REPS:-10}" 2>&1 | tee "$OUT/profile.txt"
