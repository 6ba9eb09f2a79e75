"""The engine without a GPU: the cuda backend's error path, the cpu backend (the C++ reference)
end to end on tiny, make_model, and the generate() generator's bookkeeping over a stand-in core
(a GPU run is in test_gpu.py)."""

import pytest

import deepinfer
from deepinfer.engine import Engine


def no_gpu():
    try:
        deepinfer.local_gpu()
        return False
    except deepinfer.Error:
        return True


def test_engine_without_a_gpu_says_so():
    if not no_gpu():
        pytest.skip("a GPU is present")
    with pytest.raises(deepinfer.Error, match="engine: no GPU 0"):
        Engine()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("engine") / "tiny"
    deepinfer.make_model("tiny", path, seed=5)
    return path


def run_alone(tiny, prompt, n, speculative):
    with Engine(tiny, backend="cpu", speculative=speculative) as eng:
        return list(eng.generate(prompt, n))


def test_cpu_engine_speculative_greedy_equals_plain_greedy(tiny):
    prompt = [5, 6, 7, 8, 9]
    plain = run_alone(tiny, prompt, 9, speculative=False)
    assert len(plain) == 9 and all(0 <= t < 1024 for t in plain)
    assert run_alone(tiny, prompt, 9, speculative=True) == plain


def test_cpu_engine_batched_requests_equal_requests_alone(tiny):
    prompts = [[3, 4, 5], [11, 12, 13, 14, 15, 16, 17], [40]]
    alone = [run_alone(tiny, p, 6, speculative=False) for p in prompts]
    with Engine(tiny, backend="cpu", speculative=False, max_chunk_tokens=2) as eng:
        assert eng.describe().startswith("cpu, ") and eng.kv_capacity_tokens == 0
        ids = [eng.add_request(p, 6) for p in prompts]
        while not all(eng.finished(i) for i in ids):
            eng.step()
        assert [eng.tokens(i) for i in ids] == alone


def test_cpu_engine_keeps_logits_on_the_host_only(tiny):
    with Engine(tiny, backend="cpu", speculative=False) as eng:
        rid = eng.add_request([1, 2, 3], 2, keep_logits=True)
        eng.step()
        row = eng.last_logits(rid)
        import numpy
        assert numpy.from_dlpack(row).shape == (eng.vocab_size,)
        with pytest.raises(deepinfer.Error, match="cpu backend has no device logits"):
            eng.logits()


def test_cpu_engine_rejects_bad_options(tiny):
    with pytest.raises(deepinfer.Error, match="unknown backend 'tpu'"):
        Engine(backend="tpu")
    with pytest.raises(deepinfer.Error, match="target applies to the cuda backend only"):
        Engine(backend="cpu", target="sm_80")
    with Engine(tiny, backend="cpu", max_requests=1) as eng:
        eng.add_request([1], 1)
        with pytest.raises(deepinfer.Error, match="request slots"):
            eng.add_request([2], 1)


def test_parallel_options_that_are_not_built_are_refused():
    with pytest.raises(deepinfer.Error, match="cpu backend runs the whole model in one stage on one rank"):
        Engine(backend="cpu", tp=2)
    with pytest.raises(deepinfer.Error, match="cpu backend runs the whole model in one stage"):
        Engine(backend="cpu", pp=2, stage_layers=[4, 4])
    with pytest.raises(deepinfer.Error, match="1 GPUs given for 2 pipeline stages"):
        Engine(backend="cuda", pp=2, gpus=[0])


def test_make_model_writes_a_checkpoint(tmp_path):
    deepinfer.make_model("tiny", tmp_path / "tiny", seed=3)
    names = {p.name for p in (tmp_path / "tiny").iterdir()}
    assert {"config.json", "model.safetensors", "token_map.i32"} <= names
    with pytest.raises(deepinfer.Error, match="no_such_preset"):
        deepinfer.make_model("no_such_preset", tmp_path / "x")


class FakeCore:
    """Engine.h's behaviour for two requests: a request finishes after max_new tokens, a step
    advances every live unfinished request by one token."""

    def __init__(self):
        self.reqs, self.next, self.steps = {}, 1, 0

    def add_request(self, prompt, max_new, temperature, top_p, seed, keep_logits):
        rid = self.next
        self.next += 1
        self.reqs[rid] = {"max": max_new, "toks": [], "base": 100 * rid}
        return rid

    def remove_request(self, rid):
        if rid not in self.reqs:
            raise deepinfer.Error(f"engine: no request {rid}")
        del self.reqs[rid]

    def step(self, stream):
        self.steps += 1
        events = []
        for rid, r in self.reqs.items():
            if len(r["toks"]) < r["max"]:
                r["toks"].append(r["base"] + len(r["toks"]))
                events.append((rid, r["toks"][-1], len(r["toks"]) == r["max"], [r["toks"][-1]], 0))
        return events

    def finished(self, rid):
        r = self.reqs.get(rid)
        return r is None or len(r["toks"]) >= r["max"]

    def tokens(self, rid):
        return list(self.reqs[rid]["toks"]) if rid in self.reqs else []


def engine_over(core):
    e = Engine.__new__(Engine)
    e._device, e._backend, e._core = 0, "cuda", core
    return e


def test_generate_streams_tokens_and_removes_the_request():
    core = FakeCore()
    eng = engine_over(core)
    assert list(eng.generate([1, 2], 3)) == [100, 101, 102]
    assert core.reqs == {} and core.steps == 3


def test_generate_sees_tokens_produced_by_other_steps():
    core = FakeCore()
    eng = engine_over(core)
    a = eng.generate([1], 4)
    b = eng.generate([2], 2)
    assert next(a) == 100          # a's step also advanced b
    assert list(b) == [200, 201]   # b's first token came from a's step
    assert list(a) == [101, 102, 103]
    assert core.reqs == {}


def test_closing_a_generator_early_removes_its_request():
    core = FakeCore()
    eng = engine_over(core)
    g = eng.generate([1], 10)
    assert next(g) == 100
    g.close()
    assert core.reqs == {}


def test_generate_validates_before_the_first_token():
    class Refusing(FakeCore):
        def add_request(self, *a):
            raise deepinfer.Error("engine: a request needs at least one prompt token")

    eng = engine_over(Refusing())
    with pytest.raises(deepinfer.Error, match="at least one prompt token"):
        eng.generate([], 3)
