// The configs behind `make-model --preset`: "tiny" keeps V4.1's structure at small widths so
// every mechanism engages within a few hundred tokens on a CPU; "proxy" keeps the real widths
// with fewer layers and experts so it fits one 141 GB GPU dequantized to bf16.
#pragma once
#include <string>
#include <vector>

#include "ModelConfig.h"
#include "deepinfer/Error.h"

namespace deepinfer {

Result<ModelConfig> makeModelPresetConfig(const std::string& preset);
std::vector<std::string> makeModelPresetNames();
std::string makeModelPresetSummary();  // one line per preset, for --help

ModelConfig tinyPresetConfig();
ModelConfig proxyPresetConfig();

}  // namespace deepinfer
