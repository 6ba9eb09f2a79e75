"""On a GPU (marker gpu; skipped without one or without torch): torch CUDA tensors through every
op's generated kernel against the C++ reference with the C++ GPU suite's comparison rules, zero-copy
checked by data pointer, stream ordering checked with side streams and events, CuPy arrays, and the
engine on the tiny model. DI_TEST_SEED reuses a seed; every failure message carries it."""

import os
import random

import numpy as np
import pytest

import deepinfer
from deepinfer import ops, testing

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

SEED = int(os.environ.get("DI_TEST_SEED", random.randrange(1, 2**31)))
DEV = "cuda:0"
_TORCH = {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8}


def poisoned(dtype, shape):
    """A tensor whose every byte is 0x7F (bf16/f32 3.4e38, i32 0x7F7F7F7F: never a valid result)."""
    n = int(np.prod(shape)) * torch.empty((), dtype=_TORCH[dtype]).element_size()
    return torch.full((n,), 0x7F, dtype=torch.uint8, device=DEV).view(_TORCH[dtype]).view(*shape)


_DTYPE_OF = {np.float32: "F32", np.uint16: "BF16", np.int32: "I32", np.int64: "I64", np.uint8: "U8"}


def output_dtypes(op, want):
    """The dtype of each output as the reference produced it (an op's epilogue may pick bf16 where
    the signature lists f32, e.g. weight_gemm)."""
    return {n: _DTYPE_OF[a.dtype.type] for n, a in want.items()}


def pure_outputs(op):
    return ops._SPECS[op].pure_outputs


def run_case_on_gpu(op, case, target=None):
    """The case's inputs as torch CUDA tensors, pure outputs poisoned and passed in; returns
    {output: numpy array} and the launch info, after checking every output is the caller's tensor."""
    want = testing.reference(op, case.attrs, case.inputs)
    tin = {n: testing.to_torch(a, case.dtypes[n], DEV) for n, a in case.inputs.items()}
    dtypes = output_dtypes(op, want)
    touts = {n: poisoned(dtypes[n], want[n].shape) for n in pure_outputs(op)}
    ptrs = {n: t.data_ptr() for n, t in {**tin, **touts}.items()}
    got = getattr(ops, op)(**tin, **touts, **case.attrs, target=target)
    info = ops.last_launch()
    names = testing.output_names(op)
    got = dict(zip(names, got)) if len(names) > 1 else {names[0]: got}
    for n, t in got.items():
        given = touts.get(n, tin.get(n))
        assert t is given and t.data_ptr() == ptrs[n], f"{op} [{case.name}] output {n} is not the caller's tensor"
    torch.cuda.synchronize()
    return {n: testing.to_numpy(t, dtypes[n]) for n, t in got.items()}, want, info


def check_outputs(op, case, got, want, where):
    from_kernel = testing.expected_from_kernel_outputs(op, case.attrs, case.inputs, got)
    for n in testing.output_names(op):
        rep = testing.compare(op, n, from_kernel.get(n, want[n]), got[n], case.attrs, case.inputs)
        assert rep["ok"], (f"{op} [{case.name}] {where} output '{n}': {rep['metric']} {rep['max_err']}: "
                           f"{rep['detail']} (seed {SEED})")


@pytest.mark.parametrize("op", ops.names())
def test_kernel_matches_reference_on_torch_tensors(op):
    cases = testing.cases(op, SEED)
    for case in cases:
        got, want, info = run_case_on_gpu(op, case)
        assert info["backend"] == "cuda" and info["target"] == "local" and not info["ptx"]
        check_outputs(op, case, got, want, "local")
    # The sm_80 specialization, loaded as PTX (on sm_80 itself: its cubin).
    got, want, info = run_case_on_gpu(op, cases[0], target="sm_80")
    assert info["arch"] == "sm_80" and info["ptx"] == (deepinfer.local_gpu()["arch"] != "sm_80")
    check_outputs(op, cases[0], got, want, "sm_80")


def test_in_out_cache_is_updated_in_place():
    case = testing.cases("kv_quant_insert", SEED)[0]
    tin = {n: testing.to_torch(a, case.dtypes[n], DEV) for n, a in case.inputs.items()}
    cache = tin["k_cache"]
    ptr = cache.data_ptr()
    out = ops.kv_quant_insert(**tin, **case.attrs)
    assert out is cache and cache.data_ptr() == ptr
    want = testing.reference("kv_quant_insert", case.attrs, case.inputs)["k_cache"]
    np.testing.assert_array_equal(cache.cpu().numpy(), want, err_msg=f"seed {SEED}")


def test_gather_into_a_strided_view_of_a_larger_tensor():
    case = testing.cases("gather_kcache", SEED)[0]
    R, M, D = case.inputs["out"].shape
    big = torch.randint(-2**15, 2**15, (R, M + 4, D + 64), dtype=torch.int16, device=DEV).view(torch.bfloat16)
    view = big[:, 2:M + 2, 32:32 + D]
    view.copy_(testing.to_torch(case.inputs["out"], "BF16", DEV))
    before = testing.to_numpy(big, "BF16")
    tin = {n: testing.to_torch(a, case.dtypes[n], DEV) for n, a in case.inputs.items() if n != "out"}
    got = ops.gather_kcache(**tin, out=view, **case.attrs)
    assert got is view
    expect = before.copy()
    expect[:, 2:M + 2, 32:32 + D] = testing.reference("gather_kcache", case.attrs, case.inputs)["out"]
    np.testing.assert_array_equal(testing.to_numpy(big, "BF16"), expect, err_msg=f"seed {SEED}")


def test_outputs_are_allocated_by_torch_on_the_inputs_device():
    case = testing.cases("sparse_mla_decode", SEED)[0]
    tin = {n: testing.to_torch(a, case.dtypes[n], DEV) for n, a in case.inputs.items()}
    out, lse = ops.sparse_mla_decode(**tin, **case.attrs)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and out.device == tin["q"].device
    assert lse.dtype == torch.float32 and tuple(lse.shape) == tuple(tin["q"].shape[:3])
    assert ops.last_launch()["allocated"] == ["lse", "out"]
    want = testing.reference("sparse_mla_decode", case.attrs, case.inputs)
    check_outputs("sparse_mla_decode", case, {"out": testing.to_numpy(out, "BF16"), "lse": lse.cpu().numpy()},
                  want, "allocated outputs")


# --- streams -------------------------------------------------------------------------------------
# A topk whose input is written by queued work behind a ~50-100 ms device sleep: a kernel that does
# not run after that work (wrong stream, missing dependency) reads the old zeros.

T, N, K = 64, 4096, 512
SLEEP = 100_000_000  # cycles


def topk_inputs():
    g = torch.Generator(device=DEV).manual_seed(SEED)
    new = torch.randn(T, N, device=DEV, generator=g)
    lens = torch.full((T,), N, dtype=torch.int32, device=DEV)
    scores = torch.zeros(T, N, device=DEV)
    want = testing.reference("topk", {"k": K}, {"scores": new.cpu().numpy(), "lens": lens.cpu().numpy()})["indices"]
    ops.topk(scores=scores, lens=lens, k=K)  # compile before timing-sensitive checks
    torch.cuda.synchronize()
    return scores, new, lens, want


def assert_topk(idx, want, how):
    np.testing.assert_array_equal(idx.cpu().numpy(), want, err_msg=f"{how} (seed {SEED})")


def test_runs_on_torch_current_stream_after_queued_work_and_returns_before_it_finishes():
    scores, new, lens, want = topk_inputs()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP)
        scores.copy_(new)
        idx = ops.topk(scores=scores, lens=lens, k=K)
        assert not s.query(), "the op waited for the stream (it must only enqueue)"
    s.synchronize()
    assert_topk(idx, want, "current stream")


def test_explicit_stream_argument_forms():
    scores, new, lens, want = topk_inputs()
    s = torch.cuda.Stream()

    class CudaStreamProtocol:
        def __cuda_stream__(self):
            return (0, s.cuda_stream)

    for stream in (s, s.cuda_stream, CudaStreamProtocol()):
        scores.zero_()
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(SLEEP)
            scores.copy_(new)
        idx = ops.topk(scores=scores, lens=lens, k=K, stream=stream)  # called outside the context
        s.synchronize()
        assert_topk(idx, want, f"stream={stream!r}")


def test_event_dependency_between_a_producer_and_a_consumer_stream():
    scores, new, lens, want = topk_inputs()
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    done = torch.cuda.Event()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SLEEP)
        scores.copy_(new)
        done.record(producer)
    consumer.wait_event(done)
    out = torch.empty(T, K, dtype=torch.int32, device=DEV)
    ops.topk(scores=scores, lens=lens, k=K, indices=out, stream=consumer)
    consumer.synchronize()
    assert_topk(out, want, "event dependency")


def test_dlpack_orders_the_producers_current_stream_before_the_launch_stream():
    # The input is written on torch's current stream; the op runs on another stream with no
    # explicit dependency: the DLPack export (__dlpack__(stream=...)) must add it.
    scores, new, lens, want = topk_inputs()
    s = torch.cuda.Stream()
    torch.cuda._sleep(SLEEP)
    scores.copy_(new)
    out = torch.empty(T, K, dtype=torch.int32, device=DEV)
    ops.topk(scores=scores, lens=lens, k=K, indices=out, stream=s)
    s.synchronize()
    assert_topk(out, want, "DLPack stream handshake")


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    case = testing.cases("topk", SEED)[0]
    cin = {n: cupy.asarray(a) for n, a in case.inputs.items()}
    idx = ops.topk(**cin, **case.attrs)
    assert isinstance(idx, cupy.ndarray)
    want = testing.reference("topk", case.attrs, case.inputs)["indices"]
    np.testing.assert_array_equal(cupy.asnumpy(idx), want, err_msg=f"seed {SEED}")


# --- the engine ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("models") / "tiny"
    deepinfer.make_model("tiny", d, seed=1)
    return d


def test_engine_generate_matches_stepping_and_exposes_device_logits(tiny):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    with deepinfer.Engine(tiny, max_requests=4, kv_cache_bytes=1 << 30, speculative=False) as eng:
        with pytest.raises(deepinfer.Error, match="no step"):
            eng.logits()
        streamed = list(eng.generate(prompt, 8))
        assert len(streamed) == 8 and eng.live_requests == 0

        rid = eng.add_request(prompt, 8, keep_logits=True)
        stepped = []
        s = torch.cuda.Stream()
        while not eng.finished(rid):
            events = eng.step(stream=s)
            logits = torch.from_dlpack(eng.logits())
            assert logits.device.type == "cuda" and logits.shape == (len(events), eng.vocab_size)
            assert torch.from_dlpack(eng.logits()).data_ptr() == logits.data_ptr()  # the engine's memory
            for i, ev in enumerate(events):
                if ev.request != rid or ev.token < 0:
                    continue
                stepped.append(ev.token)
                row = logits[i].cpu().numpy()
                host = np.from_dlpack(eng.last_logits(rid))
                np.testing.assert_array_equal(row, host)  # the device row is what the token was sampled from
                if (row == row.max()).sum() == 1:
                    assert int(row.argmax()) == ev.token
        eng.remove_request(rid)
        assert stepped == streamed


def test_engine_pipeline_stages_generate_what_one_stage_generates(tiny):
    # Two stages as logical devices of GPU 0 (same kernels, same order: bit-identical logits, so
    # the same greedy tokens); describe() reports each stage.
    prompt = [3, 1, 4, 1, 5, 9, 2, 6] * 9
    kw = dict(max_requests=2, kv_cache_bytes=1 << 28, speculative=False)
    with deepinfer.Engine(tiny, **kw) as eng:
        one = list(eng.generate(prompt, 12))
    with deepinfer.Engine(tiny, pp=2, stage_layers=[3, 5], gpus=[0, 0], **kw) as eng:
        two = list(eng.generate(prompt, 12))
        d = eng.describe()
    assert two == one
    assert "2 pipeline stages" in d and "stage 0: layers 0..2 on GPU 0" in d and "stage 1: layers 3..7 on GPU 0" in d
    assert "mirrors kv source 2" in d


# --- tune ----------------------------------------------------------------------------------------

def test_tune_one_bucket_into_a_private_cache(tmp_path):
    lines = []
    report = deepinfer.tune(ops="mhc_collapse", buckets="T=1", samples=3, cache_dir=tmp_path, progress=lines.append)
    assert "mhc_collapse" in report and any("mhc_collapse" in line for line in lines)
    files = deepinfer.cache.tuning(tmp_path)
    assert len(files) == 1 and "error" not in files[0], files
    (entry,) = [e for e in files[0]["entries"] if e["op"] == "mhc_collapse" and e["bucket"] == "T=1"]
    assert entry["winner"] and entry["winner"] in entry["timings"]
    best = entry["timings"][entry["winner"]]
    assert best["check_ok"] and best["samples"] == 3 and best["median_us"] > 0
    # A second run finds every candidate timed.
    assert "full cache hit" in deepinfer.tune(ops="mhc_collapse", buckets="T=1", samples=3, cache_dir=tmp_path,
                                              progress=lines.append)
