// The two mHC ops that compute the next sublayer's mixes: mhc_pre (from the residual x) and
// mhc_fused_post_pre (post step of the finished sublayer, then the mixes of the new residual).
// Both run the stream pass (MhcStream.cuh) and the finalize pass (MhcFinalize.cuh); they differ
// only in the post step and in tensor names, so one class implements both.
#pragma once
#include "MhcCommon.h"

namespace deepinfer {

class MhcMixFamily : public TypedKernelFamily<mhc::MixConfig> {
 public:
  explicit MhcMixFamily(bool fused) : fused_(fused) {}
  std::string opName() const override;
  std::vector<std::string> templateHeaders() const override;
  Status validate(const OpDesc& d) const override;
  OutputSpec outputs(const OpDesc& d) const override;
  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override;
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override;
  Status canImplement(const Config& c, const OpDesc& d) const override;
  ResourceEstimate resources(const Config& c, const OpDesc& d) const override;
  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override;
  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override;
  int64_t workspace(const Config& c, const OpDesc& d) const override;
  int64_t zeroedWorkspace(const Config& c, const OpDesc& d) const override;
  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override;
  std::vector<ShapeParam> shapeParams() const override { return mhc::shapeParams(); }
  OpDesc describe(const ShapeParams& p) const override { return mhc::describe(opName(), p); }
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override { return mhc::compileShapes(); }
  // From T = 16 on every candidate uses tensor cores (below, CUDA-core candidates exist too).
  PtxChecks ptxChecks(const OpDesc& d) const override { return {.tensorCores = dimOf(d, residualName(), 0) >= 16}; }
  std::optional<BucketAxis> bucketAxis() const override { return mhc::bucketAxis(); }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, fused_ ? "f_out" : "x", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override { return {mhc::tuneShape(m, v)}; }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"C", dimOf(d, fused_ ? "residual" : "x", 2)}, {"sinkhorn", intAttrOf(d, "sinkhorn_iters")}};
  }
  AccuracyRule accuracy(const std::string& output) const override { return mhc::accuracy(output); }
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    return mhc::benchInputs(*this, fused_ ? mhc::Mode::Fused : mhc::Mode::Pre, ctx);
  }

 private:
  // The tensor holding the residual streams the op reads: `x` (pre) or `residual` (fused).
  const char* residualName() const { return fused_ ? "residual" : "x"; }
  std::vector<int> oneLaunchWarps() const;
  bool fused_;
};

}  // namespace deepinfer
