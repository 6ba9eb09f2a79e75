"""A sketch of how an engine registers deepinfer kernels as torch custom ops (torch.library), so
that torch.compile traces through them and CUDA graphs capture them: the op declares which
arguments it mutates, a fake implementation gives output shapes without running anything, and the
real implementation calls deepinfer.ops on the tensors torch hands it (zero-copy, on torch's
current stream: what the surrounding graph runs on).

    python examples/python/torch_custom_op.py

Runs on cuda:0 when torch sees a GPU, else on the CPU (the C++ reference). Two rules an engine
keeps: compile every kernel it will use before capturing a CUDA graph (a first call compiles,
which must not happen during a capture), and keep the shapes stable across calls (each new shape
is a new kernel).
"""

import math

import torch

from deepinfer import ops

BS = 64
PAGE_BYTES = math.ceil(BS * 584 / 576) * 576  # docs/ops.md §2


@torch.library.custom_op("deepinfer::kv_quant_insert", mutates_args=("k_cache",))
def kv_quant_insert(k: torch.Tensor, slot_mapping: torch.Tensor, k_cache: torch.Tensor, block_size: int) -> None:
    ops.kv_quant_insert(k=k, slot_mapping=slot_mapping, k_cache=k_cache, block_size=block_size)


@kv_quant_insert.register_fake
def _(k, slot_mapping, k_cache, block_size):
    return None


@torch.library.custom_op("deepinfer::sparse_mla_decode", mutates_args=())
def sparse_mla_decode(q: torch.Tensor, swa_cache: torch.Tensor, swa_indices: torch.Tensor, swa_lens: torch.Tensor,
                      attn_sink: torch.Tensor, sm_scale: float, swa_block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    out, lse = ops.sparse_mla_decode(q=q, swa_cache=swa_cache, swa_indices=swa_indices, swa_lens=swa_lens,
                                     attn_sink=attn_sink, sm_scale=sm_scale, swa_block_size=swa_block_size)
    return out, lse


@sparse_mla_decode.register_fake
def _(q, swa_cache, swa_indices, swa_lens, attn_sink, sm_scale, swa_block_size):
    B, Sq, H, D = q.shape
    return q.new_empty(B, Sq, H, D), q.new_empty(B, Sq, H, dtype=torch.float32)


def decode_layer(q, k_new, slots, cache, indices, lens, sink):
    """What an engine's attention layer does per decode step: append the new keys, attend."""
    torch.ops.deepinfer.kv_quant_insert(k_new, slots, cache, BS)
    out, lse = torch.ops.deepinfer.sparse_mla_decode(q, cache, indices, lens, sink, 512 ** -0.5, BS)
    return out


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    B, H, W = 4, 16, 32
    cache = torch.zeros(B, PAGE_BYTES, dtype=torch.uint8, device=device)  # one page per sequence
    k_new = torch.randn(B, 512, device=device).to(torch.bfloat16)
    slots = (torch.arange(B, device=device) * BS + W - 1).to(torch.int64)  # each sequence's token W-1
    indices = (torch.arange(B, device=device)[:, None] * BS + torch.arange(W, device=device)).to(torch.int32)
    indices = indices.view(B, 1, W)
    lens = torch.full((B,), W, dtype=torch.int32, device=device)
    sink = torch.zeros(H, device=device)
    q = torch.randn(B, 1, H, 512, device=device).to(torch.bfloat16)
    # Earlier tokens of every sequence, written once.
    for t in range(W - 1):
        torch.ops.deepinfer.kv_quant_insert(torch.randn(B, 512, device=device).to(torch.bfloat16),
                                            (torch.arange(B, device=device) * BS + t).to(torch.int64), cache, BS)

    eager = decode_layer(q, k_new, slots, cache.clone(), indices, lens, sink)

    # torch's own checks of the registration (schema, fake vs real, mutation declarations).
    args = (q, cache.clone(), indices, lens, sink, 512 ** -0.5, BS)
    torch.library.opcheck(torch.ops.deepinfer.sparse_mla_decode.default, args)
    torch.library.opcheck(torch.ops.deepinfer.kv_quant_insert.default, (k_new, slots, cache.clone(), BS))

    compiled = torch.compile(decode_layer, fullgraph=True, backend="aot_eager")
    traced = compiled(q, k_new, slots, cache.clone(), indices, lens, sink)
    assert torch.equal(traced, eager), "the traced graph calls the same kernels on the same inputs"
    print(f"{device}: torch.compile(fullgraph=True) traced through deepinfer::kv_quant_insert and "
          f"deepinfer::sparse_mla_decode; output {tuple(traced.shape)} equals the eager call")

    if device == "cuda":
        # Kernels are compiled by the calls above; capture one decode step in a CUDA graph.
        static_cache = cache.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            decode_layer(q, k_new, slots, static_cache, indices, lens, sink)  # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_out = decode_layer(q, k_new, slots, static_cache, indices, lens, sink)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(graph_out, eager)
        print("cuda: one decode step captured in a CUDA graph and replayed; output equals the eager call")


if __name__ == "__main__":
    main()
