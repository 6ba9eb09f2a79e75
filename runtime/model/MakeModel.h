// `make-model`: writes a random-weight model directory with the real tensor names, dtypes and
// quantization formats (docs/model.md §3): config.json, model.safetensors (or shards),
// token_map.i32, engram_hash.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "MakeModelPresets.h"
#include "ModelConfig.h"
#include "ModelTensors.h"
#include "deepinfer/Error.h"

namespace deepinfer {

struct MakeModelOptions {
  std::string preset = "tiny";
  std::string outDir;
  uint64_t seed = 1;
  // Shard size bound for the safetensors output (bytes); one file when everything fits.
  uint64_t maxShardBytes = uint64_t(4) << 30;
  bool verbose = false;         // progress lines on stderr
  int threads = 0;              // generation threads; 0 = hardware concurrency (output is identical)
};

// Writes the model directory (created if missing; existing model files are replaced).
Status makeModel(const MakeModelOptions& opts);
// Same with an explicit config (tests use variations of the presets).
Status makeModelFromConfig(const ModelConfig& cfg, const MakeModelOptions& opts);

}  // namespace deepinfer
