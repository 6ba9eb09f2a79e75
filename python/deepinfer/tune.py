"""Autotuning from Python: `deepinfer-jit tune` (the timing loop lives in the tool), run as a
child process so that a candidate which breaks the CUDA context cannot take the caller's process
with it. Results land in the tuning cache, which the JIT of every later process consults
(deepinfer.cache.tuning() reads them)."""

import os

from ._tool import run_tool


def _filters(ops, buckets):
    args = []
    for op in [ops] if isinstance(ops, str) else (ops or []):
        args += ["--op", op]
    for b in [buckets] if isinstance(buckets, str) else (buckets or []):
        args += ["--bucket", b]
    return args


def tune(ops=None, buckets=None, *, target=None, config=None, samples=None, warmup=None, margin=None, jobs=None,
         seed=None, retime=False, remeasure_roofline=False, cache_dir=None, progress=None):
    """Times every candidate config of the model's kernel ops on the local GPU over the shape
    buckets and records the winners; returns the summary table `deepinfer-jit tune` prints.

    ops / buckets: names or lists (default: all); target: tune that specialization's PTX (e.g.
    'sm_80') on this GPU; config: a model config.json or directory for the shapes (default:
    V4.1-Flash); samples (30), warmup (3), margin (0.03), jobs, seed: as the tool's flags; retime:
    time candidates again that already have a timing. progress: called with each progress line
    (default: printed to stderr). Without a GPU, raises deepinfer.Error saying so.
    """
    args = ["tune"] + _filters(ops, buckets)
    for flag, value in (("--target", target), ("--config", config), ("--samples", samples),
                        ("--warmup", warmup), ("--margin", margin), ("--jobs", jobs), ("--seed", seed)):
        if value is not None:
            args += [flag, os.fspath(value) if flag == "--config" else str(value)]
    if retime:
        args.append("--retime")
    if remeasure_roofline:
        args.append("--remeasure-roofline")
    return run_tool(args, cache_dir=cache_dir, progress=progress)


def tune_plan(target, ops=None, buckets=None, *, config=None, check_inputs=False):
    """The tuning plan without a GPU: each op/bucket with its shape, candidate count and default
    config for `target` (`deepinfer-jit tune --plan`)."""
    args = ["tune", "--plan", "--target", target] + _filters(ops, buckets)
    if config is not None:
        args += ["--config", os.fspath(config)]
    if check_inputs:
        args.append("--check-inputs")
    return run_tool(args)
