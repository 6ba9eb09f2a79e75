// Kernel family of moe_experts (templates/MoeExperts.cuh): the routed experts of the MoE
// sublayer over e2m1 weights, grouped by expert on the device in three launches (route, w1/w3
// with the SwiGLU, w2).
//
// Knob `stream` picks the GEMMs' schedule. stream = 3 (a candidate up to 16 expected rows per
// expert until measured; ringDefault below): stream = 1's GEMMs with each warp's rounds copied by
// cp.async into a shared-memory ring of `stages` slots (2..8), S - 1 rounds in flight while one
// multiplies. stream = 1 (templates/MoeStream.cuh, the default up to 16 expected rows per expert): the weight-streaming core of templates/WeightStream.cuh with
// gathered rows; block_m 8 or 16 (rows per row block), block_n = 16 x warps_n (weight rows per
// CTA, w13 and w2 alike), warps_k (K split inside the CTA), block_k = w13's steps of 128 columns
// per round (w2 keeps twice that, at most 4); warps_m = stages = 1. Default: 8-row blocks, 4 warps
// over N, 2 steps, warps over K doubled while the active experts' warp tiles leave SMs short of
// ~12 warps. stream = 2: the same with double-buffered rounds (a round's loads in flight while the
// previous one multiplies; a candidate). stream = 0: the cp.async tile below.
// Knobs: the CTA tile of the w1/w3 GEMM (QuantTileGeometry.h: block_m/n/k, warps_m/n/k, stages;
// block_n counts h columns, so a CTA multiplies 2 * block_n weight rows); the w2 GEMM uses the
// same tile with 2 * block_n output columns (the same weight bytes per stage). Default heuristic,
// from the expected rows per expert (T * k / E):
//  - up to 16 (decode steps, small batches): one m16 tile of block_m = T rounded up to a power of
//    two (at most 16; shared memory and copies only for those rows), 4 warps over N in block
//    order (block_k 128), block_n 64 (8 KB of weights per stage; 32 when the active experts' column tiles
//    would leave SMs idle), as many stages as fit 48 KB (64 KB where the cap is lifted): every
//    expert's weights are streamed once, spread over all SMs;
//  - up to 64: 64-row tiles, above: 128-row tiles, on 2 x 2 warps with block_n 64 (w2: 128),
//    block_k 32 and 5 stages where the cap allows (under a 48 KB cap: 4 stages, 128-row tiles
//    narrowed to block_n 32): tensor-core bound, each stage's weights decoded once per CTA.
//    Candidates add 8 warps over twice the columns (block_n 128, w2 256; block_k 32 and 64) and
//    256-row tiles at block_k 64 (not measured yet: defaults change once measured).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "Families.h"
#include "QuantTileGeometry.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/EncodedInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "params/MoeExpertsParams.h"

namespace deepinfer {
namespace {

constexpr const char* kOp = "moe_experts";
constexpr int64_t kMaxEntries = 524288;  // T * k: keeps the row-block grid under 65535
constexpr int64_t kMaxExperts = 8192;
constexpr int kRouteThreads = 1024;
constexpr int kRouteWarps = 32;

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t align256(int64_t b) { return (b + 255) / 256 * 256; }

struct Shape {
  int64_t T, k, E, C, I;
  int64_t entries() const { return T * k; }
};

Shape shapeOf(const OpDesc& d) {
  return {d.dim("x", 0), d.dim("ids", 1), d.dim("w1", 0), d.dim("x", 1), d.dim("w1", 1)};
}

struct MoeExpertsConfig : QuantTileKnobs {
  int64_t stream = 0;  // 1: the weight-streaming GEMMs (templates/MoeStream.cuh); 2: double-buffered
                       // rounds; 3: through a shared-memory ring
  static constexpr auto fields() {
    using F = ConfigField<MoeExpertsConfig>;
    return std::array{F{"block_m", &MoeExpertsConfig::blockM}, F{"block_n", &MoeExpertsConfig::blockN},
                      F{"block_k", &MoeExpertsConfig::blockK}, F{"warps_m", &MoeExpertsConfig::warpsM},
                      F{"warps_n", &MoeExpertsConfig::warpsN}, F{"warps_k", &MoeExpertsConfig::warpsK},
                      F{"stages", &MoeExpertsConfig::stages},  F{"stream", &MoeExpertsConfig::stream}};
  }
};

// The streaming GEMMs seen from the host: row blocks of 8 * nt8 grouped rows, wn x wk warps of
// 16 weight rows each; w13 keeps u13 steps (128 e2m1 columns of w1 and w3) per round in flight,
// w2 (one matrix) twice that, at most 4.
struct StreamGemms {
  int nt8 = 1, wn = 4, wk = 1, u13 = 2;
  bool pipe = false;  // stream = 2: double-buffered rounds
  int ring = 0;        // stream = 3: slots of each warp's cp.async ring (ws::ring_core); 0: none
  int u2() const { return std::min(4, 2 * u13); }
  int rows() const { return 8 * nt8; }
  int threads() const { return 32 * wn * wk; }
  // Mirrors ws::stream_core's reduction: the wk partial tiles of two matrices (w13) or one.
  // Then the rings (ws::ring_smem_bytes): per warp, `ring` slots of 16 rows x the round's steps x
  // 64 bytes per matrix (w13: two matrices of u13 steps; w2: one of u2).
  int64_t smemBytes(int mats) const {
    const int64_t unroll = mats == 2 ? u13 : u2();
    return int64_t(wk - 1) * wn * mats * nt8 * 4 * 32 * 4 + int64_t(wn) * wk * ring * mats * unroll * 16 * 64;
  }
  // 128 registers a thread (168 with double-buffered rounds: two rounds' loads live).
  int minBlocks() const { return std::max(1, 65536 / (threads() * (pipe ? 168 : 128))); }
  int regsCap() const { return std::min(255, 65536 / (threads() * minBlocks()) / 8 * 8); }
};

struct Geometry {
  QuantTile t13, t2;
  bool stream = false;
  StreamGemms st;
  int64_t maxRowBlocks = 0;
  int rows() const { return stream ? st.rows() : t13.bm; }
  int64_t cols13() const { return stream ? 16 * st.wn : t13.bn; }  // h columns per w13 CTA
  int64_t cols2() const { return stream ? 16 * st.wn : t2.bn; }    // y columns per w2 CTA
  int threads() const { return stream ? st.threads() : t13.threads(); }
  int64_t smem13() const { return stream ? st.smemBytes(2) : t13.smemBytes(); }
  int64_t smem2() const { return stream ? st.smemBytes(1) : t2.smemBytes(); }
  int regsCap() const { return stream ? st.regsCap() : std::max(t13.regsCap(), t2.regsCap()); }
};

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The streaming knobs: block_m 8 or 16 (rows per row block), block_n = 16 x warps_n (h columns
// of a w13 CTA and y columns of a w2 CTA), warps_k a power of two with warps_n x warps_k <= 16,
// block_k = 1, 2, 4 or 8 steps of 128 columns (w13's steps per round), warps_m = stages = 1.
Result<StreamGemms> streamOf(const MoeExpertsConfig& c, const std::string& cfg) {
  auto bad = [&](const std::string& what) {
    return Error{fmt::format("{}: stream = {}: {} ({})", kOp, c.stream, what, cfg)};
  };
  if (c.stream < 1 || c.stream > 3) return bad("stream must be 0, 1, 2 or 3");
  if (c.blockM != 8 && c.blockM != 16) return bad(fmt::format("block_m = {} must be 8 or 16", c.blockM));
  if (c.warpsN != 1 && c.warpsN != 2 && c.warpsN != 4) return bad(fmt::format("warps_n = {} must be 1, 2 or 4", c.warpsN));
  if (!pow2(c.warpsK) || c.warpsK * c.warpsN > 16)
    return bad(fmt::format("warps_k = {} must be a power of two with warps_n x warps_k <= 16", c.warpsK));
  if (c.blockN != 16 * c.warpsN) return bad(fmt::format("block_n = {} must be 16 x warps_n", c.blockN));
  const int64_t u = c.blockK / 128;
  if (c.blockK % 128 != 0 || !pow2(u) || u > 8)
    return bad(fmt::format("block_k = {} must be 1, 2, 4 or 8 steps of 128 columns", c.blockK));
  if (c.stream == 3 && c.warpsM != 1) return bad(fmt::format("warps_m = {} must be 1", c.warpsM));
  if (c.stream == 3 && (c.stages < 2 || c.stages > 8))
    return bad(fmt::format("stages = {} (the ring's slots per warp) must be in 2..8", c.stages));
  if (c.stream != 3 && (c.warpsM != 1 || c.stages != 1))
    return bad(fmt::format("warps_m = {}, stages = {} must both be 1", c.warpsM, c.stages));
  StreamGemms g;
  g.nt8 = int(c.blockM / 8);
  g.wn = int(c.warpsN);
  g.wk = int(c.warpsK);
  g.u13 = int(u);
  g.pipe = c.stream == 2;
  g.ring = c.stream == 3 ? int(c.stages) : 0;
  return g;
}

Result<Geometry> geometry(const MoeExpertsConfig& c, const OpDesc& d) {
  const std::string cfg = configToString(toKnobs(c));
  if (c.stream != 0) {
    auto st = streamOf(c, cfg);
    if (!st.ok()) return st.error();
    const Shape s = shapeOf(d);
    Geometry g;
    g.stream = true;
    g.st = *st;
    g.maxRowBlocks = cdiv(s.entries(), g.st.rows()) + std::min(s.E, s.entries());
    if (g.maxRowBlocks > 65535)
      return Error{fmt::format("{}: {} entries in blocks of {} rows need up to {} row blocks; at most 65535", kOp,
                               s.entries(), g.st.rows(), g.maxRowBlocks)};
    return g;
  }
  auto t13 = quantTileOf(c, cfg, kOp, true, true, 1);
  if (!t13.ok()) return t13.error();
  auto t2 = quantTileOf(c, cfg, kOp, true, false, 2);
  if (!t2.ok()) return t2.error();
  const Shape s = shapeOf(d);
  Geometry g;
  g.t13 = *t13;
  g.t2 = *t2;
  g.maxRowBlocks = cdiv(s.entries(), t13->bm) + std::min(s.E, s.entries());
  if (g.maxRowBlocks > 65535)
    return Error{fmt::format("{}: {} entries in blocks of {} rows need up to {} row blocks; at most 65535", kOp,
                             s.entries(), t13->bm, g.maxRowBlocks)};
  return g;
}

// Workspace sections, in order (each 256-byte aligned).
struct Workspace {
  int64_t counts, numRowBlocks, rbExpert, rbStart, rbRows, rowToken, rowDest, rowWeight, h, total;
};
Workspace workspaceOf(const Shape& s, int64_t maxRowBlocks) {
  Workspace w{};
  int64_t off = 0;
  auto take = [&](int64_t bytes) {
    const int64_t at = off;
    off += align256(bytes);
    return at;
  };
  w.counts = take(kRouteWarps * s.E * 4);
  w.numRowBlocks = take(4);
  w.rbExpert = take(maxRowBlocks * 4);
  w.rbStart = take(maxRowBlocks * 4);
  w.rbRows = take(maxRowBlocks * 4);
  w.rowToken = take(s.entries() * 4);
  w.rowDest = take(s.entries() * 4);
  w.rowWeight = take(s.entries() * 4);
  w.h = take(s.entries() * s.I * 2);
  w.total = off;
  return w;
}

// Up to 16 expected rows per expert: decode steps and small batches.
bool decodeRows(const Shape& s) { return double(s.entries()) / double(std::max<int64_t>(s.E, 1)) <= 16; }

QuantTile defaultTile(const Shape& s, const TargetProfile& t) {
  QuantTile q;
  q.fp4 = true;
  q.gated = true;
  const double rows = double(s.entries()) / double(std::max<int64_t>(s.E, 1));
  q.bn = 64;
  if (rows <= 16) {
    // Rows per row block: up to T (the most one expert gets when a token's ids differ), at most 16.
    q.bm = decodeBlockM(s.T);
    // Spread the active experts' weight streams over every SM: narrower column tiles when
    // block_n 64 gives fewer than two w1/w3 CTAs per SM.
    const int64_t active = std::min(s.E, s.entries());
    if (active * cdiv(s.I, 64) < 2 * int64_t(std::max(1, t.smCount))) q.bn = 32;
    q.wm = 1;
    q.wn = 4;  // block order: a thread decodes whole k32 blocks (QuantGemmTile.cuh)
    q.wk = 1;
    q.bk = 128;
    const int64_t budget = std::min<int64_t>(t.smemPerCtaCap, 64 * 1024);
    q.stages = 2;
    while (q.stages < 8) {
      QuantTile more = q;
      ++more.stages;
      if (more.smemBytes() > budget) break;
      q = more;
    }
    return q;
  }
  q.bm = rows <= 64 ? 64 : 128;
  q.wm = 2;
  q.wn = 2;
  q.wk = 1;
  q.bk = 32;
  q.stages = t.smemPerCtaCap >= 96 * 1024 ? 5 : 4;
  if (t.smemPerCtaCap >= 160 * 1024) {
    // Measured on the H200 (sm_90, a5b191f, E=128 T=16384): block_k 64 at 3 stages, 29.2 -> 26.4 ms.
    q.bk = 64;
    q.stages = 3;
  }
  return fitPrefillTile(q, t);
}

MoeExpertsConfig configOf(const StreamGemms& q) {
  MoeExpertsConfig c;
  c.blockM = q.rows();
  c.blockN = 16 * q.wn;
  c.blockK = 128 * q.u13;
  c.warpsM = 1;
  c.warpsN = q.wn;
  c.warpsK = q.wk;
  c.stages = q.ring > 0 ? q.ring : 1;
  c.stream = q.ring > 0 ? 3 : q.pipe ? 2 : 1;
  return c;
}

// The streaming default at decode sizes: 8-row blocks (a decode step's experts get a row or two),
// 2 steps per w13 round (4 for w2), 4 warps over the weight rows of a CTA; warps over K doubled
// while the active experts' 16-row tiles would give the SMs fewer than 16 warps each (what an SM
// holds of these kernels: 4 CTAs of 4 warps at up to 128 registers) and every warp keeps two
// rounds of w13 (at most 8). Measured on the H200 at E=128 T=1 (864 tiles: 6.5 warps per SM
// with one warp over K): 2 warps over K 67.6 vs 73.0 us (cad8211) and 64.9 vs 71.6 (5a077b5);
// the rule at 12 warps per SM had kept 1.
StreamGemms streamDefault(const Shape& s, const TargetProfile& t) {
  StreamGemms q;
  q.nt8 = 1;
  q.u13 = 2;
  q.wn = 4;
  q.wk = 1;
  const int64_t active = std::max<int64_t>(1, std::min(s.E, s.entries()));
  const int64_t tiles = active * cdiv(s.I, 16), steps = cdiv(s.C, 128);
  const int64_t want = 16 * int64_t(std::max(1, t.smCount));
  while (q.wk < 8 && q.wn * q.wk * 2 <= 16 && tiles * q.wk * 2 <= want && steps >= int64_t(4 * q.wk) * q.u13) q.wk *= 2;
  return q;
}

// The ring (stream = 3): streamDefault's blocks and warps at 1 step per w13 round (w2: 2), so a
// slot is 2 KB per warp in both GEMMs; then the fewest slots (at least 3, at most 8) that keep
// 48 KB of weights in flight per SM in w13 (S - 1 slots per warp times the active experts' warps
// per SM; WeightGemmFamily.cpp's ringTile says where 48 KB comes from), within the CTA's share of
// shared memory (the target's cap, and the SM's memory over its resident CTAs).
StreamGemms ringDefault(const Shape& s, const TargetProfile& t) {
  StreamGemms q = streamDefault(s, t);
  q.u13 = 1;
  const int64_t sms = std::max(1, t.smCount);
  const int64_t active = std::max<int64_t>(1, std::min(s.E, s.entries()));
  const int64_t ctas = active * cdiv(s.I, 16 * q.wn);
  const double warpsPerSm = double(ctas * q.wn * q.wk) / double(sms);
  const int64_t ctasPerSm = std::min<int64_t>(cdiv(ctas, sms), q.minBlocks());
  int64_t budget = t.smemPerCtaCap;
  if (t.facts.smemPerSm > 0) budget = std::min(budget, t.facts.smemPerSm / ctasPerSm - 1024);
  const int64_t rounds = cdiv(cdiv(s.C, 128), int64_t(q.wk) * q.u13);
  q.ring = 2;
  while (q.ring < 8 && q.ring <= rounds && (q.ring < 3 || (q.ring - 1) * 2048.0 * warpsPerSm < 48.0 * 1024)) {
    StreamGemms more = q;
    ++more.ring;
    if (std::max(more.smemBytes(1), more.smemBytes(2)) > budget) break;
    q = more;
  }
  return q;
}

MoeExpertsConfig configOf(const QuantTile& q) {
  MoeExpertsConfig c;
  setTileKnobs(c, q);
  return c;
}

class MoeExpertsFamily final : public TypedKernelFamily<MoeExpertsConfig> {
 public:
  std::string opName() const override { return kOp; }

  std::vector<std::string> templateHeaders() const override {
    return {"MoeExperts.cuh", "MoeStream.cuh", "WeightStream.cuh", "WeightGemm.cuh", "params/WeightGemmParams.h",
            "QuantGemmTile.cuh", "params/MoeExpertsParams.h", "common/QuantWeights.cuh",
            "common/Arrival.cuh", "common/Mma.cuh", "common/Numerics.cuh", "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    const double limit = d.attrs.getFloat("swiglu_limit", 10.0);
    if (!(limit > 0) || !std::isfinite(limit))
      return Error{fmt::format("{}: swiglu_limit = {} must be a positive finite number", kOp, limit)};
    DI_TRY(expectRank(d, "x", 2));
    DI_TRY(expectRank(d, "ids", 2));
    DI_TRY(expectRank(d, "w1", 3));
    const int64_t T = d.dim("x", 0), C = d.dim("x", 1), k = d.dim("ids", 1);
    const int64_t E = d.dim("w1", 0), I = d.dim("w1", 1);
    if (C < 32 || C % 32 != 0 || C > INT32_MAX)
      return Error{fmt::format("{}: x has {} columns; the hidden size must be a positive multiple of 32", kOp, C)};
    if (I < 32 || I % 32 != 0 || I > INT32_MAX)
      return Error{fmt::format("{}: w1 has {} rows per expert; the intermediate size must be a positive multiple "
                               "of 32", kOp, I)};
    if (E < 1 || E > kMaxExperts)
      return Error{fmt::format("{}: w1 holds {} experts; must be in 1..{}", kOp, E, kMaxExperts)};
    if (k < 1 || T * k > kMaxEntries)
      return Error{fmt::format("{}: ids is [{}, {}]: needs k >= 1 and T * k <= {}", kOp, T, k, kMaxEntries)};
    if (int64_t(I) * (C / 2) > INT32_MAX)
      return Error{fmt::format("{}: one expert matrix of {} x {} is over 2 GB", kOp, I, C)};
    DI_TRY(expectShape(d, "ids", {T, k}));
    DI_TRY(expectShape(d, "weights", {T, k}));
    DI_TRY(expectShape(d, "w1", {E, I, C / 2}));
    DI_TRY(expectShape(d, "w1_scale", {E, I, C / 32}));
    DI_TRY(expectShape(d, "w3", {E, I, C / 2}));
    DI_TRY(expectShape(d, "w3_scale", {E, I, C / 32}));
    DI_TRY(expectShape(d, "w2", {E, C, I / 2}));
    DI_TRY(expectShape(d, "w2_scale", {E, C, I / 32}));
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    return {{"y", {DType::F32, {d.dim("x", 0), d.dim("ids", 1), d.dim("x", 1)}}}};
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    const Shape s = shapeOf(d);
    const Config base = defaultFor(d, t);
    std::vector<Config> out = {base};
    auto addConfig = [&](const Config& c) {
      if (!geometry(c, d).ok()) return;
      if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return toKnobs(o) == toKnobs(c); }))
        out.push_back(c);
    };
    if (decodeRows(s)) {
      // Streaming: 16-row blocks, twice / half the steps per round, twice the warps over K, and
      // 2 warps over N; then the cp.async tile's decode configs.
      const StreamGemms st0 = streamDefault(s, t);
      StreamGemms rows16 = st0, more = st0, fewer = st0, deeper = st0, narrow = st0, piped = st0, pipedHalf = st0;
      rows16.nt8 = 2;
      rows16.u13 = 1;
      more.u13 = 2 * st0.u13;
      fewer.u13 = std::max(1, st0.u13 / 2);
      deeper.wk = 2 * st0.wk;
      narrow.wn = 2;
      piped.pipe = true;  // double-buffered rounds: the default's and half of it
      pipedHalf.pipe = true;
      pipedHalf.u13 = std::max(1, st0.u13 / 2);
      // The ring (ringDefault), and the ring with one slot more or fewer and with 2 steps per w13
      // round.
      const StreamGemms r0 = ringDefault(s, t);
      StreamGemms plain = st0, ringMore = r0, ringFewer = r0, ringWide = r0;
      ringMore.ring = std::min(8, r0.ring + 1);
      ringFewer.ring = std::max(2, r0.ring - 1);
      ringWide.u13 = 2;
      for (const StreamGemms& q : {r0, plain, rows16, more, fewer, deeper, narrow, piped, pipedHalf, ringMore, ringFewer,
                                   ringWide})
        if (q.wn * q.wk <= 16 && q.u13 <= 8 && std::max(q.smemBytes(1), q.smemBytes(2)) <= t.smemPerCtaCap)
          addConfig(configOf(q));
      addConfig(configOf(defaultTile(s, t)));
    }
    const Config tileBase = configOf(defaultTile(s, t));
    auto q0 = quantTileOf(tileBase, configToString(toKnobs(tileBase)), kOp, true, true);
    if (!q0.ok()) return out;
    auto add = [&](QuantTile q) {
      while (q.smemBytes() > t.smemPerCtaCap && q.stages > 2) --q.stages;
      const Config c = configOf(q);
      if (!geometry(c, d).ok()) return;
      if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return toKnobs(o) == toKnobs(c); }))
        out.push_back(c);
    };
    QuantTile narrow = *q0, wide = *q0, deeper = *q0;
    narrow.bn /= 2;
    narrow.wn = std::min(narrow.wn, narrow.bn / 8);
    wide.bn *= 2;
    ++deeper.stages;
    add(narrow);
    add(wide);
    add(deeper);
    if (q0->bm <= 16) {
      QuantTile words = *q0;  // word order: 4 warps over K, a k32 block each (the earlier default)
      words.wn = 1;
      words.wk = 4;
      add(words);
      QuantTile two = *q0;  // block order on 2 x 2 warps: more columns per warp's A registers
      two.wn = 2;
      two.wk = 2;
      two.bk = 256;
      add(two);
      QuantTile eight = *q0;  // block order on 8 warps (4 over N, 2 over K): twice the warps per SM
      eight.wk = 2;
      eight.bk = 256;
      add(eight);
      QuantTile rows32 = *q0;  // two m16 tiles: experts with 17..32 rows read their weights once
      rows32.bm = 32;
      add(rows32);
      if (q0->bm < 16) {  // full m16 row blocks (the tile before block_m followed T)
        QuantTile rows16 = *q0;
        rows16.bm = 16;
        add(rows16);
      }
    } else {
      auto addFit = [&](const QuantTile& q) { add(fitPrefillTile(q, t)); };
      QuantTile other = *q0;
      other.bm = q0->bm == 128 ? 64 : 128;
      addFit(other);
      QuantTile wideK = *q0;  // block_k 64: half the barriers and decode rounds per K
      wideK.bk *= 2;
      wideK.stages = 3;
      addFit(wideK);
      QuantTile four = *q0;  // 8 warps: 2 x 4 (w2: 64 x 32 each)
      four.wn = 4;
      addFit(four);
      if (q0->bm == 128) {  // 256 rows on 4 x 2 warps: a decoded weight stage feeds twice the rows
        QuantTile tall = *q0;
        tall.bm = 256;
        tall.wm = 4;
        tall.stages = 4;
        addFit(tall);
        QuantTile tallK = tall;  // the same with block_k 64: half the barriers per K
        tallK.bk = 64;
        addFit(tallK);
      }
      // 8 warps over twice the columns (w13 128 x 128 h columns, w2 128 x 256; 64-row warp tiles
      // as the default's): every A row a CTA copies feeds twice the columns (half the L2 reads of x
      // and h, half the copies per warp), block_k 32 and 64.
      for (int bk : {32, 64}) {
        QuantTile wide8 = *q0;
        wide8.bn = 2 * q0->bn;
        wide8.wn = 2 * q0->wn;
        wide8.bk = bk;
        wide8.stages = bk == 32 ? 5 : 4;
        addFit(wide8);
      }
    }
    return out;
  }

  Status canImplement(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    return g.ok() ? Status{} : Status{g.error()};
  }

  ResourceEstimate resources(const Config& c, const OpDesc& d) const override {
    ResourceEstimate e;
    auto g = geometry(c, d);  // canImplement accepted it
    e.smemBytes = std::max(g->smem13(), g->smem2());
    e.threadsPerCta = g->threads();
    e.regsPerThread = g->regsCap();
    return e;
  }

  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const Shape s = shapeOf(d);
    // The ring (stream = 3, ringDefault) is a candidate until it is measured on the H200.
    if (decodeRows(s)) return configOf(streamDefault(s, t));
    return configOf(defaultTile(s, t));
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    auto g = geometry(c, d);
    if (g->stream) {
      const StreamGemms& q = g->st;
      // Template arguments: rows, warps, steps per round, then the ring's slots or the pipe flag.
      const std::string last = q.ring > 0 ? std::to_string(q.ring) : q.pipe ? "true" : "false";
      const char* w13 = q.ring > 0 ? "w13_ring" : "w13_stream";
      const char* w2 = q.ring > 0 ? "w2_ring" : "w2_stream";
      u.source = fmt::format(
          "#include \"MoeStream.cuh\"\n"
          "extern \"C\" __global__ void __launch_bounds__({}) {}_route(const di::MoeExpertsParams p) {{\n"
          "  di::grid_dependency_sync();\n"
          "  di::moe::route<{}>(p);\n"
          "}}\n"
          "extern \"C\" __global__ void __launch_bounds__({}, {}) {}_w13(const di::MoeExpertsParams p) {{\n"
          "  di::grid_dependency_sync();\n"
          "  di::moe::{}<{}, {}, {}, {}, {}>(p);\n"
          "}}\n"
          "extern \"C\" __global__ void __launch_bounds__({}, {}) {}_w2(const di::MoeExpertsParams p) {{\n"
          "  di::grid_dependency_sync();\n"
          "  di::moe::{}<{}, {}, {}, {}, {}>(p);\n"
          "}}\n",
          kRouteThreads, baseName, q.rows(), q.threads(), q.minBlocks(), baseName, w13, q.nt8, q.wn, q.wk, q.u13,
          last, q.threads(), q.minBlocks(), baseName, w2, q.nt8, q.wn, q.wk, q.u2(), last);
      u.entries = {baseName + "_route", baseName + "_w13", baseName + "_w2"};
      return u;
    }
    const QuantTile& a = g->t13;
    const QuantTile& b = g->t2;
    auto args = [](const QuantTile& q) {
      return fmt::format("{}, {}, {}, {}, {}, {}, {}", q.bm, q.bn, q.bk, q.wm, q.wn, q.wk, q.stages);
    };
    u.source = fmt::format(
        "#include \"MoeExperts.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}) {}_route(const di::MoeExpertsParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::moe::route<{}>(p);\n"
        "}}\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}_w13(const di::MoeExpertsParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::moe::w13<{}>(p);\n"
        "}}\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}_w2(const di::MoeExpertsParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::moe::w2<{}>(p);\n"
        "}}\n",
        kRouteThreads, baseName, a.bm, a.threads(), a.minBlocks(), baseName, args(a), b.threads(), b.minBlocks(),
        baseName, args(b));
    u.entries = {baseName + "_route", baseName + "_w13", baseName + "_w2"};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    auto g = geometry(c, d);
    const Shape s = shapeOf(d);
    if (s.entries() == 0) return {};
    LaunchStep route;
    route.entry = baseName + "_route";
    route.grid = {1, 1, 1};
    route.block = {kRouteThreads, 1, 1};
    LaunchStep w13;
    w13.entry = baseName + "_w13";
    w13.grid = {uint32_t(cdiv(s.I, g->cols13())), uint32_t(g->maxRowBlocks), 1};
    w13.block = {uint32_t(g->threads()), 1, 1};
    w13.dynamicSmem = uint32_t(g->smem13());
    LaunchStep w2;
    w2.entry = baseName + "_w2";
    w2.grid = {uint32_t(cdiv(s.C, g->cols2())), uint32_t(g->maxRowBlocks), 1};
    w2.block = {uint32_t(g->threads()), 1, 1};
    w2.dynamicSmem = uint32_t(g->smem2());
    return {route, w13, w2};
  }

  int64_t workspace(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    const Shape s = shapeOf(d);
    if (s.entries() == 0) return 0;
    return workspaceOf(s, g->maxRowBlocks).total;
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    auto g = geometry(c, d);
    const Shape s = shapeOf(d);
    auto addr = [&](const char* n, uint64_t align) -> Result<uint64_t> {
      auto it = addrs.find(n);
      if (it == addrs.end()) return Error{fmt::format("{}: no device address for tensor '{}'", kOp, n)};
      if (it->second % align != 0)
        return Error{fmt::format("{}: tensor '{}' at 0x{:x} is not {}-byte aligned", kOp, n, it->second, align)};
      return it->second;
    };
    const char* names[] = {"x", "ids", "weights", "w1", "w1_scale", "w3", "w3_scale", "w2", "w2_scale", "y"};
    const uint64_t aligns[] = {16, 4, 4, 16, 4, 16, 4, 16, 4, 16};
    uint64_t a[10];
    for (int i = 0; i < 10; ++i) {
      auto r = addr(names[i], aligns[i]);
      if (!r.ok()) return r.error();
      a[i] = *r;
    }
    di::MoeExpertsParams p{};
    p.x = reinterpret_cast<const uint16_t*>(a[0]);
    p.ids = reinterpret_cast<const int32_t*>(a[1]);
    p.weights = reinterpret_cast<const float*>(a[2]);
    p.w1 = reinterpret_cast<const uint8_t*>(a[3]);
    p.w1_scale = reinterpret_cast<const uint8_t*>(a[4]);
    p.w3 = reinterpret_cast<const uint8_t*>(a[5]);
    p.w3_scale = reinterpret_cast<const uint8_t*>(a[6]);
    p.w2 = reinterpret_cast<const uint8_t*>(a[7]);
    p.w2_scale = reinterpret_cast<const uint8_t*>(a[8]);
    p.y = reinterpret_cast<float*>(a[9]);
    if (s.entries() > 0) {
      auto wsAddr = addr("__workspace", 256);
      if (!wsAddr.ok()) return wsAddr.error();
      const uint64_t base = *wsAddr;
      const Workspace w = workspaceOf(s, g->maxRowBlocks);
      p.counts = reinterpret_cast<int32_t*>(base + w.counts);
      p.num_row_blocks = reinterpret_cast<int32_t*>(base + w.numRowBlocks);
      p.rb_expert = reinterpret_cast<int32_t*>(base + w.rbExpert);
      p.rb_start = reinterpret_cast<int32_t*>(base + w.rbStart);
      p.rb_rows = reinterpret_cast<int32_t*>(base + w.rbRows);
      p.row_token = reinterpret_cast<int32_t*>(base + w.rowToken);
      p.row_dest = reinterpret_cast<int32_t*>(base + w.rowDest);
      p.row_weight = reinterpret_cast<float*>(base + w.rowWeight);
      p.h = reinterpret_cast<uint16_t*>(base + w.h);
    }
    p.k = int32_t(s.k);
    p.E = int32_t(s.E);
    p.C = int32_t(s.C);
    p.I = int32_t(s.I);
    p.entries = int32_t(s.entries());
    p.limit = float(d.attrs.getFloat("swiglu_limit", 10.0));
    return paramBytes(p);
  }

  std::vector<ShapeParam> shapeParams() const override {
    return {{"T", 1, "tokens"},
            {"k", 6, "experts per token"},
            {"E", 128, "routed experts"},
            {"C", 5120, "hidden size"},
            {"I", 2304, "expert intermediate size"}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    OpDesc d;
    d.op = opName();
    const int64_t T = p.at("T"), k = p.at("k"), E = p.at("E"), C = p.at("C"), I = p.at("I");
    d.shapes["x"] = {T, C};
    d.shapes["ids"] = {T, k};
    d.shapes["weights"] = {T, k};
    d.shapes["w1"] = d.shapes["w3"] = {E, I, C / 2};
    d.shapes["w1_scale"] = d.shapes["w3_scale"] = {E, I, C / 32};
    d.shapes["w2"] = {E, C, I / 2};
    d.shapes["w2_scale"] = {E, C, I / 32};
    return d;
  }

  // Decode and prefill tiles; tensor cores at every shape.
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override {
    return {{"default", {}}, {"T=4096", {{"T", 4096}}}};
  }
  PtxChecks ptxChecks(const OpDesc&) const override { return {true, false}; }

  // Tuned along the tokens; the decode buckets (T <= 16) keep the one-row-tile kernels apart.
  std::optional<BucketAxis> bucketAxis() const override {
    return BucketAxis{"T", {1, 2, 4, 8, 16, 64, 256, 1024, 4096}};
  }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "x", 0); }
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    const ShapeParams p = {{"T", v}, {"k", m.expertsPerToken}, {"E", m.experts}, {"C", m.hidden},
                           {"I", m.moeIntermediate}};
    return {{p, p}};
  }
  // Experts per token, experts, hidden and intermediate sizes fix the rows per expert and the
  // weight matrices a config was tuned on.
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"k", dimOf(d, "ids", 1)}, {"E", dimOf(d, "w1", 0)}, {"C", dimOf(d, "x", 1)}, {"I", dimOf(d, "w1", 1)}};
  }

  // Within the per-element bound derived from fp32 accumulation (reference/QuantGemmRef.h).
  AccuracyRule accuracy(const std::string&) const override {
    return {AccuracyRule::Kind::Bound, 1.0, "error / derived bound"};
  }

  // Tokens routed to k distinct experts each, uniformly (every expert gets about T*k/E rows),
  // routing weights in [0.1, 1.5]; fp4 expert weights with UE8M0 scales (EncodedInputs.h).
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t T = p.get("T", 1), k = p.get("k", 6), E = p.get("E", 128), C = p.get("C", 5120),
                  I = p.get("I", 2304);
    DI_TRY(p.require(T >= 1 && k >= 1 && k <= E && C % 32 == 0 && I % 32 == 0 && C > 0 && I > 0,
                     "needs T >= 1, 1 <= k <= E, C and I positive multiples of 32"));
    std::vector<int32_t> ids(size_t(T * k));
    std::vector<char> usedExpert(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < k; ++r) {
        int32_t e;
        bool fresh;
        do {  // k distinct experts per token
          e = int32_t(rng.range(0, E));
          fresh = true;
          for (int64_t q = 0; q < r; ++q) fresh = fresh && ids[size_t(t * k + q)] != e;
        } while (!fresh);
        ids[size_t(t * k + r)] = e;
        usedExpert[size_t(e)] = 1;
      }
    const auto pool = bf16NormalPool(rng);
    BenchInputs in;
    in.inputs["x"] = bf16FromPool(rng, pool, {T, C});
    in.inputs["ids"] = i32Tensor({T, k}, ids);
    in.inputs["weights"] = f32Uniform(rng, {T, k}, 0.1, 1.5);
    auto experts = [&](const char* name, const char* scale, int64_t rows, int64_t cols) {
      HostTensor codes = quantCodes(rng, 4, E * rows, cols);
      codes.shape = {E, rows, cols / 2};
      in.inputs[name] = std::move(codes);
      in.inputs[scale] = quantScales(rng, {E, rows, cols / 32});
    };
    experts("w1", "w1_scale", I, C);
    experts("w3", "w3_scale", I, C);
    experts("w2", "w2_scale", C, I);
    // Each used expert's weights once, the activations, ids and weights once, y written once.
    const double used = double(std::count(usedExpert.begin(), usedExpert.end(), 1));
    in.bytes = used * 3.0 * double(I) * double(C) * (0.5 + 1.0 / 32) + double(T * C * 2) + double(T * k * 8) +
               double(T * k * C * 4);
    in.flops = 6.0 * double(T * k) * double(I) * double(C);
    in.rowSplit = BenchRowSplit{T, 6.0 * double(k) * double(I) * double(C), double(k * C), {"x", "ids", "weights"}};
    return in;
  }
};

}  // namespace

const KernelFamily& moeExpertsFamily() {
  static const MoeExpertsFamily f;
  return f;
}

}  // namespace deepinfer
