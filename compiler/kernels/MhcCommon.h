// Host code shared by the four mHC kernel families (mhc_pre, mhc_post, mhc_fused_post_pre,
// mhc_collapse; docs/ops.md §8): shape and attribute checks, the stream-pass geometry and its
// occupancy-driven default, resource figures, and the emitted entry points. The device side
// is templates/MhcStream.cuh (one pass over the residual) + templates/MhcFinalize.cuh.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/BenchInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "params/MhcParams.h"

namespace deepinfer::mhc {

constexpr int64_t kStreams = 4;  // n, fixed by the model
constexpr int64_t kMix = di::kMhcMix;
constexpr int64_t kChunk = 32;  // columns of C per stream-pass chunk; C must be a multiple
constexpr int64_t kMaxC = int64_t(1) << 20;
constexpr int kFinalizeThreads = 256;
constexpr int kSqrsumThreads = 256;
constexpr int kSqrsumTokensPerCta = kSqrsumThreads / 32;  // one warp per token
// Workspace ceiling for per-slice partials; configs beyond it are not offered.
constexpr int64_t kMaxWorkspaceBytes = int64_t(64) << 20;

// Stream-pass modes; the values are the template's kMhcMode* constants.
enum class Mode : int { Pre = 0, Fused = 1, Post = 2, Collapse = 3 };

inline bool hasMix(Mode m) { return m == Mode::Pre || m == Mode::Fused; }
inline bool hasPost(Mode m) { return m == Mode::Fused || m == Mode::Post; }

struct Dims {
  int64_t T = 0;
  int64_t C = 0;
};

std::string shapeString(const std::vector<int64_t>& s);

// `tensor` must be present with shape [T, 4, C], T >= 1, C a positive multiple of 32.
Result<Dims> residualDims(const OpDesc& d, const std::string& tensor);
// `tensor` must be present with exactly `shape`.
Status expectDims(const OpDesc& d, const std::string& tensor, const std::vector<int64_t>& shape);
// The mix attributes with signature defaults filled in, checked: rms_eps, hc_eps, norm_eps
// finite and > 0 in fp32; sinkhorn_iters an integer >= 1.
Result<OpAttrs> mixAttrs(const OpDesc& d);
// fn [24, 4C], scale [3], base [24], pre_in [T, 4], norm_weight [C].
Status checkMixTensors(const OpDesc& d, const Dims& dims);

// The stream pass's configuration: `threads` (32 * warps, one 16-token tile per warp),
// `k_slices` (CTAs along C), and for the mix ops `use_mma` (tensor cores, 0 or 1).
struct StreamConfig {
  int64_t threads = 0, kSlices = 0;
  static constexpr auto fields() {
    using F = ConfigField<StreamConfig>;
    return std::array{F{"threads", &StreamConfig::threads}, F{"k_slices", &StreamConfig::kSlices}};
  }
};
// `one_launch` (mix ops and mhc_post): 1 runs the reduction in the stream pass's launch, by the
// last CTA of each token tile to arrive (MhcOneLaunch.cuh); 0 plans a second launch.
struct MixConfig {
  int64_t threads = 0, kSlices = 0, useMma = 0, oneLaunch = 0;
  static constexpr auto fields() {
    using F = ConfigField<MixConfig>;
    return std::array{F{"threads", &MixConfig::threads}, F{"k_slices", &MixConfig::kSlices},
                      F{"use_mma", &MixConfig::useMma}, F{"one_launch", &MixConfig::oneLaunch}};
  }
};
struct PostConfig {
  int64_t threads = 0, kSlices = 0, oneLaunch = 0;
  static constexpr auto fields() {
    using F = ConfigField<PostConfig>;
    return std::array{F{"threads", &PostConfig::threads}, F{"k_slices", &PostConfig::kSlices},
                      F{"one_launch", &PostConfig::oneLaunch}};
  }
};

struct StreamGeometry {
  int warps = 1;
  bool mma = false;
  int64_t slices = 1;  // as launched (gridDim.y); every slice owns >= 1 chunk
  int64_t chunksPerSlice = 1;
  int64_t tiles = 1;  // gridDim.x
  bool oneLaunch = false;
};
// `useMma` is read in the mix modes only.
// `oneLaunch` is read in the mix and post modes only.
Result<StreamGeometry> streamGeometry(Mode mode, int64_t threads, int64_t kSlices, int64_t useMma, int64_t oneLaunch,
                                      const Dims& dims, const std::string& op);
inline Result<StreamGeometry> streamGeometry(Mode mode, const StreamConfig& c, const Dims& dims, const std::string& op) {
  return streamGeometry(mode, c.threads, c.kSlices, -1, 0, dims, op);
}
inline Result<StreamGeometry> streamGeometry(Mode mode, const PostConfig& c, const Dims& dims, const std::string& op) {
  return streamGeometry(mode, c.threads, c.kSlices, -1, c.oneLaunch, dims, op);
}
inline Result<StreamGeometry> streamGeometry(Mode mode, const MixConfig& c, const Dims& dims, const std::string& op) {
  return streamGeometry(mode, c.threads, c.kSlices, c.useMma, c.oneLaunch, dims, op);
}
// The same for op `d` whose residual streams [T, 4, C] are tensor `residual` (its shape
// checked first); messages name the op `op`.
template <class Config>
Result<StreamGeometry> streamGeometryOf(Mode mode, const Config& c, const OpDesc& d, const std::string& residual,
                                        const std::string& op) {
  auto dims = residualDims(d, residual);
  if (!dims) return dims.error();
  return streamGeometry(mode, c, *dims, op);
}

// Warps per CTA of the default: one 16-token tile per warp, at most 4, none idle.
int defaultWarps(int64_t T);
// Warps per CTA worth trying: 1, 2, 4, 8 and the default, without CTAs whose last warps idle.
std::vector<int> warpChoices(int64_t T);

// Slices such that every one owns ceil(chunks / slices) chunks and none is empty.
int64_t evenSlices(int64_t chunks, int64_t slices);

// Exact static shared memory of the stream kernel (with the one-launch finalize's tables when
// `oneLaunch`), and a register estimate (the maximum ptxas -v reported for sm_80/86/89/90 with
// CUDA 13.0; NVRTC's report is the truth).
int64_t streamSmemBytes(Mode mode, int warps, bool oneLaunch = false);
int streamRegs(Mode mode, bool mma, int warps, bool oneLaunch = false);

// One-launch plans are offered up to this many tokens (the last CTA of a tile finalizes the
// whole tile: beyond a few tiles the two-launch finalize, one CTA per token, is wider).
constexpr int64_t kOneLaunchMaxT = 64;
// Arrival counters of a one-launch plan: one uint32 per token tile, rounded up to 16 bytes.
inline int64_t arrivalBytes(const StreamGeometry& g) { return (g.tiles * 4 + 15) / 16 * 16; }

constexpr int64_t kFinalizeSmemBytes = (kFinalizeThreads / 8 + 1) * di::kMhcRecord * 4;

// CTAs of `threads` x `regs` with `smem` bytes that one SM of `t` holds at once.
int64_t residentCtasPerSm(const TargetProfile& t, int threads, int regs, int64_t smem);
// The occupancy-driven slice count: enough CTAs for every SM to hold its resident maximum.
int64_t occupancySlices(const TargetProfile& t, int64_t tiles, int64_t chunks, int threads,
                        int regs, int64_t smem);
// occupancySlices for the stream pass of `mode` with `warps` warps per CTA (its registers and
// shared memory), before any workspace limit.
int64_t defaultSlices(Mode mode, bool mma, const TargetProfile& t, int64_t tiles, int64_t chunks,
                      int warps);

// Source line of one extern "C" entry instantiating the stream kernel (the one-launch kernel,
// MhcOneLaunch.cuh, when g.oneLaunch).
std::string streamEntry(Mode mode, const StreamGeometry& g, const std::string& name);

// Device address of a required tensor; the error names a missing or misaligned one. Row data
// and per-token coefficient rows are read as 16-byte vectors (align 16); scalars need 4.
Result<uint64_t> requireAddr(const DeviceAddrMap& a, const std::string& name, const std::string& op,
                             uint64_t align = 16);

// Binds a params pointer field to the device address of tensor `name` (see requireAddr).
template <class Ptr>
Status bindAddr(Ptr& field, const DeviceAddrMap& a, const std::string& name, const std::string& op,
                uint64_t align) {
  auto r = requireAddr(a, name, op, align);
  if (!r) return r.error();
  field = reinterpret_cast<Ptr>(static_cast<uintptr_t>(*r));
  return {};
}

// The facts every mHC op shares: shapes from T (tokens) and C (hidden size), the compile shapes
// (default T = 6: one warp; T = 64: four), the tuning buckets along T (edges at 15 and 64, so the
// buckets with CUDA-core candidates, T < 16, never share timings with the tensor-core-only ones)
// and the tune shape.
std::vector<ShapeParam> shapeParams();
OpDesc describe(const std::string& op, const ShapeParams& p);
std::vector<std::pair<std::string, ShapeParams>> compileShapes();
BucketAxis bucketAxis();
TuneShape tuneShape(const ModelDims& m, int64_t v);
// pre/post/comb within 2e-3 abs; bf16 outputs within 2 bf16 ulps of the correctly rounded
// reference (or 2^-14 of the row's largest magnitude); sqrsum within 2e-5 relative.
AccuracyRule accuracy(const std::string& output);

// Benchmark inputs of the mHC op `family` running `mode`, as the test cases build them
// (tests/cases/MhcCases.cpp): residual rows of per-token magnitude 0.5..4, fn ~ N(0, 1/(4C)) so
// the mixes are ~N(0, 1) and nothing saturates, post in [0.05, 1.95], comb in [0.02, 0.5],
// pre_in / pre in [0.1, 1.1], the model's epsilons and Sinkhorn rounds. Parameters T and C.
Result<BenchInputs> benchInputs(const KernelFamily& family, Mode mode, BenchInputContext& ctx);

// Fills the shape fields of the params from the geometry.
void setShapes(di::MhcParams& p, const Dims& dims, const StreamGeometry& g);

}  // namespace deepinfer::mhc
