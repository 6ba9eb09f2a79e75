#!/usr/bin/env bash
# Wheels for a machine without a build toolchain, e.g. the GPU machine (Ubuntu 24.04, Python 3.12):
# the deepinfer wheel built for that Python (pyenv's 3.12 here; PYTHON=/path/to/python3.X picks
# another) and the wheels of pytest and its dependencies, all into wheelhouse/ (WHEELHOUSE=...).
# There: pip install --no-index --find-links wheelhouse deepinfer pytest
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  PYTHON=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3 2>/dev/null | sort -V | tail -1 || true)
fi
if [ -z "${PYTHON:-}" ] || ! "$PYTHON" -c 'import sysconfig, os; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null; then
  echo "python-wheels: no Python with headers (Debian 12 has no python3.12 package; pyenv's 3.12 is used when" \
       "present, or set PYTHON=/path/to/python3.X)" >&2
  exit 1
fi
OUT=${WHEELHOUSE:-wheelhouse}
mkdir -p "$OUT"
bash scripts/setup.sh
echo "python-wheels: building the deepinfer wheel with $PYTHON ($("$PYTHON" --version))"
"$PYTHON" -m pip wheel . --no-deps -w "$OUT"
"$PYTHON" -m pip download -q --only-binary=:all: -d "$OUT" pytest
ls -la "$OUT"
