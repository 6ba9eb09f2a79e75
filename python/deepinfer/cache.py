"""The on-disk caches: compiled kernels (content-keyed, shared by the JIT, compile and emit) and
the tuning files that `tune` writes in them.

The directory is $DEEPINFER_JIT_CACHE_DIR, else $XDG_CACHE_HOME/deepinfer-jit, else
~/.cache/deepinfer-jit; every function takes `dir=` to use another. The JIT of this process reads
the environment variable when it first launches a kernel on a GPU.
"""

import os

from . import _deepinfer as _core
from ._tool import run_tool


def _dir(dir):
    return "" if dir is None else os.fspath(dir)


def directory():
    """The default cache directory."""
    return _core.cache_default_dir()


def entries(dir=None):
    """{'dir', 'entries': [{'key', 'bytes', 'mtime'}], 'tuning_files': [names]}."""
    return _core.cache_list(_dir(dir))


def verify(dir=None):
    """Checks every entry's header, size and SHA-256; corrupt entries are evicted. Returns the
    problems found (empty: all good)."""
    return list(_core.cache_verify(_dir(dir)))


def clear(dir=None):
    """Removes every kernel entry; returns how many."""
    return _core.cache_clear(_dir(dir))


def tuning(dir=None):
    """Every tuning file: its key (GPU, compute capability, SMs, driver, NVRTC, generator) and
    entries (target, op, dtypes, bucket, default, winner, timings per config)."""
    return _core.tuning_files(_dir(dir))


def export_archive(file, dir=None):
    """Writes one archive of every kernel entry and tuning file (`deepinfer-jit cache export`)."""
    args = ["cache", "export", os.fspath(file)] + (["--dir", _dir(dir)] if dir is not None else [])
    return run_tool(args).strip()


def import_archive(file, dir=None, replace=False):
    """Imports an archive, checking every record's hash and contents (`deepinfer-jit cache
    import`); `replace` replaces an existing tuning file of the same key."""
    args = ["cache", "import", os.fspath(file)] + (["--dir", _dir(dir)] if dir is not None else [])
    return run_tool(args + (["--replace"] if replace else [])).strip()
