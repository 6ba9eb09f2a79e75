#!/usr/bin/env bash
# The whole test suite: set up, build, then every unit, lit and CLI test through CTest.
# GPU tests (label gpu) skip with a message where no GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
