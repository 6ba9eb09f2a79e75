// The model-kernel launchers: validate sizes (an error names the kernel and the bad value; bad
// sizes never launch), pack the kernel's parameter struct (templates/model/params/*.h) and
// enqueue it on the caller's stream.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ModelKernels.h"
#include "model/params/ModelEngramParams.h"
#include "model/params/ModelIndexParams.h"
#include "model/params/ModelLaunch.h"
#include "model/params/ModelMiscParams.h"
#include "model/params/ModelMoeParams.h"
#include "model/params/ModelNormParams.h"
#include "model/params/ModelParallelParams.h"
#include "model/params/ModelRopeParams.h"

namespace deepinfer {
namespace {

using di::model::kCtaThreads;
using di::model::kCtaWarps;

constexpr int64_t kMaxGrid = int64_t(1) << 20;  // grid-stride loops cover the rest
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int kRouterMaxK = 32;                 // ModelMoe.cuh kRouterMaxK
constexpr int64_t kRouterMaxExperts = 6000;     // 8 * E bytes of dynamic shared memory < 48 KiB

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t gridFor(int64_t threads) { return std::min(ceilDiv(threads, kCtaThreads), kMaxGrid); }
int64_t gridForCtas(int64_t ctas) { return std::min(ctas, kMaxGrid); }
int64_t gridForWarps(int64_t warps) { return std::min(ceilDiv(warps, kCtaWarps), kMaxGrid); }

template <class T>
T* ptr(uint64_t a) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(a));
}

// Checks for one kernel: each failing check names the kernel, the value and the rule.
class Check {
 public:
  explicit Check(const char* kernel) : kernel_(kernel) {}
  Check& that(bool ok, const std::string& what) {
    if (!ok && msg_.empty()) msg_ = fmt::format("{}: {}", kernel_, what);
    return *this;
  }
  Check& range(const char* name, int64_t v, int64_t lo, int64_t hi) {
    return that(v >= lo && v <= hi, fmt::format("{} = {} is outside [{}, {}]", name, v, lo, hi));
  }
  Check& addr(const char* name, uint64_t a, int64_t align = 1) {
    that(a != 0, fmt::format("{} is a null device address", name));
    return that(a % uint64_t(align) == 0, fmt::format("{} = {:#x} is not {}-byte aligned", name, a, align));
  }
  Check& finite(const char* name, double v) { return that(std::isfinite(v), fmt::format("{} = {} is not finite", name, v)); }
  Status status() const {
    if (msg_.empty()) return {};
    return Error{msg_};
  }

 private:
  const char* kernel_;
  std::string msg_;
};

}  // namespace

Status ModelKernels::embedStreams(uint64_t ids, uint64_t embed, uint64_t X, int64_t T, int64_t C, void* stream) const {
  const char* k = "embedStreams";
  Check c(k);
  c.range("T", T, 0, kI32Max).range("C", C, 1, kI32Max);
  if (T > 0) c.addr("ids", ids, 4).addr("embed", embed, 2).addr("X", X, 2);
  DI_TRY(c.status());
  di::EmbedStreamsParams p{};
  p.ids = ptr<const int32_t>(ids);
  p.embed = ptr<const uint16_t>(embed);
  p.X = ptr<uint16_t>(X);
  p.T = T;
  p.C = C;
  p.vec = (C % 8 == 0 && embed % 16 == 0 && X % 16 == 0) ? 1 : 0;
  return launch("di_model_embed_streams", gridForCtas(T), 0, &p, sizeof(p), stream);
}

namespace {

Status checkRmsNorm(const char* k, uint64_t x, int64_t xStride, uint64_t w, int64_t rows, int64_t n, double eps,
                    uint64_t out, int64_t outStride, int outBytes) {
  Check c(k);
  c.range("rows", rows, 0, std::numeric_limits<int64_t>::max() / 2)
      .range("n", n, 1, kI32Max)
      .that(xStride >= n, fmt::format("xStride = {} is below n = {}", xStride, n))
      .that(outStride >= n, fmt::format("outStride = {} is below n = {}", outStride, n))
      .finite("eps", eps)
      .that(eps >= 0, fmt::format("eps = {} is negative", eps));
  if (rows > 0) c.addr("x", x, 4).addr("w", w, 2).addr("out", out, outBytes);
  return c.status();
}

}  // namespace

Status ModelKernels::rmsNormF32(uint64_t x, int64_t xStride, uint64_t w, int64_t rows, int64_t n, double eps,
                                uint64_t out, int64_t outStride, void* stream) const {
  return rmsNorm(false, x, xStride, w, rows, n, eps, out, outStride, stream);
}

Status ModelKernels::rmsNormF32ToF32(uint64_t x, int64_t xStride, uint64_t w, int64_t rows, int64_t n, double eps,
                                     uint64_t out, int64_t outStride, void* stream) const {
  return rmsNorm(true, x, xStride, w, rows, n, eps, out, outStride, stream);
}

// Both RMSNorm outputs: one warp per row up to kWarpRowsMaxWidth, else one CTA per row.
Status ModelKernels::rmsNorm(bool f32Out, uint64_t x, int64_t xStride, uint64_t w, int64_t rows, int64_t n, double eps,
                             uint64_t out, int64_t outStride, void* stream) const {
  DI_TRY(checkRmsNorm(f32Out ? "rmsNormF32ToF32" : "rmsNormF32", x, xStride, w, rows, n, eps, out, outStride,
                      f32Out ? 4 : 2));
  di::RmsNormParams p{ptr<const float>(x), ptr<const uint16_t>(w), ptr<void>(out), xStride, outStride, rows,
                      int32_t(n), float(eps)};
  const bool warp = n <= di::model::kWarpRowsMaxWidth;
  const char* entry = f32Out ? (warp ? "di_model_rms_norm_f32_warp" : "di_model_rms_norm_f32_cta")
                             : (warp ? "di_model_rms_norm_bf16_warp" : "di_model_rms_norm_bf16_cta");
  return launch(entry, warp ? gridForWarps(rows) : gridForCtas(rows), 0, &p, sizeof(p), stream);
}

namespace {

Status checkRope(Check& c, int64_t rows, int64_t width, int64_t ropeDim, uint64_t invFreq,
                 const ModelKernels::RopePositions& pos) {
  c.range("rows", rows, 0, std::numeric_limits<int64_t>::max() / 2)
      .range("width", width, 1, kI32Max)
      .range("ropeDim", ropeDim, 2, width)
      .that(ropeDim % 2 == 0, fmt::format("ropeDim = {} is odd", ropeDim))
      .range("rowsPerPos", pos.rowsPerPos, 1, std::numeric_limits<int64_t>::max());
  if (pos.positions != 0)
    c.that(pos.rowsPerPos >= 1 && rows % pos.rowsPerPos == 0,
           fmt::format("rows = {} is not a multiple of rowsPerPos = {} (positions has rows / rowsPerPos entries)",
                       rows, pos.rowsPerPos))
        .addr("positions", pos.positions, 8);
  if (rows > 0) c.addr("invFreq", invFreq, 4);
  return c.status();
}

di::RopeParams ropeParams(uint64_t x, uint64_t out, int64_t xStride, int64_t outStride, int64_t rows, int64_t width,
                          int64_t ropeDim, uint64_t invFreq, const ModelKernels::RopePositions& pos, bool inverse) {
  di::RopeParams p{};
  p.x = ptr<const void>(x);
  p.out = ptr<uint16_t>(out);
  p.inv_freq = ptr<const float>(invFreq);
  p.positions = ptr<const int64_t>(pos.positions);
  p.x_stride = xStride;
  p.out_stride = outStride;
  p.rows = rows;
  p.rows_per_pos = pos.rowsPerPos;
  p.pos_base = pos.posBase;
  p.pos_stride = pos.posStride;
  p.width = int32_t(width);
  p.rope_dim = int32_t(ropeDim);
  p.inverse = inverse ? 1 : 0;
  return p;
}

}  // namespace

Status ModelKernels::ropeF32ToBf16(uint64_t x, int64_t xStride, int64_t rows, int64_t width, int64_t ropeDim,
                                   uint64_t invFreq, const RopePositions& pos, uint64_t out, int64_t outStride,
                                   void* stream) const {
  Check c("ropeF32ToBf16");
  c.that(xStride >= width, fmt::format("xStride = {} is below width = {}", xStride, width))
      .that(outStride >= width, fmt::format("outStride = {} is below width = {}", outStride, width));
  if (rows > 0) c.addr("x", x, 4).addr("out", out, 2);
  DI_TRY(checkRope(c, rows, width, ropeDim, invFreq, pos));
  const di::RopeParams p = ropeParams(x, out, xStride, outStride, rows, width, ropeDim, invFreq, pos, false);
  return launch("di_model_rope_f32_to_bf16", gridFor(rows * (width - ropeDim / 2)), 0, &p, sizeof(p), stream);
}

Status ModelKernels::ropeBf16InPlace(uint64_t x, int64_t stride, int64_t rows, int64_t width, int64_t ropeDim,
                                     uint64_t invFreq, const RopePositions& pos, bool inverse, void* stream) const {
  Check c("ropeBf16InPlace");
  c.that(stride >= width, fmt::format("stride = {} is below width = {}", stride, width));
  if (rows > 0) c.addr("x", x, 2);
  DI_TRY(checkRope(c, rows, width, ropeDim, invFreq, pos));
  const di::RopeParams p = ropeParams(x, x, stride, stride, rows, width, ropeDim, invFreq, pos, inverse);
  return launch("di_model_rope_bf16_inplace", gridFor(rows * (ropeDim / 2)), 0, &p, sizeof(p), stream);
}

Status ModelKernels::roundToBf16(uint64_t x, uint64_t out, int64_t n, void* stream) const {
  Check c("roundToBf16");
  c.range("n", n, 0, std::numeric_limits<int64_t>::max() / 2);
  if (n > 0) c.addr("x", x, 4).addr("out", out, 2);
  DI_TRY(c.status());
  di::RoundBf16Params p{ptr<const float>(x), ptr<uint16_t>(out), n};
  return launch("di_model_round_bf16", gridFor(n), 0, &p, sizeof(p), stream);
}

Status ModelKernels::roundF32InPlace(uint64_t x, int64_t n, void* stream) const {
  Check c("roundF32InPlace");
  c.range("n", n, 0, std::numeric_limits<int64_t>::max() / 2);
  if (n > 0) c.addr("x", x, 4);
  DI_TRY(c.status());
  di::RoundF32Params p{ptr<float>(x), n};
  return launch("di_model_round_f32_inplace", gridFor(n), 0, &p, sizeof(p), stream);
}

Status ModelKernels::routerTopk(uint64_t logits, uint64_t bias, int64_t T, int64_t E, int64_t k, bool normTopk,
                                double scaling, uint64_t ids, uint64_t weights, void* stream) const {
  Check c("routerTopk");
  c.range("T", T, 0, std::numeric_limits<int64_t>::max() / 2)
      .range("E", E, 1, kRouterMaxExperts)
      .range("k", k, 1, std::min<int64_t>(E, kRouterMaxK))
      .finite("scaling", scaling);
  if (T > 0) c.addr("logits", logits, 4).addr("bias", bias, 4).addr("ids", ids, 4).addr("weights", weights, 4);
  DI_TRY(c.status());
  di::RouterTopkParams p{};
  p.logits = ptr<const float>(logits);
  p.bias = ptr<const float>(bias);
  p.ids = ptr<int32_t>(ids);
  p.weights = ptr<float>(weights);
  p.T = T;
  p.E = int32_t(E);
  p.k = int32_t(k);
  p.norm_topk = normTopk ? 1 : 0;
  p.scaling = float(scaling);
  return launch("di_model_router_topk", gridForCtas(T), uint32_t(8 * E), &p, sizeof(p), stream);
}

Status ModelKernels::gatherRowsBf16(uint64_t src, uint64_t rowIdx, int64_t n, int64_t C, uint64_t out,
                                    void* stream) const {
  Check c("gatherRowsBf16");
  c.range("n", n, 0, kI32Max).range("C", C, 1, kI32Max);
  if (n > 0) c.addr("src", src, 2).addr("rowIdx", rowIdx, 4).addr("out", out, 2);
  DI_TRY(c.status());
  di::RowsParams p{ptr<const void>(src), ptr<void>(out), ptr<const int32_t>(rowIdx), n, C,
                   (C % 8 == 0 && src % 16 == 0 && out % 16 == 0) ? 1 : 0, 0};
  return launch("di_model_gather_rows_bf16", gridForCtas(n), 0, &p, sizeof(p), stream);
}

Status ModelKernels::scatterRowsF32(uint64_t src, uint64_t rowIdx, int64_t n, int64_t C, uint64_t dst,
                                    void* stream) const {
  Check c("scatterRowsF32");
  c.range("n", n, 0, kI32Max).range("C", C, 1, kI32Max);
  if (n > 0) c.addr("src", src, 4).addr("rowIdx", rowIdx, 4).addr("dst", dst, 4);
  DI_TRY(c.status());
  di::RowsParams p{ptr<const void>(src), ptr<void>(dst), ptr<const int32_t>(rowIdx), n, C,
                   (C % 4 == 0 && src % 16 == 0 && dst % 16 == 0) ? 1 : 0, 0};
  return launch("di_model_scatter_rows_f32", gridForCtas(n), 0, &p, sizeof(p), stream);
}

Status ModelKernels::moeSum(uint64_t shared, uint64_t routed, int64_t T, int64_t k, int64_t C, uint64_t out,
                            void* stream, bool f32Out) const {
  Check c("moeSum");
  c.range("T", T, 0, kI32Max).range("k", k, 0, 1024).range("C", C, 1, kI32Max);
  if (T > 0) {
    c.addr("out", out, f32Out ? 4 : 2);
    if (k > 0) c.addr("routed", routed, 4);
    if (shared != 0) c.addr("shared", shared, 4);
  }
  DI_TRY(c.status());
  di::MoeSumParams p{ptr<const float>(shared), ptr<const float>(routed), ptr<void>(out), T, C, int32_t(k),
                     f32Out ? 1 : 0};
  return launch("di_model_moe_sum", gridFor(T * C), 0, &p, sizeof(p), stream);
}

Status ModelKernels::addElems(uint64_t a, uint64_t b, uint64_t out, int64_t n, bool bf16, void* stream) const {
  Check c("addElems");
  c.range("n", n, 0, std::numeric_limits<int64_t>::max() / 4);
  const int64_t align = bf16 ? 2 : 4;
  if (n > 0) c.addr("a", a, align).addr("b", b, align).addr("out", out, align);
  DI_TRY(c.status());
  if (n == 0) return {};
  di::AddParams p{ptr<const void>(a), ptr<const void>(b), ptr<void>(out), n, bf16 ? 1 : 0, 0};
  return launch("di_model_add", gridFor(n), 0, &p, sizeof(p), stream);
}

Status ModelKernels::localExpertIds(uint64_t ids, int64_t n, int64_t begin, int64_t end, void* stream) const {
  Check c("localExpertIds");
  c.range("n", n, 0, kI32Max).range("begin", begin, 0, kI32Max).range("end", end, begin, kI32Max);
  if (n > 0) c.addr("ids", ids, 4);
  DI_TRY(c.status());
  if (n == 0) return {};
  di::LocalExpertIdsParams p{ptr<int32_t>(ids), n, int32_t(begin), int32_t(end)};
  return launch("di_model_local_expert_ids", gridFor(n), 0, &p, sizeof(p), stream);
}

Status ModelKernels::engramGate(uint64_t X, uint64_t kv, uint64_t qw, uint64_t kw, int64_t T, int64_t C, double eps,
                                void* stream) const {
  Check c("engramGate");
  c.range("T", T, 0, kI32Max).range("C", C, 1, kI32Max).finite("eps", eps);
  c.that(eps >= 0, fmt::format("eps = {} is negative", eps));
  if (T > 0) c.addr("X", X, 2).addr("kv", kv, 4).addr("qw", qw, 2).addr("kw", kw, 2);
  DI_TRY(c.status());
  di::EngramGateParams p{};
  p.X = ptr<uint16_t>(X);
  p.kv = ptr<const float>(kv);
  p.qw = ptr<const uint16_t>(qw);
  p.kw = ptr<const uint16_t>(kw);
  p.T = T;
  p.C = int32_t(C);
  p.eps = float(eps);
  p.inv_sqrt_c = float(1.0 / std::sqrt(double(C)));  // CpuLayersEngram: float(invSqrtC)
  return launch("di_model_engram_gate", gridForCtas(T * 4), 0, &p, sizeof(p), stream);
}

Status ModelKernels::pairPool(uint64_t kv, uint64_t gate, uint64_t tailKv, uint64_t tailGate, int64_t r0, int64_t n,
                              int64_t D, uint64_t out, void* stream) const {
  Check c("pairPool");
  c.range("r0", r0, -1, std::numeric_limits<int64_t>::max() / 4).range("n", n, 0, kI32Max).range("D", D, 1, kI32Max);
  if (n > 0) {
    c.addr("kv", kv, 4).addr("gate", gate, 4).addr("out", out, 4);
    if (r0 == -1) c.addr("tailKv (r0 = -1)", tailKv, 4).addr("tailGate (r0 = -1)", tailGate, 4);
  }
  DI_TRY(c.status());
  di::PairPoolParams p{ptr<const float>(kv),       ptr<const float>(gate), ptr<const float>(tailKv),
                       ptr<const float>(tailGate), ptr<float>(out),        r0,
                       n,                          D};
  return launch("di_model_pair_pool", gridFor(n * D), 0, &p, sizeof(p), stream);
}

Status ModelKernels::indexQueryQuant(uint64_t q, int64_t rows, int64_t Di, uint64_t weights, double headScale,
                                     void* stream) const {
  Check c("indexQueryQuant");
  c.range("rows", rows, 0, std::numeric_limits<int64_t>::max() / 2).range("Di", Di, 1, kI32Max).finite("headScale", headScale);
  if (rows > 0) c.addr("q", q, 2).addr("weights", weights, 4);
  DI_TRY(c.status());
  di::IndexQueryQuantParams p{ptr<uint16_t>(q), ptr<float>(weights), rows, int32_t(Di), float(headScale)};
  return launch("di_model_index_query_quant", gridForWarps(rows), 0, &p, sizeof(p), stream);
}

Status ModelKernels::indexKeyInsert(uint64_t keys, uint64_t slots, int64_t n, int64_t Di, uint64_t cache,
                                    int64_t blockSize, void* stream) const {
  Check c("indexKeyInsert");
  c.range("n", n, 0, kI32Max).range("Di", Di, 4, kI32Max).range("blockSize", blockSize, 1, kI32Max);
  c.that(Di % 4 == 0, fmt::format("Di = {} is not a multiple of 4 (fp32 scales follow the codes)", Di));
  if (n > 0) c.addr("keys", keys, 2).addr("slots", slots, 8).addr("cache", cache, 4);
  DI_TRY(c.status());
  di::IndexKeyInsertParams p{ptr<const uint16_t>(keys), ptr<const int64_t>(slots), ptr<uint8_t>(cache), n, blockSize,
                             int32_t(Di), 0};
  return launch("di_model_index_key_insert", gridForWarps(n), 0, &p, sizeof(p), stream);
}

Status ModelKernels::candidateBlockScores(uint64_t scores, int64_t scoresStride, uint64_t visible, int64_t T,
                                          int64_t blockSize, uint64_t blockScores, int64_t width, uint64_t blockLens,
                                          void* stream) const {
  Check c("candidateBlockScores");
  c.range("T", T, 0, kI32Max)
      .range("scoresStride", scoresStride, 1, std::numeric_limits<int64_t>::max() / 2)
      .range("blockSize", blockSize, 1, kI32Max)
      .range("width", width, 1, kI32Max);
  if (T > 0)
    c.addr("scores", scores, 4).addr("visible", visible, 4).addr("blockScores", blockScores, 4).addr("blockLens", blockLens, 4);
  DI_TRY(c.status());
  di::CandidateBlockScoresParams p{ptr<const float>(scores), ptr<const int32_t>(visible), ptr<float>(blockScores),
                                   ptr<int32_t>(blockLens),  scoresStride, T, blockSize, width};
  return launch("di_model_candidate_block_scores", gridFor(T * width), 0, &p, sizeof(p), stream);
}

Status ModelKernels::maskToBlocks(uint64_t scores, int64_t scoresStride, uint64_t visible, int64_t T,
                                  uint64_t keptBlocks, int64_t KB, int64_t blockSize, void* stream) const {
  Check c("maskToBlocks");
  c.range("T", T, 0, kI32Max)
      .range("scoresStride", scoresStride, 1, std::numeric_limits<int64_t>::max() / 2)
      .range("KB", KB, 0, kI32Max)
      .range("blockSize", blockSize, 1, kI32Max);
  if (T > 0) {
    c.addr("scores", scores, 4).addr("visible", visible, 4);
    if (KB > 0) c.addr("keptBlocks", keptBlocks, 4);
  }
  DI_TRY(c.status());
  di::MaskToBlocksParams p{ptr<float>(scores), ptr<const int32_t>(visible), ptr<const int32_t>(keptBlocks),
                           scoresStride,       T,                           blockSize,
                           int32_t(KB),        0};
  return launch("di_model_mask_to_blocks", gridForCtas(T), 0, &p, sizeof(p), stream);
}

Status ModelKernels::dropNegInf(uint64_t selection, int64_t T, int64_t K, uint64_t scores, int64_t scoresStride,
                                void* stream) const {
  Check c("dropNegInf");
  c.range("T", T, 0, kI32Max).range("K", K, 0, kI32Max).range("scoresStride", scoresStride, 1,
                                                               std::numeric_limits<int64_t>::max() / 2);
  if (T > 0 && K > 0) c.addr("selection", selection, 4).addr("scores", scores, 4);
  DI_TRY(c.status());
  if (K == 0) return {};
  di::DropNegInfParams p{ptr<int32_t>(selection), ptr<const float>(scores), scoresStride, T, int32_t(K), 0};
  return launch("di_model_drop_neg_inf", gridForWarps(T), 0, &p, sizeof(p), stream);
}

Status ModelKernels::selectionToSlots(uint64_t selection, int64_t T, int64_t K, uint64_t pageTable, int64_t width,
                                      uint64_t tokenReq, int64_t blockSize, uint64_t slots, void* stream) const {
  Check c("selectionToSlots");
  c.range("T", T, 0, kI32Max).range("K", K, 0, kI32Max).range("width", width, 1, kI32Max)
      .range("blockSize", blockSize, 1, 1 << 20);
  if (T > 0 && K > 0)
    c.addr("selection", selection, 4).addr("pageTable", pageTable, 4).addr("tokenReq", tokenReq, 4).addr("slots", slots, 4);
  DI_TRY(c.status());
  if (T == 0 || K == 0) return {};
  di::SelectionToSlotsParams p{ptr<const int32_t>(selection), ptr<const int32_t>(pageTable), ptr<const int32_t>(tokenReq),
                               ptr<int32_t>(slots), T, int32_t(K), int32_t(width), int32_t(blockSize), 0};
  return launch("di_model_selection_to_slots", gridFor(T * K), 0, &p, sizeof(p), stream);
}

Status ModelKernels::argmax(uint64_t logits, int64_t T, int64_t V, uint64_t out, void* stream,
                            uint64_t finite) const {
  Check c("argmax");
  c.range("T", T, 0, kI32Max).range("V", V, 1, kI32Max);
  if (T > 0) c.addr("logits", logits, 4).addr("out", out, 4);
  if (T > 0 && finite != 0) c.addr("finite", finite, 4);
  DI_TRY(c.status());
  di::ArgmaxParams p{ptr<const float>(logits), ptr<int32_t>(out), ptr<int32_t>(finite), T, V};
  return launch("di_model_argmax", gridForCtas(T), 0, &p, sizeof(p), stream);
}

Status ModelKernels::streamMean(uint64_t X, int64_t T, int64_t C, uint64_t out, int64_t outStride,
                                void* stream) const {
  Check c("streamMean");
  c.range("T", T, 0, kI32Max).range("C", C, 1, kI32Max).range("outStride", outStride, C, kI32Max);
  if (T > 0) c.addr("X", X, 2).addr("out", out, 2);
  DI_TRY(c.status());
  di::StreamMeanParams p{ptr<const uint16_t>(X), ptr<uint16_t>(out), T, C, outStride};
  return launch("di_model_stream_mean", gridFor(T * C), 0, &p, sizeof(p), stream);
}

}  // namespace deepinfer
