#!/usr/bin/env bash
# The GPU suite as the final run takes it, on one GPU machine from a dist/ built by
# scripts/build.sh: every seed x every gtest shard (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX) side by
# side, each process under one time limit, optionally the Python GPU tests alongside, then
# GpuModel.NoLeakOver1000Requests alone per seed (it measures device memory, so nothing may run
# beside it). Writes under DIR: tests-list.txt (--gtest_list_tests, the tests each seed must
# finish), gpu-tests-seed-S-shard-I.log, gpu-results-seed-S-shard-I.jsonl (one JSON row per
# comparison), gpu-tests-noleak-seed-S.log / gpu-results-seed-S-noleak.jsonl, python-tests.log.
# At the end it prints, per seed, passed / failed / skipped and the tests that were cut by the
# limit or never started (scripts/summarize-gpu-results.py --suite DIR), and the 15 slowest.
#
# Usage: scripts/gpu-suite.sh [--seeds "31337 271828 8675309"] [--shards 8] [--limit 250]
#          [--filter GTEST_FILTER] [--python] [--no-noleak] [--noleak-limit 250] [--out DIR]
#          [--balance PREV_DIR[:PREV_DIR...]]
# --balance: instead of gtest's round-robin sharding, each shard runs an explicit list of tests,
# balanced by the test times in earlier runs' logs (summarize-gpu-results.py --plan; the plan
# is in DIR/shard-I.filter). Without it, GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX shard the suite.
# Exit status: 0 when every test of every seed finished and none failed, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
SEEDS="31337 271828 8675309"
SHARDS=8
LIMIT=250
NOLEAK_LIMIT=250
FILTER="*"
PYTHON_TESTS=0
NOLEAK=1
OUT=gpu-suite
BALANCE=""
while (($#)); do
  case "$1" in
    --seeds) SEEDS=$2; shift 2 ;;
    --shards) SHARDS=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --noleak-limit) NOLEAK_LIMIT=$2; shift 2 ;;
    --filter) FILTER=$2; shift 2 ;;
    --python) PYTHON_TESTS=1; shift ;;
    --no-noleak) NOLEAK=0; shift ;;
    --out) OUT=$2; shift 2 ;;
    --balance) BALANCE=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu-suite: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$SHARDS" =~ ^[1-9][0-9]*$ && "$LIMIT" =~ ^[1-9][0-9]*$ && "$NOLEAK_LIMIT" =~ ^[1-9][0-9]*$ ]] ||
  { echo "gpu-suite: --shards, --limit and --noleak-limit take positive integers" >&2; exit 2; }
BIN=dist/bin/deepinfer-gpu-tests
[[ -x "$BIN" ]] || { echo "gpu-suite: $BIN not found (build with scripts/build.sh)" >&2; exit 2; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/dist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# One disk cache for every process: a kernel several shards need is compiled once (per-key locks).
export DEEPINFER_JIT_CACHE_DIR=${DEEPINFER_JIT_CACHE_DIR:-/tmp/deepinfer-jit-cache}
NOLEAK_TEST=GpuModel.NoLeakOver1000Requests
# The sharded runs leave NoLeak out (it runs alone after them); the list is what they must finish.
SHARD_FILTER="${FILTER}-${NOLEAK_TEST}"
[[ "$FILTER" == *-* ]] && SHARD_FILTER="${FILTER}:${NOLEAK_TEST}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX "$BIN" --gtest_list_tests --gtest_filter="$SHARD_FILTER" \
  > "$OUT/tests-list.txt" 2>&1
echo "gpu-suite: seeds [$SEEDS], $SHARDS shards each, ${LIMIT} s limit per process, filter '$SHARD_FILTER', out $OUT"
if [[ -n "$BALANCE" ]]; then
  python3 scripts/summarize-gpu-results.py --plan "$BALANCE" "$OUT/tests-list.txt" "$SHARDS" "$OUT" || exit 2
fi

pids=()
start=$(date +%s)
if ((PYTHON_TESTS)); then
  OUT="$OUT" timeout "$LIMIT" scripts/gpu-python-tests.sh > "$OUT/python-tests.log" 2>&1 &
  pypid=$!
fi
for seed in $SEEDS; do
  for ((i = 0; i < SHARDS; i++)); do
    rm -f "$OUT/gpu-results-seed-$seed-shard-$i.jsonl"
    if [[ -n "$BALANCE" ]]; then
      DI_TEST_SEED=$seed DI_GPU_RESULTS="$OUT/gpu-results-seed-$seed-shard-$i.jsonl" \
        timeout -k 10 "$LIMIT" "$BIN" --gtest_filter="$(cat "$OUT/shard-$i.filter")" \
        > "$OUT/gpu-tests-seed-$seed-shard-$i.log" 2>&1 &
    else
      DI_TEST_SEED=$seed DI_GPU_RESULTS="$OUT/gpu-results-seed-$seed-shard-$i.jsonl" \
        GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i \
        timeout -k 10 "$LIMIT" "$BIN" --gtest_filter="$SHARD_FILTER" > "$OUT/gpu-tests-seed-$seed-shard-$i.log" 2>&1 &
    fi
    pids+=($!)
  done
done
for p in "${pids[@]}"; do wait "$p"; done
echo "gpu-suite: shards done in $(($(date +%s) - start)) s"
if ((PYTHON_TESTS)); then
  wait "$pypid"; echo "python tests: exit $? ($(grep -E '[0-9]+ (passed|failed)' "$OUT/python-tests.log" | tail -1))"
fi
if ((NOLEAK)) && "$BIN" --gtest_list_tests --gtest_filter="$FILTER" 2>/dev/null | grep -q NoLeakOver1000Requests; then
  for seed in $SEEDS; do
    rm -f "$OUT/gpu-results-seed-$seed-noleak.jsonl"
    DI_TEST_SEED=$seed DI_GPU_RESULTS="$OUT/gpu-results-seed-$seed-noleak.jsonl" \
      timeout -k 10 "$NOLEAK_LIMIT" "$BIN" --gtest_filter="$NOLEAK_TEST" > "$OUT/gpu-tests-noleak-seed-$seed.log" 2>&1
    echo "$NOLEAK_TEST seed $seed: exit $?"
  done
fi
python3 scripts/summarize-gpu-results.py --suite "$OUT"
