// The checkpoint's tensor list for a config (spec/model.md §3): names, stored formats and
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

// Every tensor a config's forward pass needs (draft layers excluded), in checkpoint order
// (scales not listed separately: see ModelTensorSpec::hasScale).
std::vector<ModelTensorSpec> modelTensorSpecs(const ModelConfig& cfg);

// Width of the engram lookup concat: (maxNgram - 1) * heads * head dim (6144 in V4.1).
int64_t engramConcatWidth(const ModelConfig& cfg);

}  // namespace deepinfer
