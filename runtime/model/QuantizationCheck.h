// config.json's quantization_config against the checkpoint it describes: a config that claims a
// method, block size or expert format the stored tensors do not have is refused at load, naming
// the field, its value and a tensor that contradicts it (the loader would otherwise decode the
// tensors by their dtypes and silently ignore what the config says).
#pragma once
#include <string>

#include "Checkpoint.h"
#include "ModelConfig.h"

namespace deepinfer {

// Checks every quantized tensor the forward pass reads (modelTensorSpecs) that the checkpoint
// holds; missing tensors are left to the loaders, which name them. `configSource` names the
// config in messages. A config without quantization_config passes.
Status checkQuantizationMatchesCheckpoint(const ModelConfig& cfg, const Checkpoint& ckpt,
                                          const std::string& configSource);

}  // namespace deepinfer
