#include "QuantizationCheck.h"

#include <fmt/format.h>

#include "ModelTensors.h"

namespace deepinfer {
namespace {

std::string shapeStr(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// How a tensor is stored, in quantization_config's words.
std::string storedFormat(const TensorInfo& ti) {
  if (ti.dtype == "F8_E4M3") return "fp8";
  if (ti.dtype == "I8") return "fp4";
  return ti.dtype;  // unquantized (BF16, F32, ...)
}

}  // namespace

Status checkQuantizationMatchesCheckpoint(const ModelConfig& cfg, const Checkpoint& ckpt,
                                          const std::string& configSource) {
  const std::string q = configSource + ": quantization_config";
  for (const ModelTensorSpec& spec : modelTensorSpecs(cfg)) {
    if (spec.format == WeightFormat::Plain || !ckpt.has(spec.name)) continue;
    auto ti = ckpt.info(spec.name);
    if (!ti.ok()) return ti.error();
    const std::string stored = storedFormat(*ti);
    if (spec.format == WeightFormat::Fp4) {  // routed experts
      if (!cfg.expertQuantFormat.empty() && cfg.expertQuantFormat != stored)
        return Error{fmt::format("{}: expert_dtype '{}' does not match the checkpoint: routed expert '{}' is stored "
                                 "as {} ({})",
                                 q, cfg.expertQuantFormat, spec.name, stored, ti->dtype)};
      continue;
    }
    if (!cfg.quantMethod.empty() && cfg.quantMethod != stored)
      return Error{fmt::format("{}: quant_method '{}' does not match the checkpoint: '{}' is stored as {} ({})", q,
                               cfg.quantMethod, spec.name, stored, ti->dtype)};
    if (spec.format != WeightFormat::Fp8Block || ti->format != WeightFormat::Fp8Block ||
        cfg.weightBlockSize.size() != 2)
      continue;
    // Checkpoint::info has already checked each scale against the 32x32 blocks the loader decodes.
    const int64_t br = cfg.weightBlockSize[0], bc = cfg.weightBlockSize[1];
    if (br != 32 || bc != 32) {
      const int64_t out = ti->logicalShape[0], in = ti->logicalShape[1];
      return Error{fmt::format("{}: weight_block_size [{}, {}] does not match the checkpoint: '{}' {} has scale "
                               "'{}' of shape [{}, {}], one per 32x32 block (docs/model.md §3; [{}, {}] blocks would "
                               "give [{}, {}])",
                               q, br, bc, spec.name, shapeStr(ti->logicalShape), ti->scaleName, (out + 31) / 32,
                               (in + 31) / 32, br, bc, (out + br - 1) / br, (in + bc - 1) / bc)};
    }
  }
  return {};
}

}  // namespace deepinfer
