"""pytest setup for the deepinfer package.

The `gpu` marker: tests that need a CUDA GPU and torch with CUDA; they skip, saying why, where
either is missing (`pytest -m gpu` runs only them, `-m "not gpu"` only the CPU ones). Every test
that compiles gets a private kernel cache directory (DEEPINFER_JIT_CACHE_DIR), so runs never read
or fill the user's cache, except the GPU tests, whose JIT is per process (see gpu_jit_cache).
"""

import os
import shutil
import tempfile

import pytest

import deepinfer

# One cache for the whole session's GPU kernels: the JIT of a process reads the variable once.
_SESSION_CACHE = tempfile.mkdtemp(prefix="deepinfer-pytest-cache-")
os.environ["DEEPINFER_JIT_CACHE_DIR"] = _SESSION_CACHE


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and torch with CUDA (skipped otherwise)")


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


def _gpu_reason():
    try:
        deepinfer.local_gpu(0)
    except deepinfer.Error as e:
        return f"no GPU: {e}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "gpu" not in item.keywords:
            continue
        if not checked:
            reason, checked = _gpu_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"GPU test skipped: {reason}"))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh kernel cache directory for this test (emit, compile and the cache verbs read the
    variable on every call)."""
    d = tmp_path / "kernel-cache"
    monkeypatch.setenv("DEEPINFER_JIT_CACHE_DIR", str(d))
    return d
