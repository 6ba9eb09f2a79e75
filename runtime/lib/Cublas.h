// cuBLAS for the model's dense projections: bf16 activations times bf16 weights with fp32
// accumulation and an fp32 result, row-major on the caller's side. Uses the current context,
// which create() and every call make the Device's primary context. No cuBLAS or CUDA headers
// here: the handle is kept as void*.
//
// Numerics: CUBLAS_COMPUTE_32F (bf16 products are exact in fp32, sums in fp32; no TF32, which
// only concerns fp32 inputs), math mode CUBLAS_DEFAULT_MATH with reduced-precision reductions
// disallowed, atomics not allowed, and a fixed caller-owned workspace, so results are bitwise
// reproducible run to run on one GPU model. setPedantic(true) switches to
// CUBLAS_COMPUTE_32F_PEDANTIC (standardized arithmetic, much slower: for checks only).
//
// The workspace is also what makes the calls graph-capture friendly: cuBLAS allocates nothing
// during capture. One workspace per handle: calls on different streams that may overlap need
// one Cublas object per stream.
#pragma once
#include <cstdint>
#include <memory>

#include "deepinfer/Device.h"
#include "deepinfer/Error.h"

namespace deepinfer {

class Cublas {
 public:
  // 32 MiB: what cuBLAS asks for on Hopper (4 MiB suffices before it).
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  static Result<std::unique_ptr<Cublas>> create(std::shared_ptr<Device> dev);
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // y[M, N] (f32, row stride ldy) = alpha * x[M, K] (bf16, row stride ldx) @ W[N, K]^T (bf16,
  // row stride ldw) + beta * y. Strides in elements. M == 0 or N == 0: nothing is enqueued;
  // K == 0: y = beta * y. Only enqueues on `stream` (a CUstream, nullptr = legacy default).
  Status gemmBf16F32(uint64_t x, int64_t ldx, uint64_t W, int64_t ldw, uint64_t y, int64_t ldy, int64_t M,
                     int64_t N, int64_t K, void* stream, float alpha = 1.f, float beta = 0.f);

  // The same for `batch` independent products: batch b reads x + b*strideX and W + b*strideW
  // and writes y + b*strideY (strides in elements; a stride of 0 shares an input), with
  // alpha = 1 and beta = 0. The outputs must be disjoint: consecutive blocks
  // (strideY >= (M-1)*ldy + N) or column slices of shared rows (strideY >= N and
  // (batch-1)*strideY + N <= ldy); anything else is an error.
  Status gemmBf16F32Batched(uint64_t x, int64_t ldx, int64_t strideX, uint64_t W, int64_t ldw, int64_t strideW,
                            uint64_t y, int64_t ldy, int64_t strideY, int64_t M, int64_t N, int64_t K,
                            int64_t batch, void* stream);

  void setPedantic(bool on) { pedantic_ = on; }
  bool pedantic() const { return pedantic_; }
  const Device& device() const { return *dev_; }
  uint64_t workspaceAddr() const { return workspace_.addr(); }

 private:
  Cublas() = default;
  // Makes the context current and binds the stream and the workspace (cublasSetStream resets
  // the workspace to cuBLAS's own pool, so both are set on every call).
  Status bind(void* stream, const char* what);

  std::shared_ptr<Device> dev_;
  void* handle_ = nullptr;  // cublasHandle_t
  DeviceBuffer workspace_;
  bool pedantic_ = false;
};

}  // namespace deepinfer
