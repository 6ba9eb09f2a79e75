// The model's small kernels (docs/model.md: embedding, RMSNorm, RoPE, router, SwiGLU, MoE
// sums, engram gate, compressor pooling, index-query/key quantization, candidate-block masks):
// hand-written templates under templates/model/, compiled by NVRTC for one target (a cubin for
// the local GPU's arch, PTX for sm_80/sm_86) through the content-keyed binary cache, with
// `--fmad=false` so every per-element formula rounds like the CPU reference
// (runtime/model/CpuLayers*.cpp), which each launcher names as its oracle.
//
// Conventions: every address is a device pointer (uint64_t, 0 = absent where allowed); rows
// are row-major with the given row stride in elements; every launcher only enqueues on
// `stream` and returns an error naming the kernel for bad sizes (never launches with them).
// "bf16 values in f32" means an f32 buffer whose values are already rounded to bf16.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/DeviceModule.h"
#include "deepinfer/Jit.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/TargetProfile.h"

namespace deepinfer {

class ModelKernels {
 public:
  // Compiles (or loads from the binary cache of `opts`) every model kernel for `target`.
  static Result<std::unique_ptr<ModelKernels>> load(std::shared_ptr<Device> dev, const TargetProfile& target,
                                                    const JitOptions& opts = {});
  const TargetProfile& target() const { return target_; }
  bool fromPtx() const { return fromPtx_; }
  bool compiledNow() const { return compiledNow_; }  // false: loaded from the disk cache
  // Whether launches on a real stream use programmatic stream serialization (ProgrammaticLaunch.h).
  bool programmaticLaunch() const { return module_.programmaticLaunch(); }

  // The one NVRTC unit holding every model kernel (it #includes templates/model/*.cuh), its
  // NVRTC options (the project's, with --fmad=false) and its binary-cache key (kernelContentKey
  // extended by those options). Needs no GPU: the compile test builds it for each target.
  static CudaUnit unit();
  static std::vector<std::string> options(int arch, bool cubin);
  static std::string cacheKey(int arch, bool cubin);

  // X[t, s, :] = embed[ids[t], :] for the 4 streams s (bf16 copies). ids i32 [T] (validated by
  // the caller), embed bf16 [V, C], X bf16 [T, 4, C].
  Status embedStreams(uint64_t ids, uint64_t embed, uint64_t X, int64_t T, int64_t C, void* stream) const;

  // out[r, :] = bf16(w * x[r, :] * rsqrt(mean(x[r, :]^2) + eps)) computed in fp32 (CpuLayersMath
  // rmsNorm: r = 1 / sqrt(sum(x^2) / n + eps), then w[i] * x[i] * r, rounded once). x f32
  // [rows, n] (stride xStride), w bf16 [n], out bf16 [rows, n] (stride outStride).
  Status rmsNormF32(uint64_t x, int64_t xStride, uint64_t w, int64_t rows, int64_t n, double eps,
                    uint64_t out, int64_t outStride, void* stream) const;
  // The same writing the result as f32 (holding bf16 values) instead of bf16.
  Status rmsNormF32ToF32(uint64_t x, int64_t xStride, uint64_t w, int64_t rows, int64_t n, double eps,
                         uint64_t out, int64_t outStride, void* stream) const;

  // Position of row r for RoPE: positions ? positions[r / rowsPerPos]
  //                                       : posBase + (r / rowsPerPos) * posStride.
  struct RopePositions {
    int64_t rowsPerPos = 1;
    int64_t posBase = 0;
    int64_t posStride = 1;
    uint64_t positions = 0;  // optional i64 [rows / rowsPerPos]
  };
  // out[r, :] = bf16(x[r, :] with dims [width - ropeDim, width) rotated forward by RopeTable::rotate
  // (adjacent pairs, angle fp32(pos * invFreq[i]), cos/sin in fp64 rounded to fp32, fp32 math)).
  // x f32 [rows, width] (stride xStride), invFreq f32 [ropeDim / 2], out bf16 [rows, width].
  Status ropeF32ToBf16(uint64_t x, int64_t xStride, int64_t rows, int64_t width, int64_t ropeDim,
                       uint64_t invFreq, const RopePositions& pos, uint64_t out, int64_t outStride,
                       void* stream) const;
  // In place on bf16 [rows, width] (stride): dims [width - ropeDim, width) read as fp32, rotated
  // (inverse = by -angle), rounded to bf16 (the attention output's inverse RoPE).
  Status ropeBf16InPlace(uint64_t x, int64_t stride, int64_t rows, int64_t width, int64_t ropeDim,
                         uint64_t invFreq, const RopePositions& pos, bool inverse, void* stream) const;

  // out[i] = bf16(x[i]) for n elements (round to nearest even). x f32, out bf16.
  Status roundToBf16(uint64_t x, uint64_t out, int64_t n, void* stream) const;
  // x[i] = bf16(x[i]) kept in f32, in place (roundBf16InPlace).
  Status roundF32InPlace(uint64_t x, int64_t n, void* stream) const;

  // Router (CpuLayersMoe): s = sqrt(softplus(logits)); ids = top-k of s + bias (ties to the
  // lower expert, returned ascending); weights = s[ids] / (sum_f32 s[ids] in ascending id order
  // + 1e-20) * scaling when normTopk, else s[ids] * scaling. logits f32 [T, E], bias f32 [E],
  // ids i32 [T, k], weights f32 [T, k]. Limits: 1 <= k <= min(E, 32), E <= 6000. Only NaN
  // scores are never choosable; if fewer than k remain, the ids are padded with -1 (weight 0).
  Status routerTopk(uint64_t logits, uint64_t bias, int64_t T, int64_t E, int64_t k, bool normTopk,
                    double scaling, uint64_t ids, uint64_t weights, void* stream) const;

  // out[r, :] = src[rowIdx[r], :] for r < n. bf16 rows of width C (src stride C). rowIdx i32 [n];
  // a negative index writes a zero row.
  Status gatherRowsBf16(uint64_t src, uint64_t rowIdx, int64_t n, int64_t C, uint64_t out, void* stream) const;
  // dst[rowIdx[r], :] = src[r, :] for r < n. f32 rows of width C. rowIdx i32 [n]; a negative index
  // skips the row.
  Status scatterRowsF32(uint64_t src, uint64_t rowIdx, int64_t n, int64_t C, uint64_t dst, void* stream) const;
  // out[t, :] = bf16(shared[t, :] + routed[t, 0, :] + ... + routed[t, k-1, :]) summed in this
  // order in fp32 (per element, so bit-exact with the reference). shared f32 [T, C] (0 = zeros),
  // routed f32 [T, k, C], out bf16 [T, C] (f32 [T, C], the sum unrounded, with f32Out).
  Status moeSum(uint64_t shared, uint64_t routed, int64_t T, int64_t k, int64_t C, uint64_t out,
                void* stream, bool f32Out = false) const;
  // Tensor parallelism (docs/parallelism.md §2). out[i] = a[i] + b[i] (f32, or bf16 elements
  // summed in f32 and rounded once when `bf16`); out may alias a or b.
  Status addElems(uint64_t a, uint64_t b, uint64_t out, int64_t n, bool bf16, void* stream) const;
  // ids[i] (i32, in place) = ids[i] - begin when in [begin, end), else -1 (a zero row in moe_experts).
  Status localExpertIds(uint64_t ids, int64_t n, int64_t begin, int64_t end, void* stream) const;

  // Engram gate (CpuLayersEngram, fp32 path): for each token t and stream s, with
  // key = kv[t, s*C : (s+1)*C], value = kv[t, 4C : 5C] (bf16 values in f32), x = X[t, s, :]:
  // dot = sum(x*qw[s]*kw[s]*key) * (1/sqrt(sum(x^2)/C + eps)) * (1/sqrt(sum(key^2)/C + eps)) / sqrt(C);
  // g = sigmoid(sign(dot) * sqrt(max(|dot|, 1e-6))) (sign(0) = +1); X[t, s, :] = bf16(x + g * value).
  // X bf16 [T, 4, C] in place, kv f32 [T, 5C], qw/kw bf16 [4, C].
  Status engramGate(uint64_t X, uint64_t kv, uint64_t qw, uint64_t kw, int64_t T, int64_t C, double eps,
                    void* stream) const;

  // Ratio-2 compressor pooling (CpuLayersCompressor): entry i pools the token pair
  // (first = r0 + 2i, second = r0 + 2i + 1) of kv/gate f32 [*, D]; a first row of -1 reads the
  // carried tail (tailKv/tailGate f32 [D]). Per channel: m = max(s0, s1), e0 = exp(s0 - m),
  // e1 = exp(s1 - m), sum = e0 + e1, out = bf16(e0 / sum * kv0 + e1 / sum * kv1) stored as f32.
  // out f32 [n, D]. r0 >= -1; tailKv/tailGate are read (and required) only when r0 == -1.
  Status pairPool(uint64_t kv, uint64_t gate, uint64_t tailKv, uint64_t tailGate, int64_t r0, int64_t n,
                  int64_t D, uint64_t out, void* stream) const;

  // Index-query quantization (docs/model.md §9, CpuForwardCaches quantizeIndexQuery): per row r of
  // q bf16 [rows, Di]: scale = UE8M0-ceil(max(amax, 1e-4) / 448); q[r] = e4m3(q[r] / scale)
  // decoded back to bf16 (in place); weights[r] = weights[r] * headScale * scale (weights f32
  // [rows], in place).
  Status indexQueryQuant(uint64_t q, int64_t rows, int64_t Di, uint64_t weights, double headScale,
                         void* stream) const;
  // Index-key insert (IndexKeyCache::append, docs/ops.md §7 layout): key r (bf16 [n, Di]) goes to
  // slot = slots[r] (i64, page * BS + offset; -1 skips) of the cache, page p at p * BS*(Di+4):
  // [BS * Di e4m3][BS fp32 scale], scale = UE8M0-ceil(max(amax, 1e-4) / 448) as fp32.
  // Di % 4 == 0 and a 4-byte aligned cache (the scales are fp32 stores).
  Status indexKeyInsert(uint64_t keys, uint64_t slots, int64_t n, int64_t Di, uint64_t cache, int64_t blockSize,
                        void* stream) const;

  // Candidate blocks (CpuLayersIndexer candidateBlocksOf): for token t with v = visible[t] > 0
  // and nb = ceil(v / blockSize): blockScores[t, b] = max of scores[t, b*bs .. min(v, (b+1)*bs))
  // for b < nb, +inf for the block of entry v - 1 (pinned), -inf for b >= nb up to `width`;
  // blockLens[t] = nb (0 when v <= 0). scores f32 [T, N] (stride), blockScores f32 [T, width],
  // visible i32 [T], blockLens i32 [T]. Blocks at or past `width` are not written (width >= nb).
  Status candidateBlockScores(uint64_t scores, int64_t scoresStride, uint64_t visible, int64_t T,
                              int64_t blockSize, uint64_t blockScores, int64_t width, uint64_t blockLens,
                              void* stream) const;
  // scores[t, j] = -inf for every j < visible[t] whose block j / blockSize is not among
  // keptBlocks[t, 0..KB) (i32, -1 padded, any order). In place on scores f32 [T, N] (stride);
  // visible i32 [T], clamped to the stride.
  Status maskToBlocks(uint64_t scores, int64_t scoresStride, uint64_t visible, int64_t T, uint64_t keptBlocks,
                      int64_t KB, int64_t blockSize, void* stream) const;
  // selection i32 [T, K] (ascending, -1 padded): entries whose score is -inf are removed, the
  // rest keep their order, -1 pads the end. In place. Entries that are -1 already are dropped too.
  Status dropNegInf(uint64_t selection, int64_t T, int64_t K, uint64_t scores, int64_t scoresStride,
                    void* stream) const;

  // Compressed entry ids -> cache slots (sparse_mla_decode indices): slots[t, i] =
  // pageTable[tokenReq[t], e / blockSize] * blockSize + e % blockSize for e = selection[t, i] >= 0,
  // else -1. selection/slots i32 [T, K], pageTable i32 [R, width], tokenReq i32 [T].
  Status selectionToSlots(uint64_t selection, int64_t T, int64_t K, uint64_t pageTable, int64_t width,
                          uint64_t tokenReq, int64_t blockSize, uint64_t slots, void* stream) const;

  // DSpark's target feature (CpuForward.cpp captureTap): out[t, 0..C) = bf16(((X[t,0] + X[t,1]) +
  // X[t,2] + X[t,3]) * 0.25) in fp32. X bf16 [T, 4, C], out bf16 rows of stride outStride >= C.
  Status streamMean(uint64_t X, int64_t T, int64_t C, uint64_t out, int64_t outStride, void* stream) const;

  // out[t] = argmax of logits[t, 0..V) (ties to the lower index; argmaxToken's NaN behaviour:
  // NaN never wins, and a NaN at index 0 gives 0). logits f32 [T, V], out i32 [T]. With
  // `finite` (i32 [T], optional) also reports per row whether every logit is finite, so greedy
  // callers can refuse NaN/inf rows without copying them to the host.
  Status argmax(uint64_t logits, int64_t T, int64_t V, uint64_t out, void* stream, uint64_t finite = 0) const;

 private:
  ModelKernels() = default;
  Status rmsNorm(bool f32Out, uint64_t x, int64_t xStride, uint64_t w, int64_t rows, int64_t n, double eps,
                 uint64_t out, int64_t outStride, void* stream) const;
  // Launches `entry` with `grid` CTAs of di::model::kCtaThreads threads (nothing when grid == 0).
  Status launch(const char* entry, int64_t grid, uint32_t dynamicSmem, const void* params, size_t bytes,
                void* stream) const;
  std::shared_ptr<Device> dev_;
  TargetProfile target_;
  DeviceModule module_;
  bool fromPtx_ = false;
  bool compiledNow_ = false;
};

}  // namespace deepinfer
