// Parameters shared by the four mHC ops (mhc_pre, mhc_post, mhc_fused_post_pre, mhc_collapse,
// docs/ops.md §8): one struct for every launch step of every mHC plan, so host packing and the
// device kernels agree on a single layout. Pointers an op does not use are null.
#pragma once
#include "common/Types.h"

namespace di {

// Partial-sum records written by the stream pass and reduced by the finalize pass.
// Mix ops (pre, fused): [num_partials][T][kMhcRecord] floats: 24 mix values, then the sum of
// squares of the residual the mix reads, then the sum of squares of the bf16 collapse.
// mhc_post: [num_partials][T] floats (residual sum of squares only).
constexpr int kMhcMix = 24;
constexpr int kMhcRecord = 32;  // padded to one 128-byte line per (partial, token)
constexpr int kMhcRecSqrsum = 24;
constexpr int kMhcRecHsq = 25;

struct MhcParams {
  // Inputs.
  const uint16_t* residual;     // [T,4,C] bf16: `x` of mhc_pre/mhc_collapse, `residual` of post ops
  const uint16_t* f_out;        // [T,C] bf16 sublayer output (post ops)
  const float* post_in;         // [T,4] post mix of the finished sublayer (post ops)
  const float* comb_in;         // [T,4,4] comb mix of the finished sublayer (post ops)
  const float* fn;              // [24,4C] fp32 mix projection (mix ops)
  const float* scale;           // [3] (mix ops)
  const float* base;            // [24] (mix ops)
  const float* collapse_w;      // [T,4] collapse weights: `pre_in` (mix ops) or `pre` (collapse)
  const uint16_t* norm_weight;  // [C] bf16 RMSNorm weight (mix ops)
  // Outputs. In mhc_fused_post_pre `post_out`/`comb_out` are the same buffers as
  // `post_in`/`comb_in`: the stream pass reads them, the finalize pass (a later launch) writes.
  uint16_t* x_out;    // [T,4,C] bf16 new residual (post ops); may alias `residual`
  uint16_t* h_out;    // [T,C] bf16 `layer_input` (mix ops) or `h` (collapse)
  float* pre_out;     // [T,4]
  float* post_out;    // [T,4]
  float* comb_out;    // [T,4,4]
  float* sqrsum_out;  // [T] (mhc_post)
  float* partials;    // workspace records (see above); `sqrsum_out` for a 1-slice mhc_post
  // One-launch plans (MhcOneLaunch.cuh): one arrival counter per token tile (gridDim.x), in the
  // "__zeroed" region: zero on entry, set back to zero by the tile's last CTA. Null otherwise.
  uint32_t* arrivals;
  // Shapes.
  int64_t T;                 // tokens
  int32_t C;                 // hidden size; a multiple of 32
  int32_t chunks_per_slice;  // 32-column chunks of C handled by one CTA row (blockIdx.y)
  int32_t num_partials;      // number of C slices = gridDim.y of the stream pass
  int32_t sinkhorn_iters;    // total Sinkhorn rounds, the first being column-only
  // Attributes (fp32 on the device).
  float rms_eps;
  float hc_eps;
  float norm_eps;
  float pad_;
};

}  // namespace di
