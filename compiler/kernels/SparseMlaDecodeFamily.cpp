// Kernel family of sparse_mla_decode (docs/ops.md §6): validation, configs, resources, emission,
// launch plan and parameter packing for templates/SparseMlaDecode.cuh.
//
// Config knobs:
//   heads_per_cta  heads of one query per CTA (multiple of 8 dividing H, <= 32 in candidates);
//                  rounded up to m-tiles of 16 mma rows (zero rows pad 8 and 24)
//   threads        32 * m_tiles * dim_slices; dim_slices 4 (128 head dims per warp) or 8 (64)
//   keys_per_tile  keys dequantized and consumed per pipeline step (16 or 32)
//   stages         raw cp.async buffers in flight (1..3)
//   kv_splits      parts of the key list per query; > 1 writes normalized partials to a workspace
//   merge          with kv_splits > 1: 0 = a second launch merges the partials; 1 = the last CTA
//                  of each (query, head group) to arrive merges them in the same launch (arrival
//                  counters in the zeroed workspace); 0 with kv_splits = 1
//   schedule       where q lives: 0 = A fragments in registers (head groups of <= 32 heads: each
//                  group copies and dequantizes the split's key rows again); 1 = a bf16 tile in
//                  shared memory read by ldmatrix (wide CTAs, up to 64 heads, 4 dim slices: a key
//                  row is dequantized once for all heads of the CTA; heads_per_cta KB more shared
//                  memory, so only targets above the 48 KB cap offer it at V4.1's 64 heads)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/EncodedInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "KvCacheLayout.h"
#include "deepinfer/KernelFamily.h"
#include "params/SparseMlaDecodeParams.h"

namespace deepinfer {
namespace {

constexpr const char* kOp = "sparse_mla_decode";
constexpr int64_t kHeadDim = 512;
constexpr int64_t kStaticSmemCap = 48 * 1024;  // above this the unit uses dynamic shared memory
constexpr int kMergeThreads = 128;             // 4 of the 512 dims per thread
constexpr int64_t kPartialLseAlign = 256;

std::string shapeStr(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

struct SparseMlaDecodeConfig {
  int64_t headsPerCta = 0, threads = 0, keysPerTile = 0, stages = 0, kvSplits = 0, merge = 0, schedule = 0;
  static constexpr auto fields() {
    using F = ConfigField<SparseMlaDecodeConfig>;
    return std::array{F{"heads_per_cta", &SparseMlaDecodeConfig::headsPerCta},
                      F{"threads", &SparseMlaDecodeConfig::threads},
                      F{"keys_per_tile", &SparseMlaDecodeConfig::keysPerTile},
                      F{"stages", &SparseMlaDecodeConfig::stages},
                      F{"kv_splits", &SparseMlaDecodeConfig::kvSplits},
                      F{"merge", &SparseMlaDecodeConfig::merge},
                      F{"schedule", &SparseMlaDecodeConfig::schedule}};
  }
};

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// log2 of a power-of-two block size (the kernel then shifts instead of dividing), else -1.
int32_t blockShift(int64_t bs) {
  if (bs < 1 || (bs & (bs - 1)) != 0) return -1;
  int32_t s = 0;
  while ((int64_t(1) << s) < bs) ++s;
  return s;
}

// Sizes of an op instance that passed validate().
struct Dims {
  int64_t B = 0, Sq = 0, H = 0;
  int64_t swaK = 0, extraK = 0;  // index row widths (extraK = 0 without the compressed cache)
  bool hasExtra = false;
};

Dims dimsOf(const OpDesc& d) {
  Dims r;
  const auto& q = d.shapes.at("q");
  r.B = q[0];
  r.Sq = q[1];
  r.H = q[2];
  r.swaK = d.dim("swa_indices", 2);
  r.hasExtra = d.hasTensor("extra_indices");
  r.extraK = r.hasExtra ? d.dim("extra_indices", 2) : 0;
  return r;
}

// What a config instantiates.
struct Geometry {
  int heads = 0, mTiles = 0, dimSlices = 0, threads = 0, keys = 0, stages = 0, splits = 0;
  bool lastCtaMerge = false;  // merge = 1
  bool qSmem = false;         // schedule = 1
  di::SparseMlaDecodeSmem smem{};
  bool dynamicSmem = false;
};

// Only for configs checkConfig accepts (every knob then fits an int).
Geometry geometryOf(const SparseMlaDecodeConfig& c) {
  Geometry g;
  g.heads = int(c.headsPerCta);
  g.mTiles = (g.heads + 15) / 16;
  g.threads = int(c.threads);
  g.dimSlices = g.mTiles > 0 ? g.threads / (32 * g.mTiles) : 0;
  g.keys = int(c.keysPerTile);
  g.stages = int(c.stages);
  g.splits = int(c.kvSplits);
  g.lastCtaMerge = c.merge == 1;
  g.qSmem = c.schedule == 1;
  g.smem = di::sparseMlaDecodeSmem(g.heads, g.dimSlices, g.keys, g.stages, g.qSmem);
  g.dynamicSmem = g.smem.total > kStaticSmemCap;
  return g;
}

// Registers per thread as ptxas reports them for CUDA 13 on sm_80/86/89/90 (the largest of the
// four, rounded up): q fragments (SW/4) + o accumulators (SW/2) + scores and addressing. 8 slices
// run under a 128-register bound (105-122 measured); 4 slices need 165-185 (16 keys per tile)
// or 199-222 (32).
// q in shared memory frees the 32 (4 slices) or 16 (8 slices) registers of its fragments and
// runs under a 128-register bound.
int registerEstimate(const Geometry& g) {
  if (g.dimSlices == 8 || g.qSmem) return g.keys == 16 ? 124 : 128;
  return g.keys == 16 ? 190 : 224;
}

// __launch_bounds__ minimum CTAs per SM: with 8 slices, cap registers at 128 (no spills
// measured); with 4 slices leave room for the ~190 registers they need.
int minBlocksPerSm(const Geometry& g) {
  if (g.dimSlices == 8 || g.qSmem) return std::max(1, 512 / g.threads);
  return g.threads <= 128 ? 2 : 1;
}

Status checkConfig(const SparseMlaDecodeConfig& c, const OpDesc& d) {
  const Dims dm = dimsOf(d);
  if (c.headsPerCta < 8 || c.headsPerCta > 64 || c.headsPerCta % 8 != 0 || dm.H % c.headsPerCta != 0)
    return Error{fmt::format("{}: config heads_per_cta={} must be a multiple of 8 in 8..64 dividing "
                             "the {} heads",
                             kOp, c.headsPerCta, dm.H)};
  const int64_t mTiles = (c.headsPerCta + 15) / 16;
  if (c.threads != 128 * mTiles && c.threads != 256 * mTiles)
    return Error{fmt::format("{}: config threads={} must be {} or {} for heads_per_cta={}", kOp,
                             c.threads, 128 * mTiles, 256 * mTiles, c.headsPerCta)};
  if (c.threads > 1024)
    return Error{fmt::format("{}: config threads={} exceeds 1024", kOp, c.threads)};
  if (c.keysPerTile != 16 && c.keysPerTile != 32)
    return Error{fmt::format("{}: config keys_per_tile={} must be 16 or 32", kOp, c.keysPerTile)};
  // Each thread dequantizes an equal share of a tile's keys x 64 16-byte pieces.
  if ((c.keysPerTile * 64) % c.threads != 0)
    return Error{fmt::format("{}: config threads={} does not divide the {} dequantization pieces of a "
                             "{}-key tile (heads_per_cta={} gives {} m-tiles)",
                             kOp, c.threads, c.keysPerTile * 64, c.keysPerTile, c.headsPerCta, mTiles)};
  if (c.stages < 1 || c.stages > 4)
    return Error{fmt::format("{}: config stages={} must be in 1..4", kOp, c.stages)};
  if (c.kvSplits < 1 || c.kvSplits > 1024)
    return Error{fmt::format("{}: config kv_splits={} must be in 1..1024", kOp, c.kvSplits)};
  if (c.merge != 0 && c.merge != 1)
    return Error{fmt::format("{}: config merge={} must be 0 (merge launch) or 1 (last CTA merges)", kOp, c.merge)};
  if (c.merge == 1 && c.kvSplits == 1)
    return Error{fmt::format("{}: config merge=1 merges split partials; kv_splits=1 has none (use merge=0)", kOp)};
  if (c.schedule != 0 && c.schedule != 1)
    return Error{fmt::format("{}: config schedule={} must be 0 (q in registers) or 1 (q in shared memory)", kOp,
                             c.schedule)};
  if (c.schedule == 1 && c.headsPerCta % 16 != 0)
    return Error{fmt::format("{}: config schedule=1 (q in shared memory) needs heads_per_cta in whole m-tiles of 16; "
                             "heads_per_cta={} is not",
                             kOp, c.headsPerCta)};
  return {};
}

// Workspace: normalized partial outputs [B*Sq*H*splits, 512] fp32, then partial lse.
int64_t partialOBytes(const Dims& dm, int splits) {
  return dm.B * dm.Sq * dm.H * splits * kHeadDim * 4;
}
int64_t partialLseOffset(const Dims& dm, int splits) {
  return ceilDiv(partialOBytes(dm, splits), kPartialLseAlign) * kPartialLseAlign;
}

class SparseMlaDecodeFamily final : public TypedKernelFamily<SparseMlaDecodeConfig> {
 public:
  std::string opName() const override { return kOp; }

  std::vector<std::string> templateHeaders() const override {
    return {"SparseMlaDecode.cuh", "params/SparseMlaDecodeParams.h", "common/Arrival.cuh", "common/Mma.cuh",
            "common/Numerics.cuh", "common/QuantWeights.cuh", "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    DI_TRY(kvcache::expectMlaDims(d));
    for (const char* n : {"q", "swa_cache", "swa_indices", "swa_lens", "attn_sink"})
      if (!d.hasTensor(n)) return Error{fmt::format("{}: missing input tensor '{}'", kOp, n)};
    const auto& q = d.shapes.at("q");
    if (q.size() != 4)
      return Error{fmt::format("{}: q has shape {}; expected [B, Sq, H, 512]", kOp, shapeStr(q))};
    const int64_t B = q[0], Sq = q[1], H = q[2];
    if (q[3] != kHeadDim)
      return Error{fmt::format("{}: q has head dim {}; the head dim must be 512", kOp, q[3])};
    if (B < 1) return Error{fmt::format("{}: q has batch {}; B must be >= 1", kOp, B)};
    if (Sq < 1) return Error{fmt::format("{}: q has {} query tokens; Sq must be >= 1", kOp, Sq)};
    if (H < 8 || H > 128 || H % 8 != 0)
      return Error{fmt::format("{}: q has {} heads; heads must be a multiple of 8 in 8..128", kOp, H)};
    if (B * Sq > 65535)
      return Error{fmt::format("{}: B * Sq = {} exceeds 65535 (grid limit)", kOp, B * Sq)};
    if (d.attrs.has("sm_scale")) {
      const double s = d.attrs.getFloat("sm_scale", 0);
      if (!std::isfinite(s) || s <= 0)
        return Error{fmt::format("{}: attribute sm_scale={} must be finite and > 0", kOp, s)};
    }

    DI_TRY(validateSource(d, "swa", B, Sq));
    const bool anyExtra = d.hasTensor("extra_cache") || d.hasTensor("extra_indices") ||
                          d.hasTensor("extra_lens");
    if (anyExtra) {
      for (const char* n : {"extra_cache", "extra_indices", "extra_lens"})
        if (!d.hasTensor(n))
          return Error{fmt::format("{}: '{}' is missing; extra_cache, extra_indices and extra_lens "
                                   "come together",
                                   kOp, n)};
      DI_TRY(validateSource(d, "extra", B, Sq));
    }

    const auto& sink = d.shapes.at("attn_sink");
    if (sink != std::vector<int64_t>{H})
      return Error{fmt::format("{}: attn_sink has shape {}; expected [{}]", kOp, shapeStr(sink), H)};
    // Outputs given with the description must match what the op writes.
    for (const auto& [name, spec] : outputs(d)) {
      auto it = d.shapes.find(name);
      if (it != d.shapes.end() && it->second != spec.second)
        return Error{fmt::format("{}: {} has shape {}; expected {}", kOp, name, shapeStr(it->second),
                                 shapeStr(spec.second))};
    }
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    const auto& q = d.shapes.at("q");
    OutputSpec o;
    o["out"] = {DType::BF16, {q[0], q[1], q[2], kHeadDim}};
    o["lse"] = {DType::F32, {q[0], q[1], q[2]}};
    return o;
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    const Dims dm = dimsOf(d);
    std::vector<int> headOptions;
    for (int h : {16, 32})
      if (dm.H % h == 0) headOptions.push_back(h);
    // 8 and 24 pad the m-tile: only worth it when no multiple of 16 divides H.
    if (headOptions.empty())
      for (int h : {8, 24})
        if (dm.H % h == 0) headOptions.push_back(h);

    std::vector<Config> out;
    for (int heads : headOptions) {
      const int mTiles = (heads + 15) / 16;
      for (int slices : {4, 8}) {
        const int threads = 32 * mTiles * slices;
        if (threads > 512) continue;
        for (int keys : {16, 32}) {
          if (slices == 8 && keys == 32) continue;  // > 128 registers: spills under the bound
          for (int stages : {1, 2, 3}) {
            Config c{heads, threads, keys, stages, 1, 0};
            if (resources(c, d).smemBytes > t.smemPerCtaCap) continue;
            for (int splits : splitOptions(dm, keys)) {
              c.kvSplits = splits;
              for (int merge : {0, 1}) {
                if (merge == 1 && splits == 1) continue;
                c.merge = merge;
                out.push_back(c);
              }
            }
          }
        }
      }
    }
    // q in shared memory: the two widest CTAs of 64 / 32 / 16 heads that divide H (64 heads: one
    // CTA per query and split; 32: two CTAs of 256 threads fit an SM, so one's barrier phases
    // can overlap the other's), 4 dim slices; 16-key tiles only (32-key tiles spill under the
    // 128-register bound).
    int wideOffered = 0;
    for (int heads : {64, 32, 16}) {
      if (dm.H % heads != 0 || wideOffered == 2) continue;
      ++wideOffered;
      const int threads = 32 * (heads / 16) * 4;
      for (int stages : {1, 2, 3}) {
        Config c{heads, threads, 16, stages, 1, 0, 1};
        if (resources(c, d).smemBytes > t.smemPerCtaCap) continue;
        for (int splits : splitOptions(dm, 16)) {
          c.kvSplits = splits;
          for (int merge : {0, 1}) {
            if (merge == 1 && splits == 1) continue;
            c.merge = merge;
            out.push_back(c);
          }
        }
      }
    }
    return out;
  }

  Status canImplement(const Config& c, const OpDesc& d) const override { return checkConfig(c, d); }

  ResourceEstimate resources(const Config& c, const OpDesc&) const override {
    const Geometry g = geometryOf(c);
    ResourceEstimate r;
    r.smemBytes = g.smem.total;
    r.threadsPerCta = g.threads;
    r.regsPerThread = registerEstimate(g);
    return r;
  }

  // Heuristic (the tuner's timings override it): the schedule of kSchedules and the split count
  // with the least modeled time (modelTimeUs), each schedule with the most cp.async stages (<= 3)
  // that fit the target's per-CTA cap (48 KB static on sm_80/sm_86; sm_89/sm_90 may use dynamic
  // shared memory, which 32-key tiles need). The merge stays a launch (merge = 0): the one-launch
  // merge is a candidate, and the tuner on the H200 (11f5c23) picked merge = 0 in every decode
  // bucket it timed (B = 5..8, 9..16, 17..32), where the last CTA reading heads x splits partials
  // alone cost more than the launch it saves. The last CTA's merge now loads the unit's lse once
  // into shared memory and keeps 16 partial loads per thread in flight, but it still reads the
  // unit's partials through one SM (the defaults: 640 KB, ~5 us at ~120 GB/s), about the merge
  // launch's 6.4 us (ncu, proxy decode step): predicted within 1 us of merge = 0 either way, so
  // the default stays until the tuner times both.
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const Dims dm = dimsOf(d);
    Config best;
    double bestUs = 0;
    for (const Schedule& s : kSchedules) {
      // Heads per CTA: 16 per m-tile; the padded 8 / 24 only when no multiple of 16 divides H.
      int heads = 16 * s.mTiles;
      if (dm.H % 16 != 0) {
        if (s.qSmem) continue;
        heads = s.mTiles == 1 ? 8 : 24;
      }
      if (dm.H % heads != 0) continue;
      Config c{heads, 32 * s.mTiles * s.dimSlices, s.keys, 0, 1, 0, s.qSmem ? 1 : 0};
      for (int stages : {3, 2, 1}) {
        c.stages = stages;
        if (resources(c, d).smemBytes <= t.smemPerCtaCap) break;
      }
      if (resources(c, d).smemBytes > t.smemPerCtaCap) continue;
      for (int splits : splitOptions(dm, s.keys)) {
        // Schedule 1's direct plan (one split) spills 4 bytes under its 128-register bound.
        if (s.qSmem && splits == 1) continue;
        c.kvSplits = splits;
        const double us = modelTimeUs(dm, s, heads, splits, t);
        if (best.headsPerCta == 0 || us < bestUs) {
          best = c;
          bestUs = us;
        }
      }
    }
    // No schedule within the cap (a part below 36 KB per CTA): the smallest one, which the
    // target check then refuses with its byte count.
    if (best.headsPerCta == 0) best = Config{dm.H % 16 == 0 ? 16 : 8, 256, 16, 1, 1, 0, 0};
    return best;
  }

  CudaUnit unit(const Config& c, const OpDesc&, const std::string& baseName) const override {
    const Geometry g = geometryOf(c);
    const bool split = g.splits > 1;
    const char* mode = !split ? "di::smd::Mode::kDirect"
                       : g.lastCtaMerge ? "di::smd::Mode::kMergeLastCta"
                                        : "di::smd::Mode::kMergeLaunch";
    CudaUnit u;
    u.source = fmt::format(
        "#include \"SparseMlaDecode.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::SparseMlaDecodeParams p) "
        "{{ di::grid_dependency_sync(); di::sparse_mla_decode_kernel<{}, {}, {}, {}, {}, {}, {}>(p); }}\n",
        g.threads, minBlocksPerSm(g), baseName, g.heads, g.dimSlices, g.keys, g.stages, mode,
        g.dynamicSmem ? "true" : "false", g.qSmem ? "true" : "false");
    u.entries.push_back(baseName);
    if (split && !g.lastCtaMerge) {
      u.source += fmt::format(
          "extern \"C\" __global__ void __launch_bounds__({}) {}_merge(const di::SparseMlaDecodeParams p) "
          "{{ di::grid_dependency_sync(); di::sparse_mla_decode_merge_kernel<{}>(p); }}\n",
          kMergeThreads, baseName, g.splits);
      u.entries.push_back(baseName + "_merge");
    }
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    const Dims dm = dimsOf(d);
    const Geometry g = geometryOf(c);
    std::vector<LaunchStep> steps;
    LaunchStep main;
    main.entry = baseName;
    main.grid = {uint32_t(g.splits), uint32_t(dm.H / g.heads), uint32_t(dm.B * dm.Sq)};
    main.block = {uint32_t(g.threads), 1, 1};
    main.dynamicSmem = g.dynamicSmem ? uint32_t(g.smem.total) : 0;
    steps.push_back(main);
    if (g.splits > 1 && !g.lastCtaMerge) {
      LaunchStep merge;
      merge.entry = baseName + "_merge";
      merge.grid = {uint32_t(dm.H), uint32_t(dm.B * dm.Sq), 1};
      merge.block = {uint32_t(kMergeThreads), 1, 1};
      steps.push_back(merge);
    }
    return steps;
  }

  int64_t workspace(const Config& c, const OpDesc& d) const override {
    const Geometry g = geometryOf(c);
    if (g.splits <= 1) return 0;
    const Dims dm = dimsOf(d);
    return partialLseOffset(dm, g.splits) + dm.B * dm.Sq * dm.H * g.splits * 4;
  }

  // The one-launch merge: one arrival counter per (query, head group) (templates/SparseMlaDecode.cuh).
  int64_t zeroedWorkspace(const SparseMlaDecodeConfig& c, const OpDesc& d) const override {
    const Geometry g = geometryOf(c);
    if (g.splits <= 1 || !g.lastCtaMerge) return 0;
    const Dims dm = dimsOf(d);
    return dm.B * dm.Sq * (dm.H / g.heads) * 4;
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    DI_TRY(validate(d));
    const Dims dm = dimsOf(d);
    const Geometry g = geometryOf(c);
    auto need = [&](const char* name) -> Result<uint64_t> {
      auto it = addrs.find(name);
      if (it == addrs.end() || it->second == 0)
        return Error{fmt::format("{}: no device address for tensor '{}'", kOp, name)};
      return it->second;
    };
    auto opt = [&](const char* name) -> uint64_t {
      auto it = addrs.find(name);
      return it == addrs.end() ? 0 : it->second;
    };

    di::SparseMlaDecodeParams p{};
    Result<uint64_t> a = need("q");
    if (!a) return a.error();
    p.q = reinterpret_cast<const uint16_t*>(*a);
    if (!(a = need("swa_cache"))) return a.error();
    p.swa_cache = reinterpret_cast<const uint8_t*>(*a);
    if (!(a = need("swa_indices"))) return a.error();
    p.swa_indices = reinterpret_cast<const int32_t*>(*a);
    if (!(a = need("swa_lens"))) return a.error();
    p.swa_lens = reinterpret_cast<const int32_t*>(*a);
    if (!(a = need("attn_sink"))) return a.error();
    p.attn_sink = reinterpret_cast<const float*>(*a);
    if (!(a = need("out"))) return a.error();
    p.out = reinterpret_cast<uint16_t*>(*a);
    if (!(a = need("lse"))) return a.error();
    p.lse = reinterpret_cast<float*>(*a);
    if (dm.hasExtra) {
      if (!(a = need("extra_cache"))) return a.error();
      p.extra_cache = reinterpret_cast<const uint8_t*>(*a);
      if (!(a = need("extra_indices"))) return a.error();
      p.extra_indices = reinterpret_cast<const int32_t*>(*a);
      if (!(a = need("extra_lens"))) return a.error();
      p.extra_lens = reinterpret_cast<const int32_t*>(*a);
    } else if (opt("extra_cache") || opt("extra_indices") || opt("extra_lens")) {
      return Error{fmt::format("{}: device addresses for extra_* given but the op description has "
                               "no compressed cache",
                               kOp)};
    }
    if (g.splits > 1) {
      if (!(a = need("__workspace"))) return a.error();
      p.partial_o = reinterpret_cast<float*>(*a);
      p.partial_lse = reinterpret_cast<float*>(*a + uint64_t(partialLseOffset(dm, g.splits)));
      if (g.lastCtaMerge) {
        if (!(a = need("__zeroed"))) return a.error();
        p.arrivals = reinterpret_cast<uint32_t*>(*a);
      }
    }

    const int64_t swaBs = d.attrs.getInt("swa_block_size", 0);
    p.swa_block_size = int32_t(swaBs);
    p.swa_block_shift = blockShift(swaBs);
    p.swa_page_bytes = kvcache::pageBytes(swaBs);
    p.swa_num_slots = d.dim("swa_cache", 0) * swaBs;
    p.swa_k = int32_t(dm.swaK);
    p.swa_lens_per_query = d.shapes.at("swa_lens").size() == 2 ? 1 : 0;
    if (dm.hasExtra) {
      const int64_t extraBs = d.attrs.getInt("extra_block_size", 0);
      p.extra_block_size = int32_t(extraBs);
      p.extra_block_shift = blockShift(extraBs);
      p.extra_page_bytes = kvcache::pageBytes(extraBs);
      p.extra_num_slots = d.dim("extra_cache", 0) * extraBs;
      p.extra_k = int32_t(dm.extraK);
      p.extra_lens_per_query = d.shapes.at("extra_lens").size() == 2 ? 1 : 0;
    }
    if (!dm.hasExtra) p.extra_block_shift = -1;
    p.sq = int32_t(dm.Sq);
    p.heads = int32_t(dm.H);
    p.num_splits = g.splits;
    const double smScale = d.attrs.getFloat("sm_scale", 1.0 / std::sqrt(double(kHeadDim)));
    p.scale_log2 = float(smScale * 1.4426950408889634);
    return paramBytes(p);
  }

 private:
  // One source (prefix "swa" or "extra"): cache [P, page_bytes(BS)], indices [B, Sq, K], lens
  // [B] or [B, Sq], block size attribute >= 1.
  static Status validateSource(const OpDesc& d, const std::string& src, int64_t B, int64_t Sq) {
    const std::string bsAttr = src + "_block_size";
    if (!d.attrs.has(bsAttr))
      return Error{fmt::format("{}: attribute {} is required", kOp, bsAttr)};
    const int64_t bs = d.attrs.getInt(bsAttr, 0);
    if (bs < 1 || bs > kvcache::kMaxBlockSize)
      return Error{fmt::format("{}: attribute {}={} must be in 1..{}", kOp, bsAttr, bs,
                               kvcache::kMaxBlockSize)};

    const std::string cacheName = src + "_cache";
    const auto& cache = d.shapes.at(cacheName);
    const int64_t pageBytes = kvcache::pageBytes(bs);
    if (cache.size() != 2 || cache[1] != pageBytes)
      return Error{fmt::format("{}: {} has shape {}; expected [pages, {}] (ceil({} * 584 / 576) * 576 "
                               "bytes per page of {} tokens)",
                               kOp, cacheName, shapeStr(cache), pageBytes, bs, bs)};
    if (cache[0] < 1)
      return Error{fmt::format("{}: {} has {} pages; at least 1 is required", kOp, cacheName, cache[0])};

    const std::string idxName = src + "_indices";
    const auto& idx = d.shapes.at(idxName);
    if (idx.size() != 3 || idx[0] != B || idx[1] != Sq || idx[2] < 1)
      return Error{fmt::format("{}: {} has shape {}; expected [{}, {}, K] with K >= 1", kOp, idxName,
                               shapeStr(idx), B, Sq)};
    if (idx[2] > (int64_t(1) << 30))
      return Error{fmt::format("{}: {} has {} entries per row; at most 2^30 are supported", kOp,
                               idxName, idx[2])};

    const std::string lensName = src + "_lens";
    const auto& lens = d.shapes.at(lensName);
    if (lens != std::vector<int64_t>{B} && lens != std::vector<int64_t>{B, Sq})
      return Error{fmt::format("{}: {} has shape {}; expected [{}] or [{}, {}]", kOp, lensName,
                               shapeStr(lens), B, B, Sq)};
    return {};
  }

  // Split counts worth trying: one per distinct number of tiles per split (at least 2 tiles per
  // split, at most 32 splits), so no split is empty for a full-length key list.
  static std::vector<int> splitOptions(const Dims& dm, int keys) {
    const int64_t tiles = std::max<int64_t>(1, ceilDiv(dm.swaK + dm.extraK, keys));
    std::vector<int> r{1};
    for (int64_t perSplit = tiles - 1; perSplit >= 2; --perSplit) {
      const int64_t s = ceilDiv(tiles, perSplit);
      if (s > 32) break;
      if (s != r.back()) r.push_back(int(s));
    }
    return r;
  }

  // The schedules the default chooses from, with their cost on an H200 (V4.1 shapes, 640 keys
  // per query, L2 flushed; fitted to the bench runs at ab938db and the tuning run of 2026-11-29,
  // within 2 us over 2-40 tiles per CTA): fixedUs (launches, merge) plus, per round of CTAs on an
  // SM, kCtaUs (the dependent index -> row loads before the first tile, the epilogue; fitted
  // while the lens load still came first in that chain) and tileUs per key tile the CTA streams.
  // A tile's cost is not its instruction count: the CTA's phases (dequant, QK, score exchange,
  // softmax, PV) are separated by barriers, so fewer warps per CTA leave more of each phase's
  // latency exposed (32 heads in 4 slices: 2.7 us per 16-key tile, in 8 slices: 2.3 us).
  //
  // The q-in-shared-memory row (schedule = 1, 64 heads) is fitted to its first H200 measurement
  // (72da531, quick bench: B = 6 with 20 splits of 2 tiles 22.3 us, B = 24 with 5 splits of 8
  // tiles 42.2 us): 3.3 us per 16-key tile, and a fixed cost of 12.7 us (it was predicted at 9.0:
  // the 20-way split's fp32 partials, 15.7 MB at B = 6, make the merge dearer). So it wins only
  // from B ~ 16 on. The 32-head schedule = 1 candidates (two CTAs per SM) have no row: the tuner
  // times them.
  struct Schedule {
    int mTiles, dimSlices, keys;
    double fixedUs, tileUs;
    bool qSmem;
  };
  static constexpr Schedule kSchedules[] = {
      {1, 8, 16, 7.5, 1.85, false},         // 16 heads, 256 threads
      {2, 8, 16, 9.0, 2.3, false},          // 32 heads, 512 threads
      {2, 4, 16, 8.0, 2.7, false},          // 32 heads, 256 threads
      {2, 4, 32, 10.5, 3.75, false},        // 32 heads, 256 threads, 32-key tiles (> 48 KB)
      {4, 4, 16, 12.7, 3.3, true},          // 64 heads, 512 threads, q in shared memory (> 48 KB)
  };
  static constexpr double kCtaUs = 3.0;
  // Modeled time of a schedule with `splits` parts per key list: the busiest SM runs
  // ceil(CTAs / SMs) CTAs one after another (measured: a second resident CTA shares the SM's
  // issue slots rather than hiding latency, e.g. 20 splits of 2 tiles at B = 2 lost to 14 of 3).
  // The costs were measured on 132 SMs; other parts differ in SM count, which is what ranks
  // the splits.
  static double modelTimeUs(const Dims& dm, const Schedule& s, int heads, int splits, const TargetProfile& t) {
    const int64_t sms = std::max(1, t.smCount);
    const int64_t tiles = std::max<int64_t>(1, ceilDiv(dm.swaK + dm.extraK, s.keys));
    const int64_t ctas = dm.B * dm.Sq * (dm.H / heads) * splits;
    const int64_t rounds = ceilDiv(ctas, sms);
    return s.fixedUs + double(rounds) * (kCtaUs + s.tileUs * double(ceilDiv(tiles, splits)));
  }
  std::vector<ShapeParam> shapeParams() const override {
    return {{"B", 6, "batch"}, {"Sq", 1, "queries per request"}, {"H", 64, "heads"}, {"swa_k", 128, "window keys"},
            {"extra_k", 512, "compressed keys (0 = none)"}, {"swa_block_size", 64, ""}, {"extra_block_size", 64, ""},
            {"pages", 1024, "pages per cache"}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    const int64_t B = p.at("B"), Sq = p.at("Sq"), H = p.at("H");
    OpDesc d;
    d.op = kOp;
    d.shapes["q"] = {B, Sq, H, kHeadDim};
    d.shapes["swa_cache"] = {p.at("pages"), kvcache::pageBytes(p.at("swa_block_size"))};
    d.shapes["swa_indices"] = {B, Sq, p.at("swa_k")};
    d.shapes["swa_lens"] = {B};
    if (p.at("extra_k") > 0) {
      d.shapes["extra_cache"] = {p.at("pages"), kvcache::pageBytes(p.at("extra_block_size"))};
      d.shapes["extra_indices"] = {B, Sq, p.at("extra_k")};
      d.shapes["extra_lens"] = {B};
      d.attrs.setInt("extra_block_size", p.at("extra_block_size"));
    }
    d.shapes["attn_sink"] = {H};
    d.attrs.setFloat("sm_scale", 0.04419417382415922);
    d.attrs.setInt("swa_block_size", p.at("swa_block_size"));
    return d;
  }

  // The head-count extremes besides the model's 64.
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override {
    return {{"default", {}}, {"H=8", {{"H", 8}}}, {"H=128", {{"H", 128}}}};
  }
  PtxChecks ptxChecks(const OpDesc&) const override { return {.tensorCores = true}; }

  // Tuned along the batch of a decode step; keys: the window plus the index top-k.
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"B", {1, 2, 4, 8, 16, 32, 64}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "q", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    const ShapeParams p{{"B", v}, {"H", m.heads}, {"swa_k", m.window}, {"extra_k", m.indexTopk}};
    return {{p, p}};
  }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    const bool extra = d.hasTensor("extra_indices");
    return {{"H", dimOf(d, "q", 2)},
            {"Sq", dimOf(d, "q", 1)},
            {"swa_k", dimOf(d, "swa_indices", 2)},
            {"extra_k", extra ? dimOf(d, "extra_indices", 2) : 0},
            {"swa_bs", intAttrOf(d, "swa_block_size")},
            {"extra_bs", extra ? intAttrOf(d, "extra_block_size") : 0}};
  }
  // Kernel and reference each round `out` to bf16 once: the error is measured beyond one bf16 step
  // (5e-3 on unit-scale outputs); lse within 1e-3, +inf exactly.
  AccuracyRule accuracy(const std::string& output) const override {
    if (output == "lse") return {AccuracyRule::Kind::Lse, 1e-3, "max abs error (+inf exact)"};
    return {AccuracyRule::Kind::AttnOut, 5e-3, "max abs error beyond one bf16 step"};
  }

  // B requests at random contexts in [context_min, context_max]; request b decodes position
  // ctx_b - 1: its window is the last swa_k positions (window cache), its compressed keys extra_k
  // sorted distinct positions of its ctx_b / ratio compressed ones. Each request's pages come in
  // random order from a shared pool; indices are physical slots of pages holding tokens the
  // kv_quant_insert reference wrote; lens are full (every key valid).
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t B = p.get("B", 6), H = p.get("H", 64), swaK = p.get("swa_k", 128), extK = p.get("extra_k", 512),
                  ctxMin = p.get("context_min", 4096), ctxMax = p.get("context_max", 16384),
                  ratio = p.get("ratio", 2), bs = 64;
    DI_TRY(p.require(B >= 1 && ctxMin <= ctxMax && ctxMin >= swaK && (ctxMin / ratio) >= extK,
                     "needs context_min <= context_max, context_min >= swa_k and context_min / ratio >= extra_k"));
    auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
    std::vector<int64_t> ctxLen(static_cast<size_t>(B));
    int64_t swaPages = 0, extPages = 0;
    for (auto& x : ctxLen) {
      x = rng.range(ctxMin, ctxMax + 1);
      swaPages += cdiv(swaK, bs) + 1;
      extPages += cdiv(x / ratio, bs);
    }
    // Logical page -> physical page, from a shared pool.
    struct PageAlloc {
      std::vector<int64_t> order;
      size_t next = 0;
      int64_t take() { return order.at(next++); }
    };
    PageAlloc swa{shuffledRange(rng, swaPages + 4)}, ext{shuffledRange(rng, extPages + 4)};
    std::vector<int32_t> swaIdx(size_t(B * swaK)), extIdx(size_t(B * extK));
    std::vector<int64_t> swaUsed, extUsed;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t pos = ctxLen[size_t(b)] - 1, first = pos - swaK + 1;
      std::map<int64_t, int64_t> pageOf;
      for (int64_t i = 0; i < swaK; ++i) {
        const int64_t at = first + i;
        auto it = pageOf.find(at / bs);
        if (it == pageOf.end()) {
          it = pageOf.emplace(at / bs, swa.take()).first;
          swaUsed.push_back(it->second);
        }
        swaIdx[size_t(b * swaK + i)] = int32_t(it->second * bs + at % bs);
      }
      const int64_t ncomp = ctxLen[size_t(b)] / ratio;
      std::vector<int64_t> pages(static_cast<size_t>(cdiv(ncomp, bs)));
      for (auto& pg : pages) {
        pg = ext.take();
        extUsed.push_back(pg);
      }
      std::vector<int32_t> sel(static_cast<size_t>(extK));
      stratifiedSorted(rng, ncomp, extK, sel.data());
      for (int64_t i = 0; i < extK; ++i)
        extIdx[size_t(b * extK + i)] = int32_t(pages[size_t(sel[size_t(i)] / bs)] * bs + sel[size_t(i)] % bs);
    }
    const auto pool = bf16NormalPool(rng);
    BenchInputs in;
    in.attrs.setFloat("sm_scale", 1.0 / std::sqrt(double(kHeadDim)));
    in.attrs.setInt("swa_block_size", bs);
    in.attrs.setInt("extra_block_size", bs);
    in.inputs["q"] = bf16FromPool(rng, pool, {B, 1, H, kHeadDim});
    auto swaCache = tiledKvCache(rng, int64_t(swa.order.size()), bs, swaUsed, ctx.reference);
    if (!swaCache.ok()) return swaCache.error();
    in.inputs["swa_cache"] = std::move(*swaCache);
    in.inputs["swa_indices"] = i32Tensor({B, 1, swaK}, swaIdx);
    in.inputs["swa_lens"] = i32Tensor({B}, std::vector<int32_t>(size_t(B), int32_t(swaK)));
    auto extCache = tiledKvCache(rng, int64_t(ext.order.size()), bs, extUsed, ctx.reference);
    if (!extCache.ok()) return extCache.error();
    in.inputs["extra_cache"] = std::move(*extCache);
    in.inputs["extra_indices"] = i32Tensor({B, 1, extK}, extIdx);
    in.inputs["extra_lens"] = i32Tensor({B}, std::vector<int32_t>(size_t(B), int32_t(extK)));
    in.inputs["attn_sink"] = f32Normal(rng, {H});
    const double keys = double(B * (swaK + extK));  // all distinct rows
    in.bytes = double(in.inputs.at("q").bytes.size()) * 2 /* q in, out */ + double(B * H * 4) /* lse */ +
               double(B * (swaK + extK + 2) * 4) + double(H * 4) +
               keys * double(kvcache::kTokenBytes + kvcache::kScaleBytes);
    in.flops = double(B) * double(H) * double(swaK + extK) * 4.0 * kHeadDim;
    in.rowSplit = BenchRowSplit{B, double(H) * double(swaK + extK) * 4.0 * kHeadDim, double(H) * (kHeadDim + 1),
                                {"q", "swa_indices", "swa_lens", "extra_indices", "extra_lens"}};
    return in;
  }
};

}  // namespace

const KernelFamily& sparseMlaDecodeFamily() {
  static const SparseMlaDecodeFamily f;
  return f;
}

}  // namespace deepinfer
