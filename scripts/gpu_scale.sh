#!/usr/bin/env bash
# Scale-out on a host with two GPUs (device kind nvidia-h200-x2), from the bundle (make bundle;
# carry build/kforge-bundle.tar.gz): bench/scale_bench.py — the same batch of evaluations with
# one worker on GPU 0, then with workers on GPUs 0 and 1 (each job done once, who did what), the
# throughput ratio, and the cross-talk of timings (a candidate on GPU 0 alone, then while GPU 1
# runs matmuls). Writes $OUT/scale.json and $OUT/scale.txt.
set -u
. scripts/gpu_unpack.sh scale
nvidia-smi -L | tee "$OUT/scale.txt"
timeout "${LIMIT:-540}" python3 bench/scale_bench.py --backend cuda --gpus "${GPUS:-0,1}" --jobs "${JOBS:-24}" \
  --kforge "$dir/kforge/bin/kforge" --var "$dir/var" --json "$OUT/scale.json" 2>&1 | tee -a "$OUT/scale.txt"
cp "$dir"/var/log/worker-*.log "$OUT/" 2>/dev/null
