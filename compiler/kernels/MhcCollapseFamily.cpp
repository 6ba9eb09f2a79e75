// mhc_collapse (docs/ops.md §8): h[t, :] = bf16(sum_m pre[t, m] x[t, m, :]), one rounding; the
// final collapse after the last layer. One stream pass (MhcStream.cuh, collapse mode).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "Families.h"
#include "MhcCommon.h"

namespace deepinfer {

using namespace mhc;

namespace {

class MhcCollapseFamily : public TypedKernelFamily<StreamConfig> {
 public:
  std::string opName() const override { return "mhc_collapse"; }
  std::vector<std::string> templateHeaders() const override {
    return {"MhcStream.cuh", "params/MhcParams.h", "common/Mma.cuh", "common/Numerics.cuh",
            "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    auto dims = residualDims(d, "x");
    if (!dims) return dims.error();
    DI_TRY(expectDims(d, "pre", {dims->T, kStreams}));
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    OutputSpec out;
    auto dims = residualDims(d, "x");
    if (!dims) return out;
    out["h"] = {DType::BF16, {dims->T, dims->C}};
    return out;
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    std::vector<Config> out;
    auto dims = residualDims(d, "x");
    if (!dims) return out;
    const int64_t chunks = dims->C / kChunk;
    for (int warps : warpChoices(dims->T)) {
      const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
      std::set<int64_t> slices;
      slices.insert(defaultSlices(Mode::Collapse, false, t, tiles, chunks, warps));
      for (int64_t s : {1, 2, 4, 8, 16, 32, 64, 128}) slices.insert(evenSlices(chunks, s));
      slices.insert(chunks);
      for (int64_t s : slices) out.push_back({32 * warps, s});
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
    r.smemBytes = streamSmemBytes(Mode::Collapse, g->warps);
    r.threadsPerCta = 32 * g->warps;
    r.regsPerThread = streamRegs(Mode::Collapse, false, g->warps);
    return r;
  }

  // Default heuristic: one 16-token tile per warp, up to 4 warps per CTA (fewer for small T);
  // k_slices by occupancy (SMs x resident CTAs per SM from the target's CTA/warp/register
  // limits, divided by the token tiles), so small T still spreads over the machine.
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    auto dims = residualDims(d, "x");
    if (!dims) return {128, 1};
    const int warps = defaultWarps(dims->T);
    const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
    return {32 * warps, defaultSlices(Mode::Collapse, false, t, tiles, dims->C / kChunk, warps)};
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    auto g = geometry(c, d);
    u.source = "#include \"MhcStream.cuh\"\n" + streamEntry(Mode::Collapse, *g, baseName);
    u.entries = {baseName};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    auto g = geometry(c, d);
    return {{baseName,
             {uint32_t(g->tiles), uint32_t(g->slices), 1},
             {uint32_t(32 * g->warps), 1, 1},
             0}};
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    DI_TRY(validate(d));
    auto g = geometry(c, d);
    const Dims dims = residualDims(d, "x").value();
    const std::string op = opName();
    di::MhcParams p{};
    DI_TRY(bindAddr(p.residual, addrs, "x", op, 16));
    DI_TRY(bindAddr(p.collapse_w, addrs, "pre", op, 16));
    DI_TRY(bindAddr(p.h_out, addrs, "h", op, 16));
    setShapes(p, dims, *g);
    return paramBytes(p);
  }

  std::vector<ShapeParam> shapeParams() const override { return mhc::shapeParams(); }
  OpDesc describe(const ShapeParams& p) const override { return mhc::describe(opName(), p); }
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override { return mhc::compileShapes(); }
  std::optional<BucketAxis> bucketAxis() const override { return mhc::bucketAxis(); }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "x", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override { return {mhc::tuneShape(m, v)}; }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"C", dimOf(d, "x", 2)}};
  }
  AccuracyRule accuracy(const std::string& output) const override { return mhc::accuracy(output); }
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    return mhc::benchInputs(*this, Mode::Collapse, ctx);
  }
 private:
  Result<StreamGeometry> geometry(const Config& c, const OpDesc& d) const {
    return streamGeometryOf(Mode::Collapse, c, d, "x", opName());
  }
};

}  // namespace

const KernelFamily& mhcCollapseFamily() {
  static const MhcCollapseFamily f;
  return f;
}

}  // namespace deepinfer
