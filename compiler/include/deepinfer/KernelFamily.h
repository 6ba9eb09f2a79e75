// What the compiler knows about one kernel op, independent of MLIR: its candidate configs on a
// target, resource estimates, the CUDA unit that instantiates its template, its launch plan,
// how device tensors bind to the kernel's parameter struct, and the facts the tools and the
// tuner need (shape parameters, tuning buckets, PTX checks, accuracy rules). The compiler's
// passes look families up by op name (the dialect knows nothing of them), and the runtime and
// the tools ask them directly: the passes, the JIT and the tools hold no per-op code.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
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
  std::string op;                                      // canonical op name (docs/ops.md §11)
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

// ---- Facts about an op that the tools and the tuner read from its family ----

// A size an op description is built from (T, H, B, context, ...), with its V4.1-Flash default.
struct ShapeParam {
  std::string name;
  int64_t dflt;
  std::string help;
};
using ShapeParams = std::map<std::string, int64_t>;

// The model dimensions that fix an op's sizes other than its tuning variable (V4.1-Flash by
// default; `tune --config` reads them from a model's config.json).
struct ModelDims {
  int64_t heads = 64, hidden = 5120, indexTopk = 512, window = 128, indexHeads = 32;
  int64_t headDim = 512, qLoraRank = 1280, oLoraRank = 1024, oGroups = 8, indexHeadDim = 128;
  int64_t experts = 384, expertsPerToken = 6, moeIntermediate = 2304;
  std::vector<int64_t> ratios = {1, 2};  // compress ratios of the executed layers (combine keys on it)
};

// The one variable of an op that moves its best config, and the edges of its tuning buckets
// (autotune/ShapeBuckets.h: bucket i is (edge[i-1], edge[i]], tuned at edge[i]).
struct BucketAxis {
  std::string var;             // "B", "T", "context", "N"
  std::vector<int64_t> edges;  // strictly increasing, > 0
};

// An op at one tuning point: the shape parameters of its description, and the parameters of its
// benchmark inputs (the family's benchInputs).
struct TuneShape {
  ShapeParams shape;
  ShapeParams inputs;
};

// What the op's compiled PTX must show (`deepinfer-jit compile` checks every candidate).
struct PtxChecks {
  bool tensorCores = false;        // mma.sync.m16n8k16 present
  bool noTranscendentals = false;  // no ex2/lg2 (a pure data-movement kernel)
};

struct BenchInputs;        // BenchInputs.h
struct BenchInputContext;  // BenchInputs.h

// How an output of the op is compared with the C++ reference (docs/ops.md's accuracy contract;
// autotune/measure/cases/CompareOutputs.cpp applies it): bit-exact, or an error measure within
// `tol`.
struct AccuracyRule {
  enum class Kind {
    Exact,        // every byte equal
    Abs,          // |actual - expected|
    AttnOut,      // |actual - expected| beyond one bf16 step of the expected value
    Lse,          // |actual - expected|, +inf exactly
    RowRelative,  // |actual - expected| / the row's largest |expected|
    Bf16Ulps,     // bf16 ulps, where the error exceeds 2^-14 of the row's largest |expected|
    Relative,     // |actual - expected| / |expected|
    Bound,        // |actual - expected| / the per-element bound the op's reference derives from the
                  // inputs (referenceErrorBound, runtime's Reference.h)
  };
  Kind kind = Kind::Exact;
  double tol = 0;
  const char* metric = "mismatched elements";
};

// The type-erased interface the passes, the JIT and the tools use. A config travels as its knob
// map (what #di.config and the tuning cache hold); every call that takes one first checks that
// the family can implement it for this op (canImplement), so a bad config is an error naming
// the knob, never a unit that fails to compile or a made-up estimate. Families implement it
// through TypedKernelFamily<Config> (TypedKernelFamily.h), with a struct of named knobs.
class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual std::string opName() const = 0;
  // Template headers (paths relative to templates/) that the unit includes.
  virtual std::vector<std::string> templateHeaders() const = 0;
  // Check an op description against every rule of docs/ops.md this kernel relies on; the
  // message names the bad value and the tensor or attribute it belongs to.
  virtual Status validate(const OpDesc& d) const = 0;
  // Output tensors (name -> dtype, shape) derived from the inputs and attributes of a valid
  // description. In/out tensors are listed too.
  virtual OutputSpec outputs(const OpDesc& d) const = 0;
  // The configs worth trying for this op on this target, each one canImplement accepts (the
  // pass then drops those over the target's limits).
  virtual std::vector<KernelConfig> candidates(const OpDesc& d, const TargetProfile& t) const = 0;
  // The default config by the family's documented heuristic; must fit the target's cap.
  virtual KernelConfig defaultConfig(const OpDesc& d, const TargetProfile& t) const = 0;
  // Whether this config can serve this op: its knobs are the family's and their values ones the
  // template supports for these shapes. Asked before anything below, before a launch and before
  // a tuned winner is reused; the message names the knob and what it must be.
  virtual Status canImplement(const KernelConfig& c, const OpDesc& d) const = 0;
  virtual Result<ResourceEstimate> estimate(const KernelConfig& c, const OpDesc& d) const = 0;
  // The CUDA unit: includes the template header and instantiates it; entry names derive from
  // `baseName` (which the caller derives from the content key).
  virtual Result<CudaUnit> emit(const KernelConfig& c, const OpDesc& d, const std::string& baseName) const = 0;
  // Kernel launches in order (e.g. split-KV partials, then the merge only when needed).
  virtual Result<std::vector<LaunchStep>> launchPlan(const KernelConfig& c, const OpDesc& d,
                                                     const std::string& baseName) const = 0;
  // Device workspace bytes the plan needs (0 if none); bound as "__workspace". Its contents are
  // undefined on entry (callers share and poison it).
  virtual Result<int64_t> workspaceBytes(const KernelConfig& c, const OpDesc& d) const = 0;
  // Device bytes the plan needs zero on entry and leaves zero on exit (0 if none; e.g. the arrival
  // counters of a one-launch split-K); bound as "__zeroed". The caller allocates it zero-filled
  // once and may reuse it for any later launch on the same stream.
  virtual Result<int64_t> zeroedWorkspaceBytes(const KernelConfig& c, const OpDesc& d) const = 0;
  // The kernel parameter struct's bytes (one by-value argument shared by every step).
  virtual Result<std::vector<uint8_t>> packParams(const KernelConfig& c, const OpDesc& d,
                                                  const DeviceAddrMap& addrs) const = 0;
  // Whether the kernel can address tensor `name` with these element strides (e.g. gather_kcache
  // writes `out` with the caller's strides, docs/ops.md §3). The message says what the kernel
  // needs. Default: no tensor may be strided.
  virtual Status checkStrides(const OpDesc& d, const std::string& name, const std::vector<int64_t>& strides) const;
  // packParams for tensors bound with strides (each accepted by checkStrides).
  virtual Result<std::vector<uint8_t>> packStridedParams(const KernelConfig& c, const OpDesc& d,
                                                         const DeviceAddrMap& addrs,
                                                         const TensorStrides& strides) const = 0;

  // ---- facts for the tools and the tuner ----
  // The shape parameters the op's description is built from, with defaults.
  virtual std::vector<ShapeParam> shapeParams() const = 0;
  // The description at these parameters (every one of shapeParams() present, >= 0); attributes
  // the family sets are its defaults for those shapes.
  virtual OpDesc describe(const ShapeParams& p) const = 0;
  // The shapes `compile` builds every candidate at: the defaults, plus the edges of the op.
  virtual std::vector<std::pair<std::string, ShapeParams>> compileShapes() const { return {{"default", {}}}; }
  virtual PtxChecks ptxChecks(const OpDesc&) const { return {}; }
  // The tuning variable (nullopt: the op is not tuned), its value in a description, and the op
  // at the value `v` for a model: one shape per instance the model runs that keys apart (e.g.
  // one per projection of weight_gemm, one per compress ratio of combine_topk_swa).
  virtual std::optional<BucketAxis> bucketAxis() const { return std::nullopt; }
  virtual std::optional<int64_t> bucketValue(const OpDesc&) const { return std::nullopt; }
  virtual std::vector<TuneShape> tuneShapes(const ModelDims&, int64_t v) const { return {}; }
  // What a shape bucket keeps apart besides the bucket variable, when one op serves shapes whose
  // best configs differ (weight_gemm: "fp8 1280x5120 f32"); "" for most ops.
  virtual std::string bucketClass(const OpDesc&) const { return ""; }
  // The model dimensions that key a tuned config besides its bucket (autotune/TuningDims.h), in
  // key order; a value is nullopt when the description lacks it. Empty: the op has none.
  virtual std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc&) const { return {}; }
  // How output `name` is compared with the reference (default: bit-exact).
  virtual AccuracyRule accuracy(const std::string& output) const { return {}; }
  // Valid random inputs at the parameters of a benchmark or tuning shape (BenchInputs.h: read
  // with ctx.params, drawn from ctx.rng), for `tune` and `deepinfer-bench`. Default: an error
  // saying the op has none.
  virtual Result<BenchInputs> benchInputs(BenchInputContext& ctx) const;
};

// Registry of all families by op name.
const KernelFamily* findKernelFamily(const std::string& op);
std::vector<const KernelFamily*> allKernelFamilies();

// Shared validation helpers: messages name the tensor and the expected/actual shape.
Status expectShape(const OpDesc& d, const std::string& name, const std::vector<int64_t>& shape);
Status expectRank(const OpDesc& d, const std::string& name, size_t rank);
// Dim i of tensor `name`, nullopt when the tensor or the dim is absent.
std::optional<int64_t> dimOf(const OpDesc& d, const std::string& name, size_t i);
// Integer attribute `name`, nullopt when the description does not set it.
std::optional<int64_t> intAttrOf(const OpDesc& d, const std::string& name);

// Pack a trivially copyable params struct into bytes.
template <class P>
std::vector<uint8_t> paramBytes(const P& p) {
  std::vector<uint8_t> b(sizeof(P));
  std::memcpy(b.data(), &p, sizeof(P));
  return b;
}

}  // namespace deepinfer
