// The checkpoint's tensor list for a config (docs/model.md §3): names, stored formats and
// logical shapes. make-model writes exactly these; loaders and tests check against them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "Checkpoint.h"
#include "ModelConfig.h"

namespace deepinfer {

// A tensor the forward pass reads.
struct ModelTensorSpec {
  std::string name;
  std::string dtype;            // stored dtype of the main tensor ("BF16", "F32", "F8_E4M3", "I8")
  std::vector<int64_t> shape;   // logical shape ([out, in] for fp4 experts)
  WeightFormat format = WeightFormat::Plain;
  bool hasScale() const { return format != WeightFormat::Plain; }
  // The stored shapes: fp4 packs two codes per byte; quantized formats add `<module>.scale`.
  std::vector<int64_t> storedShape() const;
  std::vector<int64_t> scaleShape() const;  // empty for Plain
};

// "layers.7." + rest.
std::string layerTensorName(int layer, const std::string& rest);
// "mtp.2." + rest: DSpark draft stage `stage` (docs/dspark.md §1).
std::string draftTensorName(int stage, const std::string& rest);

// Every tensor a config's forward pass needs, in checkpoint order (scales not listed
// separately: see ModelTensorSpec::hasScale): the backbone's, then, when the config has DSpark
// configured, the draft stages' (dsparkTensorSpecs).
std::vector<ModelTensorSpec> modelTensorSpecs(const ModelConfig& cfg);
// The DSpark tensors alone (docs/dspark.md §1): per stage the tensors of a window-only layer
// with the draft MoE's experts under `mtp.{s}.`, stage 0's main_proj/main_norm and the last
// stage's norm, Markov head and confidence head. Empty when DSpark is not configured.
std::vector<ModelTensorSpec> dsparkTensorSpecs(const ModelConfig& cfg);
// Whether a checkpoint carries DSpark weights at all (any `mtp.` tensor): without them a
// configured model runs non-speculatively; with them every tensor must be there.
bool checkpointHasDraft(const Checkpoint& ckpt);

// Width of the engram lookup concat: (maxNgram - 1) * heads * head dim (6144 in V4.1).
int64_t engramConcatWidth(const ModelConfig& cfg);

}  // namespace deepinfer
