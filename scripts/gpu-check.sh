#!/usr/bin/env bash
# On a GPU machine, from a dist/ built by scripts/build.sh: the local GPU's facts, the GPU test
# suite (every kernel for the local arch and the sm_80/sm_86 specializations against the
# references), optionally compute-sanitizer, the benchmarks, and the autotuner (`tune`: the
# roofline, then `deepinfer-jit tune` twice; the second run must be a full cache hit and fast).
# Results go to $OUT (or ./gpu-results). Usage: scripts/gpu-check.sh [tests] [seeds] [sanitize] [bench] [tune]
# `seeds` runs the GPU suite once per seed in SEEDS (default: three random ones, printed), each
# with DI_TEST_SEED set, and fails if any run fails: e.g. SEEDS="1 2 3" scripts/gpu-check.sh seeds.
# GTEST_FILTER narrows `tests` and `seeds` (e.g. GTEST_FILTER='GpuModel.*:TunedConfigs.*').
# TUNE_ARGS are the tune runs' flags; the default tunes four ops over all their buckets with 10
# samples (minutes, within one 10-minute command); TUNE_ARGS="--samples 30" tunes every op.
# BENCH_ARGS are deepinfer-bench's (e.g. "--op weight_gemm --op moe_experts" to time only those).
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
if [[ " $steps " == *" seeds "* ]]; then
  SEEDS=${SEEDS:-"$RANDOM$RANDOM $RANDOM$RANDOM $RANDOM$RANDOM"}
  echo "GPU suite on seeds: $SEEDS"
  for seed in $SEEDS; do
    rm -f "$OUT/gpu-results-seed-$seed.jsonl"
    DI_TEST_SEED=$seed DI_GPU_RESULTS="$OUT/gpu-results-seed-$seed.jsonl" "$BIN/deepinfer-gpu-tests" \
      ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} > "$OUT/gpu-tests-seed-$seed.log" 2>&1
    s=$?
    grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|\[seed\]" "$OUT/gpu-tests-seed-$seed.log" | head -60
    echo "seed $seed: exit $s"
    [[ $s -eq 0 ]] || rc=1
  done
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
  # BENCH_ARGS (split into words on purpose), e.g. "--op weight_gemm --op moe_experts --quick".
  # shellcheck disable=SC2086
  "$BIN/deepinfer-bench" --out "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -60
fi
if [[ " $steps " == *" tune "* ]]; then
  "$BIN/deepinfer-jit" roofline 2>&1 | tee "$OUT/roofline.log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "roofline FAILED"; rc=1; }
  TUNE_ARGS=${TUNE_ARGS:---op sparse_mla_decode --op mhc_pre --op gather_kcache --op topk --samples 10}
  # TUNE_ARGS is split into words on purpose.
  # shellcheck disable=SC2086
  s0=$(date +%s.%N)
  "$BIN/deepinfer-jit" tune $TUNE_ARGS > "$OUT/tune-1.log" 2> "$OUT/tune-1.err"
  t1=$?
  awk -v a="$s0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' > "$OUT/tune-1.seconds"
  tail -80 "$OUT/tune-1.log"; tail -5 "$OUT/tune-1.err"
  echo "tune (cold): exit $t1, $(cat "$OUT/tune-1.seconds") s"
  [[ $t1 -eq 0 ]] || rc=1
  # shellcheck disable=SC2086
  s0=$(date +%s.%N)
  "$BIN/deepinfer-jit" tune $TUNE_ARGS > "$OUT/tune-2.log" 2> "$OUT/tune-2.err"
  t2=$?
  awk -v a="$s0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' > "$OUT/tune-2.seconds"
  secs=$(cat "$OUT/tune-2.seconds")
  echo "tune (warm): exit $t2, $secs s"
  if [[ $t2 -ne 0 ]] || ! grep -q "full cache hit" "$OUT/tune-2.log"; then
    echo "tune (warm): FAILED: not a full cache hit"; rc=1
  elif ! awk -v s="$secs" 'BEGIN { exit !(s < 30) }'; then
    echo "tune (warm): FAILED: took $secs s (limit 30 s)"; rc=1
  else
    echo "tune (warm): full cache hit in $secs s"
  fi
  cp "$DEEPINFER_JIT_CACHE_DIR"/tuning/*.json "$OUT/" 2>/dev/null
fi
exit $rc
