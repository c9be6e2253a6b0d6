#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine needs to build and test kforge: Debian packages and a
# Python virtual environment at .venv with the pinned packages of requirements.txt.
# Idempotent: it does nothing (in well under a second) when everything is already there.
set -euo pipefail
# On a host that already has everything (the GPU host: no apt, its own python3 with torch), skip.
[ "${KFORGE_NO_DEPS:-}" = 1 ] && exit 0
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential pkg-config git binutils libseccomp-dev cppcheck passwd python3 python3-venv
  python3-dev clang-format curl ca-certificates procps
  libmicrohttpd-dev libjansson-dev libpq-dev libhiredis-dev libssl-dev libcurl4-openssl-dev zlib1g-dev
  postgresql redis-server wrk chromium chromium-driver fonts-dejavu-core)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
stamp=.venv/.kforge-deps-$(sha256sum requirements.txt | cut -c1-16)
if [ ! -f "$stamp" ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "deps: creating .venv with $($PY --version)"
    "$PY" -m venv .venv
  fi
  echo "deps: installing Python packages (PyTorch is a few GB the first time)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  rm -f .venv/.kforge-deps-*
  touch "$stamp"
fi
