#!/usr/bin/env bash
# On a GPU machine, from a dist/ built by scripts/build.sh: run deepinfer-bench (every op at the
# docs/ops.md §10 shapes, or what the options select) and draw its JSON as an SVG bar chart.
# Writes <dir>/<gpu-slug>-<date>.{json,svg,log}, <dir> = $OUT or benchmarks/results.
# Usage: scripts/bench.sh [deepinfer-bench options, e.g. --quick or --op sparse_mla_decode]
# Exit status: deepinfer-bench's (0 all checked and timed, 1 no GPU or bad options, 2 a variant
# failed its check or errored).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-dist/bin}
if [ ! -x "$BIN/deepinfer-bench" ]; then
  echo "bench.sh: $BIN/deepinfer-bench not found; build with scripts/build.sh first" >&2
  exit 1
fi
for a in "$@"; do
  if [ "$a" = "--out" ]; then
    echo "bench.sh: choose the output directory with OUT=DIR, not --out" >&2
    exit 1
  fi
done
export DI_GIT_COMMIT=${DI_GIT_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || cat dist/COMMIT 2>/dev/null || echo unknown)}
export DEEPINFER_JIT_CACHE_DIR=${DEEPINFER_JIT_CACHE_DIR:-/tmp/deepinfer-jit-cache}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
slug=$(printf '%s' "${gpu:-gpu}" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
dir=${OUT:-benchmarks/results}
mkdir -p "$dir"
base="$dir/${slug:-gpu}-$(date -u +%Y-%m-%d)"
"$BIN/deepinfer-bench" --out "$base.json" "$@" 2>&1 | tee "$base.log"
rc=${PIPESTATUS[0]}
if [ -f "$base.json" ]; then
  python3 benchmarks/plot.py "$base.json" -o "$base.svg" || echo "bench.sh: plotting failed" >&2
fi
exit "$rc"
