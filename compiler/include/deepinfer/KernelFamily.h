// What the compiler knows about one kernel op, independent of MLIR: its candidate configs on a
// target, resource estimates, the CUDA unit that instantiates its template, its launch plan
// and how device tensors bind to the kernel's parameter struct. The MLIR op interface and the
// runtime both go through this, so adding an op touches one place.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/TargetProfile.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

// A kernel config: named integer knobs (block sizes, warps, stages, kv splits, ...).
using KernelConfig = std::map<std::string, int64_t>;
std::string configToString(const KernelConfig& c);  // "heads_per_cta=16,splits=4" (sorted)

// The static description of an op instance: its attributes plus the shapes of its tensors.
// Optional tensors that are absent are missing from `shapes`.
struct OpDesc {
  std::string op;                                      // e.g. "sparse_mla_decode"
  OpAttrs attrs;
  std::map<std::string, std::vector<int64_t>> shapes;  // canonical tensor name -> shape
  bool hasTensor(const std::string& n) const { return shapes.count(n) != 0; }
  int64_t dim(const std::string& n, size_t i) const { return shapes.at(n).at(i); }
};

struct ResourceEstimate {
  int64_t smemBytes = 0;   // static + dynamic shared memory per CTA
  int threadsPerCta = 0;
  int regsPerThread = 0;   // estimate; the NVRTC report gives the truth
};

struct LaunchStep {
  std::string entry;                     // extern "C" name inside the unit
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t dynamicSmem = 0;
};

// One emitted CUDA unit: source that includes templates by path and instantiates them.
struct CudaUnit {
  std::string source;
  std::vector<std::string> entries;  // extern "C" names defined by the unit
  std::string label;                 // what it is, for people: "topk {pool_keys=9984,...}" (not keyed)
};

using OutputSpec = std::map<std::string, std::pair<DType, std::vector<int64_t>>>;

// Device addresses by canonical tensor name (plus "__workspace" when the plan needs one).
using DeviceAddrMap = std::map<std::string, uint64_t>;
// Element strides of the tensors bound through a non-contiguous view, by canonical name;
// a tensor that is not listed is dense row-major.
using TensorStrides = std::map<std::string, std::vector<int64_t>>;

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual std::string opName() const = 0;
  // Template headers (paths relative to templates/) that the unit includes.
  virtual std::vector<std::string> templateHeaders() const = 0;
  // Check an op description against every rule of spec/ops.md this kernel relies on; the
  // message names the bad value and the tensor or attribute it belongs to.
  virtual Status validate(const OpDesc& d) const = 0;
  // Output tensors (name -> dtype, shape) derived from the inputs and attributes. In/out
  // tensors are listed too.
  virtual OutputSpec outputs(const OpDesc& d) const = 0;
  // Whether config `c` can instantiate and launch this op (`d` passed validate()): exactly the
  // family's knobs, each in the range its template supports, said in the family's own terms.
  // checkConfig (Specialize.h) runs it before estimating resources, emitKernel before emitting
  // and packParams before every launch: a config that passes here never fails later for its
  // knobs, and one that fails is never estimated, emitted or reused from the tuning cache.
  virtual Status checkKnobs(const KernelConfig& c, const OpDesc& d) const = 0;
  // All configs the kernel could run with for this op on this target (before filtering).
  virtual std::vector<KernelConfig> candidates(const OpDesc& d, const TargetProfile& t) const = 0;
  virtual ResourceEstimate estimate(const KernelConfig& c, const OpDesc& d) const = 0;
  // The default config by the family's documented heuristic; must fit the target's cap.
  virtual KernelConfig defaultConfig(const OpDesc& d, const TargetProfile& t) const = 0;
  // The CUDA unit: includes the template header and instantiates it; entry names derive from
  // `baseName` (which the caller derives from the content key).
  virtual CudaUnit emit(const KernelConfig& c, const OpDesc& d, const std::string& baseName) const = 0;
  // Kernel launches in order (e.g. split-KV partials, then the merge only when needed).
  virtual std::vector<LaunchStep> launchPlan(const KernelConfig& c, const OpDesc& d,
                                             const std::string& baseName) const = 0;
  // Device workspace bytes the plan needs (0 if none); bound as "__workspace".
  virtual int64_t workspaceBytes(const KernelConfig&, const OpDesc&) const { return 0; }
  // The kernel parameter struct's bytes (one by-value argument shared by every step).
  virtual Result<std::vector<uint8_t>> packParams(const KernelConfig& c, const OpDesc& d,
                                                  const DeviceAddrMap& addrs) const = 0;
  // Whether the kernel can address tensor `name` with these element strides (e.g. gather_kcache
  // writes `out` with the caller's strides, spec/ops.md §3). The message says what the kernel
  // needs. Default: no tensor may be strided.
  virtual Status checkStrides(const OpDesc& d, const std::string& name, const std::vector<int64_t>& strides) const;
  // packParams for tensors bound with strides (each accepted by checkStrides). Default: only
  // an empty `strides` is accepted, and it packs as packParams does.
  virtual Result<std::vector<uint8_t>> packStridedParams(const KernelConfig& c, const OpDesc& d,
                                                         const DeviceAddrMap& addrs,
                                                         const TensorStrides& strides) const;
};

// Registry of all families by op name.
const KernelFamily* findKernelFamily(const std::string& op);
std::vector<const KernelFamily*> allKernelFamilies();

// Shared validation helpers: messages name the tensor and the expected/actual shape.
Status expectShape(const OpDesc& d, const std::string& name, const std::vector<int64_t>& shape);
Status expectRank(const OpDesc& d, const std::string& name, size_t rank);
// `c` has exactly the knobs `names` (none missing, none unknown), each in 0..2^31-1 so that
// families may hold them in int; the message lists the op's knobs.
Status expectKnobs(const std::string& op, const KernelConfig& c, const std::vector<std::string>& names);

// Pack a trivially copyable params struct into bytes.
template <class P>
std::vector<uint8_t> paramBytes(const P& p) {
  std::vector<uint8_t> b(sizeof(P));
  std::memcpy(b.data(), &p, sizeof(P));
  return b;
}

}  // namespace deepinfer
