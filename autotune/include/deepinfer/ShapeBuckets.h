// Shape buckets of the tuning cache: one tuned winner serves every shape of a bucket, so a
// winner found at one problem size is never reused at a very different one (spec/jit-and-cache.md:
// the tuning key holds the shape bucket). Each op is bucketed along the one dimension that moves
// its best config; the others are fixed by the model (heads, hidden size, top-k, window).
//
//   op                                   variable   read from            edges (upper bounds)
//   sparse_mla_decode                    B          q[0]                 1 2 4 8 16 32 | 64
//   sparse_mla_prefill, combine_topk_swa,
//   kv_quant_insert                      T          q/topk_indices/k[0]  16 64 256 1024 | 4096
//   mhc_pre, mhc_post, mhc_collapse,
//   mhc_fused_post_pre                   T          x/f_out[0]           1 2 4 8 15 64 256 1024 | 4096
//   gather_kcache                        context    out[1]               2048 8192 32768 | 131072
//   indexer_logits                       context    block_table[1]*bs    2048 8192 | 32768
//   topk                                 N          scores[1]            2048 8192 | 32768
//   weight_gemm                          M          x[0]                 1 2 4 8 16 64 256 1024 | 4096
//   moe_experts                          T          x[0]                 1 2 4 8 16 64 256 1024 | 4096
//
// weight_gemm serves every projection of the model, whose best configs differ with the matrix,
// so its buckets also carry a class (bucketClass: format, N x K, groups, epilogue), e.g.
// "fp8 1280x5120 f32 M=2"; the other ops are tuned at the one shape the model gives them. The
// decode buckets (M, T <= 16) keep one CTA row tile apart from the tensor-core prefill ones.
//
// Bucket i holds (edge[i-1], edge[i]] (the first starts at 1) and is tuned at edge[i]; the last
// bucket is open-ended (everything above the second-to-last edge, tuned at the last edge). The
// mHC edges put the tensor-core threshold at a bucket boundary: the mHC kernels use CUDA cores
// for T < 16 and tensor cores from T = 16 on (spec §8), so buckets 9..15 and 16..64 never mix the
// two regimes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/KernelFamily.h"

namespace deepinfer {

struct ShapeBucket {
  std::string var;             // "B", "T", "context", "N"
  int64_t lo = 1, hi = 0;      // inclusive; hi = INT64_MAX for the open last bucket
  int64_t representative = 0;  // the size the bucket is tuned at
  std::string cls;             // bucketClass of the description ("" for most ops)
  // "B=5..8", "T=1", "T>=1025" (prefixed by the class, if any): the name in the tuning cache.
  std::string label() const;
};

// The bucket variable and edges of an op (nullopt: an op without buckets).
struct BucketAxis {
  std::string var;
  std::vector<int64_t> edges;  // strictly increasing, > 0
};
std::optional<BucketAxis> bucketAxis(const std::string& op);

// Every bucket of an op, in increasing order.
std::vector<ShapeBucket> shapeBuckets(const std::string& op);
// The bucket holding `value` (values < 1 go to the first bucket).
std::optional<ShapeBucket> bucketOf(const std::string& op, int64_t value);
// The bucket variable's value in an op description (table above), nullopt when absent.
std::optional<int64_t> bucketValue(const OpDesc& d);
std::optional<ShapeBucket> bucketFor(const OpDesc& d);
// The part of an op's shape its buckets keep apart besides the bucket variable: for weight_gemm
// "fp8 1280x5120 f32" (format, N x K, then " g8" for groups, then f32 / bf16 / swiglu).
std::string bucketClass(const OpDesc& d);

// The op's tensor dtypes as the tuning key spells them: its inputs' dtypes in signature order,
// e.g. "BF16,U8,I32".
std::string opDtypes(const std::string& op);

}  // namespace deepinfer
