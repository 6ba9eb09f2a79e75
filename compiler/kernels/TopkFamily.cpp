// Kernel family of topk (docs/ops.md §7, §11; template templates/Topk.cuh).
//
// Knobs: threads (per CTA), radix_bits (8 or 11 bits per radix pass; 1: the bisection select),
// pool_keys (keys cached in shared memory, derived from the target's per-CTA cap, which emit()
// does not see; for bisection the row items held in registers, threads x keys per thread), splits
// (chunks per row: 1 = one CTA per row and one launch; > 1 = a chunk step writing per-chunk
// top-k candidates to the workspace and a merge step).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "params/TopkParams.h"

namespace deepinfer {
namespace {

constexpr int64_t kStaticSmemCap = 48 * 1024;  // the template uses static shared memory only
constexpr int kMaxRegs = 64;                   // the launch bounds cap every config at this
constexpr int64_t kMaxK = int64_t(1) << 24;
constexpr int kMaxSplits = 64;
constexpr int64_t kMaxBisectKeysPerThread = 32;  // registers: the key array plus ~30 others under 64

// The bisection plan for rows of N scores: the fewest threads (256, 512, 1024) that hold the row
// at <= 16 keys per thread, and pool_keys = threads x keys per thread rounded up to tiles of 4
// (0 when N is over 16K).
struct BisectShape {
  int threads = 0;
  int64_t poolKeys = 0;
};
BisectShape bisectShapeFor(int64_t N) {
  for (int threads : {256, 512, 1024})
    if (N <= int64_t(16) * threads)
      return {threads, threads * std::max<int64_t>(4, (N + 4 * threads - 1) / (4 * threads) * 4)};
  return {};
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Mirrors di::topk::Smem: pool, histogram, two 32-word scan buffers, res[3] + pool_fill.
int64_t smemBytesFor(int64_t poolKeys, int radixBits) {
  const int64_t b = poolKeys * 4 + (int64_t(1) << radixBits) * 4 + 2 * 32 * 4 + 4 * 4;
  return (b + 15) / 16 * 16;
}
// The largest pool (a multiple of 256 keys) that fits `cap` bytes.
int64_t poolFor(int64_t cap, int radixBits) {
  const int64_t rest = std::min(cap, kStaticSmemCap) - smemBytesFor(0, radixBits);
  return std::max<int64_t>(256, rest / 4 / 256 * 256);
}

struct TopkConfig {
  int64_t threads = 0, radixBits = 0, poolKeys = 0, splits = 0;
  static constexpr auto fields() {
    using F = ConfigField<TopkConfig>;
    return std::array{F{"threads", &TopkConfig::threads}, F{"radix_bits", &TopkConfig::radixBits},
                      F{"pool_keys", &TopkConfig::poolKeys}, F{"splits", &TopkConfig::splits}};
  }
};

struct Geometry {
  int threads = 0, radixBits = 0;
  int64_t poolKeys = 0;
  int64_t splits = 1, chunkLen = 0;  // effective splits after rounding the chunk to 4
};

Result<Geometry> geometry(const TopkConfig& c, const OpDesc& d) {
  Geometry g;
  g.threads = int(c.threads);
  g.radixBits = int(c.radixBits);
  g.poolKeys = c.poolKeys;
  const int64_t splits = c.splits;
  const std::string cfg = configToString(toKnobs(c));
  if (g.threads != 128 && g.threads != 256 && g.threads != 512 && g.threads != 1024)
    return Error{
        fmt::format("topk: threads = {} must be 128, 256, 512 or 1024 ({})", g.threads, cfg)};
  if (g.radixBits != 1 && g.radixBits != 8 && g.radixBits != 11)
    return Error{fmt::format("topk: radix_bits = {} must be 1 (bisection), 8 or 11 ({})", g.radixBits, cfg)};
  if (g.poolKeys < 256 || g.poolKeys % 256 != 0)
    return Error{fmt::format("topk: pool_keys = {} must be a positive multiple of 256 ({})",
                             g.poolKeys, cfg)};
  if (splits < 1 || splits > kMaxSplits)
    return Error{fmt::format("topk: splits = {} must be in 1..{} ({})", splits, kMaxSplits, cfg)};
  const int64_t T = d.dim("scores", 0), N = d.dim("scores", 1);
  if (g.radixBits == 1) {
    // Bisection holds the whole row in registers: pool_keys = threads x keys per thread, whole
    // tiles of 4 keys, at most kMaxBisectKeysPerThread of them; one CTA per row.
    if (splits != 1)
      return Error{fmt::format("topk: radix_bits = 1 (bisection) needs splits = 1 ({})", cfg)};
    if (g.poolKeys % (4 * g.threads) != 0 || g.poolKeys / g.threads > kMaxBisectKeysPerThread)
      return Error{fmt::format("topk: radix_bits = 1 needs pool_keys = threads x 4..{} in steps of 4 ({})",
                               kMaxBisectKeysPerThread, cfg)};
    if (N > g.poolKeys)
      return Error{fmt::format("topk: radix_bits = 1 holds at most pool_keys = {} scores per row; rows have {} ({})",
                               g.poolKeys, N, cfg)};
  }
  if (splits > 1 && T > 65535)
    return Error{fmt::format("topk: splits = {} needs T <= 65535 rows (grid y); T = {} ({})",
                             splits, T, cfg)};
  g.chunkLen = std::max<int64_t>(4, ceilDiv(ceilDiv(std::max<int64_t>(N, 1), splits), 4) * 4);
  g.splits = splits > 1 ? ceilDiv(std::max<int64_t>(N, 1), g.chunkLen) : 1;
  return g;
}

class TopkFamily final : public TypedKernelFamily<TopkConfig> {
 public:
  std::string opName() const override { return "topk"; }

  std::vector<std::string> templateHeaders() const override {
    return {"Topk.cuh", "params/TopkParams.h", "common/Mma.cuh", "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    if (!d.attrs.has("k")) return Error{"topk: missing attribute 'k'"};
    const int64_t k = d.attrs.getInt("k", 0);
    if (k < 1 || k > kMaxK) return Error{fmt::format("topk: k = {} must be in 1..{}", k, kMaxK)};
    DI_TRY(expectRank(d, "scores", 2));
    const int64_t T = d.dim("scores", 0), N = d.dim("scores", 1);
    if (N > INT32_MAX - 4096)
      return Error{
          fmt::format("topk: scores rows have {} entries; at most {}", N, INT32_MAX - 4096)};
    if (T > INT32_MAX)
      return Error{fmt::format("topk: scores has {} rows; at most {}", T, INT32_MAX)};
    DI_TRY(expectShape(d, "lens", {T}));
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    return {{"indices", {DType::I32, {d.dim("scores", 0), d.attrs.getInt("k", 1)}}}};
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    const Config base = defaultFor(d, t);
    std::vector<int64_t> splitSet = {1};
    if (base.splits > 1)
      splitSet = {1, std::max<int64_t>(2, base.splits / 2), base.splits, std::min<int64_t>(kMaxSplits, base.splits * 2)};
    std::vector<Config> out;
    auto same = [](const Config& a, const Config& b) { return toKnobs(a) == toKnobs(b); };
    for (int threads : {256, 512, 1024})
      for (int bits : {8, 11})
        for (int64_t s : splitSet) {
          const Config c{threads, bits, poolFor(t.smemPerCtaCap, bits), s};
          if (canImplement(c, d).ok() && std::none_of(out.begin(), out.end(), [&](const Config& o) { return same(o, c); }))
            out.push_back(c);
        }
    // Bisection: every thread count that holds the row at <= 32 keys per thread.
    const int64_t N = d.dim("scores", 1);
    for (int threads : {256, 512, 1024}) {
      const int64_t kpt = std::max<int64_t>(4, ceilDiv(N, 4 * threads) * 4);
      const Config c{threads, 1, threads * kpt, 1};
      if (canImplement(c, d).ok() && std::none_of(out.begin(), out.end(), [&](const Config& o) { return same(o, c); }))
        out.push_back(c);
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
    const Geometry g = geometry(c, d).value();  // canImplement accepted it
    // The bisection select keeps its keys in registers: three pairs of 32-word buffers (two
    // count words per warp, the scans) and the list of at most 2 x threads keys its last steps
    // count over.
    e.smemBytes = g.radixBits == 1 ? 3 * 2 * 32 * 4 + 2 * int64_t(g.threads) * 4 : smemBytesFor(g.poolKeys, g.radixBits);
    e.threadsPerCta = g.threads;
    // ptxas: 34-40 on sm_80/86/90 for the radix plans; the bisection takes 32 + its keys per
    // thread (40 / 48 / 63-64 at 8 / 16 / 32 keys).
    e.regsPerThread = g.radixBits == 1 ? int(std::min<int64_t>(kMaxRegs, 32 + g.poolKeys / g.threads)) : 40;
    return e;
  }

  // Heuristic:
  //  - radix_bits = 11: three passes over 32-bit keys, 8 KB of histogram; the rest of the
  //    per-CTA cap (48 KB on sm_80/86) caches up to pool_keys keys, so rows of ~10K candidates
  //    (V4.1's 8K compressed positions) are read from memory once.
  //  - threads: 512 when two such CTAs fit an SM (sm_80: 164 KB / 64 warps, sm_86: 100 KB /
  //    48 warps, sm_90: 228 KB), else 1024 (one CTA per SM either way, the wider one is faster).
  //  - splits: a row longer than the pool is cut into pool-sized chunks, so every score is
  //    read once (a long row in one CTA re-reads it once per radix pass); when the batch has
  //    fewer rows than the GPU holds CTAs, rows are cut further to fill it. At most 64 chunks,
  //    each at least 2k long (a chunk shorter than k passes through whole).
  //  - bisection (radix_bits = 1) instead when the plan is one CTA per row and the row fits 16
  //    keys per thread of 256 / 512 / 1024 threads (N <= 16384): T=1536 N=8192 was 112 us on an
  //    H200 with the radix plan (3 passes of warp-aggregated shared atomics per row, match.any
  //    per 32 keys, 4 CTAs per SM by shared memory); bisection reads the row once into
  //    registers and takes <= 17 CTA-wide counts (two key bits each), one barrier each: of 48
  //    compares per thread until the keys that can still move the count are <= 2 x threads,
  //    then over that list.
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const int bits = 11;
    const int64_t pool = poolFor(t.smemPerCtaCap, bits);
    const int64_t smem = smemBytesFor(pool, bits) + 1024;  // + the per-CTA reservation
    auto ctasPerSm = [&](int threads) {
      const int64_t bySmem = t.facts.smemPerSm / smem;
      const int64_t byWarps = t.facts.maxWarpsPerSm / (threads / 32);
      const int64_t byRegs = t.facts.regsPerSm / (int64_t(threads) * kMaxRegs);
      return std::max<int64_t>(1,
                               std::min({bySmem, byWarps, byRegs, int64_t(t.facts.maxCtasPerSm)}));
    };
    const int threads = ctasPerSm(512) >= 2 ? 512 : 1024;
    const int64_t resident = std::max(1, t.smCount) * ctasPerSm(threads);
    const int64_t T = d.dim("scores", 0), N = d.dim("scores", 1);
    const int64_t k = d.attrs.getInt("k", 1);
    int64_t splits = 1;
    if (N > pool && T >= 1 && T <= 65535) {
      const int64_t want = std::max(ceilDiv(N, pool), ceilDiv(resident, T));
      splits = std::clamp<int64_t>(std::min(want, N / (2 * k)), 1, kMaxSplits);
    }
    // One CTA per row and a row that fits 16 keys per thread: the bisection select.
    const BisectShape b = bisectShapeFor(N);
    if (splits == 1 && b.threads > 0) return {b.threads, 1, b.poolKeys, 1};
    return {threads, bits, pool, splits};
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    auto g = geometry(c, d);
    const int minBlocks = std::max(1, 65536 / (g->threads * kMaxRegs));
    auto entry = [&](const std::string& name, const char* step) {
      return fmt::format(
          "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::TopkParams p) {{\n"
          "  di::grid_dependency_sync();\n"
          "  di::topk_kernel<{}, {}, {}, {}>(p);\n"
          "}}\n",
          g->threads, minBlocks, name, g->threads, g->radixBits, g->poolKeys, step);
    };
    u.source = "#include \"Topk.cuh\"\n";
    if (g->splits == 1) {
      u.source += entry(baseName, "di::topk::kDirect");
      u.entries = {baseName};
    } else {
      u.source += entry(baseName + "_chunk", "di::topk::kSplitChunk");
      u.source += entry(baseName + "_merge", "di::topk::kSplitMerge");
      u.entries = {baseName + "_chunk", baseName + "_merge"};
    }
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    auto g = geometry(c, d);
    const int64_t T = d.dim("scores", 0);
    if (T == 0) return {};  // no rows: nothing to launch
    LaunchStep s;
    s.block = {uint32_t(g->threads), 1, 1};
    if (g->splits == 1) {
      s.entry = baseName;
      s.grid = {uint32_t(T), 1, 1};
      return {s};
    }
    LaunchStep chunk = s, merge = s;
    chunk.entry = baseName + "_chunk";
    chunk.grid = {uint32_t(g->splits), uint32_t(T), 1};
    merge.entry = baseName + "_merge";
    merge.grid = {uint32_t(T), 1, 1};
    return {chunk, merge};
  }

  int64_t workspace(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    if (g->splits == 1) return 0;
    return d.dim("scores", 0) * g->splits * d.attrs.getInt("k", 1) * 8;  // keys + indices
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    auto g = geometry(c, d);
    auto addr = [&](const char* n) -> Result<uint64_t> {
      auto it = addrs.find(n);
      if (it == addrs.end())
        return Error{fmt::format("topk: no device address for tensor '{}'", n)};
      return it->second;
    };
    auto scores = addr("scores");
    if (!scores.ok()) return scores.error();
    auto lens = addr("lens");
    if (!lens.ok()) return lens.error();
    auto indices = addr("indices");
    if (!indices.ok()) return indices.error();
    if (scores.value() & 15) return Error{"topk: 'scores' must be a 16-byte aligned device buffer"};
    di::TopkParams p{};
    p.scores = reinterpret_cast<const float*>(scores.value());
    p.lens = reinterpret_cast<const int32_t*>(lens.value());
    p.indices = reinterpret_cast<int32_t*>(indices.value());
    const int64_t T = d.dim("scores", 0), k = d.attrs.getInt("k", 1);
    if (g->splits > 1) {
      auto ws = addr("__workspace");
      if (!ws.ok()) return ws.error();
      if (ws.value() & 15) return Error{"topk: the workspace must be 16-byte aligned"};
      p.cand_keys = reinterpret_cast<uint32_t*>(ws.value());
      p.cand_idx = reinterpret_cast<int32_t*>(ws.value() + uint64_t(T * g->splits * k) * 4);
    }
    p.num_rows = int32_t(T);
    p.row_len = int32_t(d.dim("scores", 1));
    p.k = int32_t(k);
    p.splits = int32_t(g->splits);
    p.chunk_len = int32_t(g->chunkLen);
    return paramBytes(p);
  }
  std::vector<ShapeParam> shapeParams() const override {
    return {{"T", 1536, "rows"}, {"N", 8192, "candidates per row"}, {"k", 512, ""}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    OpDesc d;
    d.op = opName();
    d.shapes["scores"] = {p.at("T"), p.at("N")};
    d.shapes["lens"] = {p.at("T")};
    d.attrs.setInt("k", p.at("k"));
    return d;
  }

  // Tuned along the candidates per row, at a prefill chunk's 1536 rows.
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"N", {2048, 8192, 32768}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "scores", 1); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    const ShapeParams p{{"T", 1536}, {"N", v}, {"k", m.indexTopk}};
    return {{p, p}};
  }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"k", intAttrOf(d, "k")}};
  }

  // The indexer's rows of a prefill chunk: N(0, 1) scores, lens growing with the position (as
  // `visible` does) within (k, N], so every row selects k entries.
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t T = p.get("T", 1536), N = p.get("N", 8192), k = p.get("k", 512);
    DI_TRY(p.require(T >= 1 && k >= 1 && N > k, "needs T >= 1 and N > k >= 1"));
    std::vector<int32_t> lens(static_cast<size_t>(T));
    double read = 0;
    for (int64_t t = 0; t < T; ++t) {
      lens[size_t(t)] = int32_t(std::max(k + 1, N - (T - 1 - t) / 2));
      read += lens[size_t(t)];
    }
    const auto pool = f32NormalPool(rng);
    BenchInputs in;
    in.attrs.setInt("k", k);
    in.inputs["scores"] = f32FromPool(rng, pool, {T, N});
    in.inputs["lens"] = i32Tensor({T}, lens);
    in.bytes = read * 4 + double(T * 4) + double(T * k * 4);
    in.rowSplit = BenchRowSplit{T, double(N) * 40.0, 0 /* bit-exact: compared with memcmp */, {"scores", "lens"}};
    return in;
  }
};

}  // namespace

const KernelFamily& topkFamily() {
  static const TopkFamily f;
  return f;
}

}  // namespace deepinfer
