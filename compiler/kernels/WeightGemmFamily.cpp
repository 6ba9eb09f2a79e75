// Kernel family of weight_gemm (templates/WeightGemm.cuh): y = x . dequant(w)^T with w in its
// checkpoint format (spec/model.md §3) and the model's epilogues.
//
// Knobs: the CTA tile (QuantTileGeometry.h: block_m/n/k, warps_m/n/k, stages) and `splits`, the
// number of CTAs that share one output tile's K (their fp32 partials go to the workspace and a
// second launch sums them in split order). Default heuristic, per target:
//  - decode (M <= 16, weight-bandwidth bound): one m16 tile holding M rows (block_m = M rounded
//    up to a power of two: shared memory and copies only for real rows), 4 warps splitting each stage's K
//    (block_k 128: one k32 block per warp), 8 KB of weights per stage per matrix (block_n 128
//    for e2m1, 64 for e4m3; halved for a SwiGLU pair), as many stages as fit 48 KB (64 KB where
//    the target lifts the cap), and splits so that about two CTAs per SM stream weights (each
//    split keeping at least two stages of K);
//  - prefill (M > 16, tensor-core bound): 128 x 128 tiles (64 x 128 up to M = 64, 32 rows up
//    to M = 32; block_n 64 for a SwiGLU pair) on 2 x 2 warps, block_k 32 with 3 stages under a
//    48 KB cap and 64 with 4 stages where the cap allows, one split unless the tiles are fewer
//    than the SMs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "Families.h"
#include "QuantTileGeometry.h"
#include "params/WeightGemmParams.h"

namespace deepinfer {
namespace {

constexpr const char* kOp = "weight_gemm";
constexpr int64_t kMaxRows = 65535 * 16;  // row tiles go in grid.y
constexpr int kMaxSplits = 32;

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Shape {
  int64_t M, N, K, G, Kg, Ng;
  bool fp4;
  int epilogue;
  bool gated() const { return epilogue == 2; }
};

Shape shapeOf(const OpDesc& d) {
  Shape s;
  s.M = d.dim("x", 0);
  s.K = d.dim("x", 1);
  s.N = d.dim("w", 0);
  s.G = std::max<int64_t>(1, d.attrs.getInt("groups", 1));
  s.Kg = s.K / s.G;
  s.Ng = s.N / s.G;
  s.fp4 = d.attrs.getInt("weight_bits", 8) == 4;
  s.epilogue = int(d.attrs.getInt("epilogue", 0));
  return s;
}

struct Geometry {
  QuantTile tile;
  int64_t tilesPerGroup = 0, mTiles = 0, kBlocks = 0, kbPerSplit = 0;
  int splits = 1;  // effective: every split has at least one k32 block
  int64_t ctas() const { return tilesPerGroup * mTiles * splits; }
};

Result<Geometry> geometry(const KernelConfig& c, const OpDesc& d) {
  const Shape s = shapeOf(d);
  auto tile = quantTileFromConfig(c, kOp, s.fp4, s.gated());
  if (!tile.ok()) return tile.error();
  Geometry g;
  g.tile = *tile;
  auto it = c.find("splits");
  const int64_t want = it == c.end() ? 1 : it->second;
  if (want < 1 || want > kMaxSplits)
    return Error{fmt::format("{}: splits = {} must be in 1..{} ({})", kOp, want, kMaxSplits, configToString(c))};
  g.tilesPerGroup = cdiv(s.Ng, g.tile.bn);
  g.mTiles = cdiv(s.M, g.tile.bm);
  if (g.mTiles > 65535)
    return Error{fmt::format("{}: M = {} gives {} row tiles of block_m = {}; at most 65535", kOp, s.M, g.mTiles,
                             g.tile.bm)};
  g.kBlocks = cdiv(s.Kg, 32);
  const int64_t kbStage = g.tile.bk / 32;
  g.kbPerSplit = cdiv(cdiv(g.kBlocks, want), kbStage) * kbStage;
  g.splits = int(std::max<int64_t>(1, cdiv(g.kBlocks, g.kbPerSplit)));
  if (g.splits == 1) g.kbPerSplit = g.kBlocks;
  return g;
}

// The decode tile: 4 warps over K, 8 KB of weights per stage per matrix, only the rows M has.
QuantTile decodeTile(const Shape& s, const TargetProfile& t) {
  QuantTile q;
  q.fp4 = s.fp4;
  q.gated = s.gated();
  q.bm = decodeBlockM(s.M);
  q.wm = 1;
  q.wn = 1;
  q.wk = 4;
  q.bk = 128;
  q.bn = (s.fp4 ? 128 : 64) / (s.gated() ? 2 : 1);
  const int64_t budget = std::min<int64_t>(t.smemPerCtaCap, 64 * 1024);
  q.stages = 2;
  while (q.stages < 8) {
    QuantTile more = q;
    ++more.stages;
    if (more.smemBytes() > budget) break;
    q = more;
  }
  return q;
}

QuantTile prefillTile(const Shape& s, const TargetProfile& t) {
  QuantTile q;
  q.fp4 = s.fp4;
  q.gated = s.gated();
  q.bm = s.M <= 32 ? 32 : s.M <= 64 ? 64 : 128;
  q.bn = s.gated() ? 64 : 128;
  q.wm = q.bm >= 64 ? 2 : 1;
  q.wn = 2;
  q.wk = 1;
  const bool roomy = t.smemPerCtaCap >= 96 * 1024;
  q.bk = roomy ? 64 : 32;
  q.stages = roomy ? 4 : 3;
  while (q.smemBytes() > t.smemPerCtaCap && q.stages > 2) --q.stages;
  return q;
}

// Splits so that about two CTAs per SM stream the weights, each split keeping two stages of K.
int splitsFor(const QuantTile& q, const Shape& s, const TargetProfile& t) {
  const int64_t tiles = cdiv(s.Ng, q.bn) * s.G * cdiv(std::max<int64_t>(s.M, 1), q.bm);
  const int64_t want = 2 * int64_t(std::max(1, t.smCount));
  const int64_t kStages = cdiv(cdiv(s.Kg, 32), q.bk / 32);
  int64_t splits = cdiv(want, std::max<int64_t>(tiles, 1));
  splits = std::min<int64_t>({splits, std::max<int64_t>(1, kStages / 2), kMaxSplits});
  return int(std::max<int64_t>(splits, 1));
}

KernelConfig configOf(const QuantTile& q, int splits) {
  KernelConfig c;
  setTileKnobs(c, q);
  c["splits"] = splits;
  return c;
}

class WeightGemmFamily final : public KernelFamily {
 public:
  std::string opName() const override { return kOp; }

  std::vector<std::string> templateHeaders() const override {
    return {"WeightGemm.cuh", "QuantGemmTile.cuh", "params/WeightGemmParams.h", "common/QuantWeights.cuh",
            "common/Mma.cuh", "common/Numerics.cuh", "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    const int64_t bits = d.attrs.getInt("weight_bits", 0);
    if (bits != 4 && bits != 8)
      return Error{fmt::format("{}: weight_bits = {} must be 8 (e4m3, 32x32-block scales) or 4 (e2m1, 1x32 "
                               "scales)", kOp, bits)};
    const int64_t epi = d.attrs.getInt("epilogue", 0);
    if (epi < 0 || epi > 2)
      return Error{fmt::format("{}: epilogue = {} must be 0 (f32 y), 1 (bf16 y) or 2 (SwiGLU of w and w_up, bf16 "
                               "y)", kOp, epi)};
    const int64_t G = d.attrs.getInt("groups", 1);
    if (G < 1) return Error{fmt::format("{}: groups = {} must be at least 1", kOp, G)};
    const double limit = d.attrs.getFloat("swiglu_limit", 10.0);
    if (!(limit > 0) || !std::isfinite(limit))
      return Error{fmt::format("{}: swiglu_limit = {} must be a positive finite number", kOp, limit)};
    DI_TRY(expectRank(d, "x", 2));
    const int64_t M = d.dim("x", 0), K = d.dim("x", 1);
    if (M > kMaxRows) return Error{fmt::format("{}: x has {} rows; at most {}", kOp, M, kMaxRows)};
    if (K < 1 || K % G != 0)
      return Error{fmt::format("{}: x has {} columns, not a positive multiple of groups = {}", kOp, K, G)};
    const int64_t Kg = K / G;
    DI_TRY(expectRank(d, "w", 2));
    const int64_t N = d.dim("w", 0);
    if (N < 1 || N > INT32_MAX || N % G != 0)
      return Error{fmt::format("{}: w has {} rows, not a positive multiple of groups = {} (at most {})", kOp, N, G,
                               INT32_MAX)};
    if (G > 1 && (N / G) % 8 != 0)
      return Error{fmt::format("{}: w has {} rows = {} groups of {}; grouped weights need groups of a multiple of "
                               "8 rows", kOp, N, G, N / G)};
    if (Kg > INT32_MAX / 2) return Error{fmt::format("{}: {} columns per group is too many", kOp, Kg)};
    std::vector<int64_t> wShape, sShape;
    if (bits == 8) {
      if (Kg % 16 != 0)
        return Error{fmt::format("{}: e4m3 weights need K per group = {} to be a multiple of 16 (16-byte rows)", kOp,
                                 Kg)};
      wShape = {N, Kg};
      sShape = {cdiv(N, 32), cdiv(Kg, 32)};
    } else {
      if (Kg % 32 != 0)
        return Error{fmt::format("{}: e2m1 weights need K per group = {} to be a multiple of 32 (one scale per 32 "
                                 "columns)", kOp, Kg)};
      wShape = {N, Kg / 2};
      sShape = {N, Kg / 32};
    }
    DI_TRY(expectShape(d, "w", wShape));
    DI_TRY(expectShape(d, "w_scale", sShape));
    if (epi == 2) {
      if (!d.hasTensor("w_up") || !d.hasTensor("w_up_scale"))
        return Error{fmt::format("{}: epilogue = 2 (SwiGLU) needs the up projection 'w_up' and 'w_up_scale'", kOp)};
      DI_TRY(expectShape(d, "w_up", wShape));
      DI_TRY(expectShape(d, "w_up_scale", sShape));
    } else if (d.hasTensor("w_up") || d.hasTensor("w_up_scale")) {
      return Error{fmt::format("{}: 'w_up'/'w_up_scale' are read only by epilogue = 2 (SwiGLU); epilogue = {}", kOp,
                               epi)};
    }
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    const DType t = d.attrs.getInt("epilogue", 0) == 0 ? DType::F32 : DType::BF16;
    return {{"y", {t, {d.dim("x", 0), d.dim("w", 0)}}}};
  }

  std::vector<KernelConfig> candidates(const OpDesc& d, const TargetProfile& t) const override {
    const Shape s = shapeOf(d);
    const KernelConfig base = defaultConfig(d, t);
    std::vector<KernelConfig> out = {base};
    auto add = [&](QuantTile q, int splits) {
      while (q.smemBytes() > t.smemPerCtaCap && q.stages > 2) --q.stages;
      KernelConfig c = configOf(q, splits);
      if (!geometry(c, d).ok()) return;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    };
    auto q0 = quantTileFromConfig(base, kOp, s.fp4, s.gated());
    if (!q0.ok()) return out;
    const int sp0 = int(base.at("splits"));
    if (s.M <= 16) {
      for (int f : {2, -2}) {  // narrower / wider tiles, splits re-derived
        QuantTile q = *q0;
        q.bn = f > 0 ? q.bn * 2 : q.bn / 2;
        if (q.bn >= 16) add(q, splitsFor(q, s, t));
      }
      QuantTile two = *q0;  // 2 x 2 warps: fewer K partials to sum, more columns per warp
      two.wn = 2;
      two.wk = 2;
      add(two, sp0);
      QuantTile deeper = *q0;
      ++deeper.stages;
      add(deeper, sp0);
      QuantTile wideK = *q0;
      wideK.bk = 256;
      wideK.wk = 8;
      add(wideK, sp0);
      if (q0->bm < 16) {  // a full m16 tile (the decode tile before block_m followed M)
        QuantTile rows16 = *q0;
        rows16.bm = 16;
        add(rows16, sp0);
      }
      add(*q0, std::max(1, sp0 / 2));
      add(*q0, std::min(kMaxSplits, sp0 * 2));
      if (sp0 > 1) {  // one launch: narrower tiles over the whole K, as deep a pipeline as fits
        QuantTile deep = *q0;
        deep.bn = std::max(16, q0->bn / 2);
        deep.stages = 6;
        add(deep, 1);
      }
    } else {
      QuantTile narrow = *q0;
      narrow.bn /= 2;
      add(narrow, splitsFor(narrow, s, t));
      if (q0->bm == 128) {
        QuantTile half = *q0;
        half.bm = 64;
        add(half, splitsFor(half, s, t));
      }
      QuantTile deeper = *q0;
      ++deeper.stages;
      add(deeper, sp0);
      QuantTile wideK = *q0;
      wideK.bk *= 2;
      add(wideK, sp0);
      QuantTile four = *q0;  // 8 warps: 2 x 4
      four.wn = 4;
      add(four, sp0);
    }
    return out;
  }

  Status checkKnobs(const KernelConfig& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    return g.ok() ? Status{} : Status{g.error()};
  }

  ResourceEstimate estimate(const KernelConfig& c, const OpDesc& d) const override {
    ResourceEstimate e;
    auto g = geometry(c, d);
    if (!g.ok()) {  // not instantiable: make the specialization pass drop it
      e.smemBytes = INT64_MAX / 2;
      e.threadsPerCta = 1024;
      e.regsPerThread = 256;
      return e;
    }
    e.smemBytes = g->tile.smemBytes();
    e.threadsPerCta = g->tile.threads();
    e.regsPerThread = g->tile.regsCap();
    return e;
  }

  KernelConfig defaultConfig(const OpDesc& d, const TargetProfile& t) const override {
    const Shape s = shapeOf(d);
    const QuantTile q = s.M <= 16 ? decodeTile(s, t) : prefillTile(s, t);
    return configOf(q, splitsFor(q, s, t));
  }

  CudaUnit emit(const KernelConfig& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    auto g = geometry(c, d);
    if (!g.ok()) {  // the pipeline validates configs first; make a bad one fail loudly at compile
      u.source = fmt::format("#error \"{}\"\n", g.error().message);
      return u;
    }
    const Shape s = shapeOf(d);
    const bool split = g->splits > 1;
    u.source = fmt::format(
        "#include \"WeightGemm.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::WeightGemmParams p) {{\n"
        "  di::weight_gemm_tile<{}, {}, {}>(p);\n"
        "}}\n",
        g->tile.threads(), g->tile.minBlocks(), baseName, g->tile.templateArgs(), s.epilogue, split ? "true" : "false");
    u.entries = {baseName};
    if (split) {
      u.source += fmt::format(
          "extern \"C\" __global__ void __launch_bounds__(256) {}_reduce(const di::WeightGemmParams p) {{\n"
          "  di::weight_gemm_reduce<{}>(p);\n"
          "}}\n",
          baseName, s.epilogue);
      u.entries.push_back(baseName + "_reduce");
    }
    return u;
  }

  std::vector<LaunchStep> launchPlan(const KernelConfig& c, const OpDesc& d,
                                     const std::string& baseName) const override {
    auto g = geometry(c, d);
    const Shape s = shapeOf(d);
    if (!g.ok() || s.M == 0) return {};  // nothing to write
    LaunchStep main;
    main.entry = baseName;
    main.grid = {uint32_t(g->tilesPerGroup * s.G), uint32_t(g->mTiles), uint32_t(g->splits)};
    main.block = {uint32_t(g->tile.threads()), 1, 1};
    main.dynamicSmem = uint32_t(g->tile.smemBytes());
    std::vector<LaunchStep> plan = {main};
    if (g->splits > 1) {
      LaunchStep red;
      red.entry = baseName + "_reduce";
      red.grid = {uint32_t(std::clamp<int64_t>(cdiv(s.M * s.N, 256), 1, 4096)), 1, 1};
      red.block = {256, 1, 1};
      plan.push_back(red);
    }
    return plan;
  }

  int64_t workspaceBytes(const KernelConfig& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    if (!g.ok() || g->splits <= 1) return 0;
    const Shape s = shapeOf(d);
    return int64_t(g->splits) * s.M * s.N * (s.gated() ? 2 : 1) * 4;
  }

  Result<std::vector<uint8_t>> packParams(const KernelConfig& c, const OpDesc& d,
                                          const DeviceAddrMap& addrs) const override {
    return packStridedParams(c, d, addrs, {});
  }

  // x may be any [M, K] view with contiguous rows (a column slice of a wider activation) and y
  // any [M, N] view with contiguous rows; rows stay 16-byte (x) and pair (y) aligned.
  Status checkStrides(const OpDesc& d, const std::string& name, const std::vector<int64_t>& strides) const override {
    if (name != "x" && name != "y") return KernelFamily::checkStrides(d, name, strides);
    const int64_t cols = name == "x" ? d.dim("x", 1) : d.dim("w", 0);
    const int64_t align = name == "x" ? 8 : 2;
    if (strides.size() != 2 || strides[1] != 1 || strides[0] < cols || strides[0] % align != 0)
      return Error{fmt::format("{}: '{}' strides [{}]: rows must be contiguous (stride 1 in dim 1) and at least {} "
                               "elements apart, a multiple of {}", kOp, name,
                               fmt::join(strides, ", "), cols, align)};
    return {};
  }

  Result<std::vector<uint8_t>> packStridedParams(const KernelConfig& c, const OpDesc& d, const DeviceAddrMap& addrs,
                                                 const TensorStrides& strides) const override {
    auto g = geometry(c, d);
    if (!g.ok()) return g.error();
    const Shape s = shapeOf(d);
    di::WeightGemmParams p{};
    p.ldx = s.K;
    p.ldy = s.N;
    for (const auto& [name, st] : strides) {
      DI_TRY(checkStrides(d, name, st));
      (name == "x" ? p.ldx : p.ldy) = st[0];
    }
    auto addr = [&](const char* n, uint64_t align) -> Result<uint64_t> {
      auto it = addrs.find(n);
      if (it == addrs.end()) return Error{fmt::format("{}: no device address for tensor '{}'", kOp, n)};
      if (it->second % align != 0)
        return Error{fmt::format("{}: tensor '{}' at 0x{:x} is not {}-byte aligned", kOp, n, it->second, align)};
      return it->second;
    };
    // y is written as pairs: 8 bytes of f32, 4 of bf16.
    auto x = addr("x", 16), w = addr("w", 16), ws = addr("w_scale", 4), y = addr("y", s.epilogue == 0 ? 8 : 4);
    for (const auto* r : {&x, &w, &ws, &y})
      if (!r->ok()) return r->error();
    p.x = reinterpret_cast<const uint16_t*>(*x);
    p.w = reinterpret_cast<const uint8_t*>(*w);
    p.w_scale = reinterpret_cast<const uint8_t*>(*ws);
    p.y = reinterpret_cast<void*>(*y);
    if (s.gated()) {
      auto wu = addr("w_up", 16), wus = addr("w_up_scale", 4);
      for (const auto* r : {&wu, &wus})
        if (!r->ok()) return r->error();
      p.w_up = reinterpret_cast<const uint8_t*>(*wu);
      p.w_up_scale = reinterpret_cast<const uint8_t*>(*wus);
    }
    if (g->splits > 1) {
      auto ws2 = addr("__workspace", 16);
      if (!ws2.ok()) return ws2.error();
      p.partial = reinterpret_cast<float*>(*ws2);
    }
    p.M = int32_t(s.M);
    p.N = int32_t(s.N);
    p.Kg = int32_t(s.Kg);
    p.Ng = int32_t(s.Ng);
    p.tiles_per_group = int32_t(g->tilesPerGroup);
    p.k_blocks = int32_t(g->kBlocks);
    p.kb_per_split = int32_t(g->kbPerSplit);
    p.splits = g->splits;
    p.limit = float(d.attrs.getFloat("swiglu_limit", 10.0));
    return paramBytes(p);
  }
};

}  // namespace

const KernelFamily& weightGemmFamily() {
  static const WeightGemmFamily f;
  return f;
}

}  // namespace deepinfer
