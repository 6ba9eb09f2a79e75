// combine_topk_swa (docs/ops.md §4): one index row per prefill query token into the gathered
// workspace (templates/CombineTopkSwa.cuh). One CTA per token; config: `threads` per CTA.
#include <fmt/format.h>

#include <algorithm>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "KvCacheLayout.h"
#include "params/CombineTopkSwaParams.h"

namespace deepinfer {
namespace {

using namespace kvcache;

// topk + window bounds the template's row width; far above V4.1's 512 + 128.
constexpr int64_t kMaxRowWidth = int64_t(1) << 20;

int64_t rowWidth(int64_t topk, int64_t window) { return (topk + window + 127) / 128 * 128; }

// ptxas -v (CUDA 13.0, sm_80..sm_90), topk 512 / window 128, request metadata loaded before the
// first barrier: 40-46 registers at 64 threads, 39 at 128, 32-40 from 160 up; rows wider than 4
// chunks per thread (the streamed tail loop) take up to 47 at 64 threads and 40 above.
int registersFor(int64_t threads) {
  return threads <= 64 ? 48 : 40;
}

struct CombineTopkSwaConfig {
  int64_t threads = 0;  // per CTA (one CTA per token)
  static constexpr auto fields() {
    return std::array{ConfigField<CombineTopkSwaConfig>{"threads", &CombineTopkSwaConfig::threads}};
  }
};

class CombineTopkSwaFamily final : public TypedKernelFamily<CombineTopkSwaConfig> {
 public:
  std::string opName() const override { return "combine_topk_swa"; }

  std::vector<std::string> templateHeaders() const override {
    return {"CombineTopkSwa.cuh", "params/CombineTopkSwaParams.h", "common/Types.h", "common/Mma.cuh"};
  }

  Status validate(const OpDesc& d) const override {
    int64_t a[5];
    const char* names[5] = {"window", "ratio", "topk", "M", "N"};
    for (int i = 0; i < 5; ++i) {
      auto v = intAttr(d, names[i]);
      if (!v.ok()) return v.error();
      a[i] = *v;
    }
    const int64_t window = a[0], ratio = a[1], topk = a[2], M = a[3], N = a[4];
    if (window < 1) return Error{fmt::format("combine_topk_swa: window is {}; it must be >= 1", window)};
    if (ratio < 0) return Error{fmt::format("combine_topk_swa: ratio is {}; it must be >= 0", ratio)};
    if (topk < 1) return Error{fmt::format("combine_topk_swa: topk is {}; it must be >= 1", topk)};
    if (topk + window > kMaxRowWidth)
      return Error{fmt::format("combine_topk_swa: topk + window = {} + {} is over the supported {}",
                               topk, window, kMaxRowWidth)};
    if (ratio > INT32_MAX)
      return Error{fmt::format("combine_topk_swa: ratio is {}; at most {}", ratio, INT32_MAX)};
    if (N < 0) return Error{fmt::format("combine_topk_swa: N is {}; it must be >= 0", N)};
    if (M > INT32_MAX)
      return Error{fmt::format("combine_topk_swa: M is {}; at most {} (int32 row indices)", M, INT32_MAX)};
    if (M < N + window)
      return Error{fmt::format("combine_topk_swa: M is {} but must be at least N + window = {} + {} "
                               "(each request's workspace holds N compressed rows, then its window "
                               "and new tokens)",
                               M, N, window)};
    auto tk = shapeOf(d, "topk_indices", 2);
    if (!tk.ok()) return tk.error();
    const int64_t T = (*tk)[0];
    if ((*tk)[1] != topk)
      return Error{fmt::format("combine_topk_swa: topk_indices has {} columns but topk is {}",
                               (*tk)[1], topk)};
    if (T > INT32_MAX)
      return Error{fmt::format("combine_topk_swa: topk_indices has {} tokens; at most {}", T, INT32_MAX)};
    auto seq = shapeOf(d, "seq_lens", 1);
    if (!seq.ok()) return seq.error();
    const int64_t R = (*seq)[0];
    DI_TRY(expectShape(d, "query_start_loc", {R + 1}));
    DI_TRY(expectShape(d, "gather_lens", {R}));
    if (R * M > INT32_MAX)
      return Error{fmt::format("combine_topk_swa: R*M = {}*{} workspace rows do not fit the int32 "
                               "row indices", R, M)};
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    const int64_t T = d.dim("topk_indices", 0);
    const int64_t W = rowWidth(d.attrs.getInt("topk", 0), d.attrs.getInt("window", 0));
    return {{"rows", {DType::I32, {T, W}}}, {"lens", {DType::I32, {T}}}};
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile&) const override {
    std::vector<Config> c;
    const int64_t exact = (rowWidth(d.attrs.getInt("topk", 0), d.attrs.getInt("window", 0)) / 4 + 31) / 32 * 32;
    for (int64_t th : {int64_t(64), int64_t(128), int64_t(256), std::min<int64_t>(exact, 1024)})
      if (std::none_of(c.begin(), c.end(), [&](const Config& o) { return o.threads == th; })) c.push_back({th});
    return c;
  }

  // threads per CTA: whole warps, 32..1024 (CombineTopkSwa.cuh).
  Status canImplement(const Config& c, const OpDesc&) const override {
    if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
      return Error{fmt::format("combine_topk_swa: threads = {} must be a multiple of 32 in 32..1024", c.threads)};
    return {};
  }

  ResourceEstimate resources(const Config& c, const OpDesc&) const override {
    const int64_t th = c.threads;
    return {4 * (1 + 4) /* s_req, s_info[4] */, int(th), registersFor(th)};
  }

  // One thread per 16-byte chunk of the row (W/4 threads, whole warps, at most 256; 160 for
  // V4.1's W = 640) so each thread stores once. At least enough warps that the CTAs-per-SM limit
  // cannot cap occupancy: 2 warps on sm_80/sm_90 (32 CTAs x 2 = 64), 3 on sm_86 (16 x 3 = 48),
  // 2 on sm_89 (24 x 2 = 48).
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const int64_t W = rowWidth(d.attrs.getInt("topk", 0), d.attrs.getInt("window", 0));
    const int64_t minWarps = (t.facts.maxWarpsPerSm + t.facts.maxCtasPerSm - 1) / t.facts.maxCtasPerSm;
    const int64_t warps = std::clamp<int64_t>((W / 4 + 31) / 32, minWarps, 8);
    return {32 * warps};
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    const int64_t th = c.threads;
    CudaUnit u;
    u.source = fmt::format(
        "#include \"CombineTopkSwa.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}) {}(const di::CombineTopkSwaParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::combine_topk_swa_kernel<{}, {}, {}>(p);\n"
        "}}\n",
        th, baseName, d.attrs.getInt("topk", 0), d.attrs.getInt("window", 0), th);
    u.entries = {baseName};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    LaunchStep s;
    s.entry = baseName;
    s.grid = {uint32_t(std::max<int64_t>(1, d.dim("topk_indices", 0))), 1, 1};  // one CTA per token
    s.block = {uint32_t(c.threads), 1, 1};
    return {s};
  }

  Result<std::vector<uint8_t>> params(const Config&, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    di::CombineTopkSwaParams p{};
    auto tk = addrOf(d, addrs, "topk_indices", d.attrs.getInt("topk", 0) % 4 == 0 ? 16 : 4);
    auto qsl = addrOf(d, addrs, "query_start_loc", 4);
    auto seq = addrOf(d, addrs, "seq_lens", 4);
    auto gl = addrOf(d, addrs, "gather_lens", 4);
    auto rows = addrOf(d, addrs, "rows", 16);
    auto lens = addrOf(d, addrs, "lens", 4);
    for (const auto* r : {&tk, &qsl, &seq, &gl, &rows, &lens})
      if (!r->ok()) return r->error();
    p.topk_indices = reinterpret_cast<const int32_t*>(*tk);
    p.query_start_loc = reinterpret_cast<const int32_t*>(*qsl);
    p.seq_lens = reinterpret_cast<const int32_t*>(*seq);
    p.gather_lens = reinterpret_cast<const int32_t*>(*gl);
    p.rows = reinterpret_cast<int32_t*>(*rows);
    p.lens = reinterpret_cast<int32_t*>(*lens);
    p.num_tokens = int32_t(d.dim("topk_indices", 0));
    p.num_reqs = int32_t(d.dim("seq_lens", 0));
    p.ratio = int32_t(d.attrs.getInt("ratio", 0));
    p.rows_per_req = int32_t(d.attrs.getInt("M", 0));
    p.swa_row0 = int32_t(d.attrs.getInt("N", 0));
    return paramBytes(p);
  }
  std::vector<ShapeParam> shapeParams() const override {
    return {{"T", 1536, "query tokens"}, {"R", 1, "requests"}, {"topk", 512, "K"}, {"window", 128, "sliding window"},
            {"ratio", 2, "compression ratio"}, {"max_model_len", 65536, "for N = ceil(max_model_len / ratio)"}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    const int64_t ratio = p.at("ratio"), n = ratio > 0 ? (p.at("max_model_len") + ratio - 1) / ratio : 0;
    OpDesc d;
    d.op = opName();
    d.shapes["topk_indices"] = {p.at("T"), p.at("topk")};
    d.shapes["query_start_loc"] = {p.at("R") + 1};
    d.shapes["seq_lens"] = {p.at("R")};
    d.shapes["gather_lens"] = {p.at("R")};
    d.attrs.setInt("window", p.at("window"));
    d.attrs.setInt("ratio", ratio);
    d.attrs.setInt("topk", p.at("topk"));
    d.attrs.setInt("N", n);
    d.attrs.setInt("M", n + p.at("window") + p.at("T"));
    return d;
  }

  // Tuned along the query tokens.
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"T", {16, 64, 256, 1024, 4096}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "topk_indices", 0); }
  // One shape per compress ratio the model's layers use (the ratio keys the tuned config).
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    std::vector<TuneShape> out;
    for (int64_t ratio : m.ratios) {
      const ShapeParams p{{"T", v}, {"topk", m.indexTopk}, {"window", m.window}, {"ratio", ratio}};
      out.push_back({p, p});
    }
    return out;
  }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"topk", intAttrOf(d, "topk")}, {"window", intAttrOf(d, "window")}, {"ratio", intAttrOf(d, "ratio")}};
  }

  // R requests, each the last chunk of a `context`-token prompt: every token sees more than K
  // compressed positions, so every row is full (K sorted distinct top-k entries in [0, visible),
  // -1 padding only where fewer are visible, + `window` window entries).
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t T = p.get("T", 1536), R = p.get("R", 1), K = p.get("topk", 512), window = p.get("window", 128),
                  ratio = p.get("ratio", 2), context = p.get("context", 16384),
                  maxModelLen = p.get("max_model_len", 65536);
    DI_TRY(p.require(R >= 1 && T >= R, "needs 1 <= R <= T"));
    const int64_t N = ratio > 0 ? (maxModelLen + ratio - 1) / ratio : 0;
    std::vector<int32_t> qsl = {0}, seq, gather;
    int64_t maxQ = 0;
    for (int64_t b = 0; b < R; ++b) {
      const int64_t q = T / R + (b == R - 1 ? T % R : 0);
      DI_TRY(p.require(context >= q && context <= maxModelLen, "needs query length <= context <= max_model_len"));
      qsl.push_back(int32_t(qsl.back() + q));
      seq.push_back(int32_t(context));
      gather.push_back(int32_t(std::min(context, q + window - 1)));
      maxQ = std::max(maxQ, q);
    }
    HostTensor topk(DType::I32, {T, K});
    prefillTopkRows(rng, qsl, context, ratio, N, K, topk.ptr<int32_t>());
    BenchInputs in;
    in.attrs.setInt("window", window);
    in.attrs.setInt("ratio", ratio);
    in.attrs.setInt("topk", K);
    in.attrs.setInt("N", N);
    in.attrs.setInt("M", N + window + maxQ);
    in.inputs["topk_indices"] = std::move(topk);
    in.inputs["query_start_loc"] = i32Tensor({R + 1}, qsl);
    in.inputs["seq_lens"] = i32Tensor({R}, seq);
    in.inputs["gather_lens"] = i32Tensor({R}, gather);
    auto bytes = denseBytes(*this, in);
    if (!bytes.ok()) return bytes.error();
    in.bytes = *bytes;
    return in;
  }
};

}  // namespace

const KernelFamily& combineTopkSwaFamily() {
  static const CombineTopkSwaFamily f;
  return f;
}

}  // namespace deepinfer
