# gpu_unpack.sh, sourced by the scripts/gpu_*.sh that run the service on the GPU host: makes $OUT,
# unpacks build/kforge-bundle.tar.gz (make bundle; carried) into a new folder $dir under /tmp named
# after $1, which PostgreSQL (running as postgres or nobody) can reach, and sets KFORGE_PYTHON.
OUT=${OUT:-/tmp/kforge-gpu}
mkdir -p "$OUT"
dir=$(mktemp -d "/tmp/kforge-$1-XXXXXX")
chmod 755 "$dir"
tar xzf build/kforge-bundle.tar.gz -C "$dir"
export KFORGE_PYTHON=${KFORGE_PYTHON:-$(command -v python3)} PYTHONUNBUFFERED=1
