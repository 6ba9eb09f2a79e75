// kv_quant_insert (docs/ops.md §2): quantize k rows into the fp8_ds_mla paged cache, one warp per
// token (templates/KvCache.cuh). Config: `warps` per CTA.
#include <fmt/format.h>

#include <algorithm>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "KvCacheLayout.h"
#include "params/KvQuantInsertParams.h"

namespace deepinfer {
namespace {

using namespace kvcache;

// ptxas -v, sm_80..sm_90, CUDA 13.0: 37-40 registers from 4 warps per CTA up; 45-47 at 1 warp
// and at 2 warps on sm_86, where the looser __launch_bounds__ lets ptxas take more.
int registersFor(int64_t warps) { return warps <= 2 ? 48 : 40; }

struct KvQuantInsertConfig {
  int64_t warps = 0;  // per CTA, one token each
  static constexpr auto fields() {
    return std::array{ConfigField<KvQuantInsertConfig>{"warps", &KvQuantInsertConfig::warps}};
  }
};

class KvQuantInsertFamily final : public TypedKernelFamily<KvQuantInsertConfig> {
 public:
  std::string opName() const override { return "kv_quant_insert"; }

  std::vector<std::string> templateHeaders() const override {
    return {"KvCache.cuh", "params/KvQuantInsertParams.h", "params/GatherKcacheParams.h",
            "common/Types.h", "common/Numerics.cuh", "common/Mma.cuh"};
  }

  Status validate(const OpDesc& d) const override {
    auto bs = blockSizeAttr(d);
    if (!bs.ok()) return bs.error();
    auto k = shapeOf(d, "k", 2);
    if (!k.ok()) return k.error();
    const int64_t T = (*k)[0];
    if ((*k)[1] != kHeadDim)
      return Error{fmt::format("kv_quant_insert: k has {} columns per token; expected {} "
                               "(448 NoPE + 64 RoPE)", (*k)[1], kHeadDim)};
    if (T > INT32_MAX)
      return Error{fmt::format("kv_quant_insert: k has {} tokens; at most {}", T, INT32_MAX)};
    DI_TRY(expectShape(d, "slot_mapping", {T}));
    auto pages = checkPagedCache(d, "k_cache", *bs);
    if (!pages.ok()) return pages.error();
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    return {{"k_cache", {DType::U8, d.shapes.at("k_cache")}}};
  }

  std::vector<Config> configs(const OpDesc&, const TargetProfile&) const override { return {{1}, {2}, {4}, {8}}; }

  // warps per CTA (one token per warp): 1..32, i.e. at most 1024 threads.
  Status canImplement(const Config& c, const OpDesc&) const override {
    if (c.warps < 1 || c.warps > 32)
      return Error{fmt::format("kv_quant_insert: warps = {} must be in 1..32 (one token per warp, at most 1024 "
                               "threads)",
                               c.warps)};
    return {};
  }

  ResourceEstimate resources(const Config& c, const OpDesc&) const override {
    return {0, int(32 * c.warps), registersFor(c.warps)};
  }

  // One warp per token. Use the smallest CTA whose CTAs-per-SM limit cannot cap occupancy
  // (2 warps on sm_80/sm_90: 32 CTAs x 2 = 64 warps; 4 on sm_86: 16 x 4 >= 48), and smaller CTAs
  // when the batch is too small to give every SM a CTA (decode: spread tokens over SMs).
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const int64_t T = d.dim("k", 0);
    int64_t warps = 1;
    while (warps < 8 && warps * t.facts.maxCtasPerSm < t.facts.maxWarpsPerSm) warps *= 2;
    while (warps > 1 && (T + warps - 1) / warps < t.smCount) warps /= 2;
    return {warps};
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    const int64_t warps = c.warps;
    const int64_t bs = d.attrs.getInt("block_size", 0);
    CudaUnit u;
    u.source = fmt::format(
        "#include \"KvCache.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}) {}(const di::KvQuantInsertParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::kv_quant_insert_kernel<{}, {}>(p);\n"
        "}}\n",
        32 * warps, baseName, bs, warps);
    u.entries = {baseName};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    const int64_t warps = c.warps;
    const int64_t T = d.dim("k", 0);
    LaunchStep s;
    s.entry = baseName;
    s.grid = {uint32_t(std::max<int64_t>(1, (T + warps - 1) / warps)), 1, 1};  // T = 0: one idle CTA
    s.block = {uint32_t(32 * warps), 1, 1};
    return {s};
  }

  Result<std::vector<uint8_t>> params(const Config&, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    di::KvQuantInsertParams p{};
    auto k = addrOf(d, addrs, "k", 16);
    auto slots = addrOf(d, addrs, "slot_mapping", 8);
    auto cache = addrOf(d, addrs, "k_cache", 16);
    for (const auto* r : {&k, &slots, &cache})
      if (!r->ok()) return r->error();
    p.k = reinterpret_cast<const uint16_t*>(*k);
    p.slot_mapping = reinterpret_cast<const int64_t*>(*slots);
    p.k_cache = reinterpret_cast<uint8_t*>(*cache);
    p.num_pages = d.dim("k_cache", 0);
    p.num_tokens = int32_t(d.dim("k", 0));
    return paramBytes(p);
  }
  std::vector<ShapeParam> shapeParams() const override {
    return {{"T", 1536, "tokens written"}, {"block_size", 64, "tokens per page"}, {"pages", 64, "pages in the cache"}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    OpDesc d;
    d.op = opName();
    d.shapes["k"] = {p.at("T"), kHeadDim};
    d.shapes["slot_mapping"] = {p.at("T")};
    d.shapes["k_cache"] = {p.at("pages"), pageBytes(p.at("block_size"))};
    d.attrs.setInt("block_size", p.at("block_size"));
    return d;
  }

  // Tuned along the tokens written (a decode step's few to a prefill chunk's thousands).
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"T", {16, 64, 256, 1024, 4096}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "k", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims&, int64_t v) const override { return {{{{"T", v}}, {{"T", v}}}}; }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"bs", intAttrOf(d, "block_size")}};
  }

  // A prefill of T consecutive positions of one request into pages scattered over the cache:
  // distinct slots in [0, pages * block_size), none skipped (-1); the cache's old bytes random.
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t T = p.get("T", 1536), bs = p.get("block_size", 64), pages = p.get("pages", 256);
    DI_TRY(p.require(T >= 1 && bs >= 1 && (T + bs - 1) / bs <= pages,
                     "needs T >= 1 and ceil(T / block_size) <= pages"));
    const std::vector<int64_t> order = shuffledRange(rng, pages);
    std::vector<int64_t> slots(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) slots[size_t(t)] = order[size_t(t / bs)] * bs + t % bs;
    const auto pool = bf16NormalPool(rng);
    BenchInputs in;
    in.attrs.setInt("block_size", bs);
    in.inputs["k"] = bf16FromPool(rng, pool, {T, kHeadDim});
    in.inputs["slot_mapping"] = i64Tensor({T}, slots);
    in.inputs["k_cache"] = randomBytes(rng, DType::U8, {pages, pageBytes(bs)});
    in.bytes = double(T) * (kHeadDim * 2 + 8 + kTokenBytes + kScaleBytes);
    return in;
  }
};

}  // namespace

const KernelFamily& kvQuantInsertFamily() {
  static const KvQuantInsertFamily f;
  return f;
}

}  // namespace deepinfer
