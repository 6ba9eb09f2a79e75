#!/usr/bin/env bash
# Set up (idempotent), configure and build into build/, and install the tools into dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
cmake --install "$BUILD_DIR" --prefix dist >/dev/null
echo "build: tools in dist/bin (deepinfer-jit, deepinfer-opt)"
