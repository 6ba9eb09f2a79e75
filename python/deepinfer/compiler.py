"""The compiler from Python: targets, an op through the pipeline (emit), and the compile matrix.
Nothing here needs a GPU; NVRTC runs in-process."""

from . import _deepinfer as _core


def targets(include_local=True):
    """The target presets (docs/targets.md) and bare sm_XX names as dicts (name, arch, SMs, shared
    memory per CTA cap, ...); with `include_local`, the local GPU as 'local' when there is one."""
    out = list(_core.targets())
    if include_local:
        try:
            out.append(_core.local_gpu(0))
        except _core.Error:
            pass
    return out


def local_gpu(ordinal=0):
    """The local GPU's profile (name 'local', arch, SMs, shared memory, L2, driver, memory);
    raises deepinfer.Error saying why there is none (no driver, no device)."""
    return _core.local_gpu(ordinal)


def shape_params(op):
    """The shape parameters of `op` for emit/compile: [(name, default, help)]."""
    return [tuple(p) for p in _core.shape_params(op)]


def emit(op, shapes=None, *, target="sm_80", stage="cuda", config=None, attrs=None, cache=True):
    """One op through the pipeline, as text at `stage`:

    'mlir' (the `di` IR after di-specialize-target), 'cuda' (the emitted CUDA C++), 'ptx' and
    'resources' (the NVRTC compile: PTX, and the register / shared memory / spill report with the
    launch plan, as `deepinfer-jit emit --stage resources` prints it), or 'all': a dict of every
    stage (input/specialized/emitted IR, CUDA, PTX, cubin bytes, resources, NVRTC log).

    shapes: {'B': 6, ...} (see shape_params(op)); target: a preset, 'sm_80'..'sm_90', or 'local';
    config: {'knob': value} instead of the default; attrs: attribute overrides. `cache`: compile
    through the on-disk kernel cache (the JIT's key for a cubin of that arch).
    """
    return _core.emit(op, dict(shapes or {}), target, stage, dict(config or {}), dict(attrs or {}), bool(cache))


def compile(ops=None, targets=None, *, shapes=None, all_configs=False, jobs=0, cache=True):
    """Compiles ops x targets x configs with NVRTC (in parallel, through the kernel cache) and
    returns one dict per config: op, shape, target, arch, config, default, kernel, registers,
    smem_bytes (static + dynamic), spill_bytes, mma_sync (tensor-core PTX), cache_hit, error.

    ops: a name or a list (default: every op); targets: a name or a list (default: sm_80, sm_86,
    sm_89, sm_90); shapes: shape parameters applied to the ops that have them; all_configs: every
    candidate that fits the target, not only the default. Raises on a setup error (unknown op or
    target); a config that fails to compile has its `error` set.
    """
    ops = [ops] if isinstance(ops, str) else list(ops or _core.op_names())
    targets = [targets] if isinstance(targets, str) else list(targets or ("sm_80", "sm_86", "sm_89", "sm_90"))
    return _core.compile(ops, targets, dict(shapes or {}), bool(all_configs), int(jobs), bool(cache))
