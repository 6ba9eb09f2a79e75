"""Test support: the op cases of the C++ GPU tests (tests/cases) and their comparison rules, so
Python tests compare a kernel with the reference exactly as the C++ GPU suite does. Needs NumPy.

Arrays are NumPy arrays; bf16 tensors are uint16 arrays of bit patterns (`dtypes` says which).
"""

import collections

import numpy as np

from . import _deepinfer as _core

Case = collections.namedtuple("Case", ["name", "op", "attrs", "inputs", "dtypes"])


def cases(op, seed, large=False):
    """Fresh random inputs for `op` from `seed` (same seed, same bytes), covering the edge sizes of
    the C++ generators; in/out tensors arrive poisoned. `large` adds > 2 GiB gather cases and the
    quantized GEMMs' decode cases at the model's shapes."""
    out = []
    for c in _core.testing.cases(op, int(seed), bool(large)):
        inputs = {n: np.from_dlpack(a) for n, a in c["inputs"].items()}
        out.append(Case(c["name"], c["op"], dict(c["attrs"]), inputs, dict(c["dtypes"])))
    return out


def output_names(op):
    """The outputs of `op` to compare (in/out tensors included)."""
    return list(_core.testing.output_names(op))


def compare(op, output, expected, actual, attrs, inputs):
    """Compares `actual` with `expected` by the op's rule (docs/ops.md: bit-exact for
    kv_quant_insert, gather_kcache, combine_topk_swa and topk; stated tolerances elsewhere).
    Returns {'ok', 'max_err', 'metric', 'detail'}."""
    return _core.testing.compare(op, output, np.ascontiguousarray(expected), np.ascontiguousarray(actual),
                                 dict(attrs), {n: np.ascontiguousarray(a) for n, a in inputs.items()})


def expected_from_kernel_outputs(op, attrs, inputs, actual):
    """Outputs whose expected values docs/ops.md defines on another output as the kernel produced
    it (mhc_fused_post_pre's next-sublayer outputs): {name: expected array}; empty for other ops."""
    got = _core.testing.expected_from_kernel_outputs(op, dict(attrs), inputs,
                                                     {n: np.ascontiguousarray(a) for n, a in actual.items()})
    return {n: np.from_dlpack(a) for n, a in got.items()}


def reference(op, attrs, inputs):
    """The C++ reference on dense copies of `inputs` (the run-op path): {output: array}."""
    got = _core.testing.reference(op, dict(attrs), {n: np.ascontiguousarray(a) for n, a in inputs.items()})
    return {n: np.from_dlpack(a) for n, a in got.items()}


def device_view(addr, dtype, shape, device_id=0):
    """A DLPack array that only describes CUDA memory at `addr` (dtype 'BF16', 'F32', ...); nothing
    reads or writes it. For error paths that must not need a GPU."""
    return _core.testing.device_view(int(addr), dtype, [int(s) for s in shape], int(device_id))


def to_torch(array, dtype, device):
    """A NumPy case array as a torch tensor on `device` (bf16 bit patterns as torch.bfloat16)."""
    import torch
    t = torch.from_numpy(np.ascontiguousarray(array))
    if dtype == "BF16":
        t = t.view(torch.bfloat16)
    return t.to(device)


def to_numpy(tensor, dtype):
    """A torch tensor (any device) as a NumPy array (bf16 as uint16 bit patterns)."""
    import torch
    t = tensor.detach().to("cpu").contiguous()
    if dtype == "BF16":
        t = t.view(torch.int16)
        return t.numpy().view(np.uint16)
    return t.numpy()
