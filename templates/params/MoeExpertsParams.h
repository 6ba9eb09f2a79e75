// Parameters of moe_experts (templates/MoeExperts.cuh): the routed experts of the MoE sublayer
// over e2m1 expert weights, grouped by expert on the device. Tile shapes are template
// constants; the workspace sections are laid out by the kernel family (MoeExpertsFamily.cpp).
#pragma once
#include "common/Types.h"

namespace di {

struct MoeExpertsParams {
  const uint16_t* x;           // [T, C] bf16
  const int32_t* ids;          // [T, k]: an id outside [0, E) selects nothing (y row = 0)
  const float* weights;        // [T, k] routing weights
  const uint8_t* w1;           // [E, I, C/2] e2m1 (gate)
  const uint8_t* w1_scale;     // [E, I, C/32] UE8M0
  const uint8_t* w3;           // [E, I, C/2] (up)
  const uint8_t* w3_scale;
  const uint8_t* w2;           // [E, C, I/2] (down)
  const uint8_t* w2_scale;     // [E, C, I/32]
  float* y;                    // [T, k, C] f32: row t*k + r is rank r's output of token t
  // Workspace (built by the route kernel, read by the two GEMMs).
  int32_t* counts;             // [32][E]: per routing warp, then its first position per expert
  int32_t* num_row_blocks;     // [1]
  int32_t* rb_expert;          // [max_row_blocks]: the expert of each row block
  int32_t* rb_start;           // [max_row_blocks]: its first grouped row
  int32_t* rb_rows;            // [max_row_blocks]: its rows (1..block_m)
  int32_t* row_token;          // [T*k]: grouped row -> token
  int32_t* row_dest;           // [T*k]: grouped row -> y row (t*k + r)
  float* row_weight;           // [T*k]: grouped row -> routing weight
  uint16_t* h;                 // [T*k, I] bf16: SwiGLU output in grouped row order
  int32_t k, E, C, I;
  int32_t entries;             // T*k (the GEMMs' grid has ceil(T*k / block_m) + min(E, T*k) rows)
  float limit;                 // SwiGLU clamp
};

}  // namespace di
