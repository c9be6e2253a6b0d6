#!/usr/bin/env bash
# bundle.sh: one relocatable tarball of kforge for air-gapped GPU hosts (no internet, no package
# manager, but a Python with PyTorch). Run by `make bundle` after `make build`:
#   bash scripts/bundle.sh [OUT.tar.gz]        (default build/kforge-bundle.tar.gz)
# Holds the kforge binaries, PostgreSQL and Redis from this machine's Debian packages, the shared
# libraries they all need (not the C library, which the host provides: Debian 12 builds need
# glibc 2.36 or newer), the harness, migrations, openapi, web and the examples. On the host:
#   tar xzf kforge-bundle.tar.gz && kforge/bin/kforge up     (then kforge/bin/kforge eval ...)
# bin/kforge is a wrapper that points the loader and kforge at the bundle's own folders.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-$root/build/kforge-bundle.tar.gz}
stage=$(mktemp -d /tmp/kforge-bundle-XXXXXX)
trap 'rm -rf "$stage"' EXIT
b=$stage/kforge
mkdir -p "$b/bin" "$b/libexec" "$b/lib"

for exe in kforge kforge-server kforge-worker kforge-jail; do
  [ -x "build/$exe" ] || { echo "bundle: build/$exe is missing (make build)" >&2; exit 1; }
  cp "build/$exe" "$b/libexec/"
done

# PostgreSQL keeps the layout of its Debian paths under pg/, so that it finds its share and
# lib folders relative to its bin folder (PostgreSQL resolves them relative to the executable).
pgbin=$(pg_config --bindir)
pgshare=$(pg_config --sharedir)
pglib=$(pg_config --pkglibdir)
mkdir -p "$b/pg$pgbin" "$b/pg$pgshare" "$b/pg$pglib"
for exe in initdb pg_ctl postgres psql createdb pg_isready; do
  src=$pgbin/$exe
  [ -e "$src" ] || src=$(command -v "$exe")
  cp -L "$src" "$b/pg$pgbin/"
done
cp -a "$pgshare/." "$b/pg$pgshare/"
rm -rf "$b/pg$pgshare/man" "$b/pg$pgshare/contrib"
cp -a "$pglib/." "$b/pg$pglib/"
rm -rf "$b/pg$pglib"/llvmjit* "$b/pg$pglib/bitcode" # the JIT drags in LLVM; kforge does not need it
mkdir -p "$b/redis"
cp -L "$(command -v redis-server)" "$b/redis/"

# the shared libraries of every executable and library copied, minus the C library's own
skip='^(linux-vdso|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|ld-linux|libresolv)'
find "$b/libexec" "$b/pg" "$b/redis" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
  { xargs -0 ldd 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    if ! echo "$name" | grep -Eq "$skip"; then cp -Ln "$path" "$b/lib/$name"; fi
  done

# the runner's C++ compute guard, built against this machine's PyTorch: a host whose PyTorch
# differs cannot load it, and its runners guard with the Python mode instead (the verdict says which)
if [ -f build/libkforge-guard.so ]; then cp build/libkforge-guard.so "$b/lib/"; fi

# the harness (without caches), the prompts, migrations, openapi, web, examples
mkdir -p "$b/share"
for d in workers/harness workers/prompts migrations openapi web examples; do
  [ -d "$d" ] || continue
  mkdir -p "$b/share/$d"
  (cd "$d" && tar cf - --exclude=__pycache__ --exclude='*.pyc' .) | (cd "$b/share/$d" && tar xf -)
done

cat >"$b/bin/kforge" <<'SH'
#!/bin/sh
# kforge from the bundle: its libraries, PostgreSQL, Redis, harness and migrations.
here=$(cd "$(dirname "$0")/.." && pwd)
# the worker gives the host's own loader path back to the harness (Python and PyTorch of the host)
export KFORGE_HOST_LD_LIBRARY_PATH="${KFORGE_HOST_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KFORGE_PG_BIN="${KFORGE_PG_BIN:-$(ls -d "$here"/pg/usr/lib/postgresql/*/bin | head -n 1)}"
export KFORGE_REDIS_BIN="${KFORGE_REDIS_BIN:-$here/redis/redis-server}"
export KFORGE_MIGRATIONS="${KFORGE_MIGRATIONS:-$here/share/migrations}"
export KFORGE_HARNESS_DIR="${KFORGE_HARNESS_DIR:-$here/share/workers/harness}"
export KFORGE_WEB_DIR="${KFORGE_WEB_DIR:-$here/share/web}"
if [ -f "$here/lib/libkforge-guard.so" ]; then
  export KFORGE_GUARD_LIB="${KFORGE_GUARD_LIB-$here/lib/libkforge-guard.so}"
fi
export KFORGE_JAIL="${KFORGE_JAIL:-$here/libexec/kforge-jail}"
export KFORGE_PYTHON="${KFORGE_PYTHON:-$(command -v python3)}"
export KFORGE_BIN_DIR="$here/libexec"
export PATH="$here/libexec:$PATH"
exec "$here/libexec/kforge" "$@"
SH
chmod +x "$b/bin/kforge"
tar czf "$out" -C "$stage" kforge
echo "bundle: $out ($(du -h "$out" | cut -f1))"
