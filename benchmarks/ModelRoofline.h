// The model-level roofline of deepinfer-model-bench: what one token of DeepSeek-V4.1 must read
// (decode) and compute (prefill) at the least, from the config alone (docs/model.md §1-§7).
// Dividing by the measured ceilings (Roofline.h: copy bandwidth, mma.sync bf16 rate) gives the
// floor time the measured times are compared with. Pure arithmetic: no GPU, unit-tested.
#pragma once
#include <cstdint>

#include "model/ModelConfig.h"

namespace deepinfer::bench {

// How the weights are stored while they are read.
enum class WeightStorage {
  Bf16,        // every matrix as bf16 (the GPU runtime before it kept the formats; for comparison)
  Checkpoint,  // the checkpoint's formats: fp8 + UE8M0 per 32x32, routed experts fp4 + UE8M0 per 32; the GPU runtime (GpuWeights.h)
};

// Bytes of the weights one token reads in one forward pass, by part. Vectors (norms, sinks,
// mHC base/scale, router bias) and the embedding row are included; they are small.
struct TokenWeightBytes {
  double attention = 0;   // wq_a, wq_b, wkv, wo_a, wo_b + q/kv norms + sinks, every layer
  double compressor = 0;  // kv sources: compressor wkv (+ wgate at ratio 2), norm, indexer wk + k_norm
  double indexer = 0;     // index sources: indexer wq_b, weights_proj
  double mhc = 0;         // hc_attn_fn / hc_ffn_fn (fp32) + base/scale, attn/ffn norms
  double router = 0;      // gate [E, C] + bias
  double shared = 0;      // the shared expert(s)
  double routed = 0;      // `routedExperts` routed experts per layer
  double engram = 0;      // engram wkv + q/k weights (the table rows are gathered on the host)
  double head = 0;        // head [V, C] + final norm
  double embedRow = 0;    // one row of embed
  double total() const {
    return attention + compressor + indexer + mhc + router + shared + routed + engram + head + embedRow;
  }
};

// `routedExperts`: distinct routed experts read per layer (num_experts_per_tok for one token;
// expectedDistinctExperts for a batch).
TokenWeightBytes tokenWeightBytes(const ModelConfig& cfg, WeightStorage storage, double routedExperts);

// Expected number of distinct experts that `streams` tokens touch in one layer when each picks
// `k` of `E` uniformly at random: E * (1 - (1 - k/E)^streams).
double expectedDistinctExperts(int E, int k, int streams);

// Multiply-accumulate operands per token: every weight matrix element one token is multiplied
// with (the same matrices as tokenWeightBytes, without vectors or the embedding gather). Routed
// experts: num_experts_per_tok of them. The head counted when `withHead`.
double tokenMatmulParams(const ModelConfig& cfg, bool withHead);

// Bytes of the fp8_ds_mla cache rows and index keys read by one decode step of the token at
// `position` (0-based; it sees positions 0..position), summed over the layers.
struct DecodeKvBytes {
  double window = 0;      // min(position+1, sliding_window) rows of 584 bytes, every layer
  double compressed = 0;  // ratio > 0 layers: min(index_topk, visible entries) selected rows of 584 bytes
  double indexKeys = 0;   // index sources: every visible index key of their key layer (132 bytes),
                          // restricted ones: at most candidate_topk_blocks * candidate_block_size
  double total() const { return window + compressed + indexKeys; }
};
DecodeKvBytes decodeKvBytes(const ModelConfig& cfg, int64_t position);

// FLOPs of a prefill of positions 0..ctx-1 (one request, empty cache), by part.
struct PrefillFlops {
  double linear = 0;     // 2 * tokenMatmulParams(without head) * ctx
  double head = 0;       // 2 * V * C: once (the last row's logits are all a first token needs)
  double attention = 0;  // per token and layer 2 * 2 * H * head_dim * keys (QK^T and PV; key == value),
                         // keys = min(pos+1, window) + (ratio > 0) min(index_topk, visible entries)
  double indexer = 0;    // per token and index source 2 * Hi * Di * scored keys (+ the head weighting)
  double total() const { return linear + head + attention + indexer; }
};
PrefillFlops prefillFlops(const ModelConfig& cfg, int64_t ctx);

// Compressed + index-key cache bytes per context token (all kv sources), as the cache stores
// them: `pageTokens` rows per page, pages of mlaPageBytes (584-byte rows padded to 576-byte
// units) and index pages of pageTokens * (index_head_dim + 4). pageTokens = 1: the unpadded rows.
double kvCacheBytesPerToken(const ModelConfig& cfg, int64_t pageTokens);

// Window-cache bytes one request holds at the least: sliding_window rows of 584 bytes per layer.
double minWindowBytesPerRequest(const ModelConfig& cfg);

constexpr double kMlaRowBytes = 584;  // fp8_ds_mla row (docs/ops.md §2)

}  // namespace deepinfer::bench
