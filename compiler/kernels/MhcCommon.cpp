// Shared host code of the mHC kernel families; see MhcCommon.h.
#include "MhcCommon.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "deepinfer/HostRandom.h"
#include "deepinfer/OpSignature.h"

namespace deepinfer::mhc {

std::string shapeString(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

Result<Dims> residualDims(const OpDesc& d, const std::string& tensor) {
  if (!d.hasTensor(tensor))
    return Error{fmt::format("{}: missing tensor `{}` [T, 4, C]", d.op, tensor)};
  const auto& s = d.shapes.at(tensor);
  if (s.size() != 3) {
    return Error{
        fmt::format("{}: {} has shape {}; expected [T, 4, C]", d.op, tensor, shapeString(s))};
  }
  if (s[1] != kStreams) {
    return Error{fmt::format("{}: {} has {} streams (shape {}); mHC needs n = 4 streams, [T, 4, C]",
                             d.op, tensor, s[1], shapeString(s))};
  }
  if (s[0] < 1 || s[0] > int64_t(INT32_MAX)) {
    return Error{fmt::format("{}: {} has T = {} tokens (shape {}); need 1 <= T <= {}", d.op, tensor,
                             s[0], shapeString(s), INT32_MAX)};
  }
  if (s[2] < kChunk || s[2] % kChunk != 0 || s[2] > kMaxC) {
    return Error{fmt::format(
        "{}: {} has hidden size C = {} (shape {}); C must be a positive multiple of {} up to {}",
        d.op, tensor, s[2], shapeString(s), kChunk, kMaxC)};
  }
  return Dims{s[0], s[2]};
}

Status expectDims(const OpDesc& d, const std::string& tensor, const std::vector<int64_t>& shape) {
  if (!d.hasTensor(tensor)) {
    return Error{fmt::format("{}: missing tensor `{}` {}", d.op, tensor, shapeString(shape))};
  }
  const auto& s = d.shapes.at(tensor);
  if (s != shape) {
    return Error{fmt::format("{}: {} has shape {}; expected {}", d.op, tensor, shapeString(s),
                             shapeString(shape))};
  }
  return {};
}

Result<OpAttrs> mixAttrs(const OpDesc& d) {
  // Defaults of absent optional attributes come from the op's signature (the one table).
  OpAttrs attrs = d.attrs;
  if (const OpSignature* sig = findOpSignature(d.op)) {
    auto full = completeAttrs(*sig, d.attrs);
    if (!full) return full.error();
    attrs = std::move(full.value());
  }
  for (const char* name : {"rms_eps", "hc_eps", "norm_eps"}) {
    if (!attrs.has(name)) return Error{fmt::format("{}: missing attribute `{}`", d.op, name)};
    const double v = attrs.getFloat(name, 0.0);
    if (!(v > 0.0) || !std::isfinite(v) || float(v) <= 0.f) {
      return Error{
          fmt::format("{}: attribute {} = {}; it must be a finite value > 0 (and not "
                      "underflow in fp32)",
                      d.op, name, v)};
    }
  }
  if (!attrs.has("sinkhorn_iters")) {
    return Error{fmt::format("{}: missing attribute `sinkhorn_iters`", d.op)};
  }
  const auto& a = attrs.all().at("sinkhorn_iters");
  const double iters = a.isInt ? double(a.i) : a.f;
  if (iters < 1 || iters != std::floor(iters) || iters > 1e6) {
    return Error{
        fmt::format("{}: attribute sinkhorn_iters = {}; it must be an integer in 1..1000000 "
                    "(total Sinkhorn rounds, 20 in V4.1)",
                    d.op, iters)};
  }
  return attrs;
}

Status checkMixTensors(const OpDesc& d, const Dims& dims) {
  DI_TRY(expectDims(d, "fn", {kMix, kStreams * dims.C}));
  DI_TRY(expectDims(d, "scale", {3}));
  DI_TRY(expectDims(d, "base", {kMix}));
  DI_TRY(expectDims(d, "pre_in", {dims.T, kStreams}));
  DI_TRY(expectDims(d, "norm_weight", {dims.C}));
  return {};
}

int defaultWarps(int64_t T) { return int(std::min<int64_t>(4, (T + 15) / 16)); }

std::vector<int> warpChoices(int64_t T) {
  std::set<int> w{1, 2, 4, 8, defaultWarps(T)};
  std::vector<int> out;
  for (int k : w)
    if ((k - 1) * 16 < T) out.push_back(k);  // no warp without a token
  return out;
}

int64_t evenSlices(int64_t chunks, int64_t slices) {
  slices = std::clamp<int64_t>(slices, 1, chunks);
  const int64_t per = (chunks + slices - 1) / slices;
  return (chunks + per - 1) / per;
}

Result<StreamGeometry> streamGeometry(Mode mode, int64_t threads, int64_t slices, int64_t mma, int64_t oneLaunch,
                                      const Dims& dims, const std::string& op) {
  StreamGeometry g;
  if (threads < 32 || threads > 256 || threads % 32 != 0) {
    return Error{
        fmt::format("{}: config threads = {}; expected a multiple of 32 in 32..256 (one "
                    "16-token tile per warp)",
                    op, threads)};
  }
  g.warps = int(threads / 32);
  const int64_t chunks = dims.C / kChunk;
  if (slices < 1 || slices > chunks) {
    return Error{fmt::format("{}: config k_slices = {}; expected 1..{} (C / {})", op, slices,
                             chunks, kChunk)};
  }
  g.chunksPerSlice = (chunks + slices - 1) / slices;
  g.slices = (chunks + g.chunksPerSlice - 1) / g.chunksPerSlice;
  if (hasMix(mode)) {
    if (mma != 0 && mma != 1) {
      return Error{fmt::format("{}: config use_mma = {}; expected 0 or 1", op, mma)};
    }
    g.mma = mma == 1;
  }
  if (oneLaunch != 0 && oneLaunch != 1) {
    return Error{fmt::format("{}: config one_launch = {}; expected 0 or 1", op, oneLaunch)};
  }
  g.oneLaunch = oneLaunch == 1;
  if (g.oneLaunch && !hasMix(mode) && mode != Mode::Post) {
    return Error{fmt::format("{}: config one_launch = 1; only the mix ops and mhc_post have a reduction", op)};
  }
  if (g.oneLaunch && dims.T > kOneLaunchMaxT) {
    return Error{fmt::format("{}: config one_launch = 1 with T = {} tokens; one-launch plans are for T <= {} "
                             "(the last CTA of a tile finalizes all its tokens)",
                             op, dims.T, kOneLaunchMaxT)};
  }
  const int64_t tileTokens = 16 * int64_t(g.warps);
  g.tiles = (dims.T + tileTokens - 1) / tileTokens;
  return g;
}

int64_t streamSmemBytes(Mode mode, int warps, bool oneLaunch) {
  // fn staging: 2 buffers x 24 rows x (4 x 32 + 4) floats; coefficients: 16 tokens per warp x 24.
  const int64_t fnStage = hasMix(mode) ? 2 * kMix * (4 * kChunk + 4) * 4 : 0;
  const int64_t coef = hasPost(mode) ? int64_t(16) * warps * 24 * 4 : 0;
  int64_t finalize = 0;
  if (oneLaunch) {
    // The arrival flag; mix: slot sums and totals (2 x 32 tokens x 28 floats) and scale/base
    // (27 floats); post: one float per thread.
    finalize = 4 + (hasMix(mode) ? 2 * 32 * 28 * 4 + 27 * 4 : int64_t(32) * warps * 4);
  }
  return fnStage + coef + finalize;
}

int streamRegs(Mode mode, bool mma, int warps, bool oneLaunch) {
  if (oneLaunch) return 128;  // held there by the entry's __launch_bounds__ (streamEntry)
  // Maximum over sm_80/86/89/90 of ptxas -v (CUDA 13.0), rounded up to a multiple of 8, for
  // 1, 2, 3, 4 and 8 warps per CTA; ptxas spends more registers when the CTA is small. Other
  // warp counts get the mode's maximum.
  struct Row {
    Mode mode;
    bool mma;
    int regs[5];  // warps 1, 2, 3, 4, 8
  };
  static const Row kRows[] = {
      {Mode::Pre, true, {120, 120, 96, 104, 96}},
      {Mode::Pre, false, {224, 224, 224, 224, 224}},
      {Mode::Fused, true, {208, 200, 160, 160, 128}},
      {Mode::Fused, false, {232, 224, 232, 232, 232}},
      {Mode::Post, false, {168, 168, 168, 168, 128}},
      {Mode::Collapse, false, {88, 72, 56, 56, 64}},
  };
  const bool useMma = hasMix(mode) && mma;
  for (const Row& r : kRows) {
    if (r.mode != mode || r.mma != useMma) continue;
    switch (warps) {
      case 1:
        return r.regs[0];
      case 2:
        return r.regs[1];
      case 3:
        return r.regs[2];
      case 4:
        return r.regs[3];
      case 8:
        return r.regs[4];
      default:
        return *std::max_element(std::begin(r.regs), std::end(r.regs));
    }
  }
  return 255;
}

int64_t residentCtasPerSm(const TargetProfile& t, int threads, int regs, int64_t smem) {
  const ArchFacts& f = t.facts;
  const int warps = (threads + 31) / 32;
  int64_t n = f.maxCtasPerSm > 0 ? f.maxCtasPerSm : 16;
  if (f.maxWarpsPerSm > 0) n = std::min<int64_t>(n, f.maxWarpsPerSm / warps);
  // Registers are allocated per warp in units of 256 (8 per thread).
  const int64_t regsPerWarp = int64_t((regs + 7) / 8 * 8) * 32;
  if (f.regsPerSm > 0) n = std::min<int64_t>(n, f.regsPerSm / (regsPerWarp * warps));
  // sm_80+ reserve 1 KB of shared memory per resident CTA.
  if (smem > 0 && f.smemPerSm > 0) n = std::min<int64_t>(n, f.smemPerSm / (smem + 1024));
  return std::max<int64_t>(n, 1);
}

int64_t occupancySlices(const TargetProfile& t, int64_t tiles, int64_t chunks, int threads,
                        int regs, int64_t smem) {
  const int64_t target = std::max(1, t.smCount) * residentCtasPerSm(t, threads, regs, smem);
  return evenSlices(chunks, (target + tiles - 1) / tiles);
}

std::string streamEntry(Mode mode, const StreamGeometry& g, const std::string& name) {
  static const char* const kModeNames[] = {"di::kMhcModePre", "di::kMhcModeFused",
                                           "di::kMhcModePost", "di::kMhcModeCollapse"};
  // One-launch kernels are held to 128 registers (a minimum of 64K / (threads x 128) resident
  // CTAs): with more, the 8-warp fused kernel (~172 registers with 16 record loads in flight)
  // would hold one CTA per SM and the default 160-slice grid would need a second wave on 132 SMs.
  // The finalize's batches (8 record loads, 4 norm vectors) keep every default spill-free there.
  const std::string bounds = g.oneLaunch ? fmt::format("{}, {}", 32 * g.warps, 65536 / (32 * g.warps * 128))
                                         : fmt::format("{}", 32 * g.warps);
  return fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const di::MhcParams p) {{\n"
      "  di::grid_dependency_sync();\n"
      "  di::{}<{}, {}, {}>(p);\n}}\n",
      bounds, name, g.oneLaunch ? "mhc_one_launch_kernel" : "mhc_stream_kernel", kModeNames[int(mode)], g.warps,
      g.mma ? "true" : "false");
}

Result<uint64_t> requireAddr(const DeviceAddrMap& a, const std::string& name, const std::string& op,
                             uint64_t align) {
  auto it = a.find(name);
  if (it == a.end() || it->second == 0) {
    return Error{fmt::format("{}: no device address for tensor `{}`", op, name)};
  }
  if (it->second % align != 0) {
    return Error{
        fmt::format("{}: tensor `{}` at 0x{:x} is not {}-byte aligned (the kernels access "
                    "it with {}-byte vectors)",
                    op, name, it->second, align, align)};
  }
  return it->second;
}

std::vector<ShapeParam> shapeParams() { return {{"T", 6, "tokens"}, {"C", 5120, "hidden size"}}; }

OpDesc describe(const std::string& op, const ShapeParams& p) {
  const int64_t T = p.at("T"), C = p.at("C");
  OpDesc d;
  d.op = op;
  auto& s = d.shapes;
  auto mixesIn = [&] {
    s["fn"] = {kMix, kStreams * C};
    s["scale"] = {3};
    s["base"] = {kMix};
    s["pre_in"] = {T, kStreams};
    s["norm_weight"] = {C};
  };
  if (op == "mhc_pre") {
    s["x"] = {T, kStreams, C};
    mixesIn();
  } else if (op == "mhc_post" || op == "mhc_fused_post_pre") {
    s["f_out"] = {T, C};
    s["residual"] = {T, kStreams, C};
    s["post"] = {T, kStreams};
    s["comb"] = {T, kStreams, kStreams};
    if (op == "mhc_fused_post_pre") mixesIn();
  } else {
    s["x"] = {T, kStreams, C};
    s["pre"] = {T, kStreams};
  }
  return d;
}

std::vector<std::pair<std::string, ShapeParams>> compileShapes() { return {{"default", {}}, {"T=64", {{"T", 64}}}}; }

BucketAxis bucketAxis() { return {"T", {1, 2, 4, 8, 15, 64, 256, 1024, 4096}}; }

TuneShape tuneShape(const ModelDims& m, int64_t v) {
  const ShapeParams p{{"T", v}, {"C", m.hidden}};
  return {p, p};
}

AccuracyRule accuracy(const std::string& out) {
  using K = AccuracyRule::Kind;
  if (out == "pre" || out == "post" || out == "comb") return {K::Abs, 2e-3, "max abs error"};
  if (out == "sqrsum") return {K::Relative, 2e-5, "max relative error"};
  return {K::Bf16Ulps, 2, "bf16 ulps (beyond 2^-14 of the row's max)"};
}

void setShapes(di::MhcParams& p, const Dims& dims, const StreamGeometry& g) {
  p.T = dims.T;
  p.C = int32_t(dims.C);
  p.chunks_per_slice = int32_t(g.chunksPerSlice);
  p.num_partials = int32_t(g.slices);
}


int64_t defaultSlices(Mode mode, bool mma, const TargetProfile& t, int64_t tiles, int64_t chunks,
                      int warps) {
  return occupancySlices(t, tiles, chunks, 32 * warps, streamRegs(mode, mma, warps),
                         streamSmemBytes(mode, warps));
}

namespace {

HostTensor residualStreams(Rng& rng, const ValuePool<uint16_t>& pool, int64_t T, int64_t C) {
  HostTensor x = bf16FromPool(rng, pool, {T, kStreams, C});
  for (int64_t t = 0; t < T; ++t) {
    const float s = float(0.5 + 3.5 * rng.uniform());
    uint16_t* row = x.ptr<uint16_t>() + t * kStreams * C;
    for (int64_t i = 0; i < kStreams * C; ++i) row[i] = floatToBf16(bf16ToFloat(row[i]) * s);
  }
  return x;
}

}  // namespace

Result<BenchInputs> benchInputs(const KernelFamily& family, Mode mode, BenchInputContext& ctx) {
  BenchParams& p = ctx.params;
  Rng& rng = ctx.rng;
  const int64_t T = p.get("T", 6), C = p.get("C", 5120);
  DI_TRY(p.require(T >= 1 && C >= 128 && C % 128 == 0, "needs T >= 1 and C a positive multiple of 128"));
  const auto pool = bf16NormalPool(rng);
  BenchInputs in;
  if (hasPost(mode)) {
    in.inputs["f_out"] = bf16FromPool(rng, pool, {T, C});
    in.inputs["residual"] = residualStreams(rng, pool, T, C);
    in.inputs["post"] = f32Uniform(rng, {T, kStreams}, 0.05, 1.95);
    in.inputs["comb"] = f32Uniform(rng, {T, kStreams, kStreams}, 0.02, 0.5);
  }
  if (hasMix(mode)) {
    if (mode == Mode::Pre) in.inputs["x"] = residualStreams(rng, pool, T, C);
    const auto fnPool = f32NormalPool(rng, 1.0 / std::sqrt(4.0 * double(C)));
    in.inputs["fn"] = f32FromPool(rng, fnPool, {kMix, kStreams * C});
    in.inputs["scale"] = f32Uniform(rng, {3}, 0.5, 1.5);
    in.inputs["base"] = f32Normal(rng, {kMix}, 0.5);
    in.inputs["pre_in"] = f32Uniform(rng, {T, kStreams}, 0.1, 1.1);
    in.inputs["norm_weight"] = bf16Normal(rng, {C}, 0.1, 1.0);
    // The model's values (docs/model.md §1: rms_norm_eps 1e-20, hc_eps 1e-6, 20 Sinkhorn rounds).
    in.attrs.setFloat("rms_eps", 1e-20);
    in.attrs.setFloat("hc_eps", 1e-6);
    in.attrs.setInt("sinkhorn_iters", 20);
    in.attrs.setFloat("norm_eps", 1e-20);
    in.flops = 2.0 * double(T) * kMix * kStreams * double(C);  // the mix GEMM
  }
  if (mode == Mode::Collapse) {
    in.inputs["x"] = residualStreams(rng, pool, T, C);
    in.inputs["pre"] = f32Uniform(rng, {T, kStreams}, 0.1, 1.1);
  }
  auto bytes = denseBytes(family, in);
  if (!bytes.ok()) return bytes.error();
  in.bytes = *bytes;
  auto outPerRow = outputElementsPerRow(family, in);
  if (!outPerRow.ok()) return outPerRow.error();
  // Tokens are independent; the fp64 reference of the mix GEMM dominates: 24 * 4C multiply-adds
  // per token.
  BenchRowSplit split{T, hasMix(mode) ? 2.0 * kMix * kStreams * double(C) : 40.0 * double(C), *outPerRow, {}};
  for (const char* n : {"x", "f_out", "residual", "post", "comb", "pre_in", "pre"})
    if (in.inputs.count(n)) split.inputs.push_back(n);
  in.rowSplit = split;
  return in;
}

}  // namespace deepinfer::mhc
