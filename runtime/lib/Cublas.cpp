#include "lib/Cublas.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "deepinfer/LaunchTally.h"

namespace deepinfer {
namespace {

cublasHandle_t H(void* h) { return static_cast<cublasHandle_t>(h); }

Error cublasError(cublasStatus_t st, const std::string& what) {
  return Error{fmt::format("cuBLAS: {} failed: {} ({})", what, cublasGetStatusName(st), cublasGetStatusString(st))};
}

#define DI_CUBLAS(call, what)                                                    \
  do {                                                                           \
    cublasStatus_t di_cublas_st_ = (call);                                       \
    if (di_cublas_st_ != CUBLAS_STATUS_SUCCESS) return cublasError(di_cublas_st_, what); \
  } while (0)

std::string shapes(int64_t M, int64_t N, int64_t K, int64_t ldx, int64_t ldw, int64_t ldy) {
  return fmt::format("M={} N={} K={} ldx={} ldw={} ldy={}", M, N, K, ldx, ldw, ldy);
}

Status checkArgs(const char* what, uint64_t x, int64_t ldx, uint64_t W, int64_t ldw, uint64_t y, int64_t ldy,
                 int64_t M, int64_t N, int64_t K) {
  auto bad = [&](const std::string& why) {
    return Error{fmt::format("cuBLAS: {} ({}): {}", what, shapes(M, N, K, ldx, ldw, ldy), why)};
  };
  if (M < 0 || N < 0 || K < 0) return bad("negative size");
  if (ldx < std::max<int64_t>(K, 1)) return bad("ldx must be >= max(K, 1)");
  if (ldw < std::max<int64_t>(K, 1)) return bad("ldw must be >= max(K, 1)");
  if (ldy < std::max<int64_t>(N, 1)) return bad("ldy must be >= max(N, 1)");
  if (M > 0 && N > 0) {
    if (!y) return bad("y is null");
    if (K > 0 && (!x || !W)) return bad("x or W is null");
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Cublas>> Cublas::create(std::shared_ptr<Device> dev) {
  if (!dev) return Error{"cuBLAS: create needs a device"};
  DI_TRY(dev->use());
  std::unique_ptr<Cublas> c(new Cublas());
  c->dev_ = std::move(dev);
  auto ws = DeviceBuffer::alloc(kWorkspaceBytes);
  if (!ws.ok()) return Error{"cuBLAS workspace: " + ws.error().message};
  c->workspace_ = std::move(*ws);
  cublasHandle_t h = nullptr;
  DI_CUBLAS(cublasCreate(&h), "cublasCreate");
  c->handle_ = h;
  DI_CUBLAS(cublasSetMathMode(h, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
            "cublasSetMathMode");
  DI_CUBLAS(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
  DI_CUBLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  DI_TRY(c->bind(nullptr, "create"));
  return c;
}

Cublas::~Cublas() {
  if (!handle_) return;
  // cublasDestroy synchronizes; it needs the context that created the handle.
  if (dev_) (void)dev_->use();
  cublasDestroy(H(handle_));
  handle_ = nullptr;
}

Status Cublas::bind(void* stream, const char* what) {
  DI_TRY(dev_->use());
  DI_CUBLAS(cublasSetStream(H(handle_), static_cast<cudaStream_t>(stream)), fmt::format("cublasSetStream ({})", what));
  DI_CUBLAS(cublasSetWorkspace(H(handle_), reinterpret_cast<void*>(workspace_.addr()), workspace_.size()),
            fmt::format("cublasSetWorkspace ({})", what));
  return {};
}

Status Cublas::gemmBf16F32(uint64_t x, int64_t ldx, uint64_t W, int64_t ldw, uint64_t y, int64_t ldy, int64_t M,
                           int64_t N, int64_t K, void* stream, float alpha, float beta) {
  DI_TRY(checkArgs("gemmBf16F32", x, ldx, W, ldw, y, ldy, M, N, K));
  if (M == 0 || N == 0) return {};
  DI_TRY(bind(stream, "gemmBf16F32"));
  const cublasComputeType_t compute = pedantic_ ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  // cuBLAS is column-major: row-major y[M, N] is a column-major [N, M] matrix with ld ldy, and
  // y^T = W x^T, where row-major W[N, K] read column-major is [K, N] (ld ldw, hence OP_T) and
  // row-major x[M, K] read column-major is x^T [K, M] (ld ldx, OP_N): m = N, n = M, k = K.
  DI_CUBLAS(cublasGemmEx_64(H(handle_), CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, reinterpret_cast<const void*>(W),
                            CUDA_R_16BF, ldw, reinterpret_cast<const void*>(x), CUDA_R_16BF, ldx, &beta,
                            reinterpret_cast<void*>(y), CUDA_R_32F, ldy, compute, CUBLAS_GEMM_DEFAULT),
            fmt::format("cublasGemmEx (gemmBf16F32 {} alpha={} beta={})", shapes(M, N, K, ldx, ldw, ldy), alpha, beta));
  ++threadLaunchTally().cublasCalls;
  return {};
}

Status Cublas::gemmBf16F32Batched(uint64_t x, int64_t ldx, int64_t strideX, uint64_t W, int64_t ldw, int64_t strideW,
                                  uint64_t y, int64_t ldy, int64_t strideY, int64_t M, int64_t N, int64_t K,
                                  int64_t batch, void* stream) {
  DI_TRY(checkArgs("gemmBf16F32Batched", x, ldx, W, ldw, y, ldy, M, N, K));
  const std::string desc = fmt::format("{} batch={} strideX={} strideW={} strideY={}", shapes(M, N, K, ldx, ldw, ldy),
                                       batch, strideX, strideW, strideY);
  if (batch < 0 || strideX < 0 || strideW < 0 || strideY < 0)
    return Error{fmt::format("cuBLAS: gemmBf16F32Batched ({}): negative batch or stride", desc)};
  // Outputs must not overlap: either whole [M, N] blocks one after another, or column blocks
  // side by side within each row (e.g. the per-group slices of one wide output row).
  const bool blocks = strideY >= (M - 1) * ldy + N;
  const bool columns = strideY >= N && (batch - 1) * strideY + N <= ldy;
  if (batch > 1 && M > 0 && N > 0 && !blocks && !columns)
    return Error{fmt::format("cuBLAS: gemmBf16F32Batched ({}): the outputs of the batches overlap (strideY must be >= "
                             "(M-1)*ldy+N, or >= N with (batch-1)*strideY+N <= ldy)",
                             desc)};
  if (M == 0 || N == 0 || batch == 0) return {};
  DI_TRY(bind(stream, "gemmBf16F32Batched"));
  const float alpha = 1.f, beta = 0.f;
  const cublasComputeType_t compute = pedantic_ ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  DI_CUBLAS(cublasGemmStridedBatchedEx_64(H(handle_), CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha,
                                          reinterpret_cast<const void*>(W), CUDA_R_16BF, ldw, strideW,
                                          reinterpret_cast<const void*>(x), CUDA_R_16BF, ldx, strideX, &beta,
                                          reinterpret_cast<void*>(y), CUDA_R_32F, ldy, strideY, batch, compute,
                                          CUBLAS_GEMM_DEFAULT),
            fmt::format("cublasGemmStridedBatchedEx (gemmBf16F32Batched {})", desc));
  ++threadLaunchTally().cublasCalls;
  return {};
}

}  // namespace deepinfer
