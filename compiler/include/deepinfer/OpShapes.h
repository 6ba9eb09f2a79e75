// Op descriptions from a few shape parameters (T, H, B, context, ...) with V4.1-Flash defaults
// (the benchmark shapes of docs/ops.md §10); each op's parameters are its family's
// (KernelFamily::shapeParams / describe). Used by `emit`, `compile`, `tune` and the benchmarks.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "deepinfer/KernelFamily.h"

namespace deepinfer {

// The shape parameters an op takes, with defaults (empty for an unknown op).
std::vector<ShapeParam> opShapeParams(const std::string& op);
// Build the OpDesc; unknown parameter names are errors naming the parameter and the op.
Result<OpDesc> makeOpDesc(const std::string& op, const std::map<std::string, int64_t>& shape,
                          const OpAttrs& attrOverrides);
// fp8_ds_mla page size for a block size: ceil(BS*584/576)*576.
constexpr int64_t mlaPageBytes(int64_t bs) { return (bs * 584 + 575) / 576 * 576; }

}  // namespace deepinfer
