"""Tensors in and out through DLPack, and the CUDA stream a call runs on.

No framework is imported here: torch, CuPy and NumPy are recognised by the module a tensor's type
comes from, and used only when the caller already uses them.
"""

import sys

DL_CPU = 1
DL_CUDA = 2

# The package's dtype names (OpSignature.h) per framework. NumPy and CuPy have no bfloat16: bf16
# tensors are uint16 arrays holding the bit patterns.
_NUMPY_DTYPES = {"BF16": "uint16", "F32": "float32", "I32": "int32", "I64": "int64", "U8": "uint8"}
_TORCH_DTYPES = {"BF16": "bfloat16", "F32": "float32", "I32": "int32", "I64": "int64", "U8": "uint8"}


def framework(t):
    """'torch', 'cupy', 'numpy', ... : the top-level module of a tensor's type."""
    return type(t).__module__.split(".")[0]


def device_of(name, t):
    """(DLPack device type, device id) of tensor `name`."""
    if not hasattr(t, "__dlpack__") or not hasattr(t, "__dlpack_device__"):
        raise TypeError(f"tensor '{name}' ({type(t).__module__}.{type(t).__name__}) does not support DLPack "
                        "(__dlpack__ / __dlpack_device__); pass a torch tensor, a CuPy or a NumPy array")
    dev_type, dev_id = t.__dlpack_device__()
    return int(dev_type), int(dev_id)


def device_name(dev):
    return f"cuda:{dev[1]}" if dev[0] == DL_CUDA else "cpu" if dev[0] == DL_CPU else f"DLPack device {dev}"


def stream_handle(stream):
    """A CUstream handle (int) from `stream=`: an int, an object with the __cuda_stream__ protocol
    (returns (version, handle)), a torch.cuda.Stream (.cuda_stream) or a CuPy stream (.ptr)."""
    if isinstance(stream, bool):
        raise TypeError("stream= must be a CUDA stream handle (int) or a stream object, not a bool")
    if isinstance(stream, int):
        if stream < 0:
            raise ValueError(f"stream={stream}: a CUstream handle is not negative")
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        if isinstance(value, tuple) and len(value) == 2:
            return int(value[1])
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"{type(stream).__name__}.__cuda_stream__ gave {value!r}, not (version, handle)")
    for attr in ("cuda_stream", "ptr"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(f"stream= got a {type(stream).__module__}.{type(stream).__name__}: pass a CUstream handle (int) "
                    "or an object with __cuda_stream__ (torch.cuda.Stream, cupy.cuda.Stream, cuda.core Stream)")


def current_stream(tensors, device_id):
    """The caller's current stream on `device_id`: torch's for torch tensors, CuPy's for CuPy
    arrays; with neither among the tensors, torch's current stream when torch is in use (already
    imported and CUDA initialised), else 0 (the legacy default stream)."""
    for t in tensors:
        fw = framework(t)
        if fw == "torch":
            return sys.modules["torch"].cuda.current_stream(device_id).cuda_stream
        if fw == "cupy":
            cupy = sys.modules["cupy"]
            with cupy.cuda.Device(device_id):
                return cupy.cuda.get_current_stream().ptr
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.current_stream(device_id).cuda_stream
    return 0


def exportable(t):
    """`t` as DLPack can export it without a copy: NumPy arrays of ml_dtypes' bfloat16 as uint16
    bit patterns, torch tensors that require grad detached."""
    fw = framework(t)
    if fw == "numpy" and getattr(t, "dtype", None) is not None and t.dtype.name == "bfloat16":
        return t.view(sys.modules["numpy"].uint16)
    if fw == "torch" and getattr(t, "requires_grad", False):
        return t.detach()
    return t


def capsule(name, t, dev, stream):
    """A DLPack capsule of `t`; for a CUDA tensor its producer first orders its pending work
    before `stream` (the array API's stream argument: 1 means the legacy default stream)."""
    t = exportable(t)
    try:
        if dev[0] == DL_CUDA:
            return t.__dlpack__(stream=1 if stream in (0, 1) else stream)
        try:
            return t.__dlpack__()
        except BufferError:
            # Read-only NumPy arrays export only as versioned capsules (with a read-only flag).
            return t.__dlpack__(max_version=(1, 0))
    except (BufferError, TypeError, RuntimeError) as e:
        raise TypeError(f"tensor '{name}' ({type(t).__module__}.{type(t).__name__}) could not be exported "
                        f"through DLPack: {e}") from e


def empty_like_framework(template, name, dtype, shape, dev):
    """An uninitialised output of the template's framework on its device."""
    fw = framework(template)
    shape = tuple(int(s) for s in shape)
    if fw == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device=template.device)
    if fw == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(dev[1]):
            return cupy.empty(shape, dtype=_NUMPY_DTYPES[dtype])
    if fw == "numpy":
        return sys.modules["numpy"].empty(shape, dtype=_NUMPY_DTYPES[dtype])
    raise TypeError(f"cannot allocate output '{name}' like a {type(template).__module__}.{type(template).__name__}: "
                    f"pass {name}= (a {dtype} tensor of shape {list(shape)})")


def bf16_to_float32(bits):
    """NumPy uint16 bf16 bit patterns -> float32 (exact)."""
    import numpy as np
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        raise TypeError(f"bf16 bit patterns are uint16, got {bits.dtype}")
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(values):
    """float32 -> NumPy uint16 bf16 bit patterns, rounded to nearest even (NaN stays NaN)."""
    import numpy as np
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, ((u >> 16) | np.uint32(0x40)).astype(np.uint16), rounded)
