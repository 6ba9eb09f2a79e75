// The baseline of weight_gemm rows: cuBLAS bf16 GEMMs (fp32 accumulation) on the same weights
// dequantized to bf16 on the host, which is what the runtime did before the quantized ops (and
// reads 2x / 4x the weight bytes of e4m3 / e2m1). Timed like the kernels, in the same run. The
// SwiGLU row times its two GEMMs without the epilogue, the grouped row one strided batch.
#pragma once
#include "BenchCase.h"
#include "BenchTiming.h"
#include "CaseRunner.h"
#include "lib/Cublas.h"

namespace deepinfer::bench {

// A row of kind "cublas-bf16" (not checked: its output is the GEMM's fp32 value, not the op's).
VariantResult cublasBaseline(Cublas& blas, const BenchCase& c, const TimingOptions& t);

}  // namespace deepinfer::bench
