"""The engine: DeepSeek-V4.1 on one GPU through the generated kernels (or on the CPU through the
C++ reference, backend="cpu"), with continuous batching.

    with deepinfer.Engine("/models/v41-tiny") as eng:
        for token in eng.generate([1, 2, 3], max_new_tokens=32):
            print(token)

Lifetimes and streams:
  * step(stream=None) enqueues one forward call for every live request (a prefill chunk or one
    decode token) on `stream` and returns once that step's tokens are known (it synchronises).
    stream=None: torch's current stream when torch is in use, else the engine's own stream (a
    stream is needed for decode steps to run as CUDA graphs). The cpu backend ignores streams.
  * speculative=True (the default) runs DSpark speculative decoding when the model has draft
    layers: a decode step may then yield several tokens per request (StepEvent.tokens).
  * logits() is the last plain step's fp32 logits on the GPU as a DLPack tensor [events, vocab]
    (row i for event i; after a speculative step it raises: use last_logits(request)), aliasing the engine's memory: zero-copy, complete when step() returned, valid
    until the next step(), load_model() or close(). Copy it (e.g. torch.from_dlpack(x).clone())
    to keep it.
  * An Engine is not thread-safe; use one per thread or serialise calls.
"""

import collections

from . import _deepinfer as _core
from . import _tensors

StepEvent = collections.namedtuple("StepEvent", ["request", "token", "finished", "tokens", "accepted"])
StepEvent.__doc__ = ("One request's result of a step: token is the newest token (-1 after a prefill chunk that "
                     "produced none); tokens every token the step produced (several on a speculative step); "
                     "accepted the drafts accepted on a speculative step (0 otherwise).")


class Engine:
    """A model on one GPU (Engine.h), or on the CPU with backend="cpu" (the fp32 C++ reference:
    slow, for tests and small models; no device logits). Without a GPU, the cuda backend's
    constructor raises deepinfer.Error.

    pp splits the layers into pipeline stages (stage_layers: layers per stage, default as even as
    possible) on gpus (one ordinal per stage; default one GPU per stage when that many are
    visible, else all on `device`); describe() then reports every stage. tp tensor ranks per stage
    (cuda; docs/parallelism.md §2): gpus then lists pp * tp ordinals."""

    def __init__(self, model=None, *, backend="cuda", threads=0, device=0, target=None, kv_cache_bytes=0,
                 max_requests=16, max_chunk_tokens=256, speculative=True, pp=1, tp=1, stage_layers=None,
                 gpus=None):
        self._device = int(device)
        self._backend = str(backend)
        self._core = _core.Engine(self._backend, int(threads), self._device, target or "", int(kv_cache_bytes),
                                  int(max_requests), int(max_chunk_tokens), bool(speculative), int(pp), int(tp),
                                  [int(n) for n in (stage_layers or [])], [int(g) for g in (gpus or [])])
        if model is not None:
            self.load_model(model)

    def load_model(self, path):
        """Loads a model directory (config.json, safetensors, token map); no request may be live."""
        import os
        self._core.load_model(os.fspath(path))

    @property
    def device(self):
        return self._device

    @property
    def backend(self):
        return self._backend

    def describe(self):
        """One line naming the backend, its device and KV capacity (or the CPU threads)."""
        return self._core.describe()

    @property
    def has_model(self):
        return self._core.has_model()

    @property
    def vocab_size(self):
        return self._core.vocab_size()

    @property
    def kv_capacity_tokens(self):
        return self._core.kv_capacity_tokens()

    @property
    def live_requests(self):
        return self._core.live_requests()

    def add_request(self, prompt, max_new_tokens=16, *, temperature=0.0, top_p=1.0, seed=0, keep_logits=False):
        """Adds a request (prompt token ids); returns its id. It advances with every step()."""
        return self._core.add_request([int(t) for t in prompt], int(max_new_tokens), float(temperature),
                                      float(top_p), int(seed), bool(keep_logits))

    def remove_request(self, request):
        """Removes a request and frees its KV pages."""
        self._core.remove_request(int(request))

    def step(self, stream=None):
        """One forward call over every live, unfinished request; returns a StepEvent per request."""
        if self._backend == "cpu":
            handle = 0
        elif stream is not None:
            handle = _tensors.stream_handle(stream)
        else:
            handle = _tensors.current_stream((), self._device)
        return [StepEvent(*e) for e in self._core.step(handle)]

    def finished(self, request):
        return self._core.finished(int(request))

    def tokens(self, request):
        """The tokens generated so far."""
        return list(self._core.tokens(int(request)))

    def last_logits(self, request):
        """A host copy of the request's last logits row (needs keep_logits=True): a CPU DLPack array
        (numpy.from_dlpack / torch.from_dlpack)."""
        return self._core.last_logits(int(request))

    def logits(self):
        """The last step's fp32 logits on the GPU, [events, vocab], as a DLPack tensor aliasing the
        engine's memory (torch.from_dlpack / cupy.from_dlpack, no copy). Valid until the next
        step(), load_model() or close()."""
        return self._core.step_logits()

    def generate(self, prompt, max_new_tokens=16, *, temperature=0.0, top_p=1.0, seed=0, stream=None):
        """Adds a request and returns a generator that yields its tokens as steps produce them
        (stepping the engine, which also advances every other live request). The request is removed
        when the generator finishes or is closed."""
        request = self.add_request(prompt, max_new_tokens, temperature=temperature, top_p=top_p, seed=seed)
        return self._stream_tokens(request, stream)

    def _stream_tokens(self, request, stream):
        seen = 0
        try:
            while True:
                toks = self.tokens(request)
                while seen < len(toks):
                    yield toks[seen]
                    seen += 1
                if self.finished(request):
                    return
                self.step(stream)
        finally:
            try:
                self.remove_request(request)
            except _core.Error:
                pass  # already removed by the caller, or the engine was closed

    def close(self):
        """Frees the model and its device memory; the engine is unusable afterwards."""
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def make_model(preset, out, seed=1):
    """Writes a random-weight V4.1 checkpoint (preset 'tiny' or 'proxy') with the real tensor names
    and quantization formats into directory `out` (`deepinfer-jit make-model`)."""
    import os
    _core.make_model(preset, os.fspath(out), int(seed))
