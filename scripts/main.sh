#!/usr/bin/env bash
# The main job: set up and build, then prepare the kernels for this machine.
# With a GPU: autotune every kernel op of the model for the local GPU (`deepinfer-jit tune`:
# candidates compiled into the kernel cache, checked against the references, timed; winners and
# timings in the tuning cache; a warm re-run is a full cache hit in seconds).
# Without one: every op x default target x candidate config through NVRTC, with the resource
# report and the checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
JIT=dist/bin/deepinfer-jit
"$JIT" targets
if "$JIT" targets --local-only | grep -q '^local GPU 0'; then
  exec "$JIT" tune "$@"
else
  exec "$JIT" compile "$@"
fi
