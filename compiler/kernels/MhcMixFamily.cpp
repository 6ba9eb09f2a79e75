// mhc_pre and mhc_fused_post_pre: see MhcMixFamily.h. Plan: the stream pass writes per-slice
// partial records (24 mix sums, sum x^2, sum h^2) and the bf16 collapse into `layer_input`;
// the finalize pass (one CTA per token) reduces the records in a fixed order, writes
// pre/post/comb and normalizes `layer_input` in place. With one_launch = 1 (decode sizes) the
// finalize runs in the stream pass's launch, in the last CTA of each token tile to arrive
// (MhcOneLaunch.cuh; arrival counters in the "__zeroed" region).
#include "MhcMixFamily.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "MhcCommon.h"

namespace deepinfer {

using namespace mhc;

namespace {

Mode modeOf(bool fused) { return fused ? Mode::Fused : Mode::Pre; }

}  // namespace

// Warps per CTA of the one-launch candidates. Their kernels are held to 128 registers
// (streamEntry); the fused stream pass needs ~160 at 4 warps (it spilled there on sm_80), so
// mhc_fused_post_pre runs one launch on 8 warps only.
std::vector<int> MhcMixFamily::oneLaunchWarps() const {
  if (fused_) return {8};
  return {4, 8};
}

std::string MhcMixFamily::opName() const { return fused_ ? "mhc_fused_post_pre" : "mhc_pre"; }

std::vector<std::string> MhcMixFamily::templateHeaders() const {
  return {"MhcStream.cuh",  "MhcFinalize.cuh",     "MhcOneLaunch.cuh", "params/MhcParams.h", "common/Arrival.cuh",
          "common/Mma.cuh", "common/Numerics.cuh", "common/Types.h"};
}

Status MhcMixFamily::validate(const OpDesc& d) const {
  auto dims = residualDims(d, residualName());
  if (!dims) return dims.error();
  if (fused_) {
    DI_TRY(expectDims(d, "f_out", {dims->T, dims->C}));
    DI_TRY(expectDims(d, "post", {dims->T, kStreams}));
    DI_TRY(expectDims(d, "comb", {dims->T, kStreams, kStreams}));
  }
  DI_TRY(checkMixTensors(d, *dims));
  auto attrs = mixAttrs(d);
  if (!attrs) return attrs.error();
  return {};
}

OutputSpec MhcMixFamily::outputs(const OpDesc& d) const {
  OutputSpec out;
  auto dims = residualDims(d, residualName());
  if (!dims) return out;
  const int64_t T = dims->T, C = dims->C;
  if (fused_) out["x"] = {DType::BF16, {T, kStreams, C}};
  out["layer_input"] = {DType::BF16, {T, C}};
  out["pre"] = {DType::F32, {T, kStreams}};
  out["post"] = {DType::F32, {T, kStreams}};  // in/out for the fused op
  out["comb"] = {DType::F32, {T, kStreams, kStreams}};
  return out;
}

std::vector<MhcMixFamily::Config> MhcMixFamily::configs(const OpDesc& d, const TargetProfile& t) const {
  std::vector<Config> out;
  auto dims = residualDims(d, residualName());
  if (!dims) return out;
  const Mode mode = modeOf(fused_);
  const int64_t chunks = dims->C / kChunk;
  for (int mma : {1, 0}) {
    // The mma path is valid for any T (padding rows are zeros) and is the default everywhere; the
    // CUDA-core path is also offered below one full 16-token tile (docs/ops.md §8.4).
    if (mma == 0 && dims->T >= 16) continue;
    for (int warps : warpChoices(dims->T)) {
      const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
      std::set<int64_t> slices;
      slices.insert(defaultSlices(mode, mma, t, tiles, chunks, warps));
      for (int64_t s : {1, 2, 4, 8, 16, 32, 64, 128}) slices.insert(evenSlices(chunks, s));
      slices.insert(chunks);
      for (int64_t s : slices) {
        if (s * dims->T * di::kMhcRecord * 4 > kMaxWorkspaceBytes) continue;
        out.push_back({32 * warps, s, mma, 0});
      }
    }
  }
  // One launch (MhcOneLaunch.cuh), tensor cores: oneLaunchWarps(), the idle warps of a small T
  // widening the last CTA's reduction and norm; the slice counts of the default down to a quarter.
  if (dims->T <= kOneLaunchMaxT) {
    for (int warps : oneLaunchWarps()) {
      const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
      const int64_t s0 = defaultSlices(mode, true, t, tiles, chunks, warps);
      std::set<int64_t> slices{evenSlices(chunks, 1), s0, evenSlices(chunks, s0 / 2), evenSlices(chunks, s0 / 4)};
      for (int64_t s : slices) {
        if (s * dims->T * di::kMhcRecord * 4 > kMaxWorkspaceBytes) continue;
        out.push_back({32 * warps, s, 1, 1});
      }
    }
  }
  return out;
}

Status MhcMixFamily::canImplement(const Config& c, const OpDesc& d) const {
  auto g = streamGeometryOf(modeOf(fused_), c, d, residualName(), opName());
  if (!g) return g.error();
  return {};
}

ResourceEstimate MhcMixFamily::resources(const Config& c, const OpDesc& d) const {
  ResourceEstimate r;
  auto g = streamGeometryOf(modeOf(fused_), c, d, residualName(), opName());
  // The stream pass dominates; the finalize pass (256 threads x ~40 registers, 1.1 KB of
  // shared memory) fits wherever it does.
  r.smemBytes = std::max(streamSmemBytes(modeOf(fused_), g->warps, g->oneLaunch), kFinalizeSmemBytes);
  r.threadsPerCta = 32 * g->warps;
  r.regsPerThread = streamRegs(modeOf(fused_), g->mma, g->warps, g->oneLaunch);
  return r;
}

// Default heuristic:
//  - use_mma = 1 at every T: tensor cores, the padding rows of a partial 16-token tile being
//    zeros. The fp32 CUDA-core path stays a candidate below T = 16, but measured on an H200
//    (ab938db, bench --quick) it was the slower one: mhc_pre 14.8 us at T = 6 and 16.8 us at
//    T = 12 on CUDA cores against 12.8 us at T = 16 on tensor cores (24 x 8 x 4 FMAs and 2 x 96
//    shared 16-byte loads per lane per chunk against 48 mma.sync); accuracy is the tensor-core
//    path's at T >= 16 (docs/ops.md §12).
//  - threads: one 16-token tile per warp, up to 4 warps (64 tokens) per CTA, fewer when T is
//    small so that no warp idles; the 4 warps share each staged fn chunk, and 8 warps of ~150
//    registers would leave a single CTA per SM.
//  - k_slices: occupancy-driven split of C. A CTA count of (SMs x resident CTAs per SM) fills
//    the machine in one wave; resident CTAs per SM come from the target's max CTAs/SM, max
//    warps/SM, registers and shared memory (sm_80: 32 CTAs, 64 warps, 164 KB; sm_86: 16 CTAs,
//    48 warps, 100 KB, so sm_86 gets fewer slices per SM), then slices = ceil(that / token
//    tiles), evened so every slice owns the same number of 32-column chunks. Small T thus
//    spreads the fn read (1.9 MB at C = 5120) over up to C/32 CTAs; large T keeps the slices
//    few so the partial records stay small. The static shared memory (<= 38 KB) always fits
//    the 48 KB cap.
//  - one_launch: 0. The one-launch plans (the last CTA of a token tile reduces the slices and
//    finalizes) are candidates up to T = 64, not defaults: measured on the H200 (11f5c23) they
//    lost in every decode bucket, e.g. mhc_pre T = 6 19.6 us against 11.3 for two launches and
//    T = 16 36.4 against 11.8: one CTA reducing 160 slice records per token is a serial chain
//    that costs more than the second launch it saves.
MhcMixFamily::Config MhcMixFamily::defaultFor(const OpDesc& d, const TargetProfile& t) const {
  auto dims = residualDims(d, residualName());
  if (!dims) return {128, 1, 1, 0};
  const Mode mode = modeOf(fused_);
  const bool mma = true;
  const int64_t chunks = dims->C / kChunk;
  auto slicesFor = [&](int warps) {
    const int64_t tiles = (dims->T + 16 * warps - 1) / (16 * warps);
    int64_t slices = defaultSlices(mode, mma, t, tiles, chunks, warps);
    while (slices > 1 && slices * dims->T * di::kMhcRecord * 4 > kMaxWorkspaceBytes) {
      slices = evenSlices(chunks, slices / 2);
    }
    return slices;
  };
  const int warps = defaultWarps(dims->T);
  return Config{32 * warps, slicesFor(warps), mma ? 1 : 0, 0};
}

CudaUnit MhcMixFamily::unit(const Config& c, const OpDesc& d, const std::string& baseName) const {
  CudaUnit u;
  auto g = streamGeometryOf(modeOf(fused_), c, d, residualName(), opName());
  if (g->oneLaunch) {
    u.source = "#include \"MhcOneLaunch.cuh\"\n" + streamEntry(modeOf(fused_), *g, baseName);
    u.entries = {baseName};
    return u;
  }
  u.source = "#include \"MhcStream.cuh\"\n#include \"MhcFinalize.cuh\"\n";
  u.source += streamEntry(modeOf(fused_), *g, baseName);
  u.source += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}_finalize(const di::MhcParams p) {{\n"
      "  di::grid_dependency_sync();\n"
      "  di::mhc_finalize_kernel<{0}>(p);\n}}\n",
      kFinalizeThreads, baseName);
  u.entries = {baseName, baseName + "_finalize"};
  return u;
}

std::vector<LaunchStep> MhcMixFamily::plan(const Config& c, const OpDesc& d, const std::string& baseName) const {
  auto dims = residualDims(d, residualName());
  auto g = streamGeometry(modeOf(fused_), c, *dims, opName());
  LaunchStep stream{
      baseName, {uint32_t(g->tiles), uint32_t(g->slices), 1}, {uint32_t(32 * g->warps), 1, 1}, 0};
  if (g->oneLaunch) return {stream};
  LaunchStep finalize{
      baseName + "_finalize", {uint32_t(dims->T), 1, 1}, {uint32_t(kFinalizeThreads), 1, 1}, 0};
  return {stream, finalize};
}

int64_t MhcMixFamily::workspace(const Config& c, const OpDesc& d) const {
  auto dims = residualDims(d, residualName());
  auto g = streamGeometry(modeOf(fused_), c, *dims, opName());
  return g->slices * dims->T * di::kMhcRecord * int64_t(sizeof(float));
}

int64_t MhcMixFamily::zeroedWorkspace(const Config& c, const OpDesc& d) const {
  auto dims = residualDims(d, residualName());
  auto g = streamGeometry(modeOf(fused_), c, *dims, opName());
  return g->oneLaunch ? arrivalBytes(*g) : 0;
}

Result<std::vector<uint8_t>> MhcMixFamily::params(const Config& c, const OpDesc& d,
                                                  const DeviceAddrMap& addrs) const {
  DI_TRY(validate(d));
  const Dims dims = residualDims(d, residualName()).value();
  auto g = streamGeometry(modeOf(fused_), c, dims, opName());
  const std::string op = opName();
  di::MhcParams p{};
  DI_TRY(bindAddr(p.residual, addrs, residualName(), op, 16));
  if (fused_) {
    DI_TRY(bindAddr(p.f_out, addrs, "f_out", op, 16));
    DI_TRY(bindAddr(p.post_in, addrs, "post", op, 16));
    DI_TRY(bindAddr(p.comb_in, addrs, "comb", op, 16));
    DI_TRY(bindAddr(p.x_out, addrs, "x", op, 16));
  }
  DI_TRY(bindAddr(p.fn, addrs, "fn", op, 16));
  DI_TRY(bindAddr(p.scale, addrs, "scale", op, 4));
  DI_TRY(bindAddr(p.base, addrs, "base", op, 4));
  DI_TRY(bindAddr(p.collapse_w, addrs, "pre_in", op, 16));
  DI_TRY(bindAddr(p.norm_weight, addrs, "norm_weight", op, 16));
  DI_TRY(bindAddr(p.h_out, addrs, "layer_input", op, 16));
  DI_TRY(bindAddr(p.pre_out, addrs, "pre", op, 4));
  // In the fused op `post`/`comb` are also inputs, read as 16-byte rows.
  DI_TRY(bindAddr(p.post_out, addrs, "post", op, fused_ ? 16 : 4));
  DI_TRY(bindAddr(p.comb_out, addrs, "comb", op, 16));  // stored as 16-byte rows
  DI_TRY(bindAddr(p.partials, addrs, "__workspace", op, 16));
  if (g->oneLaunch) DI_TRY(bindAddr(p.arrivals, addrs, "__zeroed", op, 4));
  setShapes(p, dims, *g);
  const OpAttrs attrs = mixAttrs(d).value();  // validated above
  p.sinkhorn_iters = int32_t(attrs.getInt("sinkhorn_iters", 0));
  p.rms_eps = float(attrs.getFloat("rms_eps", 0.0));
  p.hc_eps = float(attrs.getFloat("hc_eps", 0.0));
  p.norm_eps = float(attrs.getFloat("norm_eps", 0.0));
  return paramBytes(p);
}

}  // namespace deepinfer
