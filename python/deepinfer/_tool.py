"""The deepinfer-jit executable shipped with the package (deepinfer/bin), for the verbs whose
logic lives in the tool rather than the library (tune, cache archives)."""

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from . import _deepinfer as _core


def tool_path():
    """$DEEPINFER_JIT, else the package's bin/deepinfer-jit, else deepinfer-jit on PATH."""
    env = os.environ.get("DEEPINFER_JIT")
    if env:
        return env
    here = Path(__file__).resolve().parent / "bin" / "deepinfer-jit"
    if here.exists():
        return str(here)
    found = shutil.which("deepinfer-jit")
    if found:
        return found
    raise _core.Error(f"deepinfer-jit not found (looked for $DEEPINFER_JIT, {here}, PATH)")


def run_tool(args, *, cache_dir=None, progress=None):
    """Runs `deepinfer-jit ARGS`; returns its stdout. stderr lines go to `progress` (a callable;
    default: sys.stderr) as they come. A non-zero exit raises deepinfer.Error with the last lines."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["DEEPINFER_JIT_CACHE_DIR"] = str(cache_dir)
    proc = subprocess.Popen([tool_path(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    out_chunks, err_lines = [], []

    def read_stdout():
        out_chunks.append(proc.stdout.read())

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    for line in proc.stderr:
        err_lines.append(line)
        if progress is not None:
            progress(line.rstrip("\n"))
        else:
            sys.stderr.write(line)
    reader.join()
    rc = proc.wait()
    out = "".join(out_chunks)
    if rc != 0:
        tail = "".join(err_lines[-20:]).strip() or out.strip()[-2000:]
        raise _core.Error(f"deepinfer-jit {' '.join(args)}: exit {rc}: {tail}")
    return out


def main():
    """The `deepinfer-jit` console script: runs the packaged tool with the same arguments."""
    tool = tool_path()
    os.execv(tool, [tool, *sys.argv[1:]])
