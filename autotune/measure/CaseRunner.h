// Runs one benchmark case on the GPU. Inputs are uploaded once and outputs allocated once for
// all variants; each variant (a target's default config or a fixed candidate) is compiled
// through the JIT, checked once against the reference (in/out tensors restored, outputs and
// workspace poisoned first), then timed as one launch of its whole plan. A plan's zeroed
// workspace is checked to be zero again after the check and after the timed launches.
#pragma once
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "BenchCase.h"
#include "BenchCheck.h"
#include "BenchTiming.h"
#include "deepinfer/Jit.h"

namespace deepinfer::bench {

struct Variant {
  std::string kind;  // "sm80-default", "sm86-default", "local-default", "candidate"
  TargetProfile target;
  std::optional<KernelConfig> config;  // nullopt: the target's default
};

struct VariantResult {
  std::string kind, target, config;
  int arch = 0;
  bool ptx = false;        // loaded as PTX (compiled by the driver for the local GPU)
  std::string error;       // what stopped the variant (compile, launch, download)
  double getSeconds = 0;   // JIT lookup incl. compile when not cached
  bool compiled = false;   // this variant's lookup compiled a new unit
  int64_t kernelsPerLaunch = 0;  // kernels one launch of the plan runs (a plan's empty steps launch none)
  int registers = -1;      // from the ptxas report (cubin only; -1 unknown)
  int64_t spillBytes = -1;
  CheckResult check;
  TimingStats timing;
  bool tuned = false;      // the best measured candidate of its case
};

class CaseRunner {
 public:
  static Result<std::unique_ptr<CaseRunner>> create(Jit& jit, const BenchCase& c, const OpDesc& d);
  // `exp` null: outputs are not checked.
  VariantResult run(const Variant& v, const Expected* exp, const TimingOptions& t);

 private:
  CaseRunner(Jit& jit, const BenchCase& c, OpDesc d) : jit_(jit), c_(c), desc_(std::move(d)) {}
  Status restoreAndPoison();
  Status ensureWorkspace(int64_t bytes, int64_t zeroedBytes);
  Status checkZeroed(int64_t bytes, const char* when) const;
  Result<TensorMap> downloadOutputs(const std::vector<int64_t>& rows) const;

  Jit& jit_;
  const BenchCase& c_;
  OpDesc desc_;
  OutputSpec outs_;
  std::map<std::string, DeviceBuffer> bufs_;
  std::set<std::string> inOut_;  // inputs the op also writes
  DeviceAddrMap addrs_;
  DeviceBuffer workspace_;
  DeviceBuffer zeroed_;  // "__zeroed": zero-filled once, every kernel leaves it zero
};

}  // namespace deepinfer::bench
