#!/usr/bin/env bash
# diag-cuda.sh: when CUDA fails inside `kforge-jail --profile run --gpu N`, tells why: the
# same cuInit through the jail normally, in record mode (seccomp lets everything through and
# notes what the list lacks), and a probe of what the driver opens (device nodes, /proc,
# /sys, /dev/shm). Run on the GPU host from the repository root with build/ present:
#   bash sandbox/diag-cuda.sh [OUTDIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
jail=${BUILD:-$here/../build}/kforge-jail
out=${1:-/tmp/kforge-diag}
mkdir -p "$out"
gpu=${GPU:-0}
ws=$(mktemp -d /tmp/kforge-diag-XXXXXX)
chmod 755 "$ws"
trap 'rm -rf "$ws"' EXIT
py=$(command -v python3)
cat >"$ws/probe.py" <<'SRC'
import ctypes, glob, os, sys
def tryit(what, f):
    try:
        r = f()
        print(f"ok   {what}: {r!r}"[:300])
    except Exception as e:
        print(f"FAIL {what}: {type(e).__name__}: {e}"[:300])
for p in sorted(glob.glob("/dev/nvidia*")) + ["/dev/shm"]:
    tryit("stat " + p, lambda p=p: oct(os.stat(p).st_mode))
    if p != "/dev/shm":
        tryit("open " + p, lambda p=p: os.close(os.open(p, os.O_RDWR)))
tryit("/proc/driver/nvidia/version", lambda: open("/proc/driver/nvidia/version").read().split("\n")[0])
tryit("/proc/driver/nvidia/params", lambda: len(open("/proc/driver/nvidia/params").read()))
tryit("/proc/driver/nvidia/capabilities", lambda: os.listdir("/proc/driver/nvidia/capabilities"))
tryit("/sys/bus/pci/devices", lambda: len(os.listdir("/sys/bus/pci/devices")))
tryit("/sys/devices/system/node", lambda: os.listdir("/sys/devices/system/node")[:4])
tryit("comm write", lambda: open(f"/proc/self/task/{os.getpid()}/comm", "w").write("x"))
tryit("shm file", lambda: open("/dev/shm/x", "w").write("x"))
tryit("memfd", lambda: os.close(os.memfd_create("x")))
tryit("mounts", lambda: [l.split()[1:4] for l in open("/proc/self/mounts") if "nvidia" in l or " /dev" in l or "/proc" in l])
lib = ctypes.CDLL("libcuda.so.1")
rc = lib.cuInit(0)
msg = ctypes.c_char_p()
lib.cuGetErrorString(rc, ctypes.byref(msg))
n = ctypes.c_int(-1)
lib.cuDeviceGetCount(ctypes.byref(n))
print("cuInit", rc, msg.value, "devices", n.value)
sys.exit(0 if rc == 0 else 1)
SRC
{
  echo "== host"; id; uname -r; ls -la /dev/nvidia* 2>&1; command -v strace
  echo "== host probe"; (cd "$ws" && "$py" probe.py)
  for mode in plain record; do
    echo "== jail $mode"
    extra=()
    [ "$mode" = record ] && extra=(--record "$out/record.txt")
    "$jail" --profile run --gpu "$gpu" --workdir "$ws" --time 60 --env LD_LIBRARY_PATH \
      --report "$out/report-$mode.json" "${extra[@]}" -- "$py" probe.py
    echo "exit $?"; cat "$out/report-$mode.json"; echo
    [ "$mode" = record ] && { echo "record lacks:"; cat "$out/record.txt"; }
  done
  if command -v strace >/dev/null; then
    echo "== jail strace (failing calls)"
    "$jail" --profile run --gpu "$gpu" --workdir "$ws" --time 60 --env LD_LIBRARY_PATH --record "$out/record-strace.txt" \
      -- "$(command -v strace)" -f -e trace=%file,%desc,%memory,%process,%network -Z "$py" probe.py 2>&1 | tail -60
  fi
} >"$out/diag-cuda.log" 2>&1
cat "$out/diag-cuda.log"
