"""The cache verbs with a private cache directory, archives through the packaged tool, and tune's
plan (no GPU) and its no-GPU error."""

import os

import pytest

import deepinfer
from deepinfer import cache


def test_list_verify_clear(cache_dir):
    assert cache.entries()["entries"] == []
    deepinfer.compile("mhc_collapse", "sm_80")
    listed = cache.entries()
    assert listed["dir"] == str(cache_dir) and len(listed["entries"]) == 1
    assert cache.verify() == []
    assert cache.clear() == 1
    assert cache.entries()["entries"] == []


def test_verify_reports_and_evicts_a_corrupt_entry(cache_dir):
    deepinfer.compile("mhc_collapse", "sm_80")
    key = cache.entries()["entries"][0]["key"]
    path = next(p for p in cache_dir.rglob("*") if p.is_file() and key in p.name and not p.name.endswith(".lock"))
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    problems = cache.verify()
    assert len(problems) == 1 and key in problems[0]
    assert cache.entries()["entries"] == []


def test_an_explicit_dir(tmp_path):
    d = tmp_path / "other"
    assert cache.entries(d)["entries"] == []
    assert cache.entries(d)["dir"] == str(d)
    assert cache.clear(d) == 0


def test_export_and_import_an_archive(cache_dir, tmp_path):
    deepinfer.compile("mhc_collapse", "sm_80")
    archive = tmp_path / "kernels.archive"
    assert "exported 1 kernel entries" in cache.export_archive(archive)
    other = tmp_path / "imported"
    assert "imported 1 kernel entries" in cache.import_archive(archive, other)
    assert [e["key"] for e in cache.entries(other)["entries"]] == [e["key"] for e in cache.entries()["entries"]]
    archive.write_bytes(b"not an archive\n")
    with pytest.raises(deepinfer.Error, match="not a deepinfer-jit cache archive"):
        cache.import_archive(archive, other)


def test_tuning_files_empty_without_tuning(cache_dir):
    assert cache.tuning() == []


def test_tune_plan_without_a_gpu():
    plan = deepinfer.tune_plan("sm_80", ops="topk")
    assert "tuning plan for sm_80" in plan and "topk" in plan and "N=" in plan
    with pytest.raises(deepinfer.Error, match="not a tunable op"):
        deepinfer.tune_plan("sm_80", ops="no_such_op")


def test_tune_without_a_gpu_says_so(cache_dir):
    try:
        deepinfer.local_gpu()
        pytest.skip("a GPU is present")
    except deepinfer.Error:
        pass
    lines = []
    with pytest.raises(deepinfer.Error, match="no GPU"):
        deepinfer.tune(ops="topk", samples=1, progress=lines.append)
    assert any("no GPU" in line for line in lines)


def test_the_packaged_tool_is_found():
    from deepinfer._tool import tool_path
    assert os.access(tool_path(), os.X_OK)
