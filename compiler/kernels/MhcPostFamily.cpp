// mhc_post (docs/ops.md §8): x[t, j, :] = bf16(sum_m comb[t, m, j] residual[t, m, :] +
// post[t, j] f_out[t, :]) and sqrsum[t] = sum of squares of the new bf16 residual (fp32), which
// the next pre step uses. One stream pass (MhcStream.cuh, post mode); when it is split over C
// (k_slices > 1) a second launch sums the per-slice squares in a fixed order, or, with
// one_launch = 1, the last CTA of each token tile to arrive does (MhcOneLaunch.cuh).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "Families.h"
#include "MhcCommon.h"

namespace deepinfer {

using namespace mhc;

namespace {

class MhcPostFamily : public TypedKernelFamily<PostConfig> {
 public:
  std::string opName() const override { return "mhc_post"; }
  std::vector<std::string> templateHeaders() const override {
    return {"MhcStream.cuh",  "MhcFinalize.cuh",     "MhcOneLaunch.cuh", "params/MhcParams.h", "common/Arrival.cuh",
            "common/Mma.cuh", "common/Numerics.cuh", "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    auto dims = residualDims(d, "residual");
    if (!dims) return dims.error();
    DI_TRY(expectDims(d, "f_out", {dims->T, dims->C}));
    DI_TRY(expectDims(d, "post", {dims->T, kStreams}));
    DI_TRY(expectDims(d, "comb", {dims->T, kStreams, kStreams}));
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    OutputSpec out;
    auto dims = residualDims(d, "residual");
    if (!dims) return out;
    out["x"] = {DType::BF16, {dims->T, kStreams, dims->C}};
    out["sqrsum"] = {DType::F32, {dims->T}};
    return out;
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    std::vector<Config> out;
    auto dims = residualDims(d, "residual");
    if (!dims) return out;
    const int64_t chunks = dims->C / kChunk;
    for (int warps : warpChoices(dims->T)) {
      const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
      std::set<int64_t> slices;
      slices.insert(defaultSlices(Mode::Post, false, t, tiles, chunks, warps));
      for (int64_t s : {1, 2, 4, 8, 16, 32, 64, 128}) slices.insert(evenSlices(chunks, s));
      slices.insert(chunks);
      for (int64_t s : slices) {
        if (s * dims->T * 4 > kMaxWorkspaceBytes) continue;
        out.push_back({32 * warps, s, 0});
      }
    }
    // One launch (MhcOneLaunch.cuh) for the split passes of decode sizes: the default warps and
    // 8 (the idle ones widen the last CTA's reduction), the slice counts of the default down to
    // a quarter of it.
    if (dims->T <= kOneLaunchMaxT) {
      std::set<int> warpSet{defaultWarps(dims->T), 8};
      for (int warps : warpSet) {
        const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
        const int64_t s0 = defaultSlices(Mode::Post, false, t, tiles, chunks, warps);
        std::set<int64_t> slices{s0, evenSlices(chunks, s0 / 2), evenSlices(chunks, s0 / 4), evenSlices(chunks, 2)};
        for (int64_t s : slices) {
          if (s < 2 || s * dims->T * 4 > kMaxWorkspaceBytes) continue;
          out.push_back({32 * warps, s, 1});
        }
      }
    }
    return out;
  }

  Status canImplement(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    if (!g) return g.error();
    return {};
  }

  ResourceEstimate resources(const Config& c, const OpDesc& d) const override {
    ResourceEstimate r;
    auto g = geometry(c, d);
    r.smemBytes = streamSmemBytes(Mode::Post, g->warps, g->oneLaunch);
    r.threadsPerCta = 32 * g->warps;  // the optional reduction step is far lighter
    r.regsPerThread = streamRegs(Mode::Post, false, g->warps, g->oneLaunch);
    return r;
  }

  // Default heuristic: one 16-token tile per warp, up to 4 warps per CTA (fewer when T is small
  // so no warp idles); k_slices by occupancy as in mhc_pre (SMs x resident CTAs per SM, from
  // the target's CTA/warp/register/shared-memory limits, divided by the token tiles). When the
  // token tiles alone fill the machine this gives 1 slice and the plan is a single launch that
  // writes sqrsum directly. The one-launch forms (the last CTA sums the slices) are candidates up
  // to T = 64, not defaults: measured on the H200 (11f5c23) at T = 6 they took 7.9 us against 7.0
  // for the split pass and its reduction launch.
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    auto dims = residualDims(d, "residual");
    if (!dims) return {128, 1, 0};
    const int64_t chunks = dims->C / kChunk;
    auto slicesFor = [&](int warps) {
      const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
      int64_t slices = defaultSlices(Mode::Post, false, t, tiles, chunks, warps);
      while (slices > 1 && slices * dims->T * 4 > kMaxWorkspaceBytes) slices = evenSlices(chunks, slices / 2);
      return slices;
    };
    const int warps = defaultWarps(dims->T);
    return Config{32 * warps, slicesFor(warps), 0};
  }

  // The unit always defines both entries, so configs that differ only in k_slices share one
  // binary; the plan launches the reduction only when the pass is split.
  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    auto g = geometry(c, d);
    if (g->oneLaunch) {
      u.source = "#include \"MhcOneLaunch.cuh\"\n" + streamEntry(Mode::Post, *g, baseName);
      u.entries = {baseName};
      return u;
    }
    u.source = "#include \"MhcStream.cuh\"\n#include \"MhcFinalize.cuh\"\n";
    u.source += streamEntry(Mode::Post, *g, baseName);
    u.source += fmt::format(
        "extern \"C\" __global__ void __launch_bounds__({0}) {1}_sqrsum(const di::MhcParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::mhc_sqrsum_kernel<{0}>(p);\n}}\n",
        kSqrsumThreads, baseName);
    u.entries = {baseName, baseName + "_sqrsum"};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    auto g = geometry(c, d);
    const int64_t T = d.dim("residual", 0);
    std::vector<LaunchStep> plan{{baseName,
                                  {uint32_t(g->tiles), uint32_t(g->slices), 1},
                                  {uint32_t(32 * g->warps), 1, 1},
                                  0}};
    if (g->slices > 1 && !g->oneLaunch) {
      plan.push_back({baseName + "_sqrsum",
                      {uint32_t((T + kSqrsumTokensPerCta - 1) / kSqrsumTokensPerCta), 1, 1},
                      {uint32_t(kSqrsumThreads), 1, 1},
                      0});
    }
    return plan;
  }

  int64_t workspace(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    if (g->slices == 1 && !g->oneLaunch) return 0;
    return g->slices * d.dim("residual", 0) * int64_t(sizeof(float));
  }

  int64_t zeroedWorkspace(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    return g->oneLaunch ? arrivalBytes(*g) : 0;
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    DI_TRY(validate(d));
    auto g = geometry(c, d);
    const Dims dims = residualDims(d, "residual").value();
    const std::string op = opName();
    di::MhcParams p{};
    DI_TRY(bindAddr(p.residual, addrs, "residual", op, 16));
    DI_TRY(bindAddr(p.f_out, addrs, "f_out", op, 16));
    DI_TRY(bindAddr(p.post_in, addrs, "post", op, 16));
    DI_TRY(bindAddr(p.comb_in, addrs, "comb", op, 16));
    DI_TRY(bindAddr(p.x_out, addrs, "x", op, 16));
    DI_TRY(bindAddr(p.sqrsum_out, addrs, "sqrsum", op, 4));
    if (g->oneLaunch) DI_TRY(bindAddr(p.arrivals, addrs, "__zeroed", op, 4));
    if (g->slices > 1 || g->oneLaunch) {
      DI_TRY(bindAddr(p.partials, addrs, "__workspace", op, 16));
    } else {
      p.partials = p.sqrsum_out;  // one slice: the pass writes the final sums itself
    }
    setShapes(p, dims, *g);
    return paramBytes(p);
  }

  std::vector<ShapeParam> shapeParams() const override { return mhc::shapeParams(); }
  OpDesc describe(const ShapeParams& p) const override { return mhc::describe(opName(), p); }
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override { return mhc::compileShapes(); }
  std::optional<BucketAxis> bucketAxis() const override { return mhc::bucketAxis(); }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "f_out", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override { return {mhc::tuneShape(m, v)}; }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"C", dimOf(d, "residual", 2)}};
  }
  AccuracyRule accuracy(const std::string& output) const override { return mhc::accuracy(output); }
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    return mhc::benchInputs(*this, Mode::Post, ctx);
  }
 private:
  Result<StreamGeometry> geometry(const Config& c, const OpDesc& d) const {
    return streamGeometryOf(Mode::Post, c, d, "residual", opName());
  }
};

}  // namespace

const KernelFamily& mhcPostFamily() {
  static const MhcPostFamily f;
  return f;
}

}  // namespace deepinfer
