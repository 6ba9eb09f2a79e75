// The local GPU's profile, read through the CUDA driver API when one is present.
#pragma once
#include <optional>
#include <string>

#include "deepinfer/Error.h"
#include "deepinfer/TargetProfile.h"

namespace deepinfer {

struct LocalGpuInfo {
  TargetProfile profile;      // name "local"; facts of its arch, part facts from the driver
  int ordinal = 0;
  int64_t totalMemBytes = 0;
  int64_t smemPerCtaOptIn = 0;  // as the driver reports
  int64_t smemPerSm = 0;
  int computeMajor = 0, computeMinor = 0;
};

// The GPU at `ordinal`, or an Error saying plainly why there is none (no driver, no device).
Result<LocalGpuInfo> localGpu(int ordinal = 0);

}  // namespace deepinfer
