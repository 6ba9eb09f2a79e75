"""Every `di` kernel op as a function, generated from the op signatures (docs/ops.md §11 names).

    out, lse = deepinfer.ops.sparse_mla_decode(q=q, swa_cache=cache, swa_indices=idx, swa_lens=lens,
                                               attn_sink=sink, swa_block_size=64)

Tensors are keyword arguments by canonical name, attributes too. CUDA tensors (torch, CuPy) run
the generated kernel in place on the caller's stream: the kernel reads and writes the caller's
memory through DLPack, no copy. CPU tensors (NumPy, torch CPU) run the C++ reference.

Outputs: every output is also a keyword argument by its canonical name (`out=`, `lse=`, ...):
pass a tensor to have the op write into it (memory you own: a view of a larger buffer, memory
captured in a CUDA graph); an output left out is allocated by the framework of the op's first
input, on its device (torch.empty, cupy.empty, numpy.empty; bf16 as uint16 for NumPy and CuPy), so
the caller's allocator and its stream rules apply. In/out tensors (kv_quant_insert's
`k_cache`, gather_kcache's `out`, mhc_fused_post_pre's `post` and `comb`) are updated in place and
returned. One output is returned as the tensor; several as a named tuple in signature order.

Common keywords: stream= (an int CUstream, an object with __cuda_stream__, a torch/CuPy stream;
default: the current stream of the tensors' framework), target= ('sm_80', 'sm_86', ...: run that
specialization's PTX; default: the GPU's own arch), config= ({'knob': value} replacing the
default or tuned config). A kernel compiles on its first use (seconds; the on-disk kernel cache
makes later processes fast); warm up before capturing a CUDA graph.
"""

import collections
import inspect
import threading

from . import _deepinfer as _core
from . import _tensors

_REQUIRED = inspect.Parameter.empty
_local = threading.local()


class _OpSpec:
    def __init__(self, sig):
        self.op = sig["op"]
        self.inputs = [(n, dt, opt) for n, dt, opt, _ in sig["inputs"]]
        self.outputs = [(n, dt) for n, dt, _, _ in sig["outputs"]]
        input_names = {n for n, _, _ in self.inputs}
        self.in_out = [n for n, _ in self.outputs if n in input_names]
        self.pure_outputs = [n for n, _ in self.outputs if n not in input_names]
        self.attrs = [(n, kind, required, dflt) for n, kind, required, dflt in sig["attrs"]]
        clash = (input_names | set(self.pure_outputs)) & {n for n, *_ in self.attrs}
        if clash:
            raise RuntimeError(f"{self.op}: tensors and attributes share names {sorted(clash)}")
        names = [n for n, _ in self.outputs]
        self.result_type = (collections.namedtuple(f"{self.op}_outputs", names) if len(names) > 1 else None)

    def signature(self):
        kw = inspect.Parameter.KEYWORD_ONLY
        params = [inspect.Parameter(n, kw, default=None if opt else _REQUIRED) for n, _, opt in self.inputs]
        params += [inspect.Parameter(n, kw, default=None) for n in self.pure_outputs]
        params += [inspect.Parameter(n, kw, default=_REQUIRED if req else dflt) for n, _, req, dflt in self.attrs]
        params += [inspect.Parameter(n, kw, default=None) for n in ("stream", "target", "config")]
        return inspect.Signature(params)

    def doc(self):
        lines = [f"{self.op}: the generated kernel on CUDA tensors, the C++ reference on CPU tensors.", "",
                 "Tensors (canonical names, docs/ops.md §11):"]
        for n, dt, opt in self.inputs:
            role = "in/out, updated in place" if n in self.in_out else "optional input" if opt else "input"
            lines.append(f"  {n}: {dt} ({role})")
        for n in self.pure_outputs:
            dt = dict(self.outputs)[n]
            lines.append(f"  {n}: {dt} (output: pass a tensor to write into, or leave it out to have it allocated)")
        if self.attrs:
            lines.append("Attributes:")
            for n, kind, req, dflt in self.attrs:
                lines.append(f"  {n}: {kind}" + ("" if req else f" = {dflt}"))
        lines += ["Returns: " + (", ".join(n for n, _ in self.outputs)) +
                  (" (a named tuple)" if self.result_type else ""),
                  "Keywords: stream=, target=, config= (see deepinfer.ops)."]
        return "\n".join(lines)


def _run(spec, bound):
    stream = bound.pop("stream")
    target = bound.pop("target")
    config = bound.pop("config")
    attrs = {n: bound[n] for n, *_ in spec.attrs}
    tensors = {n: bound[n] for n, _, _ in spec.inputs if bound[n] is not None}
    tensors.update({n: bound[n] for n in spec.pure_outputs if bound[n] is not None})
    devices = {n: _tensors.device_of(n, t) for n, t in tensors.items()}
    first = next(iter(tensors))
    dev = devices[first]
    for n, d in devices.items():
        if d != dev:
            raise ValueError(f"{spec.op}: tensor '{n}' is on {_tensors.device_name(d)} but tensor '{first}' is on "
                             f"{_tensors.device_name(dev)}; all tensors of one call must be on one device")
    handle = 0
    if dev[0] == _tensors.DL_CUDA:
        handle = (_tensors.stream_handle(stream) if stream is not None
                  else _tensors.current_stream(tensors.values(), dev[1]))
    elif stream is not None:
        raise ValueError(f"{spec.op}: stream= applies to CUDA tensors; these are on {_tensors.device_name(dev)}")
    template = tensors[first]
    allocated = {}

    def alloc(name, dtype, shape):
        t = _tensors.empty_like_framework(template, name, dtype, shape, dev)
        allocated[name] = t
        return _tensors.capsule(name, t, dev, handle)

    capsules = {n: _tensors.capsule(n, t, devices[n], handle) for n, t in tensors.items()}
    info = _core.run_op(spec.op, capsules, attrs, alloc, handle, target or "", dict(config or {}))
    _local.info = info
    if allocated and _tensors.framework(template) == "torch" and dev[0] == _tensors.DL_CUDA:
        _record_on_stream(allocated.values(), handle, dev[1])
    results = []
    for name, _ in spec.outputs:
        t = allocated.get(name)
        if t is None:
            t = tensors[name]
        results.append(_like_input_bf16(t, name, spec, bound))
    return spec.result_type(*results) if spec.result_type else results[0]


def _record_on_stream(tensors, handle, device_id):
    # torch allocated the outputs on its current stream; when the kernel ran on another stream the
    # caching allocator must not hand their memory out again before that stream is done.
    import torch
    if handle == torch.cuda.current_stream(device_id).cuda_stream:
        return
    s = torch.cuda.ExternalStream(handle, device=torch.device("cuda", device_id))
    for t in tensors:
        t.record_stream(s)


def _like_input_bf16(t, name, spec, bound):
    # NumPy outputs are uint16 bf16 bit patterns; when the caller's bf16 inputs were ml_dtypes'
    # bfloat16 arrays, give the outputs that dtype too.
    if _tensors.framework(t) != "numpy" or t.dtype.name != "uint16" or dict(spec.outputs).get(name) != "BF16":
        return t
    for n, dt, _ in spec.inputs:
        x = bound.get(n)
        if dt == "BF16" and x is not None and _tensors.framework(x) == "numpy" and x.dtype.name == "bfloat16":
            return t.view(x.dtype)
    return t


def _make(spec):
    sig = spec.signature()

    def fn(**kwargs):
        try:
            b = sig.bind(**kwargs)
        except TypeError as e:
            raise TypeError(f"{spec.op}(): {e}") from None
        b.apply_defaults()
        return _run(spec, dict(b.arguments))

    fn.__name__ = fn.__qualname__ = spec.op
    fn.__signature__ = sig
    fn.__doc__ = spec.doc()
    fn.__module__ = __name__
    return fn


def last_launch():
    """What the calling thread's last op call ran: backend ('cuda' or 'reference'), and for the
    kernel its name, target, arch, config and whether it ran as PTX; outputs it allocated."""
    return getattr(_local, "info", None)


_SPECS = {s["op"]: _OpSpec(s) for s in _core.op_signatures()}
for _name, _spec in _SPECS.items():
    globals()[_name] = _make(_spec)
__all__ = sorted(_SPECS) + ["last_launch", "names"]


def names():
    """The canonical op names."""
    return list(_SPECS)
