// Parameters of weight_gemm: y[M, N] = x[M, K] . dequant(w)[N, K]^T with the weights in their
// checkpoint formats (templates/WeightGemm.cuh). Tile shapes, the weight format and the
// epilogue are template constants; everything here is a runtime shape, stride or pointer.
#pragma once
#include "common/Types.h"

namespace di {

struct WeightGemmParams {
  const uint16_t* x;           // [M, ldx] bf16; group g reads columns [g*Kg, (g+1)*Kg)
  const uint8_t* w;            // [N, Kg] e4m3, or [N, Kg/2] e2m1 (low nibble = even column)
  const uint8_t* w_scale;      // UE8M0: e4m3 [ceil(N/32), ceil(Kg/32)], e2m1 [N, Kg/32]
  const uint8_t* w_up;         // SwiGLU only: the up projection (w3), laid out as w
  const uint8_t* w_up_scale;
  void* y;                     // [M, ldy]: f32, or bf16 (bf16 store and SwiGLU epilogues)
  float* partial;              // split-K only: [splits][M][N * (SwiGLU ? 2 : 1)] f32 (workspace)
  uint32_t* arrivals;          // split-K only: one counter per output tile, zero on entry and exit ("__zeroed")
  int64_t ldx;                 // elements between rows of x (>= K, a multiple of 8)
  int64_t ldy;                 // elements between rows of y (>= N, even)
  int32_t M, N, Kg;            // Kg: columns of one group (= K for groups = 1)
  int32_t Ng;                  // output columns per group (N / groups; tiles never straddle groups)
  int32_t tiles_per_group;     // ceil(Ng / block_n)
  int32_t k_blocks;            // ceil(Kg / 32)
  int32_t kb_per_split;        // k32 blocks of one split (a multiple of block_k / 32)
  int32_t splits;
  float limit;                 // SwiGLU clamp
  int32_t pad_;
};

}  // namespace di
