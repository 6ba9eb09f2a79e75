// Kernel family of indexer_logits (docs/ops.md §7, §11; template templates/IndexerLogits.cuh).
//
// Knobs: tokens_per_cta (TPC: tokens of one request sharing every decoded key tile), warps,
// block_n (positions per tile), stages (1 or 2 decoded tile buffers), positions_per_cta (the
// positions one CTA covers; the grid is token groups x position chunks). Derived: heads padded to
// 16/32/64 rows; the CTA's TPC*Hpad/16 m16 tiles go to warps_m warps of two, one or (when the
// warps are too few for that, with 32+ padded heads) four tiles each (the query fragments stay in
// registers), the remaining warps split the tile's keys.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/EncodedInputs.h"
#include "deepinfer/Formats.h"
#include "deepinfer/TypedKernelFamily.h"
#include "params/IndexerLogitsParams.h"

namespace deepinfer {
namespace {

constexpr int64_t kIndexDim = 128;
constexpr int64_t kKeyBytes = 132;
constexpr int kSlots = 3;            // per-tile score/scale ring of the template
// The launch bounds cap a warp of one or two m16 tiles at 128 registers; four tiles hold 128
// registers of A fragments alone and get the whole 255.
constexpr int kRegsTwoTiles = 128;
constexpr int kRegsFourTiles = 256;

struct IndexerLogitsConfig {
  int64_t tokensPerCta = 0, warps = 0, blockN = 0, stages = 0, positionsPerCta = 0;
  static constexpr auto fields() {
    using F = ConfigField<IndexerLogitsConfig>;
    return std::array{F{"tokens_per_cta", &IndexerLogitsConfig::tokensPerCta},
                      F{"warps", &IndexerLogitsConfig::warps}, F{"block_n", &IndexerLogitsConfig::blockN},
                      F{"stages", &IndexerLogitsConfig::stages},
                      F{"positions_per_cta", &IndexerLogitsConfig::positionsPerCta}};
  }
};

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Everything the template instantiation and the launch need, derived from a config and the op.
struct Geometry {
  int hpad = 0, tpc = 0, warps = 0, warpsM = 0, warpsN = 0, blockN = 0, stages = 0;
  int64_t positionsPerCta = 0;
  int threads() const { return warps * 32; }
  int mTilesPerWarp() const { return (tpc * hpad / 16) / warpsM; }
  int regCap() const { return mTilesPerWarp() == 4 ? kRegsFourTiles : kRegsTwoTiles; }
  int parts() const {  // warps sharing one token's head sum
    const int wm = (tpc * hpad / 16) / warpsM, mtTok = hpad / 16;
    return wm >= mtTok ? 1 : mtTok / wm;
  }
  // Mirrors di::idxl::Smem (all members are 16-byte multiples except the last two).
  int64_t smemBytes() const {
    const int64_t b = int64_t(stages) * blockN * 256 + int64_t(blockN) * 128 +
                      int64_t(kSlots) * tpc * parts() * blockN * 4 + int64_t(kSlots) * blockN * 4 +
                      int64_t(kSlots) * blockN + int64_t(tpc) * 4;
    return (b + 15) / 16 * 16;
  }
};

int paddedHeads(int64_t hi) { return hi <= 16 ? 16 : hi <= 32 ? 32 : 64; }

// The config's geometry, or why it cannot be instantiated for this op.
Result<Geometry> geometry(const IndexerLogitsConfig& c, const OpDesc& d) {
  Geometry g;
  g.hpad = paddedHeads(d.dim("q", 1));
  const std::string cfg = configToString(toKnobs(c));
  if (c.tokensPerCta != 1 && c.tokensPerCta != 2 && c.tokensPerCta != 4 && c.tokensPerCta != 8)
    return Error{
        fmt::format("indexer_logits: tokens_per_cta = {} must be 1, 2, 4 or 8 ({})", c.tokensPerCta, cfg)};
  if (c.warps < 1 || c.warps > 16)
    return Error{fmt::format("indexer_logits: warps = {} must be in 1..16 ({})", c.warps, cfg)};
  if (c.blockN != 32 && c.blockN != 64 && c.blockN != 128)
    return Error{
        fmt::format("indexer_logits: block_n = {} must be 32, 64 or 128 ({})", c.blockN, cfg)};
  if (c.stages != 1 && c.stages != 2)
    return Error{fmt::format("indexer_logits: stages = {} must be 1 or 2 ({})", c.stages, cfg)};
  g.tpc = int(c.tokensPerCta);
  g.warps = int(c.warps);
  g.blockN = int(c.blockN);
  g.stages = int(c.stages);
  g.positionsPerCta = c.positionsPerCta;
  const int mt = g.tpc * g.hpad / 16;
  // Two m16 tiles per warp when possible (B fragments then feed two mma each).
  if (mt % 2 == 0 && g.warps % (mt / 2) == 0)
    g.warpsM = mt / 2;
  else if (g.warps % mt == 0)
    g.warpsM = mt;
  else if (g.hpad >= 32 && mt % 4 == 0 && g.warps % (mt / 4) == 0)
    g.warpsM = mt / 4;  // four tiles: at most two tokens per warp (one head-sum per row lane)
  else
    return Error{
        fmt::format("indexer_logits: {} warps cannot split {} m16 tiles ({} tokens x {} "
                    "padded heads) into one or two per warp, or four with 32+ padded heads ({})",
                    g.warps, mt, g.tpc, g.hpad, cfg)};
  g.warpsN = g.warps / g.warpsM;
  if (g.blockN % (16 * g.warpsN) != 0)
    return Error{
        fmt::format("indexer_logits: block_n = {} does not give each of {} key-splitting "
                    "warps a pair of n8 tiles ({})",
                    g.blockN, g.warpsN, cfg)};
  if ((g.blockN * 8) % g.threads() != 0)
    return Error{
        fmt::format("indexer_logits: block_n = {} gives {} 16-byte loads, not a multiple "
                    "of {} threads ({})",
                    g.blockN, g.blockN * 8, g.threads(), cfg)};
  if (int64_t(g.warps) * 4096 > int64_t(g.stages) * g.blockN * 256)
    return Error{
        fmt::format("indexer_logits: {} warps need {} bytes to stage query rows, more than "
                    "the {}-byte key buffer ({})",
                    g.warps, g.warps * 4096, g.stages * g.blockN * 256, cfg)};
  if (g.positionsPerCta < g.blockN || g.positionsPerCta % g.blockN != 0)
    return Error{
        fmt::format("indexer_logits: positions_per_cta = {} must be a positive multiple of "
                    "block_n = {} ({})",
                    g.positionsPerCta, g.blockN, cfg)};
  const int64_t nmax = d.dim("block_table", 1) * d.attrs.getInt("block_size", 1);
  if (ceilDiv(nmax, g.positionsPerCta) > 65535)
    return Error{
        fmt::format("indexer_logits: positions_per_cta = {} splits Nmax = {} into more "
                    "than 65535 chunks ({})",
                    g.positionsPerCta, nmax, cfg)};
  return g;
}

class IndexerLogitsFamily final : public TypedKernelFamily<IndexerLogitsConfig> {
 public:
  std::string opName() const override { return "indexer_logits"; }

  std::vector<std::string> templateHeaders() const override {
    return {"IndexerLogits.cuh", "params/IndexerLogitsParams.h", "common/Mma.cuh",
            "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    if (!d.attrs.has("block_size")) return Error{"indexer_logits: missing attribute 'block_size'"};
    const int64_t bs = d.attrs.getInt("block_size", 0);
    if (bs < 1 || bs > 4096)
      return Error{fmt::format("indexer_logits: block_size = {} must be in 1..4096", bs)};
    DI_TRY(expectRank(d, "q", 3));
    const int64_t T = d.dim("q", 0), hi = d.dim("q", 1);
    if (d.dim("q", 2) != kIndexDim)
      return Error{fmt::format("indexer_logits: q has head dim {}; the index head dim must be {}",
                               d.dim("q", 2), kIndexDim)};
    if (hi < 4 || hi > 64)
      return Error{fmt::format("indexer_logits: q has {} heads; Hi must be in 4..64", hi)};
    DI_TRY(expectShape(d, "weights", {T, hi}));
    DI_TRY(expectRank(d, "k_cache", 2));
    if (d.dim("k_cache", 1) != bs * kKeyBytes)
      return Error{
          fmt::format("indexer_logits: k_cache pages have {} bytes; block_size = {} needs "
                      "block_size*132 = {}",
                      d.dim("k_cache", 1), bs, bs * kKeyBytes)};
    if (d.dim("k_cache", 0) > INT32_MAX)
      return Error{fmt::format("indexer_logits: k_cache has {} pages; at most {} are addressable",
                               d.dim("k_cache", 0), INT32_MAX)};
    DI_TRY(expectRank(d, "block_table", 2));
    const int64_t R = d.dim("block_table", 0), maxPages = d.dim("block_table", 1);
    if (T > 0 && R < 1)
      return Error{"indexer_logits: block_table has no rows (R = 0) but q has tokens"};
    if (R > INT32_MAX)
      return Error{
          fmt::format("indexer_logits: block_table has {} rows; at most {}", R, INT32_MAX)};
    const int64_t nmax = maxPages * bs;
    if (nmax > INT32_MAX - 128)
      return Error{
          fmt::format("indexer_logits: Nmax = max_pages*block_size = {}*{} = {} is over "
                      "the supported {}",
                      maxPages, bs, nmax, INT32_MAX - 128)};
    if (T > INT32_MAX)
      return Error{fmt::format("indexer_logits: q has {} tokens; at most {}", T, INT32_MAX)};
    DI_TRY(expectShape(d, "token_to_req", {T}));
    DI_TRY(expectShape(d, "visible", {T}));
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    const int64_t nmax = d.dim("block_table", 1) * d.attrs.getInt("block_size", 1);
    return {{"scores", {DType::F32, {d.dim("q", 0), nmax}}}};
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    const Config base = defaultFor(d, t);
    const int64_t ppc0 = base.positionsPerCta;
    std::vector<Config> out;
    auto same = [](const Config& a, const Config& b) { return toKnobs(a) == toKnobs(b); };
    for (int tpc : {1, 2, 4, 8})
      for (int warps : {4, 8})
        for (int blockN : {32, 64})
          for (int stages : {1, 2})
            for (int64_t ppc : {ppc0 / 2, ppc0, ppc0 * 2}) {
              const Config c{tpc, warps, blockN, stages, std::max<int64_t>(blockN, ppc / blockN * blockN)};
              if (!canImplement(c, d).ok()) continue;
              if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return same(o, c); })) out.push_back(c);
            }
    if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return same(o, base); })) out.push_back(base);
    return out;
  }

  Status canImplement(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    if (!g.ok()) return g.error();
    return {};
  }

  ResourceEstimate resources(const Config& c, const OpDesc& d) const override {
    ResourceEstimate e;
    auto g = geometry(c, d);
    e.smemBytes = g->smemBytes();
    e.threadsPerCta = g->threads();
    // Two m16 tiles of A fragments (64 registers) + accumulators + addressing: ptxas settles at
    // 118-128 under the launch bounds; one tile needs about 96; four tiles (128 registers of A
    // fragments, 32 accumulators) about 200-255 of the 255 they are allowed.
    const int wm = g->mTilesPerWarp();
    e.regsPerThread = wm == 4 ? kRegsFourTiles - 1 : wm == 2 ? kRegsTwoTiles : 96;
    return e;
  }

  // Heuristic:
  //  - tokens_per_cta: tokens of one request share each decoded key tile, so take as many as
  //    the batch has per request (T / R, a power of two up to 8) while the CTA's query rows stay
  //    within 256 (16 m16 tiles = 8 warps of two tiles; Hi = 64 allows at most 4 tokens).
  //  - warps: with 16 m16 tiles (8 tokens of 32 heads, 4 of 64), 4 warps of four tiles: each
  //    ldmatrix'd B fragment then feeds 8 mma instead of 4, which halves the shared-memory reads
  //    per mma (2 tiles/warp: ~160 B of shared-memory traffic per mma against ~1.5 SM clocks of
  //    mma.sync, i.e. ~80% of the 128 B/clock; 4 tiles: ~100 B, ~50%), at 2 CTAs (8 warps) per
  //    SM by registers. Otherwise two m16 tiles per warp, and 8 warps when the tiles allow it (4
  //    otherwise).
  //  - block_n = 64, two decoded stages: 48,096 bytes at 8 tokens, two CTAs per SM on both
  //    sm_80 (164 KB, 64 warps) and sm_86 (100 KB, 48 warps); if the target's cap is smaller,
  //    one stage (and then 32-position tiles) is used.
  //  - positions_per_cta: the tiles per CTA m (at least 4, so the per-CTA query staging stays
  //    amortized; at most 65535 chunks) that minimize waves x (m + 1): the waves of resident CTAs
  //    (SMs x CTAs per SM from registers, warps and shared memory of this target) the grid
  //    needs, times a CTA's time in tiles plus about one tile of query staging and pipeline fill.
  //    A last wave that is mostly empty costs as much as a full one; the causal rows' shorter
  //    CTAs are left to the hardware's dynamic CTA scheduling.
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const int64_t T = std::max<int64_t>(1, d.dim("q", 0));
    const int64_t R = std::max<int64_t>(1, d.dim("block_table", 0));
    const int hpad = paddedHeads(d.dim("q", 1));
    int tpc = 1;
    while (tpc < 8 && int64_t(tpc) * 2 <= T / R && tpc * 2 * hpad <= 256) tpc *= 2;
    const int mt = tpc * hpad / 16;
    const int warps = (mt == 16 && hpad >= 32) ? 4 : mt >= 4 ? 8 : 4;
    Config c{tpc, warps, 64, 2, 1024};
    auto fits = [&](const Config& k) {
      auto g = geometry(k, d);
      return g.ok() && g->smemBytes() <= t.smemPerCtaCap;
    };
    if (!fits(c) && c.warps == 4 && mt == 16) c.warps = 8;  // two tiles per warp
    if (!fits(c)) c.stages = 1;
    if (!fits(c)) {
      c.blockN = 32;
      c.warps = 4;
    }
    if (!fits(c)) {
      c.tokensPerCta = 1;
      c.warps = 4;
      c.blockN = 64;
      c.stages = 2;
    }

    auto g = geometry(c, d);
    const int64_t bn = c.blockN;
    const int64_t nmax = d.dim("block_table", 1) * d.attrs.getInt("block_size", 1);
    int ctasPerSm = 1;
    if (g.ok()) {
      const int threads = g->threads();
      const int64_t byRegs = t.facts.regsPerSm / (int64_t(threads) * g->regCap());
      const int64_t byWarps = t.facts.maxWarpsPerSm / (threads / 32);
      const int64_t bySmem = t.facts.smemPerSm / std::max<int64_t>(1, g->smemBytes() + 1024);
      ctasPerSm = int(
          std::max<int64_t>(1, std::min({byRegs, byWarps, bySmem, int64_t(t.facts.maxCtasPerSm)})));
    }
    const int64_t groups = ceilDiv(T, c.tokensPerCta);
    const int64_t slots = int64_t(std::max(1, t.smCount)) * ctasPerSm;
    const int64_t tiles = std::max<int64_t>(1, ceilDiv(nmax, bn));
    const int64_t mMin = std::max<int64_t>(std::min<int64_t>(4, tiles), ceilDiv(tiles, 65535));
    const int64_t mMax = std::min<int64_t>(tiles, mMin + 65536);
    int64_t best = mMin;
    double bestCost = -1;
    for (int64_t m = mMin; m <= mMax; ++m) {
      const int64_t waves = ceilDiv(groups * ceilDiv(tiles, m), slots);
      const double cost = double(waves) * double(m + 1);
      if (bestCost < 0 || cost < bestCost) {
        bestCost = cost;
        best = m;
      }
    }
    c.positionsPerCta = best * bn;
    return c;
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    auto g = geometry(c, d);
    const int bs = int(d.attrs.getInt("block_size", 1));
    const int minBlocks = std::max(1, 65536 / (g->threads() * g->regCap()));
    u.source = fmt::format(
        "#include \"IndexerLogits.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::IndexerLogitsParams "
        "p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::indexer_logits_kernel<{}, {}, {}, {}, {}, {}, {}>(p);\n"
        "}}\n",
        g->threads(), minBlocks, baseName, g->hpad, g->tpc, g->warpsM, g->warpsN, g->blockN,
        g->stages, bs);
    u.entries = {baseName};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    auto g = geometry(c, d);
    const int64_t T = d.dim("q", 0);
    const int64_t nmax = d.dim("block_table", 1) * d.attrs.getInt("block_size", 1);
    if (T == 0 || nmax == 0) return {};  // nothing to write
    LaunchStep s;
    s.entry = baseName;
    s.grid = {uint32_t(ceilDiv(T, g->tpc)), uint32_t(ceilDiv(nmax, g->positionsPerCta)), 1};
    s.block = {uint32_t(g->threads()), 1, 1};
    return {s};
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    auto g = geometry(c, d);
    auto addr = [&](const char* n) -> Result<uint64_t> {
      auto it = addrs.find(n);
      if (it == addrs.end())
        return Error{fmt::format("indexer_logits: no device address for tensor '{}'", n)};
      return it->second;
    };
    di::IndexerLogitsParams p{};
    const char* names[] = {"q",       "weights", "k_cache", "block_table", "token_to_req",
                           "visible", "scores"};
    uint64_t a[7];
    for (int i = 0; i < 7; ++i) {
      auto r = addr(names[i]);
      if (!r.ok()) return r.error();
      a[i] = r.value();
    }
    if ((a[0] & 15) || (a[6] & 15) || (a[2] & 15))
      return Error{"indexer_logits: q, k_cache and scores must be 16-byte aligned device buffers"};
    p.q = reinterpret_cast<const uint16_t*>(a[0]);
    p.weights = reinterpret_cast<const float*>(a[1]);
    p.k_cache = reinterpret_cast<const uint8_t*>(a[2]);
    p.block_table = reinterpret_cast<const int32_t*>(a[3]);
    p.token_to_req = reinterpret_cast<const int32_t*>(a[4]);
    p.visible = reinterpret_cast<const int32_t*>(a[5]);
    p.scores = reinterpret_cast<float*>(a[6]);
    p.num_tokens = int32_t(d.dim("q", 0));
    p.num_heads = int32_t(d.dim("q", 1));
    p.num_reqs = int32_t(d.dim("block_table", 0));
    p.max_pages = int32_t(d.dim("block_table", 1));
    p.num_pages = int32_t(d.dim("k_cache", 0));
    p.n_max = int32_t(d.dim("block_table", 1) * d.attrs.getInt("block_size", 1));
    p.positions_per_cta = int32_t(g->positionsPerCta);
    return paramBytes(p);
  }
  std::vector<ShapeParam> shapeParams() const override {
    return {{"T", 1536, "query tokens"}, {"Hi", 32, "indexer heads"}, {"R", 1, "requests"},
            {"context", 8192, "compressed positions per request"}, {"block_size", 64, ""}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    const int64_t bs = std::max<int64_t>(p.at("block_size"), 1), maxPages = ceilDiv(p.at("context"), bs);
    const int64_t T = p.at("T"), hi = p.at("Hi");
    OpDesc d;
    d.op = opName();
    d.shapes["q"] = {T, hi, kIndexDim};
    d.shapes["weights"] = {T, hi};
    d.shapes["k_cache"] = {p.at("R") * maxPages, bs * kKeyBytes};
    d.shapes["block_table"] = {p.at("R"), maxPages};
    d.shapes["token_to_req"] = {T};
    d.shapes["visible"] = {T};
    d.attrs.setInt("block_size", bs);
    return d;
  }

  PtxChecks ptxChecks(const OpDesc&) const override { return {.tensorCores = true}; }

  // Tuned along the compressed positions (pages x block size), at a prefill chunk's 1536 tokens.
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"context", {2048, 8192, 32768}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override {
    auto pages = dimOf(d, "block_table", 1), row = dimOf(d, "k_cache", 1);
    if (!pages || !row) return std::nullopt;
    return *pages * (*row / kKeyBytes);
  }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    const ShapeParams p{{"T", 1536}, {"Hi", m.indexHeads}, {"context", v}};
    return {{p, p}};
  }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"Hi", dimOf(d, "q", 1)}, {"bs", intAttrOf(d, "block_size")}};
  }
  // -inf exactly where expected; else within 1e-4 of the row's largest |score|.
  AccuracyRule accuracy(const std::string&) const override {
    return {AccuracyRule::Kind::RowRelative, 1e-4, "error relative to the row's largest |score|"};
  }

  // One request, the last chunk of T tokens of a (context * ratio)-token prompt: token t sees the
  // compressed positions below (pos + 1) / ratio (visible <= context, token_to_req all 0), pages
  // of the index-key cache in random order (a block table of distinct pages in [0, P)).
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t T = p.get("T", 1536), Hi = p.get("Hi", 32), context = p.get("context", 8192),
                  bs = p.get("block_size", 64), ratio = p.get("ratio", 2);
    DI_TRY(p.require(T >= 1 && context * ratio >= T, "needs T <= context * ratio"));
    const int64_t maxPages = ceilDiv(context, bs), P = maxPages + 2;
    const std::vector<int64_t> order = shuffledRange(rng, P);
    std::vector<int32_t> table(order.begin(), order.begin() + maxPages);
    std::vector<int32_t> visible(static_cast<size_t>(T)), toReq(static_cast<size_t>(T), 0);
    double visSum = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = context * ratio - T + t;
      visible[size_t(t)] = int32_t(std::min(context, (pos + 1) / ratio));
      visSum += visible[size_t(t)];
    }
    // Queries hold e4m3 values (exact in bf16) with their power-of-two scale folded into the
    // weights, as the caller quantizes them (tests/cases/IndexerLogitsCases.cpp); rows are drawn
    // from a pool of quantized rows.
    constexpr int64_t kPoolRows = 2048;
    std::vector<uint16_t> qPool(size_t(kPoolRows * kIndexDim));
    std::vector<float> qScale(static_cast<size_t>(kPoolRows));
    for (int64_t r = 0; r < kPoolRows; ++r) {
      float x[kIndexDim], amax = 0.f;
      for (float& v : x) {
        v = bf16ToFloat(floatToBf16(float(rng.normal())));
        amax = std::max(amax, std::fabs(v));
      }
      qScale[size_t(r)] = ue8m0ToFloat(ue8m0CeilEncode(std::max(amax, 1e-4f) / 448.f));
      for (int64_t d = 0; d < kIndexDim; ++d)
        qPool[size_t(r * kIndexDim + d)] =
            floatToBf16(e4m3ToFloat(e4m3Code(std::clamp(x[d] / qScale[size_t(r)], -448.f, 448.f))));
    }
    HostTensor q(DType::BF16, {T, Hi, kIndexDim});
    HostTensor w(DType::F32, {T, Hi});
    const double headScale = 1.0 / std::sqrt(double(Hi) * double(kIndexDim));
    for (int64_t row = 0; row < T * Hi; ++row) {
      const int64_t r = rng.range(0, kPoolRows);
      std::memcpy(q.ptr<uint16_t>() + row * kIndexDim, qPool.data() + r * kIndexDim, kIndexDim * 2);
      w.ptr<float>()[row] = float(rng.normal() * headScale * qScale[size_t(r)]);
    }
    BenchInputs in;
    in.attrs.setInt("block_size", bs);
    in.bytes = double(q.bytes.size()) + double(w.bytes.size()) + double(maxPages * bs * (kIndexDim + 4)) +
               double(maxPages * 4 + 2 * T * 4) + double(T * maxPages * bs * 4);
    in.inputs["q"] = std::move(q);
    in.inputs["weights"] = std::move(w);
    in.inputs["k_cache"] = indexerKeyCache(rng, P, bs);
    in.inputs["block_table"] = i32Tensor({1, maxPages}, table);
    in.inputs["token_to_req"] = i32Tensor({T}, toReq);
    in.inputs["visible"] = i32Tensor({T}, visible);
    in.flops = visSum * double(Hi) * 2.0 * kIndexDim;
    in.rowSplit = BenchRowSplit{T, double(maxPages * bs) * double(Hi) * 2.0 * kIndexDim, double(maxPages * bs),
                                {"q", "weights", "token_to_req", "visible"}};
    return in;
  }
};

}  // namespace

const KernelFamily& indexerLogitsFamily() {
  static const IndexerLogitsFamily f;
  return f;
}

}  // namespace deepinfer
