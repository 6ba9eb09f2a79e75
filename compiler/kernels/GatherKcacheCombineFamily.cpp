// gather_kcache_combine (docs/ops.md §4a): the prefill window gather (gather_kcache at offset N)
// and combine_topk_swa over the same lengths, in one launch (templates/GatherKcacheCombine.cuh).
// The op is the pair composed, so its rules, parameters and strides are the two families' own,
// asked through the sub-ops' descriptions; only the shared launch is decided here.
//
// Config: gather_kcache's knobs (`warps`, `tokens_per_warp`, `ctas_per_sm`, `grid_ctas`: the
// CTAs that gather); the row CTAs that follow have the same 32 * warps threads.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/EncodedInputs.h"
#include "deepinfer/HostRandom.h"
#include "deepinfer/TypedKernelFamily.h"
#include "GatherKcacheGeometry.h"
#include "KvCacheLayout.h"
#include "params/GatherKcacheCombineParams.h"

namespace deepinfer {
namespace {

using namespace kvcache;

constexpr const char* kOp = "gather_kcache_combine";

// Registers of the row-building body (CombineTopkSwaFamily.cpp: 40-46 at 64 threads, <= 40 from
// 128 up); the gather's by tokens_per_warp (GatherKcacheGeometry.h). The fused kernel needs the
// larger of the two under its __launch_bounds__.
int rowRegisters(int64_t threads) { return threads <= 64 ? 48 : 40; }
int fusedRegisters(int64_t warps, int64_t tokensPerWarp) {
  return std::max(rowRegisters(32 * warps), gatherRegisters(tokensPerWarp));
}

// CTAs of this shape that stay resident on one SM with the fused kernel's registers.
int residentCtas(const TargetProfile& t, int64_t warps, int64_t tokensPerWarp) {
  return residentGatherCtas(t, warps, fusedRegisters(warps, tokensPerWarp));
}

// The gather half: gather_kcache of the window rows at offset N.
OpDesc gatherDesc(const OpDesc& d) {
  OpDesc g;
  g.op = "gather_kcache";
  for (const char* n : {"k_cache", "seq_lens", "gather_lens", "block_table", "out"})
    if (d.hasTensor(n)) g.shapes[n] = d.shapes.at(n);
  if (d.attrs.has("block_size")) g.attrs.setInt("block_size", d.attrs.getInt("block_size", 0));
  g.attrs.setInt("offset", d.attrs.getInt("N", 0));
  return g;
}

// The row half: combine_topk_swa with M = out's rows per request.
OpDesc combineDesc(const OpDesc& d) {
  OpDesc c;
  c.op = "combine_topk_swa";
  for (const char* n : {"topk_indices", "query_start_loc", "seq_lens", "gather_lens"})
    if (d.hasTensor(n)) c.shapes[n] = d.shapes.at(n);
  for (const char* a : {"window", "ratio", "topk", "N"})
    if (d.attrs.has(a)) c.attrs.setInt(a, d.attrs.getInt(a, 0));
  if (auto m = dimOf(d, "out", 1)) c.attrs.setInt("M", *m);
  return c;
}

// A sub-op's message, under this op's name.
Error under(const Error& e) { return Error{fmt::format("{}: {}", kOp, e.message)}; }

struct GatherKcacheCombineConfig {
  int64_t warps = 0, tokensPerWarp = 0, ctasPerSm = 0, gridCtas = 0;
  static constexpr auto fields() {
    using F = ConfigField<GatherKcacheCombineConfig>;
    return std::array{F{"warps", &GatherKcacheCombineConfig::warps},
                      F{"tokens_per_warp", &GatherKcacheCombineConfig::tokensPerWarp},
                      F{"ctas_per_sm", &GatherKcacheCombineConfig::ctasPerSm},
                      F{"grid_ctas", &GatherKcacheCombineConfig::gridCtas}};
  }
};

KernelConfig gatherKnobs(const GatherKcacheCombineConfig& c) {
  return {{"warps", c.warps}, {"tokens_per_warp", c.tokensPerWarp}, {"ctas_per_sm", c.ctasPerSm},
          {"grid_ctas", c.gridCtas}};
}
KernelConfig rowKnobs(const GatherKcacheCombineConfig& c) { return {{"threads", 32 * c.warps}}; }

class GatherKcacheCombineFamily final : public TypedKernelFamily<GatherKcacheCombineConfig> {
 public:
  std::string opName() const override { return kOp; }

  std::vector<std::string> templateHeaders() const override {
    return {"GatherKcacheCombine.cuh", "params/GatherKcacheCombineParams.h", "KvCache.cuh",
            "CombineTopkSwa.cuh", "params/GatherKcacheParams.h", "params/KvQuantInsertParams.h",
            "params/CombineTopkSwaParams.h", "common/Types.h", "common/Numerics.cuh", "common/Mma.cuh"};
  }

  // Both ops' rules; the lengths are one pair of tensors, so the rows index the rows gathered.
  Status validate(const OpDesc& d) const override {
    for (const char* a : {"block_size", "window", "ratio", "topk", "N"})
      if (!d.attrs.has(a)) return Error{fmt::format("{}: missing attribute '{}'", kOp, a)};
    if (!d.hasTensor("gather_lens")) return Error{fmt::format("{}: missing tensor 'gather_lens'", kOp)};
    if (auto st = gatherKcacheFamily().validate(gatherDesc(d)); !st.ok()) return under(st.error());
    if (auto st = combineTopkSwaFamily().validate(combineDesc(d)); !st.ok()) return under(st.error());
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    OutputSpec o = gatherKcacheFamily().outputs(gatherDesc(d));
    for (auto& [name, spec] : combineTopkSwaFamily().outputs(combineDesc(d))) o[name] = spec;
    return o;
  }

  // gather_kcache's candidates at the fused kernel's residency (the row body's registers may
  // lower it), deduplicated.
  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    std::vector<Config> out;
    const OpDesc g = gatherDesc(d);
    for (const KernelConfig& k : gatherKcacheFamily().candidates(g, t)) {
      auto c = fromKnobs<Config>(kOp, k);
      if (!c.ok()) continue;
      Config f = fitted(*c, d, t);
      if (f.ctasPerSm < 1) continue;
      if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return toKnobs(o) == toKnobs(f); }))
        out.push_back(f);
    }
    return out;
  }

  // gather_kcache's default schedule for the window rows (GatherKcacheFamily.cpp: one row per
  // warp of 4-warp CTAs for the ~1.7K rows of a prefill chunk), at the fused residency.
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    auto c = fromKnobs<Config>(kOp, gatherKcacheFamily().defaultConfig(gatherDesc(d), t));
    Config f = c.ok() ? fitted(*c, d, t) : Config{4, 1, 1, 1};
    f.ctasPerSm = std::max<int64_t>(f.ctasPerSm, 1);
    return f;
  }

  // The gather's knob ranges (warps 1..32, tokens_per_warp 1/2/4, ...) and rows of 32 * warps
  // threads.
  Status canImplement(const Config& c, const OpDesc& d) const override {
    if (auto st = gatherKcacheFamily().canImplement(gatherKnobs(c), gatherDesc(d)); !st.ok()) return under(st.error());
    if (auto st = combineTopkSwaFamily().canImplement(rowKnobs(c), combineDesc(d)); !st.ok())
      return under(st.error());
    return {};
  }

  // Both bodies' shared memory (one CTA runs one body, but both are allocated), the larger
  // register need.
  ResourceEstimate resources(const Config& c, const OpDesc& d) const override {
    auto g = gatherKcacheFamily().estimate(gatherKnobs(c), gatherDesc(d));
    auto r = combineTopkSwaFamily().estimate(rowKnobs(c), combineDesc(d));
    const int threads = int(32 * c.warps);
    const int cap = launchBoundsRegisterCap(threads, c.ctasPerSm);
    const int regs = std::max(g.ok() ? g->regsPerThread : 0, std::min(fusedRegisters(c.warps, c.tokensPerWarp), cap));
    const int64_t smem = (g.ok() ? (g->smemBytes + 15) / 16 * 16 : 0) + (r.ok() ? r->smemBytes : 0);
    return {smem, threads, regs};
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    u.source = fmt::format(
        "#include \"GatherKcacheCombine.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::GatherKcacheCombineParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::gather_kcache_combine_kernel<{}, {}, {}, {}, {}>(p);\n"
        "}}\n",
        32 * c.warps, c.ctasPerSm, baseName, d.attrs.getInt("block_size", 0), c.warps, c.tokensPerWarp,
        d.attrs.getInt("topk", 0), d.attrs.getInt("window", 0));
    u.entries = {baseName};
    return u;
  }

  // grid_ctas gather CTAs, then one CTA per token.
  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    LaunchStep s;
    s.entry = baseName;
    s.grid = {uint32_t(c.gridCtas + d.dim("topk_indices", 0)), 1, 1};
    s.block = {uint32_t(32 * c.warps), 1, 1};
    return {s};
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    return stridedParams(c, d, addrs, {});
  }

  // `out` may be a strided view, as gather_kcache's.
  Status checkStrides(const OpDesc& d, const std::string& name,
                      const std::vector<int64_t>& strides) const override {
    if (name != "out") return KernelFamily::checkStrides(d, name, strides);
    if (auto st = gatherKcacheFamily().checkStrides(gatherDesc(d), name, strides); !st.ok()) return under(st.error());
    return {};
  }

  // The two ops' own parameter structs, packed by their families, side by side.
  Result<std::vector<uint8_t>> stridedParams(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs,
                                             const TensorStrides& strides) const override {
    for (const auto& [name, st] : strides) DI_TRY(checkStrides(d, name, st));
    auto g = gatherKcacheFamily().packStridedParams(gatherKnobs(c), gatherDesc(d), addrs, strides);
    if (!g.ok()) return under(g.error());
    auto r = combineTopkSwaFamily().packParams(rowKnobs(c), combineDesc(d), addrs);
    if (!r.ok()) return under(r.error());
    di::GatherKcacheCombineParams p{};
    if (g->size() != sizeof(p.gather) || r->size() != sizeof(p.combine))
      return Error{fmt::format("{}: sub-op parameter sizes {} / {} differ from {} / {}", kOp, g->size(), r->size(),
                               sizeof(p.gather), sizeof(p.combine))};
    std::memcpy(&p.gather, g->data(), sizeof(p.gather));
    std::memcpy(&p.combine, r->data(), sizeof(p.combine));
    p.gather_ctas = int32_t(c.gridCtas);
    return paramBytes(p);
  }

  std::vector<ShapeParam> shapeParams() const override {
    return {{"T", 1536, "query tokens"},
            {"R", 1, "requests"},
            {"topk", 512, "K"},
            {"window", 128, "sliding window"},
            {"ratio", 2, "compression ratio"},
            {"max_model_len", 65536, "for N = ceil(max_model_len / ratio)"},
            {"context", 65536, "tokens per request (the chunk is its last T / R)"},
            {"block_size", 64, "tokens per page"}};
  }

  // The runtime's prefill workspace: out[R, M, 512] with M = N + window + T (attendPrefill).
  OpDesc describe(const ShapeParams& p) const override {
    const int64_t R = p.at("R"), T = p.at("T"), ratio = p.at("ratio"), window = p.at("window");
    const int64_t bs = std::max<int64_t>(p.at("block_size"), 1);
    const int64_t N = ratio > 0 ? (p.at("max_model_len") + ratio - 1) / ratio : 0;
    const int64_t maxPages = (p.at("context") + bs - 1) / bs;
    OpDesc d;
    d.op = opName();
    d.shapes["k_cache"] = {R * maxPages, pageBytes(bs)};
    d.shapes["seq_lens"] = {R};
    d.shapes["gather_lens"] = {R};
    d.shapes["block_table"] = {R, maxPages};
    d.shapes["out"] = {R, N + window + T, kHeadDim};
    d.shapes["topk_indices"] = {T, p.at("topk")};
    d.shapes["query_start_loc"] = {R + 1};
    d.attrs.setInt("block_size", bs);
    d.attrs.setInt("window", window);
    d.attrs.setInt("ratio", ratio);
    d.attrs.setInt("topk", p.at("topk"));
    d.attrs.setInt("N", N);
    return d;
  }

  // Small chunks: the shapes where the two launches cost more than their work.
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override {
    return {{"default", {}}, {"T=16", {{"T", 16}}}};
  }

  PtxChecks ptxChecks(const OpDesc&) const override { return {.noTranscendentals = true}; }

  // Tuned along the query tokens (the window rows follow them: T + window - 1), one shape per
  // compress ratio as combine_topk_swa.
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"T", {16, 64, 256, 1024, 4096}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "topk_indices", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    std::vector<TuneShape> out;
    for (int64_t ratio : m.ratios) {
      const ShapeParams p{{"T", v}, {"topk", m.indexTopk}, {"window", m.window}, {"ratio", ratio}};
      out.push_back({p, p});
    }
    return out;
  }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"topk", intAttrOf(d, "topk")},
            {"window", intAttrOf(d, "window")},
            {"ratio", intAttrOf(d, "ratio")},
            {"bs", intAttrOf(d, "block_size")}};
  }

  // R requests, each the last chunk (T / R tokens, the remainder on the last) of a `context`-token
  // prompt, as attendPrefill runs it: each gathers its last q + window - 1 positions from a
  // window ring of pages handed out in random order (position p in ring page p / BS mod the
  // ring's pages), and each token's top-k row holds sorted distinct visible positions.
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t T = p.get("T", 1536), R = p.get("R", 1), K = p.get("topk", 512), window = p.get("window", 128),
                  ratio = p.get("ratio", 2), context = p.get("context", 65536),
                  maxModelLen = p.get("max_model_len", 65536), bs = p.get("block_size", 64);
    DI_TRY(p.require(R >= 1 && T >= R && K >= 1 && window >= 1 && bs >= 1, "needs 1 <= R <= T, topk, window, "
                     "block_size >= 1"));
    DI_TRY(p.require(ratio >= 0, "needs ratio >= 0"));
    const int64_t N = ratio > 0 ? (maxModelLen + ratio - 1) / ratio : 0;
    std::vector<int32_t> qsl = {0}, seq, gather;
    int64_t maxQ = 0, rows = 0;
    for (int64_t b = 0; b < R; ++b) {
      const int64_t q = T / R + (b == R - 1 ? T % R : 0);
      DI_TRY(p.require(context >= q && context <= maxModelLen, "needs query length <= context <= max_model_len"));
      qsl.push_back(int32_t(qsl.back() + q));
      seq.push_back(int32_t(context));
      gather.push_back(int32_t(std::min(context, q + window - 1)));
      rows += gather.back();
      maxQ = std::max(maxQ, q);
    }
    const int64_t M = N + window + maxQ;
    // The ring: enough pages for the gathered positions to land on distinct pages.
    const int64_t maxPages = (context + bs - 1) / bs, ring = std::min(maxPages, (window + maxQ - 1 + bs - 1) / bs + 1);
    const int64_t P = R * ring + 4;
    const std::vector<int64_t> order = shuffledRange(rng, P);
    std::vector<int32_t> table(size_t(R * maxPages));
    std::vector<int64_t> used(order.begin(), order.begin() + R * ring);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t lp = 0; lp < maxPages; ++lp) table[size_t(r * maxPages + lp)] = int32_t(order[size_t(r * ring + lp % ring)]);
    HostTensor topk(DType::I32, {T, K});
    prefillTopkRows(rng, qsl, context, ratio, N, K, topk.ptr<int32_t>());
    BenchInputs in;
    in.attrs.setInt("block_size", bs);
    in.attrs.setInt("window", window);
    in.attrs.setInt("ratio", ratio);
    in.attrs.setInt("topk", K);
    in.attrs.setInt("N", N);
    auto cache = tiledKvCache(rng, P, bs, used, ctx.reference);
    if (!cache.ok()) return cache.error();
    in.inputs["k_cache"] = std::move(*cache);
    in.inputs["seq_lens"] = i32Tensor({R}, seq);
    in.inputs["gather_lens"] = i32Tensor({R}, gather);
    in.inputs["block_table"] = i32Tensor({R, maxPages}, table);
    // Random contents: rows the op does not write must keep them.
    in.inputs["out"] = randomBytes(rng, DType::BF16, {R, M, kHeadDim});
    in.inputs["topk_indices"] = std::move(topk);
    in.inputs["query_start_loc"] = i32Tensor({R + 1}, qsl);
    // The gathered rows read (data + scales) and written, the top-k rows read, the index rows and
    // lens written, the lengths and the block-table entries of the gathered pages read.
    const int64_t W = (K + window + 127) / 128 * 128;
    const double cacheRows = double(rows), entries = double(R * std::min(maxPages, ring));
    in.bytes = cacheRows * double(kTokenBytes + kScaleBytes + kHeadDim * 2) + double(T * K * 4) +
               double(T * W * 4 + T * 4) + entries * 4 + double((3 * R + 1) * 4);
    return in;
  }

 private:
  // A gather config at the fused residency: ctas_per_sm no higher than the fused kernel's
  // registers allow, and the gather grid no larger than one wave of them.
  static Config fitted(Config c, const OpDesc&, const TargetProfile& t) {
    const int resident = residentCtas(t, c.warps, c.tokensPerWarp);
    c.ctasPerSm = std::min<int64_t>(c.ctasPerSm, resident);
    c.gridCtas = std::max<int64_t>(1, std::min<int64_t>(c.gridCtas, gatherWave(t, c.ctasPerSm)));
    return c;
  }
};

}  // namespace

const KernelFamily& gatherKcacheCombineFamily() {
  static const GatherKcacheCombineFamily f;
  return f;
}

}  // namespace deepinfer
