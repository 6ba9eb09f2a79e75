#!/usr/bin/env bash
# On a GPU machine, from a dist/ built by scripts/build.sh: the model benchmark
# (deepinfer-model-bench) on the `proxy` model (7 layers at V4.1-Flash widths, 128 experts):
# cold prefill tok/s and time to first token per context, decode tok/s per number of streams
# (batched and serial), KV bytes per token and tokens per 80 GB, each against its roofline.
# Usage: scripts/model-bench.sh [make] [bench]        (default: both)
#   make   generate the proxy model into $MODEL_DIR unless a complete one is there (timed)
#   bench  run deepinfer-model-bench on it
# Environment: OUT (default gpu-results) receives model-bench.{json,log}, make-model.{log,seconds};
# MODEL_DIR (default /tmp/proxy); MODEL_BENCH_QUICK=1 passes --quick; MODEL_BENCH_ARGS adds flags;
# MODEL_BENCH_BUDGET_S (default 480) bounds the whole script, the bench gets what make leaves.
# Exit status: 0 all measured, 1 a step failed or ran out of time.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
BIN=dist/bin
export LD_LIBRARY_PATH="$PWD/dist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export DEEPINFER_JIT_CACHE_DIR=${DEEPINFER_JIT_CACHE_DIR:-/tmp/deepinfer-jit-cache}
export DI_GIT_COMMIT=${DI_GIT_COMMIT:-$(cat dist/COMMIT 2>/dev/null || git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
MODEL_DIR=${MODEL_DIR:-/tmp/proxy}
budget=${MODEL_BENCH_BUDGET_S:-480}
steps=${*:-make bench}
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
for tool in deepinfer-jit deepinfer-model-bench; do
  [ -x "$BIN/$tool" ] || { echo "model-bench.sh: $BIN/$tool not found; build with scripts/build.sh first" >&2; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
# make-model writes this marker last, so a directory left by an interrupted run is regenerated.
marker="$MODEL_DIR/.model-bench-complete"
rc=0
if [[ " $steps " == *" make "* ]]; then
  if [ -f "$marker" ]; then
    echo "proxy model: $MODEL_DIR (already generated: $(cat "$marker"))"
  else
    rm -rf "$MODEL_DIR"
    s0=$(date +%s.%N)
    timeout "$(left)" "$BIN/deepinfer-jit" make-model --preset proxy --out "$MODEL_DIR" > "$OUT/make-model.log" 2>&1
    mrc=$?
    awk -v a="$s0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' > "$OUT/make-model.seconds"
    tail -5 "$OUT/make-model.log"
    if [ $mrc -ne 0 ]; then
      echo "make-model --preset proxy: FAILED (exit $mrc; 124 = out of time) after $(cat "$OUT/make-model.seconds") s"
      exit 1
    fi
    echo "make-model --preset proxy: $(cat "$OUT/make-model.seconds") s, $(du -sh "$MODEL_DIR" | cut -f1) in $MODEL_DIR"
    echo "proxy preset, made in $(cat "$OUT/make-model.seconds") s, commit $DI_GIT_COMMIT" > "$marker"
  fi
fi
if [[ " $steps " == *" bench "* ]]; then
  [ -f "$marker" ] || { echo "model-bench.sh: no complete proxy model in $MODEL_DIR; run the make step first" >&2; exit 1; }
  remaining=$(left)
  if [ "$remaining" -lt 60 ]; then
    echo "model-bench.sh: only $remaining s of the ${budget} s budget left; run 'scripts/model-bench.sh bench' on its own"
    exit 1
  fi
  quick=()
  [ "${MODEL_BENCH_QUICK:-0}" = 1 ] && quick=(--quick)
  # MODEL_BENCH_ARGS is split into words on purpose.
  # shellcheck disable=SC2086
  timeout "$remaining" "$BIN/deepinfer-model-bench" --model "$MODEL_DIR" --out "$OUT/model-bench.json" "${quick[@]}" \
    ${MODEL_BENCH_ARGS:-} 2>&1 | tee "$OUT/model-bench.log"
  brc=${PIPESTATUS[0]}
  [ "$brc" -eq 124 ] && echo "deepinfer-model-bench: out of time after $remaining s (try MODEL_BENCH_QUICK=1 or fewer --contexts)"
  [ "$brc" -eq 0 ] || rc=1
fi
echo "model-bench.sh: $(($(date +%s) - start)) s"
exit $rc
