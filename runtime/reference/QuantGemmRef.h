// The checkpoint weight formats (docs/model.md §3) for the references of weight_gemm and
// moe_experts, and the accuracy contract their GPU kernels are held to.
//
// Dequantization: a weight is the correctly rounded bf16 of code * 2^(s-127) (s the UE8M0 byte;
// s = 0 is 2^-127, not zero; s = 0xFF and the e4m3 NaN codes give NaN). That is exact for the
// scale bytes checkpoints use (fp8 3..246, fp4 0..252) and is what the kernels compute for every
// byte, so the ops equal "dequantize to bf16, then GEMM with fp32 accumulation" up to the order
// of the fp32 sums. The references accumulate exactly (fp64: every bf16 x bf16 product is exact).
//
// Tolerance (error bounds per output element, derived, not tuned):
//  - fp32 accumulation over K terms: the kernel adds a k16 step's 16 exact products into its
//    fp32 accumulator ceil(K/16) times, then sums at most 8 in-CTA partials and 32 split
//    partials; each addition errs by at most 2^-23 of the running sum's magnitude, which never
//    exceeds A = sum_k |x_k w_k| (2^-23, not 2^-24: tensor-core adders may truncate). Inside an
//    mma the 16 products are aligned to the largest before they are added, which loses at most
//    2^-23 of the largest per product: 16 * 2^-23 * A over all steps. So
//    |y_kernel - y_exact| <= tau(K) * A with tau(K) = (ceil(K/16) + 64) * 2^-23, and an f32
//    output is compared within tau(K) * A + 2^-23 |y|.
//  - bf16 outputs (store, SwiGLU h): kernel and reference round the same function of fp32 values
//    that differ by at most dF (the accumulation bound carried through the epilogue: silu' lies
//    in [-0.1, 1.1], min/clamp are 1-Lipschitz, 2^-19 |F| covers both sides' fp32 evaluation);
//    they give the same bf16 unless [F - dF, F + dF] holds a rounding boundary, where they may
//    differ by one bf16 step. So a bf16 output must be bit-exact except at such near-ties.
//  - moe_experts y = h . w2^T with the kernel's own h: sum_i |dh_i| |w2_i| (dh_i one step at
//    h's near-ties, else 0) + tau(I) * sum_i |h_i w2_i| + 2^-23 |y|.
#pragma once
#include <cstdint>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::ref {

class RefArgs;

// 2^(s-127) as a double (s = 0 is 2^-127); NaN for 0xFF.
double ue8m0Scale(uint8_t s);
// The correctly rounded bf16 (bits) of code * 2^(s-127); NaN (either) gives 0x7FC0.
uint16_t dequantWeightBf16(float code, uint8_t s);

// One [rows, cols] weight matrix in its checkpoint format (bits 8: e4m3 [rows, cols] with scales
// [ceil(rows/32), ceil(cols/32)]; bits 4: e2m1 [rows, cols/2] with scales [rows, cols/32]).
struct QuantMatrix {
  int bits = 8;
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t scaleCols() const { return bits == 8 ? (cols + 31) / 32 : cols / 32; }
  // Row r dequantized (the bf16 values as floats) into out[0, cols).
  void row(int64_t r, float* out) const;
};

// tau(K) above.
double accumulationTolerance(int64_t K);

// Per element of the op's output `y`, the largest difference from the reference's `y` a faithful
// kernel may show (the rules above), computed from the op's inputs; errors as the reference's.
Result<HostTensor> weightGemmErrorBound(RefArgs& a);
Result<HostTensor> moeExpertsErrorBound(RefArgs& a);

}  // namespace deepinfer::ref
