"""deepinfer kernels on torch tensors: write keys into the fp8 KV cache, read them back
dequantized, and run sparse MLA decode over them, checked against plain torch math.

On CUDA tensors each op runs its generated kernel in place on torch's current stream (no copy,
no synchronisation); on CPU tensors the C++ reference runs instead, so this runs anywhere torch
is installed:

    python examples/python/torch_op.py            # cuda:0 if torch sees a GPU, else the CPU
"""

import math

import torch

import deepinfer
from deepinfer import ops

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)

# The fp8_ds_mla cache (docs/ops.md §2): pages of BS tokens, 584 bytes per token, padded to 576.
BS = 64
page_bytes = math.ceil(BS * 584 / 576) * 576
T, pages = 100, 2
k = torch.randn(T, 512, device=device).to(torch.bfloat16)
cache = torch.zeros(pages, page_bytes, dtype=torch.uint8, device=device)
slots = torch.arange(T, dtype=torch.int64, device=device)  # page * BS + offset

# In/out tensors (k_cache here) are updated in place.
ops.kv_quant_insert(k=k, slot_mapping=slots, k_cache=cache, block_size=BS)

# Read every token back, dequantized, into a tensor we own (`out` is in/out: written rows only).
gathered = torch.zeros(1, T, 512, dtype=torch.bfloat16, device=device)
ops.gather_kcache(k_cache=cache, seq_lens=torch.tensor([T], dtype=torch.int32, device=device),
                  block_table=torch.tensor([[0, 1]], dtype=torch.int32, device=device), out=gathered, block_size=BS)
keys = gathered[0].float()
assert torch.equal(gathered[0, :, 448:], k[:, 448:]), "the RoPE dims are stored as bf16 and come back exactly"
rel = ((keys[:, :448] - k[:, :448].float()).abs().max() / k[:, :448].float().abs().max()).item()
print(f"{device}: fp8 round trip of {T} keys, largest error {rel:.3f} of the largest |k| (e4m3: 3 mantissa bits)")

# Decode for two sequences: the first attends to the last 64 tokens, the second to its first 40.
B, H, W = 2, 16, 64
q = torch.randn(B, 1, H, 512, device=device).to(torch.bfloat16)
indices = torch.stack([torch.arange(T - W, T), torch.arange(0, W)]).to(torch.int32).view(B, 1, W).to(device)
lens = torch.tensor([W, 40], dtype=torch.int32, device=device)
sink = torch.randn(H, device=device)
scale = 512 ** -0.5
out, lse = ops.sparse_mla_decode(q=q, swa_cache=cache, swa_indices=indices, swa_lens=lens, attn_sink=sink,
                                 sm_scale=scale, swa_block_size=BS)  # outputs allocated with torch.empty
print(f"ran {deepinfer.ops.last_launch()}")

# The same attention in plain torch (float64) on the dequantized keys: V is the key row (MQA over
# the 512-dim latent), the sink joins the softmax denominator only.
for b in range(B):
    kv = keys[indices[b, 0, :lens[b]].long()].double()
    p = scale * q[b, 0].double() @ kv.T
    l = torch.logsumexp(p, dim=1)
    l_sink = torch.logaddexp(l, sink.double())
    ref = torch.exp(p - l_sink[:, None]) @ kv
    err_out = (out[b, 0].double() - ref).abs().max().item()
    err_lse = (lse[b, 0].double() - l).abs().max().item()
    print(f"sequence {b}: out within {err_out:.1e}, lse within {err_lse:.1e} of torch")
    assert err_out <= 5e-3 and err_lse <= 1e-4
