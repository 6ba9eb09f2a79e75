// Target specialization shared by the MLIR pass and the runtime's JIT: which configs of an
// op's kernel family fit a target (shared-memory cap, registers, threads), their occupancy,
// and the default choice. No MLIR here.
#pragma once
#include <string>
#include <vector>

#include "deepinfer/KernelFamily.h"

namespace deepinfer {

struct ConfigChoice {
  KernelConfig config;
  ResourceEstimate estimate;
  int ctasPerSm = 0;   // occupancy on the target by the estimate
};

struct Specialization {
  std::vector<ConfigChoice> fitting;  // candidates within the target's limits
  int droppedOverCap = 0;             // candidates rejected by the limits
  ConfigChoice chosen;                // the family's default for the target
};

// CTAs per SM a kernel with this estimate reaches on the target (0 = does not fit at all).
int occupancy(const ResourceEstimate& e, const TargetProfile& t);
// Why a config does not fit the op or the target, or its choice record: the op description
// (KernelFamily::validate), the knobs (KernelFamily::canImplement, the check every launch runs),
// then resources against the target's limits.
Result<ConfigChoice> checkConfig(const OpDesc& d, const TargetProfile& t, const KernelConfig& c);
Result<Specialization> specialize(const OpDesc& d, const TargetProfile& t);

// The emitted unit of one op + config. Its entry names derive from the hash of the unit's own
// text (emitted first under a fixed stand-in name): two different kernels never share a name, and
// shapes that are runtime parameters do not multiply the compiled variants.
struct EmittedKernel {
  CudaUnit unit;
  std::string baseName;               // "di_<op>_<16 hex>"
  std::vector<LaunchStep> plan;       // entries already renamed
  int64_t workspaceBytes = 0;
  int64_t zeroedBytes = 0;  // KernelFamily::zeroedWorkspaceBytes ("__zeroed")
};
// Refuses an invalid op description or config (never emits a unit that cannot compile).
Result<EmittedKernel> emitKernel(const OpDesc& d, const KernelConfig& c);

// Hex SHA-256 of bytes.
std::string sha256Hex(std::string_view bytes);

}  // namespace deepinfer
