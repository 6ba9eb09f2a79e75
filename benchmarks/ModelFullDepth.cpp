#include "ModelFullDepth.h"

#include <algorithm>
#include <fmt/format.h>

#include "model/MakeModelPresets.h"
#include "model/gpu/GpuWeights.h"

namespace deepinfer::bench {
namespace {

constexpr int kMaxExperts = 384;  // V4.1-Flash's
constexpr int kExpertStep = 16;

double gib(int64_t b) { return double(b) / double(int64_t(1) << 30); }

Result<int64_t> bytesWith(int experts, bool draft) {
  auto cfg = fullDepthConfig(experts);
  if (!cfg.ok()) return cfg.error();
  return gpuWeightBytes(*cfg, ConfigWeightTable(*cfg, draft));
}

// The most experts (a multiple of 16, at most 384, at most `below`) whose backbone and draft
// fit; 0 when not even 16 do. The draft's MoE has min(128, experts) experts, so its bytes are
// not affine in the count: every candidate is planned exactly.
Result<int> mostExpertsWithDraft(int64_t freeBytes, int64_t reserveBytes, int below) {
  for (int e = std::min(below, kMaxExperts) / kExpertStep * kExpertStep; e >= kExpertStep; e -= kExpertStep) {
    auto all = bytesWith(e, true);
    if (!all.ok()) return all.error();
    if (*all + reserveBytes <= freeBytes) return e;
  }
  return 0;
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

Result<int64_t> draftWeightBytes(const ModelConfig& cfg) {
  auto with = gpuWeightBytes(cfg, ConfigWeightTable(cfg, true));
  auto without = gpuWeightBytes(cfg, ConfigWeightTable(cfg, false));
  if (!with.ok()) return with.error();
  if (!without.ok()) return without.error();
  return *with - *without;
}

Result<int64_t> fullDepthDraftBytes(int experts) {
  auto cfg = fullDepthConfig(experts);
  if (!cfg.ok()) return cfg.error();
  return draftWeightBytes(*cfg);
}

Result<FullDepthPlan> planFullDepth(int64_t freeBytes, int64_t reserveBytes, int requestedExperts, bool wantDraft) {
  FullDepthPlan p;
  p.freeBytes = freeBytes;
  p.reserveBytes = reserveBytes;
  // Backbone bytes are affine in the expert count: measure the slope between two counts.
  auto a = bytesWith(kExpertStep, false), b = bytesWith(2 * kExpertStep, false);
  if (!a.ok()) return a.error();
  if (!b.ok()) return b.error();
  p.bytesPerExpert = (*b - *a) / kExpertStep;
  p.fixedBytes = *a - kExpertStep * p.bytesPerExpert;
  const int64_t room = freeBytes - reserveBytes - p.fixedBytes;
  const int64_t fitWithout = room > 0 ? room / p.bytesPerExpert : 0;
  if (requestedExperts > 0) {
    p.experts = requestedExperts;
  } else {
    const int without = int(std::min<int64_t>(fitWithout / kExpertStep * kExpertStep, kMaxExperts));
    int with = 0;
    if (wantDraft && without >= kExpertStep) {
      auto w = mostExpertsWithDraft(freeBytes, reserveBytes, without);
      if (!w.ok()) return w.error();
      with = *w;
    }
    p.experts = with > 0 ? with : without;
    if (p.experts < kExpertStep)
      return Error{fmt::format("full-depth model: not even {} routed experts per layer fit: {:.2f} GiB free, {:.2f} GiB "
                               "kept for caches and workspaces, {:.2f} GiB of weights besides the routed experts, "
                               "{:.3f} GiB per expert in every layer",
                               kExpertStep, gib(freeBytes), gib(reserveBytes), gib(p.fixedBytes),
                               gib(p.bytesPerExpert))};
  }
  auto bytes = bytesWith(p.experts, false);
  if (!bytes.ok()) return bytes.error();
  p.weightBytes = *bytes;
  if (p.weightBytes + reserveBytes > freeBytes)
    return Error{fmt::format("full-depth model with {} routed experts per layer does not fit: {:.2f} GiB of weights + "
                             "{:.2f} GiB kept for caches and workspaces > {:.2f} GiB free (at most {} experts fit)",
                             p.experts, gib(p.weightBytes), gib(reserveBytes), gib(freeBytes), fitWithout)};
  auto draft = fullDepthDraftBytes(p.experts);
  if (!draft.ok()) return draft.error();
  p.draftBytes = *draft;
  if (!wantDraft) return p;
  if (p.weightBytes + p.draftBytes + reserveBytes <= freeBytes) {
    p.draft = true;
    return p;
  }
  auto keep = mostExpertsWithDraft(freeBytes, reserveBytes, p.experts);
  if (!keep.ok()) return keep.error();
  auto cfg = fullDepthConfig(p.experts);
  if (!cfg.ok()) return cfg.error();
  p.draftLeftOut = fmt::format(
      "the DSpark draft ({:.2f} GiB: {} stages with {} routed experts each, main_proj, the Markov and confidence "
      "heads) does not fit next to {} routed experts per layer: {:.2f} GiB of weights + {:.2f} GiB of draft + {:.2f} "
      "GiB kept for caches and workspaces > {:.2f} GiB free; {}",
      gib(p.draftBytes), cfg->numNextnPredictLayers, cfg->draftRoutedExperts(), p.experts, gib(p.weightBytes),
      gib(p.draftBytes), gib(reserveBytes), gib(freeBytes),
      *keep > 0 ? fmt::format("--experts {} or fewer leave room for it", *keep)
                : std::string("no expert count leaves room for it"));
  return p;
}

Result<ModelConfig> syntheticModelConfig(const std::string& name, int experts) {
  if (name == "flash") return fullDepthConfig(experts);
  if (name != "proxy")
    return Error{fmt::format("--synthetic '{}': the synthetic models are 'flash' (V4.1-Flash, 40 layers) and 'proxy' "
                             "(make-model's proxy: 7 layers at V4.1-Flash widths, 128 experts)",
                             name)};
  auto cfg = makeModelPresetConfig("proxy");
  if (!cfg.ok()) return cfg.error();
  if (experts > 0 && experts != cfg->nRoutedExperts)
    return Error{fmt::format("--synthetic proxy has {} routed experts per layer; --experts {} applies to --synthetic flash",
                             cfg->nRoutedExperts, experts)};
  return cfg;
}

Result<FullDepthPlan> planSynthetic(const std::string& name, int64_t freeBytes, int64_t reserveBytes,
                                    int requestedExperts, bool wantDraft) {
  if (name == "flash") return planFullDepth(freeBytes, reserveBytes, requestedExperts, wantDraft);
  auto cfg = syntheticModelConfig(name, requestedExperts);
  if (!cfg.ok()) return cfg.error();
  FullDepthPlan p;
  p.freeBytes = freeBytes;
  p.reserveBytes = reserveBytes;
  p.experts = cfg->nRoutedExperts;
  auto bytes = gpuWeightBytes(*cfg, ConfigWeightTable(*cfg, false));
  if (!bytes.ok()) return bytes.error();
  p.weightBytes = *bytes;
  p.fixedBytes = p.weightBytes;  // no expert count to choose
  if (p.weightBytes + reserveBytes > freeBytes)
    return Error{fmt::format("synthetic {} model does not fit: {:.2f} GiB of weights + {:.2f} GiB kept for caches and "
                             "workspaces > {:.2f} GiB free",
                             name, gib(p.weightBytes), gib(reserveBytes), gib(freeBytes))};
  auto draft = draftWeightBytes(*cfg);
  if (!draft.ok()) return draft.error();
  p.draftBytes = *draft;
  if (!wantDraft || p.draftBytes == 0) return p;
  if (p.weightBytes + p.draftBytes + reserveBytes <= freeBytes) {
    p.draft = true;
    return p;
  }
  p.draftLeftOut = fmt::format("the DSpark draft ({:.2f} GiB) does not fit next to {:.2f} GiB of weights and {:.2f} GiB "
                               "kept for caches and workspaces in {:.2f} GiB free",
                               gib(p.draftBytes), gib(p.weightBytes), gib(reserveBytes), gib(freeBytes));
  return p;
}

}  // namespace deepinfer::bench
