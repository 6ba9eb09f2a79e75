#!/usr/bin/env bash
# The main job: set up and build, then compile every kernel for the targets that matter here.
# With a GPU: the local GPU's kernels (plus the sm_80/sm_86 specializations it can run as PTX);
# without one: every op x default target x candidate config, with the resource report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
JIT=dist/bin/deepinfer-jit
"$JIT" targets
if "$JIT" targets --local-only | grep -q '^local GPU 0'; then
  exec "$JIT" compile --target auto --target sm_80 --target sm_86 "$@"
else
  exec "$JIT" compile "$@"
fi
