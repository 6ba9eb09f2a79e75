"""Bad tensors and arguments get errors that name the tensor (or argument) and what was expected,
before anything is written; none of this needs a GPU."""

import numpy as np
import pytest

import deepinfer
from deepinfer import ops, testing


def topk_args(**over):
    args = dict(scores=np.zeros((2, 8), dtype=np.float32), lens=np.array([8, 3], dtype=np.int32), k=4)
    args.update(over)
    return args


def error_of(fn, **kwargs):
    with pytest.raises((deepinfer.Error, TypeError, ValueError)) as e:
        fn(**kwargs)
    return str(e.value)


def test_wrong_dtype_names_the_tensor():
    msg = error_of(ops.topk, **topk_args(scores=np.zeros((2, 8), dtype=np.float16)))
    assert "tensor 'scores' is float16, expected float32" in msg
    msg = error_of(ops.topk, **topk_args(lens=np.array([8, 3], dtype=np.int64)))
    assert "tensor 'lens' is int64, expected int32" in msg


def test_bf16_takes_uint16_bits_but_not_other_16_bit_types():
    x = np.zeros((1, 4, 128), dtype=np.int16)
    msg = error_of(ops.mhc_collapse, x=x, pre=np.zeros((1, 4), dtype=np.float32))
    assert "tensor 'x' is int16, expected bfloat16 (or uint16 holding bf16 bits)" in msg


def test_wrong_rank_and_shape_name_the_tensor():
    msg = error_of(ops.topk, **topk_args(scores=np.zeros(8, dtype=np.float32)))
    assert "'scores'" in msg and "rank" in msg
    msg = error_of(ops.topk, **topk_args(lens=np.array([8, 3, 1], dtype=np.int32)))
    assert "'lens'" in msg


def test_non_contiguous_input_is_refused_where_the_kernel_reads_densely():
    wide = np.zeros((2, 16), dtype=np.float32)
    msg = error_of(ops.topk, **topk_args(scores=wide[:, ::2]))
    assert "tensor 'scores' is not contiguous" in msg and "strides [16, 2]" in msg


def test_non_contiguous_output_is_refused_unless_the_kernel_takes_strides():
    case = testing.cases("sparse_mla_prefill", seed=2)[0]
    T, H = case.inputs["q"].shape[:2]
    out = np.zeros((T, H, 1024), dtype=np.uint16)[:, :, ::2]
    msg = error_of(ops.sparse_mla_prefill, **case.inputs, **case.attrs, out=out)
    assert "tensor 'out' is not contiguous" in msg


def test_negative_strides_are_refused():
    scores = np.zeros((2, 8), dtype=np.float32)[:, ::-1]
    msg = error_of(ops.topk, **topk_args(scores=scores))
    assert "'scores'" in msg


def test_output_of_the_wrong_shape_or_dtype_is_refused_and_nothing_is_written():
    bad = np.full((2, 5), 7, dtype=np.int32)
    msg = error_of(ops.topk, **topk_args(indices=bad))
    assert "tensor 'indices' has shape [2, 5], the kernel was built for [2, 4]" in msg
    assert (bad == 7).all()
    msg = error_of(ops.topk, **topk_args(indices=np.zeros((2, 4), dtype=np.int64)))
    assert "tensor 'indices' is int64, expected int32" in msg


def test_missing_and_unknown_arguments():
    msg = error_of(ops.topk, scores=np.zeros((2, 8), dtype=np.float32), k=4)
    assert "'lens'" in msg
    msg = error_of(ops.topk, **topk_args(lenz=np.zeros(2, dtype=np.int32)))
    assert "'lenz'" in msg
    msg = error_of(ops.topk, **topk_args(k=4.5))
    assert "attribute 'k' must be an int" in msg


def test_not_a_tensor():
    msg = error_of(ops.topk, **topk_args(scores=[[1.0, 2.0]]))
    assert "tensor 'scores' (builtins.list) does not support DLPack" in msg


def test_device_mismatch_names_both_tensors():
    # A CUDA device tensor (described only: never touched) next to a CPU array.
    scores = testing.device_view(0x10000, "F32", (2, 8), device_id=0)
    msg = error_of(ops.topk, scores=scores, lens=np.array([8, 3], dtype=np.int32), k=4)
    assert "tensor 'lens' is on cpu but tensor 'scores' is on cuda:0" in msg
    msg = error_of(ops.topk, scores=scores, lens=testing.device_view(0x20000, "I32", (2,), device_id=1), k=4)
    assert "tensor 'lens' is on cuda:1 but tensor 'scores' is on cuda:0" in msg


def test_cuda_tensors_without_a_gpu_say_why():
    try:
        deepinfer.local_gpu(0)
        pytest.skip("a GPU is present")
    except deepinfer.Error:
        pass
    v = testing.device_view
    msg = error_of(ops.topk, scores=v(0x10000, "F32", (2, 8)), lens=v(0x20000, "I32", (2,)), k=4,
                   indices=v(0x30000, "I32", (2, 4)))
    assert "GPU 0" in msg
    # An output the package would have to allocate for an unknown framework: asks for it by name.
    msg = error_of(ops.topk, scores=v(0x10000, "F32", (2, 8)), lens=v(0x20000, "I32", (2,)), k=4)
    assert "indices=" in msg


def test_cpu_tensors_refuse_kernel_only_arguments():
    msg = error_of(ops.topk, **topk_args(target="sm_80"))
    assert "CPU tensors run the C++ reference" in msg
    msg = error_of(ops.topk, **topk_args(stream=7))
    assert "stream= applies to CUDA tensors" in msg


def test_stream_argument_forms():
    from deepinfer._tensors import stream_handle

    class Proto:
        def __cuda_stream__(self):
            return (0, 1234)

    class TorchLike:
        cuda_stream = 99

    assert stream_handle(5) == 5
    assert stream_handle(Proto()) == 1234
    assert stream_handle(TorchLike()) == 99
    for bad in (True, -1, "s", object()):
        with pytest.raises((TypeError, ValueError)):
            stream_handle(bad)
