#!/usr/bin/env bash
# Installs the build dependencies from Debian's archive. Idempotent: installs only what is missing.
set -euo pipefail
PKGS=(cmake ninja-build g++ python3 python3-dev libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
      libzstd-dev libfmt-dev libgtest-dev zlib1g-dev libedit-dev libxml2-dev libcurl4-openssl-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] || [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "setup: the CUDA 13 toolkit (with NVRTC) is expected in /usr/local/cuda" >&2
  exit 1
fi
python3 -c 'import lit' 2>/dev/null || [ -f /usr/lib/llvm-19/build/utils/lit/lit.py ] || python3 -m pip install -q lit
# The Python package: nanobind to build its extension, pytest and NumPy to test it (from PyPI).
python3 -c 'import nanobind, pytest, numpy' 2>/dev/null || python3 -m pip install -q nanobind pytest numpy
echo "setup: dependencies present"
