"""The C++ reference through deepinfer.ops on NumPy arrays (the CPU backend): known values worked
out by hand from docs/ops.md, every op on the C++ test cases against the run-op path, in/out
tensors updated in place, strided outputs where the kernel takes them."""

import numpy as np
import pytest

import deepinfer
from deepinfer import ops, testing


def test_topk_known_values():
    scores = np.array([[0.5, 3, -1, 3, 2],     # ties: the lower index first; result sorted ascending
                       [1, 1, 1, 1, 1],        # all tied: the first k
                       [9, 8, 7, 6, 5],        # lens 2 <= k: 0..n-1, then -1
                       [4, 4, 4, 4, 4]],       # lens 0: all -1
                      dtype=np.float32)
    lens = np.array([5, 5, 2, 0], dtype=np.int32)
    got = ops.topk(scores=scores, lens=lens, k=3)
    np.testing.assert_array_equal(got, [[1, 3, 4], [0, 1, 2], [0, 1, -1], [-1, -1, -1]])
    assert got.dtype == np.int32
    assert ops.last_launch()["backend"] == "reference"


def test_combine_topk_swa_known_values():
    # Two requests: 3 query tokens of a 10-token sequence, then 2 of a 3-token one (b = 1 adds M).
    window, ratio, K, M, N = 4, 4, 2, 16, 4
    topk = np.array([[0, 3], [1, 9], [-1, 2], [0, 1], [2, 0]], dtype=np.int32)
    qsl = np.array([0, 3, 5], dtype=np.int32)
    seq_lens = np.array([10, 3], dtype=np.int32)
    gather_lens = np.array([10, 3], dtype=np.int32)
    rows, lens = ops.combine_topk_swa(topk_indices=topk, query_start_loc=qsl, seq_lens=seq_lens,
                                      gather_lens=gather_lens, window=window, ratio=ratio, topk=K, M=M, N=N)
    W = 128  # round_up(K + window, 128)
    expect = np.full((5, W), -1, dtype=np.int32)
    # request 0, positions 7, 8, 9: topk_len = min((pos + 1) // 4, 2) = 2; swa_start = pos - 3
    expect[0, :6] = [0, 3, N + 4, N + 5, N + 6, N + 7]
    expect[1, :6] = [1, -1, N + 5, N + 6, N + 7, N + 8]          # 9 >= N: invalid
    expect[2, :6] = [-1, 2, N + 6, N + 7, N + 8, N + 9]          # -1 stays -1
    # request 1, positions 1, 2: topk_len = (pos + 1) // 4 = 0; swa_start = 0
    expect[3, :2] = [M + N + 0, M + N + 1]
    expect[4, :3] = [M + N + 0, M + N + 1, M + N + 2]
    np.testing.assert_array_equal(rows, expect)
    np.testing.assert_array_equal(lens, [6, 6, 6, 2, 3])


def test_mhc_collapse_known_values():
    T, C = 2, 128
    x = np.zeros((T, 4, C), dtype=np.float32)
    x[:, 0, :] = 1.0
    x[:, 1, :] = 2.0
    x[:, 2, :] = -4.0
    x[:, 3, :] = np.arange(C, dtype=np.float32) / 64.0  # exact in bf16
    pre = np.array([[1.0, 0.5, 0.25, 0.0], [0.0, 0.0, 0.0, 2.0]], dtype=np.float32)
    h = ops.mhc_collapse(x=deepinfer.float32_to_bf16(x), pre=pre)
    assert h.dtype == np.uint16 and h.shape == (T, C)
    hf = deepinfer.bf16_to_float32(h)
    np.testing.assert_array_equal(hf[0], np.full(C, 1.0 + 1.0 - 1.0, dtype=np.float32))
    np.testing.assert_array_equal(hf[1], 2.0 * np.arange(C, dtype=np.float32) / 64.0)


def test_bf16_helpers_round_to_nearest_even():
    f = np.array([1.0, -2.5, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, np.inf, np.nan], dtype=np.float32)
    b = deepinfer.float32_to_bf16(f)
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1); 1 + 3*2^-8 rounds up to 1 + 2^-6.
    assert list(b[:5]) == [0x3F80, 0xC020, 0x3F80, 0x3F82, 0x7F80]
    assert np.isnan(deepinfer.bf16_to_float32(b)[5])
    np.testing.assert_array_equal(deepinfer.bf16_to_float32(b[:2]), [1.0, -2.5])


@pytest.mark.parametrize("op", ops.names())
def test_every_op_matches_the_run_op_path(op):
    """NumPy arrays through deepinfer.ops (views of the caller's memory, outputs allocated with
    NumPy, in/out tensors written in place) give the bytes the run-op path gives."""
    for case in testing.cases(op, seed=7)[:3]:
        want = testing.reference(op, case.attrs, case.inputs)
        inputs = {n: a.copy() for n, a in case.inputs.items()}
        got = getattr(ops, op)(**inputs, **case.attrs)
        outs = testing.output_names(op)
        got = dict(zip(outs, got)) if len(outs) > 1 else {outs[0]: got}
        for name in outs:
            assert got[name].dtype == want[name].dtype, (op, case.name, name)
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{op} [{case.name}] {name}")
            if name in case.inputs:  # in/out: the caller's array itself was updated
                assert got[name] is inputs[name]


def test_kv_quant_insert_updates_the_callers_cache_in_place():
    case = testing.cases("kv_quant_insert", seed=3)[0]
    inputs = {n: a.copy() for n, a in case.inputs.items()}
    cache = inputs["k_cache"]
    before = cache.copy()
    out = ops.kv_quant_insert(**inputs, **case.attrs)
    assert out is cache
    assert not np.array_equal(cache, before)
    np.testing.assert_array_equal(cache, testing.reference("kv_quant_insert", case.attrs, case.inputs)["k_cache"])


def test_gather_kcache_writes_a_strided_view_and_nothing_else():
    case = testing.cases("gather_kcache", seed=5)[0]
    out0 = case.inputs["out"]
    R, Mrows, D = out0.shape
    big = np.random.default_rng(1).integers(0, 2**16, size=(R, Mrows + 2, D + 64), dtype=np.uint16)
    view = big[:, 1:Mrows + 1, 32:32 + D]
    view[...] = out0
    before = big.copy()
    inputs = dict(case.inputs, out=view)
    got = ops.gather_kcache(**inputs, **case.attrs)
    assert got is view
    want = testing.reference("gather_kcache", case.attrs, case.inputs)["out"]
    expect = before.copy()
    expect[:, 1:Mrows + 1, 32:32 + D] = want
    np.testing.assert_array_equal(big, expect)


def test_outputs_given_by_keyword_are_written_and_returned():
    case = testing.cases("sparse_mla_prefill", seed=2)[0]
    T, H = case.inputs["q"].shape[:2]
    out = np.full((T, H, 512), 0x7F7F, dtype=np.uint16)
    lse = np.full((T, H), np.nan, dtype=np.float32)
    got_out, got_lse = ops.sparse_mla_prefill(**case.inputs, **case.attrs, out=out, lse=lse)
    assert got_out is out and got_lse is lse
    want = testing.reference("sparse_mla_prefill", case.attrs, case.inputs)
    np.testing.assert_array_equal(out, want["out"])
    np.testing.assert_array_equal(lse, want["lse"])


def test_read_only_inputs_are_accepted():
    scores = np.array([[3, 1, 2]], dtype=np.float32)
    scores.flags.writeable = False
    lens = np.array([3], dtype=np.int32)
    np.testing.assert_array_equal(ops.topk(scores=scores, lens=lens, k=2), [[0, 2]])


def test_ml_dtypes_bfloat16_arrays_travel_as_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    T, C = 1, 128
    x = np.ones((T, 4, C), dtype=ml_dtypes.bfloat16)
    pre = np.array([[0.5, 0.5, 0.0, 0.0]], dtype=np.float32)
    h = ops.mhc_collapse(x=x, pre=pre)
    assert h.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(h.astype(np.float32), np.ones((T, C), dtype=np.float32))


@pytest.mark.parametrize("op", ops.names())
def test_comparison_helpers_take_each_outputs_dtype_from_the_attributes(op):
    # weight_gemm's bf16 epilogues give a bf16 `y` where the signature says f32: the comparison
    # helpers must import each output in the dtype the reference produced, and a reference
    # compared with itself passes.
    for case in testing.cases(op, seed=11)[:4]:
        want = testing.reference(op, case.attrs, case.inputs)
        from_kernel = testing.expected_from_kernel_outputs(op, case.attrs, case.inputs, want)
        for n in testing.output_names(op):
            rep = testing.compare(op, n, from_kernel.get(n, want[n]), want[n], case.attrs, case.inputs)
            assert rep["ok"], (op, case.name, n, rep)
