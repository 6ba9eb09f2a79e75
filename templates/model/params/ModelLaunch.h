// Launch geometry shared by the model kernels (templates/model/*.cuh) and their host launchers
// (runtime/model/gpu/ModelKernels*.cpp): the kernels' __launch_bounds__ and the host's block sizes
// must agree, so both read them from here.
#pragma once
#include "common/Types.h"

namespace di {
namespace model {

constexpr int kCtaThreads = 256;          // CTA-per-row kernels and grid-stride kernels
constexpr int kCtaWarps = kCtaThreads / 32;
constexpr int kWarpRowsMaxWidth = 1024;   // RMSNorm rows up to this width use one warp per row
constexpr int kMaskChunkBlocks = 32768;   // mask_to_blocks: candidate blocks per shared bitmap pass

}  // namespace model
}  // namespace di
