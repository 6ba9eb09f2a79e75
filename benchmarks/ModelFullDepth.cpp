#include "ModelFullDepth.h"

#include <algorithm>
#include <fmt/format.h>

#include "model/gpu/GpuWeights.h"

namespace deepinfer::bench {
namespace {

constexpr int kMaxExperts = 384;  // V4.1-Flash's
constexpr int kExpertStep = 16;

double gib(int64_t b) { return double(b) / double(int64_t(1) << 30); }

Result<int64_t> bytesWith(int experts) {
  auto cfg = fullDepthConfig(experts);
  if (!cfg.ok()) return cfg.error();
  return gpuWeightBytes(*cfg, ConfigWeightTable(*cfg, /*draft=*/false));
}

}  // namespace

Result<ModelConfig> fullDepthConfig(int experts) {
  ModelConfig c = v41FlashDefaults();
  if (experts < c.numExpertsPerTok || experts > kMaxExperts)
    return Error{fmt::format("full-depth model: {} routed experts per layer (between num_experts_per_tok = {} and {})",
                             experts, c.numExpertsPerTok, kMaxExperts)};
  c.nRoutedExperts = experts;
  c.dspark.nRoutedExperts = std::min(c.dspark.nRoutedExperts, experts);
  DI_TRY(finalizeModelConfig(c, "full-depth model"));
  return c;
}

Result<FullDepthPlan> planFullDepth(int64_t freeBytes, int64_t reserveBytes, int requestedExperts) {
  FullDepthPlan p;
  p.freeBytes = freeBytes;
  p.reserveBytes = reserveBytes;
  // Weight bytes are affine in the expert count: measure the slope between two counts.
  auto a = bytesWith(kExpertStep), b = bytesWith(2 * kExpertStep);
  if (!a.ok()) return a.error();
  if (!b.ok()) return b.error();
  p.bytesPerExpert = (*b - *a) / kExpertStep;
  p.fixedBytes = *a - kExpertStep * p.bytesPerExpert;
  const int64_t room = freeBytes - reserveBytes - p.fixedBytes;
  if (requestedExperts > 0) {
    p.experts = requestedExperts;
  } else {
    const int64_t fit = room > 0 ? room / p.bytesPerExpert : 0;
    p.experts = int(std::min<int64_t>(fit / kExpertStep * kExpertStep, kMaxExperts));
    if (p.experts < kExpertStep)
      return Error{fmt::format("full-depth model: not even {} routed experts per layer fit: {:.2f} GiB free, {:.2f} GiB "
                               "kept for caches and workspaces, {:.2f} GiB of weights besides the routed experts, "
                               "{:.3f} GiB per expert in every layer",
                               kExpertStep, gib(freeBytes), gib(reserveBytes), gib(p.fixedBytes),
                               gib(p.bytesPerExpert))};
  }
  auto bytes = bytesWith(p.experts);
  if (!bytes.ok()) return bytes.error();
  p.weightBytes = *bytes;
  if (p.weightBytes + reserveBytes > freeBytes)
    return Error{fmt::format("full-depth model with {} routed experts per layer does not fit: {:.2f} GiB of weights + "
                             "{:.2f} GiB kept for caches and workspaces > {:.2f} GiB free (at most {} experts fit)",
                             p.experts, gib(p.weightBytes), gib(reserveBytes), gib(freeBytes),
                             room > 0 ? room / p.bytesPerExpert : 0)};
  return p;
}

}  // namespace deepinfer::bench
