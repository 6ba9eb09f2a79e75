#!/usr/bin/env bash
# On a GPU machine, from a dist/ built by scripts/build.sh: the local GPU's facts, the GPU test
# suite (every kernel for the local arch and the sm_80/sm_86 specializations against the
# references), optionally compute-sanitizer, and the benchmarks. Results go to $OUT (or
# ./gpu-results). Usage: scripts/gpu-check.sh [tests] [sanitize] [bench]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
BIN=dist/bin
export LD_LIBRARY_PATH="$PWD/dist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export DEEPINFER_JIT_CACHE_DIR=${DEEPINFER_JIT_CACHE_DIR:-/tmp/deepinfer-jit-cache}
export DI_GIT_COMMIT=${DI_GIT_COMMIT:-$(cat dist/COMMIT 2>/dev/null || echo unknown)}
steps=${*:-tests}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
"$BIN/deepinfer-jit" targets --local-only | tee "$OUT/targets.txt"
rc=0
if [[ " $steps " == *" tests "* ]]; then
  rm -f "$OUT/gpu-results.jsonl"
  DI_GPU_RESULTS="$OUT/gpu-results.jsonl" "$BIN/deepinfer-gpu-tests" ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} \
    2>&1 | tee "$OUT/gpu-tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |comparisons|GPU:|Failure|error" | head -150
  rc=${PIPESTATUS[0]}
fi
if [[ " $steps " == *" sanitize "* ]]; then
  for tool in memcheck racecheck; do
    DI_GPU_LARGE=0 timeout ${SANITIZE_TIMEOUT:-240} compute-sanitizer --tool $tool --print-limit 20 "$BIN/deepinfer-gpu-tests" \
      --gtest_filter="${SANITIZE_FILTER:-*}" > "$OUT/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer-$tool.log") clean summaries)"
    tail -3 "$OUT/sanitizer-$tool.log"
  done
fi
if [[ " $steps " == *" bench "* ]]; then
  "$BIN/deepinfer-bench" --out "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -60
fi
exit $rc
