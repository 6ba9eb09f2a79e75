#!/usr/bin/env bash
# The Python package's tests on a machine with a GPU, Python, torch (CuPy optional) and no build
# tools: the wheels of wheelhouse/ (scripts/python-wheels.sh, built for this machine's Python) are
# unpacked into a private directory (no pip install, nothing changes in the system's Python) and
# pytest runs python/tests against them: the GPU tests, the torch examples and the CPU tests.
# Extra arguments go to pytest (e.g. -m gpu, -k stream). The log goes to $OUT (./gpu-results).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
shopt -s nullglob
wheels=(wheelhouse/*.whl)
if ((${#wheels[@]} == 0)); then
  echo "gpu-python-tests: no wheels in wheelhouse/ (run scripts/python-wheels.sh where the project builds)" >&2
  exit 1
fi
PKG=$(mktemp -d)/site
mkdir -p "$PKG"
for w in "${wheels[@]}"; do "$PY" -m zipfile -e "$w" "$PKG"; done
chmod +x "$PKG"/deepinfer/bin/deepinfer-jit  # zip archives do not keep the executable bit
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
export DEEPINFER_JIT_CACHE_DIR=${DEEPINFER_JIT_CACHE_DIR:-$(mktemp -d)}
"$PY" - <<'PYEOF' 2>&1 | tee "$OUT/python-env.txt"
import sys, deepinfer
print("python", sys.version.split()[0], "deepinfer", deepinfer.__version__, deepinfer.__file__)
try:
    g = deepinfer.local_gpu()
    print("GPU", g["gpu_name"], g["arch"], "driver", g.get("driver"))
except deepinfer.Error as e:
    print("no GPU:", e)
for mod in ("torch", "cupy", "numpy"):
    try:
        m = __import__(mod)
        print(mod, m.__version__)
    except ImportError as e:
        print(mod, "missing:", e)
PYEOF
"$PY" -m pytest -v -rs -p no:cacheprovider python/tests "$@" 2>&1 | tee "$OUT/python-tests.log"
exit "${PIPESTATUS[0]}"
