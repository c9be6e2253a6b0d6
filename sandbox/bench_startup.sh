#!/usr/bin/env bash
# bench_startup.sh: the median time to run `true` through each profile of kforge-jail, next to a
# plain fork+exec of `true`, as a table. The goal is a jail median under 20 ms.
#
#   bash sandbox/bench_startup.sh [RUNS]        (RUNS defaults to 50)
#
# BUILD picks the build folder (default: build/ beside sandbox/); PYTHON the interpreter that
# times the runs (default: python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
jail=$build/kforge-jail
runs=${1:-50}
[ -x "$jail" ] || { echo "bench_startup: $jail not built (make -C sandbox BUILD=...)" >&2; exit 1; }
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
"${PYTHON:-python3}" - "$jail" "$ws" "$runs" <<'PY'
import shutil, statistics, subprocess, sys, time

jail, ws, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
true = shutil.which("true")

def times(argv):
    subprocess.run(argv, check=True)  # warm-up
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, check=True)
        out.append((time.perf_counter() - t) * 1000)
    return out

rows = [("fork+exec true", [true])]
for profile in ("build", "shell", "run"):
    rows.append((f"jail {profile}", [jail, "--profile", profile, "--workdir", ws, "--", "true"]))
print(f"{'what':<16} {'median ms':>10} {'p10 ms':>8} {'p90 ms':>8}   runs={runs}")
worst = 0.0
for name, argv in rows:
    t = sorted(times(argv))
    med = statistics.median(t)
    p10, p90 = t[len(t) // 10], t[(len(t) * 9) // 10]
    print(f"{name:<16} {med:>10.2f} {p10:>8.2f} {p90:>8.2f}")
    if name.startswith("jail"):
        worst = max(worst, med)
print(f"goal: jail median < 20 ms: {'met' if worst < 20 else 'NOT met'} ({worst:.2f} ms)")
PY
