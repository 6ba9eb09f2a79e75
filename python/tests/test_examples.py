"""The torch examples (examples/python) run to completion where torch is installed: on cuda:0
when torch sees a GPU, else on the CPU through the reference. Skipped without torch."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


@pytest.mark.parametrize("script", ["torch_op.py", "torch_custom_op.py"])
def test_example_runs(script):
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ))
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    print(r.stdout)
