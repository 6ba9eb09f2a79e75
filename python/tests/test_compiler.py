"""The compiler from Python, on the CPU: targets, emit at every stage (PTX and the resource report
through NVRTC), compile through the kernel cache."""

import pytest

import deepinfer


def test_targets_lists_the_presets():
    ts = {t["name"]: t for t in deepinfer.targets(include_local=False)}
    for name in ("sm_80", "sm_86", "sm_89", "sm_90", "a100-80gb", "rtx3090", "h200"):
        assert name in ts
    assert ts["sm_80"]["arch"] == "sm_80" and ts["sm_86"]["smem_per_cta_cap"] == 48 * 1024
    assert ts["h200"]["arch"] == "sm_90" and ts["h200"]["sm_count"] == 132


def test_local_gpu_says_why_there_is_none():
    try:
        g = deepinfer.local_gpu()
    except deepinfer.Error as e:
        assert str(e)  # e.g. "no CUDA driver: ..."
        assert all(t["name"] != "local" for t in deepinfer.targets())
    else:
        assert g["name"] == "local" and g["arch"].startswith("sm_")


def test_shape_params():
    names = [p[0] for p in deepinfer.shape_params("sparse_mla_decode")]
    assert "B" in names and "H" in names
    with pytest.raises(deepinfer.Error, match=r"unknown op 'no_such_op' \(ops: kv_quant_insert, "):
        deepinfer.shape_params("no_such_op")


def test_emit_mlir_and_cuda():
    mlir = deepinfer.emit("gather_kcache", target="sm_86", stage="mlir")
    assert "di.gather_kcache" in mlir and "sm_86" in mlir
    cuda = deepinfer.emit("gather_kcache", target="sm_86", stage="cuda")
    assert 'extern "C"' in cuda and "di_gather_kcache_" in cuda


def test_emit_ptx_and_resources_through_nvrtc(cache_dir):
    ptx = deepinfer.emit("combine_topk_swa", {"T": 64}, target="sm_86", stage="ptx")
    assert ".target sm_86" in ptx and ".entry di_combine_topk_swa_" in ptx
    res = deepinfer.emit("combine_topk_swa", {"T": 64}, target="sm_86", stage="resources")
    assert res.startswith("op di_combine_topk_swa_") and "on sm_86 (sm_86)" in res
    assert "launch di_combine_topk_swa_" in res and "regs" in res
    # The second compile of the same unit came from the cache the first one filled.
    assert deepinfer.emit("combine_topk_swa", {"T": 64}, target="sm_86", stage="all")["cache_hit"]


def test_emit_all_stages_and_a_fixed_config(cache_dir):
    a = deepinfer.emit("topk", {"T": 16, "N": 2048}, target="sm_80", stage="all", cache=False)
    for key in ("input_mlir", "specialized_mlir", "emitted_mlir", "cuda", "ptx", "resources", "nvrtc_log"):
        assert a[key], key
    assert a["cubin"][:4] == b"\x7fELF" and not a["cache_hit"]
    knobs = dict(kv.split("=") for kv in a["config"].split(","))
    name, value = next(iter(knobs.items()))
    other = deepinfer.emit("topk", {"T": 16, "N": 2048}, target="sm_80", stage="mlir", config={name: int(value)})
    assert other == a["specialized_mlir"]


def test_emit_errors():
    with pytest.raises(deepinfer.Error, match="stage 'sass'"):
        deepinfer.emit("topk", stage="sass")
    with pytest.raises(deepinfer.Error, match="unknown target 'sm_70'"):
        deepinfer.emit("topk", target="sm_70")
    with pytest.raises(deepinfer.Error, match="no_op"):
        deepinfer.emit("no_op")
    with pytest.raises(deepinfer.Error, match="no config knob 'bogus'"):
        deepinfer.emit("topk", config={"bogus": 1})
    with pytest.raises(deepinfer.Error, match="'Q'"):
        deepinfer.emit("topk", {"Q": 3})


def test_compile_reports_resources_and_fills_the_cache(cache_dir):
    rows = deepinfer.compile("gather_kcache", ["sm_80", "sm_86"])
    assert [r["target"] for r in rows] == ["sm_80", "sm_86"]
    for r in rows:
        assert r["error"] is None, r
        assert r["default"] and r["registers"] > 0 and r["spill_bytes"] == 0
        assert 0 < r["smem_bytes"] <= 48 * 1024
        assert not r["mma_sync"] and not r["cache_hit"]
    again = deepinfer.compile("gather_kcache", ["sm_80", "sm_86"])
    assert all(r["cache_hit"] for r in again)
    assert len(deepinfer.cache.entries()["entries"]) >= 1


def test_compile_every_candidate(cache_dir):
    rows = deepinfer.compile("mhc_collapse", "sm_86", shapes={"T": 64}, all_configs=True)
    assert len(rows) > 1 and sum(r["default"] for r in rows) == 1
    assert all(r["error"] is None for r in rows), [r["error"] for r in rows if r["error"]]
    assert {r["shape"]["T"] for r in rows} == {64}
