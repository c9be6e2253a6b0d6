#!/usr/bin/env bash
# record-syscalls.sh: runs representative honest workloads through kforge-jail --record and
# writes down the syscalls each profile's allow-list lacks, so that the lists in
# sandbox/syscalls/ can be refreshed (for a new driver, PyTorch or Triton on the GPU host).
#
#   bash sandbox/record-syscalls.sh OUTDIR
#
# Environment:
#   BUILD   the build folder holding kforge-jail (default: build/ beside sandbox/)
#   PYTHON  the interpreter with PyTorch (default: /usr/bin/python3 when it imports torch,
#           else python3 from PATH)
#   RECORD_TIME  wall-clock limit per workload in seconds (default 600)
#   GPU     the GPU index for the run profile (default 0; CUDA workloads are skipped when
#           /dev/nvidiaGPU is missing or torch sees no GPU)
#   APPLY=1 append the plain syscall names found to sandbox/syscalls/PROFILE.list (entries
#           with an argument, such as "socket/0x11", always need a person: see README.md)
#
# Writes OUTDIR/PROFILE-WORKLOAD.txt (what that workload lacked: "name<TAB>count"),
# OUTDIR/PROFILE.missing (the union per profile), OUTDIR/WORKLOAD.log (its output and
# report) and prints a summary. Exits 1 when a workload failed, so a breakage shows.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
jail=$build/kforge-jail
out=${1:?usage: record-syscalls.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -x "$jail" ] || { echo "record-syscalls: $jail not built" >&2; exit 2; }

py=${PYTHON:-}
if [ -z "$py" ]; then
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then py=/usr/bin/python3; else py=$(command -v python3); fi
fi
gpu=${GPU:-0}
have_cuda=0
if [ -e "/dev/nvidia$gpu" ] && "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  have_cuda=1
fi
# what the interpreter needs beyond the automatic prefix: its site-packages may live elsewhere
py_ro=()
while IFS= read -r p; do
  case "$p" in /usr|/usr/*|"") ;; *) [ -e "$p" ] && py_ro+=(--ro "$p") ;; esac
done < <("$py" -c 'import sys, site, os; print("\n".join(sorted({sys.prefix, sys.base_prefix, *site.getsitepackages()})))' 2>/dev/null)
# the driver's libraries and what the caller's loader path names (as the worker passes them)
pass_env=(--env LD_LIBRARY_PATH --env CUDA_HOME --env NCCL_NVLS_ENABLE --env TORCH_SYMM_MEM_DISABLE_MULTICAST --env NVSHMEM_DISABLE_NVLS)
extra_ro=()
for d in /usr/local/nvidia /opt/nvidia; do [ -d "$d" ] && extra_ro+=(--ro "$d"); done

ws=$(mktemp -d /tmp/kforge-record-XXXXXX)
trap 'rm -rf "$ws"' EXIT
chmod 755 "$ws"
failed=0

# record PROFILE NAME [jail options...] -- COMMAND...
record() {
  local profile=$1 name=$2 limit=${RECORD_TIME:-600}
  shift 2
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  echo "== $profile/$name"
  "$jail" --profile "$profile" --workdir "$ws" --time "$limit" --mem 0 --pids 4096 \
    --output-limit 65536 --record "$out/$profile-$name.txt" --report "$out/$name.report" \
    "${pass_env[@]}" "${opts[@]}" -- "$@" >"$out/$name.log" 2>&1
  local rc=$?
  cat "$out/$name.report" >>"$out/$name.log" 2>/dev/null
  if [ $rc -ne 0 ]; then
    echo "   FAILED (exit $rc): see $out/$name.log"
    tail -5 "$out/$name.log" | sed 's/^/   | /'
    failed=1
  fi
  if [ -s "$out/$profile-$name.txt" ]; then sed 's/^/   lacks: /' "$out/$profile-$name.txt"; fi
}

cat >"$ws/k.cpp" <<'SRC'
#include <vector>
#include <thread>
extern "C" int add(int a, int b) { std::vector<int> v{a, b}; return v[0] + v[1]; }
SRC
cat >"$ws/k.cu" <<'SRC'
__global__ void scale(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
extern "C" int run_scale(int n) {
  float *d; if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return -1;
  cudaMemset(d, 0, n * sizeof(float)); scale<<<(n + 255) / 256, 256>>>(d, n);
  int rc = cudaDeviceSynchronize() == cudaSuccess ? 0 : -2; cudaFree(d); return rc; }
SRC
cat >"$ws/cpu_model.py" <<'SRC'
import os, tempfile, threading, multiprocessing as mp
import torch
if __name__ == "__main__":
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))
    with torch.no_grad():
        y = m(torch.randn(32, 64))
    t = threading.Thread(target=lambda: torch.randn(256, 256) @ torch.randn(256, 256))
    t.start(); t.join()
    with mp.get_context("spawn").Pool(2) as p:
        print(p.map(abs, [-1, -2]))
    print("cpu ok", tuple(y.shape), tempfile.gettempdir(), os.cpu_count())
SRC
cat >"$ws/cuda_model.py" <<'SRC'
import ctypes, os, sys
import torch
x = torch.randn(1024, 1024, device="cuda")
y = (x @ x).relu().sum()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    z = torch.empty(1 << 20, device="cuda").fill_(1).sum()
torch.cuda.synchronize()
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
e0.record(); (x @ x); e1.record(); torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
static = torch.zeros(8, device="cuda")
with torch.cuda.graph(g):
    static.add_(1)
g.replay(); torch.cuda.synchronize()
if os.path.exists("libkcu.so"):
    assert ctypes.CDLL("./libkcu.so").run_scale(4096) == 0
print("cuda ok", torch.cuda.get_device_name(0), float(y) > 0, float(z), e0.elapsed_time(e1) > 0, float(static[0]))
SRC
cat >"$ws/compile_model.py" <<'SRC'
import torch
def f(a, b):
    return torch.nn.functional.gelu(a @ b + 1.0).sum(dim=-1)
dev = "cuda" if torch.cuda.is_available() else "cpu"
a, b = torch.randn(256, 256, device=dev), torch.randn(256, 256, device=dev)
g = torch.compile(f)
print("compile ok", dev, torch.allclose(g(a, b), f(a, b), atol=1e-3, rtol=1e-3))
SRC

record build gxx -- g++ -shared -fPIC -O2 -pthread -o libk.so k.cpp
record build cc -- sh -c 'printf "int main(void){return 0;}\n" > m.c && cc -O2 -o m m.c && ./m && make --version >/dev/null'
if command -v nvcc >/dev/null 2>&1; then
  record build nvcc -- "$(command -v nvcc)" -shared -Xcompiler -fPIC -O2 -o libkcu.so k.cu
fi
record shell bash -- bash -c 'set -e; ls -la / >/dev/null; cat /etc/os-release >/dev/null; echo hi | grep -q hi; find . -maxdepth 1 >/dev/null; sed -n 1p k.cpp >/dev/null; tar cf /tmp/t.tar k.cpp; sort k.cpp | uniq >/dev/null; (sleep 0.1 &); wait; command -v git >/dev/null && git --version >/dev/null; true'
record shell python -- "$py" -c 'import json, os, subprocess; print(json.dumps(os.listdir("."))); subprocess.run(["ls"], check=True)'
record run cpu_model "${py_ro[@]}" -- "$py" cpu_model.py
record run compile_cpu "${py_ro[@]}" --env CUDA_VISIBLE_DEVICES= -- "$py" compile_model.py
if [ $have_cuda = 1 ]; then
  record run cuda_model --gpu "$gpu" "${py_ro[@]}" "${extra_ro[@]}" -- "$py" cuda_model.py
  record run compile_cuda --gpu "$gpu" "${py_ro[@]}" "${extra_ro[@]}" -- "$py" compile_model.py
else
  echo "== run/cuda: skipped (no /dev/nvidia$gpu or torch sees no GPU)"
fi

echo
for profile in build shell run; do
  cat "$out/$profile"-*.txt 2>/dev/null | cut -f1 | sort -u >"$out/$profile.missing"
  if [ -s "$out/$profile.missing" ]; then
    echo "$profile lacks: $(tr '\n' ' ' <"$out/$profile.missing")"
    if [ "${APPLY:-0}" = 1 ]; then
      names=$(grep -v / "$out/$profile.missing" | tr '\n' ' ')
      if [ -n "$names" ]; then
        { echo "# recorded $(date -u +%Y-%m-%d) by record-syscalls.sh"; grep -v / "$out/$profile.missing"; } >>"$here/syscalls/$profile.list"
        echo "   appended to sandbox/syscalls/$profile.list: $names"
      fi
    fi
  else
    echo "$profile lacks nothing"
  fi
done
exit $failed
