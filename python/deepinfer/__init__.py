"""deepinfer: deepinfer-jit's kernels, compiler and engine from Python.

    import deepinfer
    deepinfer.targets()                                    # presets, and the local GPU
    print(deepinfer.emit("gather_kcache", target="sm_86", stage="ptx"))
    out, lse = deepinfer.ops.sparse_mla_decode(q=q, swa_cache=c, ...)   # torch/CuPy/NumPy tensors
    eng = deepinfer.Engine("/models/v41-tiny"); list(eng.generate([1, 2, 3], 16))

Tensors travel through DLPack (no copy for device tensors, no link against torch); see
deepinfer.ops for outputs and streams, deepinfer.engine for the engine's lifetimes.
"""

from . import _deepinfer
from ._deepinfer import Error, __version__
from . import cache, ops
from ._tensors import bf16_to_float32, float32_to_bf16
from .compiler import compile, emit, local_gpu, shape_params, targets
from .engine import Engine, StepEvent, make_model
from .tune import tune, tune_plan

__all__ = ["Error", "__version__", "cache", "ops", "targets", "local_gpu", "shape_params", "emit", "compile",
           "tune", "tune_plan", "Engine", "StepEvent", "make_model", "bf16_to_float32", "float32_to_bf16"]
