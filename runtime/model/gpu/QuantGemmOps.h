// Typed calls of the quantized-weight ops (weight_gemm, moe_experts) for the GPU forward pass:
// device buffers holding checkpoint tensors in their own formats (docs/model.md §3) in, the op's
// tensors and attributes built here, the kernels from DiOps (JIT, memoized per shapes, tuned
// winners when recorded, the workspace from DiOps' grow-only buffer). Every launch size depends
// only on the shapes, so the calls can be captured in CUDA graphs.
#pragma once
#include <cstdint>
#include <vector>

#include "lib/DiOps.h"

namespace deepinfer {

// One weight matrix [rows, cols] in its checkpoint format, on the device.
//  bits 8: e4m3 codes [rows, cols] + UE8M0 scales [ceil(rows/32), ceil(cols/32)] (32x32 blocks)
//  bits 4: e2m1 codes [rows, cols/2] (low nibble = even column) + UE8M0 scales [rows, cols/32]
struct DeviceQuantWeight {
  uint64_t codes = 0, scales = 0;
  int64_t rows = 0, cols = 0;
  int bits = 8;
  std::vector<int64_t> codeShape() const;
  std::vector<int64_t> scaleShape() const;
};

enum class GemmEpilogue {
  F32 = 0,     // y f32
  Bf16 = 1,    // y bf16 (round once)
  Swiglu = 2,  // y bf16 = silu(min(g, limit)) * clamp(v, -limit, limit), g from w, v from `up`
};

// y[M, N] = x[M, K] . dequant(w)^T (x bf16, dense rows). groups > 1 is wo_a's grouped form:
// x [M, groups * w.cols], w has groups blocks of w.rows / groups rows, output column n reads x's
// group n / (w.rows / groups). For Swiglu, `up` is the up projection (w3) laid out as `w`.
Status weightGemm(DiOps& ops, uint64_t x, int64_t M, const DeviceQuantWeight& w, uint64_t y, GemmEpilogue epilogue,
                  void* stream, int64_t groups = 1, const DeviceQuantWeight* up = nullptr, double limit = 10.0);

// The routed experts of one layer: E experts of e2m1 weights, w1/w3 [E, I, C/2] + [E, I, C/32],
// w2 [E, C, I/2] + [E, C, I/32], contiguous per expert.
struct DeviceExpertWeights {
  uint64_t w1 = 0, w1Scale = 0, w3 = 0, w3Scale = 0, w2 = 0, w2Scale = 0;
  int64_t experts = 0, hidden = 0, intermediate = 0;  // E, C, I
};

// y [T, k, C] f32: row t*k + r is token t's rank-r expert output, weights[t, r] applied before w2
// (docs/model.md §7); ids outside [0, E) give a zero row. x [T, C] bf16, ids [T, k] i32, weights [T, k]
// f32. Sum the ranks in order afterwards (ModelKernels::moeSum) as the CPU reference does.
Status moeExperts(DiOps& ops, uint64_t x, uint64_t ids, uint64_t weights, int64_t T, int64_t k,
                  const DeviceExpertWeights& w, uint64_t y, void* stream, double limit = 10.0);

}  // namespace deepinfer
