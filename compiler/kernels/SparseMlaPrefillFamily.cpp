// Kernel family of sparse_mla_prefill (docs/ops.md §5): shape rules, configs, resources, the
// emitted unit and its launch. The kernel itself is templates/SparseMlaPrefill.cuh; the CTA
// geometry and shared-memory arithmetic live in templates/params/SparseMlaPrefillParams.h and are
// shared with the kernel, so the estimate is the instantiated kernel's exact byte count.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "KvCacheLayout.h"
#include "params/SparseMlaPrefillParams.h"

namespace deepinfer {
namespace {

constexpr int64_t kHeadDim = 512;
constexpr double kDefaultSmScale = 0.04419417382415922;  // 512^-0.5, as in OpSignatures.cpp
constexpr const char* kOp = "sparse_mla_prefill";

// Config knobs, in the order the template takes them.
struct SparseMlaPrefillConfig {
  int64_t headsPerCta = 0, warps = 0, blockN = 0, stages = 0;
  static constexpr auto fields() {
    using F = ConfigField<SparseMlaPrefillConfig>;
    return std::array{F{"heads_per_cta", &SparseMlaPrefillConfig::headsPerCta},
                      F{"warps", &SparseMlaPrefillConfig::warps}, F{"block_n", &SparseMlaPrefillConfig::blockN},
                      F{"stages", &SparseMlaPrefillConfig::stages}};
  }
};

struct Shapes {
  int64_t T = 0, H = 0, S = 0, kmax = 0;
};
Shapes shapesOf(const OpDesc& d) {
  return {d.dim("q", 0), d.dim("q", 1), d.dim("kv", 0), d.dim("indices", 1)};
}

std::string shapeStr(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += fmt::format("{}{}", i ? ", " : "", s[i]);
  return r + "]";
}

Status requireTensor(const OpDesc& d, const std::string& name, size_t rank, const char* layout) {
  auto it = d.shapes.find(name);
  if (it == d.shapes.end())
    return Error{fmt::format("{}: missing tensor '{}' {}", kOp, name, layout)};
  if (it->second.size() != rank)
    return Error{fmt::format("{}: tensor '{}' has shape {} (rank {}); expected {}", kOp, name,
                             shapeStr(it->second), it->second.size(), layout)};
  for (size_t i = 0; i < rank; ++i)
    if (it->second[i] < 0)
      return Error{fmt::format("{}: tensor '{}' has shape {}; dim {} must be static and >= 0", kOp,
                               name, shapeStr(it->second), i)};
  return {};
}

// The geometry of a config, or why the config is not one the template supports.
Result<di::SparseMlaPrefillGeometry> geometryOf(const SparseMlaPrefillConfig& c) {
  const KernelConfig knobs = toKnobs(c);
  for (const auto& f : SparseMlaPrefillConfig::fields())
    if (c.*(f.member) < 0 || c.*(f.member) > 4096)
      return Error{fmt::format("{}: config {{{}}}: '{}' = {} is out of range", kOp, configToString(knobs), f.name,
                               c.*(f.member))};
  const auto g = di::sparseMlaPrefillGeometry(int(c.headsPerCta), int(c.warps), int(c.blockN), int(c.stages));
  if (!g.valid)
    return Error{fmt::format(
        "{}: config {{{}}} is not a supported CTA shape (heads_per_cta 16/32/64; warps = head "
        "groups x 2/4/8 dim splits with at most 256 dims x 16-row tiles per warp; "
        "block_n 16/32/64; stages 2..8)",
        kOp, configToString(knobs))};
  return g;
}

// Registers per thread, calibrated on ptxas -v (CUDA 13.0, sm_80..sm_90): the Q slice
// (mTiles*dims/4) and the fp32 output accumulator (mTiles*dims/2) live for the whole kernel, plus
// ~80 for addresses, softmax state and fragments in flight (more when block_n > 16 unrolls
// further). ptxas stops at 255. A need above 65536 / threads is reported as is, so the occupancy
// check drops the config instead of the kernel spilling.
int estimateRegisters(const di::SparseMlaPrefillGeometry& g) {
  const int regs = g.mTiles * g.dimsPerWarp * 3 / 4 + 80 + (g.blockN > 16 ? 32 : 0);
  return std::min((regs + 7) & ~7, 255);
}

bool fitsRegisterFile(const di::SparseMlaPrefillGeometry& g) {
  return int64_t(estimateRegisters(g)) * 32 * g.warps <= 65536;
}

// A shape worth compiling: supported, within the register file, and not one ptxas spills. Where
// Q + accumulator already take 192 registers (mTiles x dims = 256), block_n = 64 spills 16 bytes
// on sm_90 (NVRTC, CUDA 13.0), and so does block_n = 32 with two head groups but no ping-pong
// (stages 2: 8 bytes); the other block_n = 32 shapes fit in 255 registers without spilling, and
// halve the per-key share of each tile's fixed costs (three barriers, the partial exchange, the
// softmax latency chain).
bool worthCompiling(const di::SparseMlaPrefillGeometry& g) {
  if (!g.valid || !fitsRegisterFile(g)) return false;
  if (g.mTiles * g.dimsPerWarp < 256) return true;
  return g.blockN == 16 || (g.blockN == 32 && (g.groups == 1 || g.stages >= 3));
}

SparseMlaPrefillConfig makeConfig(int heads, int warps, int blockN, int stages) {
  return {heads, warps, blockN, stages};
}

// Largest heads_per_cta worth using for H heads: all of a token's heads in as few CTAs as possible.
int maxHeadsPerCta(int64_t H) {
  const int64_t padded = (H + 15) / 16 * 16;
  return padded >= 64 ? 64 : (padded >= 32 ? 32 : 16);
}

// CTAs of this config resident on one SM of the target (registers, warps, CTAs, shared memory;
// 1 KB of shared memory per CTA is reserved by the driver).
int residentCtas(const di::SparseMlaPrefillGeometry& g, const TargetProfile& t) {
  const int regsPerWarp = ((estimateRegisters(g) * 32 + 255) / 256) * 256;
  int ctas = std::min(t.facts.maxCtasPerSm, t.facts.maxWarpsPerSm / g.warps);
  ctas = std::min(ctas, t.facts.regsPerSm / (regsPerWarp * g.warps));
  ctas = int(std::min<int64_t>(ctas, t.facts.smemPerSm / (g.smemBytes + 1024)));
  return std::max(ctas, 0);
}

class SparseMlaPrefillFamily final : public TypedKernelFamily<SparseMlaPrefillConfig> {
 public:
  std::string opName() const override { return kOp; }

  std::vector<std::string> templateHeaders() const override {
    return {"SparseMlaPrefill.cuh", "params/SparseMlaPrefillParams.h", "common/Mma.cuh",
            "common/Numerics.cuh", "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    if (d.op != kOp) return Error{fmt::format("{}: op description is for '{}'", kOp, d.op)};
    DI_TRY(kvcache::expectMlaDims(d));
    DI_TRY(requireTensor(d, "q", 3, "[T, H, 512] BF16"));
    DI_TRY(requireTensor(d, "kv", 2, "[S, 512] BF16"));
    DI_TRY(requireTensor(d, "indices", 2, "[T, Kmax] I32"));
    DI_TRY(requireTensor(d, "lens", 1, "[T] I32"));
    DI_TRY(requireTensor(d, "attn_sink", 1, "[H] F32"));
    const Shapes s = shapesOf(d);
    if (d.dim("q", 2) != kHeadDim)
      return Error{fmt::format("{}: q has head dim {} ({}); the head dim must be 512", kOp,
                               d.dim("q", 2), shapeStr(d.shapes.at("q")))};
    if (s.H < 8 || s.H > 128 || s.H % 8 != 0)
      return Error{
          fmt::format("{}: q has {} heads; heads must be a multiple of 8 in 8..128", kOp, s.H)};
    if (d.dim("kv", 1) != kHeadDim)
      return Error{fmt::format(
          "{}: kv has row width {} ({}); rows must be 512 wide (MQA, one KV head)", kOp,
          d.dim("kv", 1), shapeStr(d.shapes.at("kv")))};
    if (d.dim("indices", 0) != s.T)
      return Error{fmt::format("{}: indices has {} rows ({}) but q has {} tokens", kOp,
                               d.dim("indices", 0), shapeStr(d.shapes.at("indices")), s.T)};
    if (s.kmax > std::numeric_limits<int32_t>::max())
      return Error{fmt::format("{}: indices rows hold {} entries; at most 2^31-1", kOp, s.kmax)};
    if (d.dim("lens", 0) != s.T)
      return Error{fmt::format("{}: lens has {} entries but q has {} tokens", kOp,
                               d.dim("lens", 0), s.T)};
    if (d.dim("attn_sink", 0) != s.H)
      return Error{fmt::format("{}: attn_sink has {} entries but q has {} heads", kOp,
                               d.dim("attn_sink", 0), s.H)};
    // Outputs, when the description carries them, must match what the kernel writes.
    if (d.hasTensor("out") && d.shapes.at("out") != std::vector<int64_t>{s.T, s.H, kHeadDim})
      return Error{fmt::format("{}: out has shape {}; expected [{}, {}, 512]", kOp,
                               shapeStr(d.shapes.at("out")), s.T, s.H)};
    if (d.hasTensor("lse") && d.shapes.at("lse") != std::vector<int64_t>{s.T, s.H})
      return Error{fmt::format("{}: lse has shape {}; expected [{}, {}]", kOp,
                               shapeStr(d.shapes.at("lse")), s.T, s.H)};
    const double scale = d.attrs.getFloat("sm_scale", kDefaultSmScale);
    if (!std::isfinite(scale) || std::fabs(scale) > 3.0e38)
      return Error{
          fmt::format("{}: attribute sm_scale = {} is not a finite fp32 number", kOp, scale)};
    // One CTA per (token, head block) in grid.x.
    const int64_t ctas = s.T * ((s.H + 15) / 16);
    if (ctas > std::numeric_limits<int32_t>::max())
      return Error{fmt::format("{}: {} tokens x {} heads need {} CTAs; at most 2^31-1", kOp, s.T,
                               s.H, ctas)};
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    const Shapes s = shapesOf(d);
    return {{"out", {DType::BF16, {s.T, s.H, kHeadDim}}}, {"lse", {DType::F32, {s.T, s.H}}}};
  }

  // Every CTA shape of the template worth compiling (see worthCompiling) within the architecture's
  // opt-in shared memory; the pass drops those over the target's (possibly lower) per-CTA cap.
  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    std::vector<Config> out;
    const int maxHeads = maxHeadsPerCta(d.dim("q", 1));
    for (int heads : {16, 32, 64}) {
      if (heads > maxHeads) continue;
      for (int warps : {2, 4, 8, 16})
        for (int blockN : {16, 32, 64})
          for (int stages : {2, 3, 4, 6, 8}) {
            const auto g = di::sparseMlaPrefillGeometry(heads, warps, blockN, stages);
            if (worthCompiling(g) && g.smemBytes <= t.facts.smemPerCtaOptIn)
              out.push_back(makeConfig(heads, warps, blockN, stages));
          }
    }
    return out;
  }

  Status canImplement(const Config& c, const OpDesc&) const override {
    auto g = geometryOf(c);
    if (!g.ok()) return g.error();
    return {};
  }

  ResourceEstimate resources(const Config& c, const OpDesc&) const override {
    auto g = geometryOf(c);
    return {g->smemBytes, 32 * g->warps, estimateRegisters(*g)};
  }

  // Heuristic:
  //  1. heads_per_cta: the largest of 64/32/16 that H (rounded up to 16) fills. Each CTA gathers
  //     its token's key rows once, so fewer head blocks mean less L2 -> SM traffic; halve it while
  //     the grid (T x head blocks) would leave SMs idle, since a CTA's keys are walked serially.
  //  2. warps: the shape with the most resident warps per SM on this target (registers, warps and
  //     CTAs per SM, shared memory per SM at the 16-key/2-stage tile); ties go to fewer warps per
  //     CTA (a smaller partial-score exchange). This is where sm_80 (64 warps, 32 CTAs, 164 KB per
  //     SM) and sm_86 (48 warps, 16 CTAs, 100 KB) part ways for the small-head shapes.
  //  3. block_n / stages: the first of (32,4), (16,6), (32,3), (16,4), (32,2), (16,3), (16,2) that
  //     the shape allows (worthCompiling) and that fits the per-CTA cap without costing resident
  //     CTAs; (16,2) fits 48 KB in every shape. Larger tiles amortise the exchange barriers; >= 3
  //     stages with two head groups switch on the ping-pong schedule, which hides the softmax
  //     (keys in flight: (stages-2) x block_n; otherwise (stages-1) x block_n).
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const Shapes s = shapesOf(d);
    int heads = maxHeadsPerCta(s.H);
    while (heads > 16 && s.T * ((s.H + heads - 1) / heads) < t.smCount) heads /= 2;

    int bestWarps = 0, bestResident = -1;
    for (int warps : {2, 4, 8, 16}) {
      const auto g = di::sparseMlaPrefillGeometry(heads, warps, 16, 2);
      if (!worthCompiling(g) || g.smemBytes > t.smemPerCtaCap) continue;
      const int resident = residentCtas(g, t) * warps;
      if (resident > bestResident) {
        bestResident = resident;
        bestWarps = warps;
      }
    }
    if (bestWarps == 0) bestWarps = heads == 64 ? 8 : 4;  // unreachable for the supported shapes
    const auto base = di::sparseMlaPrefillGeometry(heads, bestWarps, 16, 2);
    const int baseCtas = residentCtas(base, t);
    const std::pair<int, int> tiles[] = {{32, 4}, {16, 6}, {32, 3}, {16, 4}, {32, 2}, {16, 3}};
    for (auto [blockN, stages] : tiles) {
      // The 256-dims-per-warp shapes at 32 keys x 4 stages spill (8 B at 255 registers, sm_90);
      // they take 3 stages, as fast on the H200 (T=1536 k=640: 593 us against 594; 16-key tiles 731).
      auto g = di::sparseMlaPrefillGeometry(heads, bestWarps, blockN, stages);
      if (blockN > 16 && stages > 3 && g.mTiles * g.dimsPerWarp >= 256)
        g = di::sparseMlaPrefillGeometry(heads, bestWarps, blockN, stages = 3);
      if (worthCompiling(g) && g.smemBytes <= t.smemPerCtaCap &&
          residentCtas(g, t) >= baseCtas)
        return makeConfig(heads, bestWarps, blockN, stages);
    }
    return makeConfig(heads, bestWarps, 16, 2);
  }

  CudaUnit unit(const Config& c, const OpDesc&, const std::string& baseName) const override {
    auto g = geometryOf(c);
    return {fmt::format("#include \"SparseMlaPrefill.cuh\"\n"
                        "extern \"C\" __global__ void __launch_bounds__({}, 1) {}(const "
                        "di::SparseMlaPrefillParams p) {{\n"
                        "  di::grid_dependency_sync();\n"
                        "  di::sparse_mla_prefill_kernel<{}, {}, {}, {}>(p);\n"
                        "}}\n",
                        32 * g->warps, baseName, g->heads, g->warps, g->blockN, g->stages),
            {baseName}};
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    auto g = geometryOf(c);
    const Shapes s = shapesOf(d);
    if (s.T == 0) return {};  // nothing to launch for an empty batch
    LaunchStep step;
    step.entry = baseName;
    const int64_t headBlocks = (s.H + g->heads - 1) / g->heads;
    step.grid = {uint32_t(s.T * headBlocks), 1, 1};
    step.block = {uint32_t(32 * g->warps), 1, 1};
    step.dynamicSmem =
        g->smemBytes > di::kSparseMlaPrefillStaticSmemLimit ? uint32_t(g->smemBytes) : 0u;
    return {step};
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    auto g = geometryOf(c);
    // kv rows are gathered and out rows stored with 16-byte vector accesses; q is read as bf16
    // pairs; the int32 / fp32 tensors element-wise.
    const std::pair<const char*, uint64_t> bindings[] = {
        {"q", 4},         {"kv", 16}, {"indices", 4}, {"lens", 4},
        {"attn_sink", 4}, {"out", 16}, {"lse", 4}};
    for (const auto& [name, align] : bindings) {
      auto it = addrs.find(name);
      if (it == addrs.end())
        return Error{fmt::format("{}: no device address for tensor '{}'", kOp, name)};
      if (it->second % align != 0)
        return Error{fmt::format("{}: tensor '{}' at 0x{:x} is not {}-byte aligned", kOp, name,
                                 it->second, align)};
    }
    const Shapes s = shapesOf(d);
    di::SparseMlaPrefillParams p{};
    p.q = reinterpret_cast<const uint16_t*>(addrs.at("q"));
    p.kv = reinterpret_cast<const uint16_t*>(addrs.at("kv"));
    p.indices = reinterpret_cast<const int32_t*>(addrs.at("indices"));
    p.lens = reinterpret_cast<const int32_t*>(addrs.at("lens"));
    p.attn_sink = reinterpret_cast<const float*>(addrs.at("attn_sink"));
    p.out = reinterpret_cast<uint16_t*>(addrs.at("out"));
    p.lse = reinterpret_cast<float*>(addrs.at("lse"));
    p.num_tokens = s.T;
    p.kv_rows = s.S;
    p.num_heads = int32_t(s.H);
    p.kmax = int32_t(s.kmax);
    p.head_blocks = int32_t((s.H + g->heads - 1) / g->heads);
    p.scale_log2 = float(d.attrs.getFloat("sm_scale", kDefaultSmScale) * 1.4426950408889634);
    return paramBytes(p);
  }
  std::vector<ShapeParam> shapeParams() const override {
    return {{"T", 1536, "query tokens"}, {"H", 64, "query heads"}, {"kv_rows", 32768, "rows of the gathered workspace"},
            {"topk", 2048, "index entries per token (Kmax)"}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    OpDesc d;
    d.op = kOp;
    d.shapes["q"] = {p.at("T"), p.at("H"), kHeadDim};
    d.shapes["kv"] = {p.at("kv_rows"), kHeadDim};
    d.shapes["indices"] = {p.at("T"), p.at("topk")};
    d.shapes["lens"] = {p.at("T")};
    d.shapes["attn_sink"] = {p.at("H")};
    d.attrs.setFloat("sm_scale", kDefaultSmScale);
    return d;
  }

  // The head-count extremes besides the model's 64.
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override {
    return {{"default", {}}, {"H=8", {{"H", 8}}}, {"H=128", {{"H", 128}}}};
  }
  PtxChecks ptxChecks(const OpDesc&) const override { return {.tensorCores = true}; }

  // Tuned along the query tokens; each token's row holds the index top-k plus the window.
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"T", {16, 64, 256, 1024, 4096}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "q", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    return {{{{"T", v}, {"H", m.heads}, {"topk", m.indexTopk + m.window}, {"kv_rows", 65536}},
             {{"T", v}, {"H", m.heads}, {"index_topk", m.indexTopk}, {"window", m.window}}}};
  }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"H", dimOf(d, "q", 1)}, {"topk", dimOf(d, "indices", 1)}};
  }
  // Kernel and reference each round `out` to bf16 once: the error is measured beyond one bf16 step
  // (5e-3 on unit-scale outputs); lse within 1e-3, +inf exactly.
  AccuracyRule accuracy(const std::string& output) const override {
    if (output == "lse") return {AccuracyRule::Kind::Lse, 1e-3, "max abs error (+inf exact)"};
    return {AccuracyRule::Kind::AttnOut, 5e-3, "max abs error beyond one bf16 step"};
  }

  // The workspace combine_topk_swa indexes (docs/ops.md §3/§4), one request, the last chunk of T
  // tokens of a `context`-token prompt: compressed rows [0, N), then the gathered window rows of
  // this chunk from N on; rows past them are unused. Each index row: the sorted distinct top-k
  // compressed rows the token sees, then its window rows, then -1 padding; lens count the valid.
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t T = p.get("T", 1536), H = p.get("H", 64), topk = p.get("index_topk", 512),
                  window = p.get("window", 128), S = p.get("kv_rows", 65536), context = p.get("context", 65536),
                  ratio = p.get("ratio", 2);
    const int64_t N = (context + ratio - 1) / ratio, gatherLen = std::min(context, T + window - 1),
                  g0 = context - gatherLen;
    DI_TRY(p.require(T >= 1 && context >= T && N + gatherLen <= S,
                     "needs T <= context and N + T + window - 1 <= kv_rows"));
    const int64_t kmax = topk + window;
    HostTensor idx(DType::I32, {T, kmax});
    std::vector<int32_t> lens(static_cast<size_t>(T));
    std::vector<uint8_t> touched(static_cast<size_t>(S), 0);
    double validKeys = 0;
    for (int64_t t = 0; t < T; ++t) {
      int32_t* row = idx.ptr<int32_t>() + t * kmax;
      const int64_t pos = context - T + t;
      const int64_t visible = std::min((pos + 1) / ratio, N), nk = std::min(topk, visible);
      stratifiedSorted(rng, visible, nk, row);
      const int64_t swaStart = std::max<int64_t>(pos - window + 1, 0), swaLen = pos - swaStart + 1;
      for (int64_t i = 0; i < swaLen; ++i) row[nk + i] = int32_t(N + (swaStart - g0) + i);
      std::fill(row + nk + swaLen, row + kmax, -1);
      lens[size_t(t)] = int32_t(nk + swaLen);
      for (int64_t i = 0; i < nk + swaLen; ++i) touched[size_t(row[i])] = 1;
      validKeys += double(nk + swaLen);
    }
    const auto pool = bf16NormalPool(rng);
    BenchInputs in;
    in.attrs.setFloat("sm_scale", 1.0 / std::sqrt(double(kHeadDim)));
    in.inputs["q"] = bf16FromPool(rng, pool, {T, H, kHeadDim});
    in.inputs["kv"] = bf16FromPool(rng, pool, {S, kHeadDim});
    in.inputs["indices"] = std::move(idx);
    in.inputs["lens"] = i32Tensor({T}, lens);
    in.inputs["attn_sink"] = f32Normal(rng, {H});
    const double rows = double(std::accumulate(touched.begin(), touched.end(), int64_t(0)));
    in.bytes = double(in.inputs.at("q").bytes.size()) * 2 + double(T * H * 4) + rows * kHeadDim * 2 +
               double(in.inputs.at("indices").bytes.size()) + double(T * 4 + H * 4);
    in.flops = validKeys * double(H) * 4.0 * kHeadDim;
    in.rowSplit = BenchRowSplit{T, double(H) * double(kmax) * 4.0 * kHeadDim, double(H) * (kHeadDim + 1),
                                {"q", "indices", "lens"}};
    return in;
  }
};

}  // namespace

const KernelFamily& sparseMlaPrefillFamily() {
  static const SparseMlaPrefillFamily f;
  return f;
}

}  // namespace deepinfer
