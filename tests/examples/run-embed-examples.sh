#!/bin/sh
# Runs the engine-embedding examples (C++ and C) on a fresh tiny model and checks what they print.
# Exit 0: both ran and printed what they should; 77: no GPU (both said so: CTest reports the test
# as skipped); 1: anything else (a failing example fails the test whatever it printed).
#   run-embed-examples.sh DEEPINFER_JIT EMBED_ENGINE EMBED_ENGINE_C WORKDIR
set -u
jit=$1 cxx=$2 c=$3 dir=$4
rm -rf "$dir"
"$jit" make-model --preset tiny --out "$dir" --quiet > /dev/null || { echo "make-model failed"; exit 1; }
cxx_out=$("$cxx" "$dir" 2>&1); cxx_rc=$?
c_out=$("$c" "$dir" 2>&1); c_rc=$?
printf '%s\n%s\n' "$cxx_out" "$c_out"
if [ $cxx_rc -eq 77 ] && [ $c_rc -eq 77 ]; then
  echo "no GPU: the embedding examples were skipped"
  exit 77
fi
if [ $cxx_rc -ne 0 ] || [ $c_rc -ne 0 ]; then
  echo "FAIL: embed_engine exited $cxx_rc, embed_engine_c exited $c_rc"
  exit 1
fi
echo "$cxx_out" | grep -q '^request 1: [0-9 ]*[0-9]' || { echo "FAIL: embed_engine printed no tokens for request 1"; exit 1; }
echo "$cxx_out" | grep -q '^topk rows: 1 3 5 7 | 0 1 2 4$' || { echo "FAIL: embed_engine's top-k rows are wrong"; exit 1; }
echo "$c_out" | grep -q '^request 1: [0-9 ]*[0-9]' || { echo "FAIL: embed_engine_c printed no tokens"; exit 1; }
exit 0
