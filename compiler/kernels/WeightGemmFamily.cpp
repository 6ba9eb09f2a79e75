// Kernel family of weight_gemm (templates/WeightGemm.cuh): y = x . dequant(w)^T with w in its
// checkpoint format (docs/model.md §3) and the model's epilogues.
//
// Two schedules, picked by the knob `stream`:
//  - stream = 3 (a candidate for decode rows until measured; ringTile below): the streaming core
//    of stream = 1 with each warp's rounds copied by cp.async into a shared-memory ring of
//    `stages` slots (2..8; block_k = the steps per slot), S - 1 rounds in flight while one
//    multiplies; no K split. The items below hold for it too.
//  - stream = 1 or 2 (templates/WeightStream.cuh); 1 is the default for decode rows (M <= 16, weight-
//    bandwidth bound) of ungrouped weights (grouped ones, wo_a's form, keep the tile: measured
//    faster there): the weights go from global memory straight into registers and are
//    multiplied with the roles swapped (16 weight rows as the mma's A, the x rows as B). Knobs:
//    block_m 8 or 16 (x rows per CTA row), warps_n (16-row warp tiles side by side, block_n =
//    16 x warps_n), warps_k (warps splitting K inside the CTA, summed in a fixed order),
//    block_k = the K columns a warp has in flight per round (1..8 steps of 64 weight bytes per
//    row: 64 e4m3 / 128 e2m1 columns); warps_m = stages = 1, splits (default 1). Default: block_m = M
//    rounded up to 8 or 16, 4 steps per round (2 for a SwiGLU pair, 1 for an e2m1 pair with 16
//    rows: more spill), warps_k doubled (up to 8) while the SMs would hold fewer than ~12 warps
//    each and every warp keeps a whole round, warps_n up to 4 warps per CTA; then, for a SwiGLU
//    pair or e2m1 weights at <= 8 rows, stream = 2 at half the steps (measured, streamTile). One
//    launch, no workspace; the candidates add half the steps, twice / half the warps over K, one warp tile
//    per CTA row, stream = 2 (the same with double-buffered rounds: a round's loads in flight
//    while the previous one multiplies), `splits` > 1 for narrow shapes (K over the grid's z
//    CTAs, partials summed by the last to arrive in split order, as the tile's split-K), and the
//    cp.async tile schedule's decode tiles below. The entry issues the warp's first weight round
//    before griddepcontrol.wait (weights are never written by a kernel of the stream).
//  - stream = 0: the cp.async CTA tile (QuantTileGeometry.h: block_m/n/k, warps_m/n/k, stages)
//    and `splits`, the number of CTAs that share one output tile's K (their fp32 partials go to
//    the workspace and the last CTA of the tile to arrive, counted in the zeroed workspace, sums
//    them in split order: one launch). Default heuristic, per target:
//  - decode (the candidates for M <= 16): one m16 tile holding M rows (block_m = M rounded
//    up to a power of two: shared memory and copies only for real rows), 4 warps over N in block
//    order (block_k 128: a thread decodes whole k32 blocks), 8 KB of weights per stage per matrix (block_n 128
//    for e2m1, 64 for e4m3; halved for a SwiGLU pair), as many stages as fit 48 KB (64 KB where
//    the target lifts the cap), and splits so that about two CTAs per SM stream weights (each
//    split keeping at least two stages of K);
//  - prefill (M > 16, tensor-core bound; each stage's weights decoded once per CTA into shared
//    memory, fragments by ldmatrix): 128 x 128 tiles (64 x 128 up to M = 64, 32 rows up to
//    M = 32; block_n 64 for a SwiGLU pair) on 2 x 2 warps of 64 x 64 (or 32 x 64), block_k 32
//    with 5 stages where the cap allows; under a 48 KB cap 4 stages (3 for e4m3) and 128-row
//    tiles narrowed to block_n 64; one split unless the tiles are fewer than the SMs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "Families.h"
#include "QuantTileGeometry.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/EncodedInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "params/WeightGemmParams.h"

namespace deepinfer {
namespace {

constexpr const char* kOp = "weight_gemm";
constexpr int64_t kMaxRows = 65535 * 16;  // row tiles go in grid.y
constexpr int kMaxSplits = 32;

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Shape {
  int64_t M, N, K, G, Kg, Ng;
  bool fp4;
  int epilogue;
  bool gated() const { return epilogue == 2; }
};

Shape shapeOf(const OpDesc& d) {
  Shape s;
  s.M = d.dim("x", 0);
  s.K = d.dim("x", 1);
  s.N = d.dim("w", 0);
  s.G = std::max<int64_t>(1, d.attrs.getInt("groups", 1));
  s.Kg = s.K / s.G;
  s.Ng = s.N / s.G;
  s.fp4 = d.attrs.getInt("weight_bits", 8) == 4;
  s.epilogue = int(d.attrs.getInt("epilogue", 0));
  return s;
}

struct WeightGemmConfig : QuantTileKnobs {
  int64_t splits = 0;
  int64_t stream = 0;  // 1: the weight-streaming schedule (templates/WeightStream.cuh); 2: the same
                       // with double-buffered rounds; 3: the same through a shared-memory ring
  static constexpr auto fields() {
    using F = ConfigField<WeightGemmConfig>;
    return std::array{F{"block_m", &WeightGemmConfig::blockM}, F{"block_n", &WeightGemmConfig::blockN},
                      F{"block_k", &WeightGemmConfig::blockK}, F{"warps_m", &WeightGemmConfig::warpsM},
                      F{"warps_n", &WeightGemmConfig::warpsN}, F{"warps_k", &WeightGemmConfig::warpsK},
                      F{"stages", &WeightGemmConfig::stages},  F{"splits", &WeightGemmConfig::splits},
                      F{"stream", &WeightGemmConfig::stream}};
  }
};

// The weight-streaming schedule seen from the host: 8 or 16 rows of x per CTA (nt8 n8 tiles),
// wn x wk warps of 16 weight rows each, `unroll` steps of 64 weight bytes per row in flight.
struct StreamTile {
  bool fp4 = false, gated = false;
  int nt8 = 1, wn = 1, wk = 1, unroll = 4;
  bool pipe = false;  // stream = 2: round r + 1's loads in flight while round r multiplies
  bool split = false;  // K split over the grid's z CTAs (partials, arrival counter: one int of smem)
  int ring = 0;  // stream = 3: slots of each warp's cp.async ring (ws::ring_core); 0: none
  int threads() const { return 32 * wn * wk; }
  int mats() const { return gated ? 2 : 1; }
  // Mirrors ws::ring_smem_bytes: per warp, `ring` slots of 16 rows x unroll steps x 64 bytes per matrix.
  int64_t ringBytes() const { return int64_t(wn) * wk * ring * mats() * unroll * 16 * 64; }
  int rows() const { return 8 * nt8; }
  int stepCols() const { return fp4 ? 128 : 64; }
  // Mirrors ws::stream_smem_bytes (the wk partial tiles), then a split's arrival verdict.
  int64_t smemBytes() const {
    return int64_t(wk - 1) * wn * mats() * nt8 * 4 * 32 * 4 + (split ? 16 : 0) + ringBytes();
  }
  // 128 registers a thread: the loads of a round (8 per chunk) and the decoded fragments fit;
  // 168 for double-buffered rounds (two rounds' loads live: at 128 the default round spills).
  int minBlocks() const { return std::max(1, 65536 / (threads() * (pipe ? 168 : 128))); }
  int regsCap() const { return std::min(255, 65536 / (threads() * minBlocks()) / 8 * 8); }
  std::string templateArgs(int epilogue) const {
    if (ring > 0) return fmt::format("{}, {}, {}, {}, {}, {}, {}", fp4 ? "true" : "false", nt8, wn, wk, unroll, ring, epilogue);
    return fmt::format("{}, {}, {}, {}, {}, {}, {}{}", fp4 ? "true" : "false", nt8, wn, wk, unroll, epilogue,
                       pipe ? "true" : "false", split ? ", true" : "");
  }
};

struct Geometry {
  QuantTile tile;
  bool stream = false;
  StreamTile st;
  int64_t tilesPerGroup = 0, mTiles = 0, kBlocks = 0, kbPerSplit = 0;
  int splits = 1;  // effective: every split has at least one k32 block
  int64_t ctas() const { return tilesPerGroup * mTiles * splits; }
  int threads() const { return stream ? st.threads() : tile.threads(); }
  int64_t smemBytes() const { return stream ? st.smemBytes() : tile.smemBytes(); }
  int regsCap() const { return stream ? st.regsCap() : tile.regsCap(); }
  int minBlocks() const { return stream ? st.minBlocks() : tile.minBlocks(); }
};

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The streaming schedule's knobs: block_m 8 or 16 (x rows per CTA), block_n = 16 x warps_n,
// warps_k a power of two, warps_n x warps_k <= 16, block_k = a power of two 1..8 times the step
// (64 e4m3 / 128 e2m1 columns), warps_m = 1, stages = 1, splits 1..32 (K over the grid's z CTAs,
// each a whole number of rounds; the effective count drops to what K has). stream = 3 (the ring):
// stages = the ring's slots per warp, 2..8, and splits = 1.
Result<Geometry> streamGeometry(const WeightGemmConfig& c, const Shape& s, const std::string& cfg) {
  auto bad = [&](const std::string& what) {
    return Error{fmt::format("{}: stream = {}: {} ({})", kOp, c.stream, what, cfg)};
  };
  if (c.stream < 1 || c.stream > 3) return bad("stream must be 0, 1, 2 or 3");
  Geometry g;
  g.stream = true;
  StreamTile& t = g.st;
  t.pipe = c.stream == 2;
  t.fp4 = s.fp4;
  t.gated = s.gated();
  if (c.blockM != 8 && c.blockM != 16) return bad(fmt::format("block_m = {} must be 8 or 16", c.blockM));
  if (c.warpsN != 1 && c.warpsN != 2 && c.warpsN != 4) return bad(fmt::format("warps_n = {} must be 1, 2 or 4", c.warpsN));
  if (!pow2(c.warpsK) || c.warpsK * c.warpsN > 16)
    return bad(fmt::format("warps_k = {} must be a power of two with warps_n x warps_k <= 16", c.warpsK));
  if (c.blockN != 16 * c.warpsN) return bad(fmt::format("block_n = {} must be 16 x warps_n", c.blockN));
  t.nt8 = int(c.blockM / 8);
  t.wn = int(c.warpsN);
  t.wk = int(c.warpsK);
  const int64_t unroll = c.blockK / t.stepCols();
  if (c.blockK % t.stepCols() != 0 || !pow2(unroll) || unroll > 8)
    return bad(fmt::format("block_k = {} must be 1, 2, 4 or 8 steps of {} columns", c.blockK, t.stepCols()));
  t.unroll = int(unroll);
  if (c.stream == 3) {
    if (c.warpsM != 1) return bad(fmt::format("warps_m = {} must be 1", c.warpsM));
    if (c.stages < 2 || c.stages > 8)
      return bad(fmt::format("stages = {} (the ring's slots per warp) must be in 2..8", c.stages));
    if (c.splits != 1) return bad(fmt::format("splits = {} must be 1 (the ring has no K split)", c.splits));
    t.ring = int(c.stages);
  } else if (c.warpsM != 1 || c.stages != 1) {
    return bad(fmt::format("warps_m = {}, stages = {} must both be 1", c.warpsM, c.stages));
  }
  if (c.splits < 1 || c.splits > kMaxSplits) return bad(fmt::format("splits = {} must be in 1..{}", c.splits, kMaxSplits));
  g.tilesPerGroup = cdiv(s.Ng, 16 * t.wn);
  g.mTiles = cdiv(s.M, t.rows());
  if (g.mTiles > 65535)
    return Error{fmt::format("{}: M = {} gives {} row tiles of block_m = {}; at most 65535", kOp, s.M, g.mTiles,
                             t.rows())};
  g.kBlocks = cdiv(s.Kg, 32);
  g.kbPerSplit = g.kBlocks;
  const int64_t steps = cdiv(s.Kg, t.stepCols());
  const int64_t per = cdiv(cdiv(steps, c.splits), t.unroll) * t.unroll;  // whole rounds per split
  g.splits = int(cdiv(steps, per));
  if (g.splits > 1) {
    t.split = true;
    g.kbPerSplit = per * (t.stepCols() / 32);
  }
  return g;
}

Result<Geometry> geometry(const WeightGemmConfig& c, const OpDesc& d) {
  const Shape s = shapeOf(d);
  const std::string cfg = configToString(toKnobs(c));
  if (c.stream != 0) return streamGeometry(c, s, cfg);
  auto tile = quantTileOf(c, cfg, kOp, s.fp4, s.gated());
  if (!tile.ok()) return tile.error();
  Geometry g;
  g.tile = *tile;
  const int64_t want = c.splits;
  if (want < 1 || want > kMaxSplits)
    return Error{fmt::format("{}: splits = {} must be in 1..{} ({})", kOp, want, kMaxSplits, cfg)};
  g.tilesPerGroup = cdiv(s.Ng, g.tile.bn);
  g.mTiles = cdiv(s.M, g.tile.bm);
  if (g.mTiles > 65535)
    return Error{fmt::format("{}: M = {} gives {} row tiles of block_m = {}; at most 65535", kOp, s.M, g.mTiles,
                             g.tile.bm)};
  g.kBlocks = cdiv(s.Kg, 32);
  const int64_t kbStage = g.tile.bk / 32;
  g.kbPerSplit = cdiv(cdiv(g.kBlocks, want), kbStage) * kbStage;
  g.splits = int(std::max<int64_t>(1, cdiv(g.kBlocks, g.kbPerSplit)));
  if (g.splits == 1) g.kbPerSplit = g.kBlocks;
  return g;
}

// The decode tile: 4 warps over N in block order (a thread decodes whole k32 blocks), 8 KB of
// weights per stage per matrix, only the rows M has.
QuantTile decodeTile(const Shape& s, const TargetProfile& t) {
  QuantTile q;
  q.fp4 = s.fp4;
  q.gated = s.gated();
  q.bm = decodeBlockM(s.M);
  q.wm = 1;
  q.wn = 4;
  q.wk = 1;
  q.bk = 128;
  q.bn = (s.fp4 ? 128 : 64) / (s.gated() ? 2 : 1);
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

QuantTile prefillTile(const Shape& s, const TargetProfile& t) {
  QuantTile q;
  q.fp4 = s.fp4;
  q.gated = s.gated();
  q.bm = s.M <= 32 ? 32 : s.M <= 64 ? 64 : 128;
  q.bn = s.gated() ? 64 : 128;
  q.wm = q.bm >= 64 ? 2 : 1;
  q.wn = 2;
  q.wk = 1;
  q.bk = 32;
  q.stages = t.smemPerCtaCap >= 96 * 1024 ? 5 : 4;
  if (t.smemPerCtaCap >= 160 * 1024 && s.M >= 4096) {
    // Measured on the H200 (sm_90, a5b191f, M = 16384): block_k 64 halves the barriers per k; the
    // plain GEMMs take 256-row tiles on 4 x 2 warps (wo_a 4.07 -> 3.80 ms, wq_a 0.81 -> 0.74 ms),
    // the gated one keeps 128 x 64 at 3 stages (shared w13 3.14 -> 2.90 ms).
    q.bk = 64;
    if (!s.gated()) {
      q.bm = 256;
      q.wm = 4;
      q.stages = 4;
    } else {
      q.stages = 3;
    }
  }
  return fitPrefillTile(q, t);
}

// Splits so that about two CTAs per SM stream the weights, each split keeping two stages of K.
int splitsFor(const QuantTile& q, const Shape& s, const TargetProfile& t) {
  const int64_t tiles = cdiv(s.Ng, q.bn) * s.G * cdiv(std::max<int64_t>(s.M, 1), q.bm);
  const int64_t want = 2 * int64_t(std::max(1, t.smCount));
  const int64_t kStages = cdiv(cdiv(s.Kg, 32), q.bk / 32);
  int64_t splits = cdiv(want, std::max<int64_t>(tiles, 1));
  splits = std::min<int64_t>({splits, std::max<int64_t>(1, kStages / 2), kMaxSplits});
  return int(std::max<int64_t>(splits, 1));
}

WeightGemmConfig configOf(const QuantTile& q, int splits) {
  WeightGemmConfig c;
  setTileKnobs(c, q);
  c.splits = splits;
  return c;
}

WeightGemmConfig configOf(const StreamTile& q) {
  WeightGemmConfig c;
  c.blockM = q.rows();
  c.blockN = 16 * q.wn;
  c.blockK = int64_t(q.unroll) * q.stepCols();
  c.warpsM = 1;
  c.warpsN = q.wn;
  c.warpsK = q.wk;
  c.stages = q.ring > 0 ? q.ring : 1;
  c.splits = 1;
  c.stream = q.ring > 0 ? 3 : q.pipe ? 2 : 1;
  return c;
}

WeightGemmConfig configOf(const StreamTile& q, int splits) {
  WeightGemmConfig c = configOf(q);
  c.splits = splits;
  return c;
}

// The streaming default: every x row in one CTA row (8 or 16), 4 steps (256 weight bytes of each
// of a thread's two rows; 2 for a SwiGLU pair's two matrices) per round; warps over K doubled while the SMs hold fewer than about 12
// warps each and every warp still gets a whole round (at most 8); warps over N so that a CTA has
// 4 warps where the tile count allows.
StreamTile streamBase(const Shape& s, const TargetProfile& t) {
  StreamTile q;
  q.fp4 = s.fp4;
  q.gated = s.gated();
  q.nt8 = s.M <= 8 ? 1 : 2;
  // A SwiGLU pair loads two matrices per step: 4 steps spill (e2m1 with 16 rows already at 2).
  q.unroll = !s.gated() ? 4 : (s.fp4 && q.nt8 == 2) ? 1 : 2;
  const int64_t warpTiles = s.G * cdiv(s.Ng, 16);
  const int64_t steps = cdiv(s.Kg, q.stepCols());
  const int64_t want = 12 * int64_t(std::max(1, t.smCount));
  while (q.wk < 8 && warpTiles * q.wk * 2 <= want && steps >= int64_t(2 * q.wk) * q.unroll) q.wk *= 2;
  while (q.wn * q.wk < 4 && 2 * q.wn * 16 <= s.Ng) q.wn *= 2;
  return q;
}

// The default: streamBase, double-buffered at half its steps (stream = 2) for a SwiGLU pair or
// e2m1 weights at up to 8 rows, where a round's decode and mma take long enough for the next
// round's loads to hide under them. Measured on the H200 at 2b70e6b (deepinfer-bench, 20 samples):
// shared w13 (fp8 SwiGLU 2304x5120) M=1 18.72 us vs 19.44 with stream 1, expert w1 (fp4
// 2304x5120) M=1 9.81 vs 10.78; single fp8 matrices lost there (wq_b M=1 20.58 vs 19.12, wo_b M=1
// 27.58 vs 23.65, wkv 10.88 vs 10.43), so they keep stream 1. 16 rows stay stream 1 (only wq_b
// M=12 was measured: 22.19 vs 23.20, too little to generalize).
StreamTile streamTile(const Shape& s, const TargetProfile& t) {
  StreamTile q = streamBase(s, t);
  if ((s.gated() || s.fp4) && q.nt8 == 1 && q.unroll > 1) {
    q.pipe = true;
    q.unroll /= 2;
  }
  return q;
}

// The ring (stream = 3): streamBase's rows and warps; 2 steps per round for one matrix (a copy
// instruction then reads 128 contiguous bytes of each of 4 rows), 1 for a SwiGLU pair (the same
// 2 KB slot); then the fewest slots (at least 3, at most 8 or one more than the warp's rounds)
// that keep 48 KB of weights in flight per SM: S - 1 slots per warp times the grid's warps per SM
// (3.5 TB/s x ~1.5 us of loaded DRAM latency / 132 SMs = 40 KB, rounded up), within the CTA's
// share of shared memory (the target's cap, and the SM's memory over its resident CTAs).
StreamTile ringTile(const Shape& s, const TargetProfile& t) {
  StreamTile q = streamBase(s, t);
  q.unroll = s.gated() ? 1 : 2;
  const int64_t sms = std::max(1, t.smCount);
  const int64_t ctas = s.G * cdiv(s.Ng, 16 * q.wn) * cdiv(s.M, q.rows());
  const double warpsPerSm = double(ctas * q.wn * q.wk) / double(sms);
  const int64_t ctasPerSm = std::min<int64_t>(cdiv(ctas, sms), q.minBlocks());
  int64_t budget = t.smemPerCtaCap;
  if (t.facts.smemPerSm > 0) budget = std::min(budget, t.facts.smemPerSm / ctasPerSm - 1024);  // 1 KB: the CTA's reserve
  const int64_t rounds = cdiv(cdiv(s.Kg, q.stepCols()), int64_t(q.wk) * q.unroll);
  const double slotBytes = double(q.mats() * q.unroll * 16 * 64);
  q.ring = 2;
  while (q.ring < 8 && q.ring <= rounds && (q.ring < 3 || (q.ring - 1) * slotBytes * warpsPerSm < 48.0 * 1024)) {
    StreamTile more = q;
    ++more.ring;
    if (more.smemBytes() > budget) break;
    q = more;
  }
  return q;
}

class WeightGemmFamily final : public TypedKernelFamily<WeightGemmConfig> {
 public:
  std::string opName() const override { return kOp; }

  std::vector<std::string> templateHeaders() const override {
    return {"WeightGemm.cuh", "WeightStream.cuh", "QuantGemmTile.cuh", "params/WeightGemmParams.h", "common/QuantWeights.cuh",
            "common/Arrival.cuh", "common/Mma.cuh", "common/Numerics.cuh", "common/Types.h"};
  }

  Status validate(const OpDesc& d) const override {
    const int64_t bits = d.attrs.getInt("weight_bits", 0);
    if (bits != 4 && bits != 8)
      return Error{fmt::format("{}: weight_bits = {} must be 8 (e4m3, 32x32-block scales) or 4 (e2m1, 1x32 "
                               "scales)", kOp, bits)};
    const int64_t epi = d.attrs.getInt("epilogue", 0);
    if (epi < 0 || epi > 2)
      return Error{fmt::format("{}: epilogue = {} must be 0 (f32 y), 1 (bf16 y) or 2 (SwiGLU of w and w_up, bf16 "
                               "y)", kOp, epi)};
    const int64_t G = d.attrs.getInt("groups", 1);
    if (G < 1) return Error{fmt::format("{}: groups = {} must be at least 1", kOp, G)};
    const double limit = d.attrs.getFloat("swiglu_limit", 10.0);
    if (!(limit > 0) || !std::isfinite(limit))
      return Error{fmt::format("{}: swiglu_limit = {} must be a positive finite number", kOp, limit)};
    DI_TRY(expectRank(d, "x", 2));
    const int64_t M = d.dim("x", 0), K = d.dim("x", 1);
    if (M > kMaxRows) return Error{fmt::format("{}: x has {} rows; at most {}", kOp, M, kMaxRows)};
    if (K < 1 || K % G != 0)
      return Error{fmt::format("{}: x has {} columns, not a positive multiple of groups = {}", kOp, K, G)};
    const int64_t Kg = K / G;
    DI_TRY(expectRank(d, "w", 2));
    const int64_t N = d.dim("w", 0);
    if (N < 1 || N > INT32_MAX || N % G != 0)
      return Error{fmt::format("{}: w has {} rows, not a positive multiple of groups = {} (at most {})", kOp, N, G,
                               INT32_MAX)};
    // The epilogues store output columns in pairs (float2 / two bf16 in 32 bits): an odd row
    // width would misalign every other row.
    if (N % 2 != 0)
      return Error{fmt::format("{}: w has {} rows; the output is written in column pairs, so its width must be even",
                               kOp, N)};
    if (G > 1 && (N / G) % 8 != 0)
      return Error{fmt::format("{}: w has {} rows = {} groups of {}; grouped weights need groups of a multiple of "
                               "8 rows", kOp, N, G, N / G)};
    if (Kg > INT32_MAX / 2) return Error{fmt::format("{}: {} columns per group is too many", kOp, Kg)};
    std::vector<int64_t> wShape, sShape;
    if (bits == 8) {
      if (Kg % 16 != 0)
        return Error{fmt::format("{}: e4m3 weights need K per group = {} to be a multiple of 16 (16-byte rows)", kOp,
                                 Kg)};
      wShape = {N, Kg};
      sShape = {cdiv(N, 32), cdiv(Kg, 32)};
    } else {
      if (Kg % 32 != 0)
        return Error{fmt::format("{}: e2m1 weights need K per group = {} to be a multiple of 32 (one scale per 32 "
                                 "columns)", kOp, Kg)};
      wShape = {N, Kg / 2};
      sShape = {N, Kg / 32};
    }
    DI_TRY(expectShape(d, "w", wShape));
    DI_TRY(expectShape(d, "w_scale", sShape));
    if (epi == 2) {
      if (!d.hasTensor("w_up") || !d.hasTensor("w_up_scale"))
        return Error{fmt::format("{}: epilogue = 2 (SwiGLU) needs the up projection 'w_up' and 'w_up_scale'", kOp)};
      DI_TRY(expectShape(d, "w_up", wShape));
      DI_TRY(expectShape(d, "w_up_scale", sShape));
    } else if (d.hasTensor("w_up") || d.hasTensor("w_up_scale")) {
      return Error{fmt::format("{}: 'w_up'/'w_up_scale' are read only by epilogue = 2 (SwiGLU); epilogue = {}", kOp,
                               epi)};
    }
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    const DType t = d.attrs.getInt("epilogue", 0) == 0 ? DType::F32 : DType::BF16;
    return {{"y", {t, {d.dim("x", 0), d.dim("w", 0)}}}};
  }

  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    const Shape s = shapeOf(d);
    const Config base = defaultFor(d, t);
    std::vector<Config> out = {base};
    auto add = [&](QuantTile q, int splits) {
      while (q.smemBytes() > t.smemPerCtaCap && q.stages > 2) --q.stages;
      const Config c = configOf(q, splits);
      if (!geometry(c, d).ok()) return;
      if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return toKnobs(o) == toKnobs(c); }))
        out.push_back(c);
    };
    if (s.M <= 16) {
      // Streaming: half the steps in flight (the default's are the most that fit 128 registers
      // without spilling), twice / half the warps over K, and one warp tile per CTA row.
      auto addStream = [&](StreamTile q) {
        const Config c = configOf(q);
        if (q.smemBytes() > t.smemPerCtaCap || !geometry(c, d).ok()) return;
        if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return toKnobs(o) == toKnobs(c); }))
          out.push_back(c);
      };
      const StreamTile st0 = streamBase(s, t);
      addStream(st0);  // stream 1 where the default is stream 2
      if (st0.unroll > 1) {
        StreamTile q = st0;
        q.unroll = st0.unroll / 2;
        addStream(q);
      }
      for (int wk : {st0.wk * 2, st0.wk / 2}) {
        StreamTile q = st0;
        q.wk = wk;
        if (wk >= 1 && q.wn * wk <= 16) addStream(q);
      }
      StreamTile narrow = st0;
      narrow.wn = 1;
      addStream(narrow);
      // Double-buffered rounds (stream = 2) at half the default's steps (the default's own steps
      // never won: two rounds of registers spill or cut occupancy).
      if (st0.unroll > 1) {
        StreamTile piped = st0;
        piped.pipe = true;
        piped.unroll = st0.unroll / 2;
        addStream(piped);
      }
      // The ring (ringTile), then its neighbours: half the steps per round (same slot count; twice
      // the steps spill: the round's registers and the slots' scale registers), and one slot more
      // or fewer.
      const StreamTile r0 = ringTile(s, t);
      addStream(r0);
      if (r0.unroll > 1) {
        StreamTile q = r0;
        q.unroll = r0.unroll / 2;
        addStream(q);
      }
      for (int dr : {1, -1}) {
        StreamTile q = r0;
        q.ring += dr;
        if (q.ring >= 2 && q.ring <= 8) addStream(q);
      }
      // (K splits over CTAs, `splits` > 1 with stream = 1, never won on the H200 and are no longer
      // candidates; the knob still takes them.)
    }
    // The cp.async tile schedule: the default for prefill rows, the alternative for decode rows.
    const QuantTile tile0 = s.M <= 16 ? decodeTile(s, t) : prefillTile(s, t);
    const Config tileBase = configOf(tile0, splitsFor(tile0, s, t));
    if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return toKnobs(o) == toKnobs(tileBase); }))
      out.push_back(tileBase);
    auto q0 = quantTileOf(tileBase, configToString(toKnobs(tileBase)), kOp, s.fp4, s.gated());
    if (!q0.ok()) return out;
    const int sp0 = int(tileBase.splits);
    if (s.M <= 16) {
      for (int f : {2, -2}) {  // narrower / wider tiles, splits re-derived
        QuantTile q = *q0;
        q.bn = f > 0 ? q.bn * 2 : q.bn / 2;
        q.wn = std::min(q.wn, q.bn / 8);
        if (q.bn >= 16) add(q, splitsFor(q, s, t));
      }
      QuantTile words = *q0;  // word order: 4 warps over K, a k32 block each (the earlier default)
      words.wn = 1;
      words.wk = 4;
      add(words, sp0);
      QuantTile two = *q0;  // block order on 2 x 2 warps: more columns per warp's A registers
      two.wn = 2;
      two.wk = 2;
      two.bk = 256;
      add(two, sp0);
      QuantTile deeper = *q0;
      ++deeper.stages;
      add(deeper, sp0);
      QuantTile eight = *q0;  // block order on 8 warps (4 over N, 2 over K): twice the warps per SM
      eight.wk = 2;
      eight.bk = 256;
      add(eight, sp0);
      // No split, block order: 16-row tiles over the whole K on 8 warps (2 over N, 4 over K, a
      // quad each), every SM a tile when N >= 16 per SM, no partials or arrival counters.
      QuantTile one = *q0;
      one.bn = 16;
      one.wn = 2;
      one.wk = 4;
      one.bk = 512;
      one.stages = 8;
      while (one.smemBytes() > std::min<int64_t>(t.smemPerCtaCap, 64 * 1024) && one.stages > 2) --one.stages;
      add(one, 1);
      if (q0->bm < 16) {  // a full m16 tile (the decode tile before block_m followed M)
        QuantTile rows16 = *q0;
        rows16.bm = 16;
        add(rows16, sp0);
      }
      add(*q0, std::max(1, sp0 / 2));
      add(*q0, std::min(kMaxSplits, sp0 * 2));
      if (sp0 > 1) {  // no split: narrower tiles over the whole K, as deep a pipeline as fits
        QuantTile deep = *q0;
        deep.bn = std::max(16, q0->bn / 2);
        deep.stages = 6;
        add(deep, 1);
      }
    } else {
      auto addFit = [&](const QuantTile& q, int splits) { add(fitPrefillTile(q, t), splits); };
      QuantTile narrow = *q0;
      narrow.bn /= 2;
      add(narrow, splitsFor(narrow, s, t));
      if (q0->bm == 128) {
        QuantTile half = *q0;
        half.bm = 64;
        add(half, splitsFor(half, s, t));
      }
      QuantTile deeper = *q0;
      ++deeper.stages;
      add(deeper, sp0);
      QuantTile wideK = *q0;  // block_k 64: half the barriers and decode rounds per K
      wideK.bk *= 2;
      wideK.stages = 3;
      addFit(wideK, sp0);
      QuantTile four = *q0;  // 8 warps: 2 x 4
      four.wn = 4;
      addFit(four, sp0);
      if (s.M > 128) {
        // 256 rows on 4 x 2 warps (64 x 64 each): a decoded weight stage feeds twice the rows.
        QuantTile tall = *q0;
        tall.bm = 256;
        tall.wm = 4;
        tall.wn = 2;
        tall.bn = s.gated() ? 64 : 128;
        tall.stages = 4;
        addFit(tall, splitsFor(fitPrefillTile(tall, t), s, t));
        QuantTile wide = *q0;  // 128 x 256 on 2 x 4 warps (64 x 64 each)
        wide.bm = 128;
        wide.wm = 2;
        wide.wn = 4;
        wide.bn = s.gated() ? 128 : 256;
        wide.stages = 4;
        addFit(wide, splitsFor(fitPrefillTile(wide, t), s, t));
        // Both at block_k 64: half the barriers per K (one CTA of 8 warps per SM on sm_90).
        for (QuantTile q : {tall, wide}) {
          q.bk = 64;
          addFit(q, splitsFor(fitPrefillTile(q, t), s, t));
        }
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
    const Geometry g = geometry(c, d).value();  // canImplement accepted it
    e.smemBytes = g.smemBytes();
    e.threadsPerCta = g.threads();
    e.regsPerThread = g.regsCap();
    return e;
  }

  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const Shape s = shapeOf(d);
    // Grouped decode (wo_a's form) keeps the tile schedule: measured on the H200 at 11f5c23,
    // wo_a (8 groups of 1024 x 4096) took 21.3 us at M = 1 and 24.5 at M = 12 streamed, against
    // 19.5 and 20.0 with the tile (db9e463).
    // The ring (stream = 3, ringTile) is a candidate until it is measured on the H200.
    if (s.M <= 16 && s.G == 1) return configOf(streamTile(s, t));
    if (s.M <= 16) {
      const QuantTile q = decodeTile(s, t);
      return configOf(q, splitsFor(q, s, t));
    }
    const QuantTile q = prefillTile(s, t);
    return configOf(q, splitsFor(q, s, t));
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    CudaUnit u;
    auto g = geometry(c, d);
    const Shape s = shapeOf(d);
    const bool split = g->splits > 1;
    if (g->stream && g->st.ring > 0) {
      u.source = fmt::format(
          "#include \"WeightStream.cuh\"\n"
          "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::WeightGemmParams p) {{\n"
          "  // The ring's first rounds before the wait (WeightStream.cuh: weights only).\n"
          "  di::WeightGemmRing<{}> k(p);\n"
          "  di::grid_dependency_wait();\n"
          "  di::grid_launch_dependents();\n"
          "  k.run(p);\n"
          "}}\n",
          g->threads(), g->minBlocks(), baseName, g->st.templateArgs(s.epilogue));
      u.entries = {baseName};
      return u;
    }
    if (g->stream) {
      u.source = fmt::format(
          "#include \"WeightStream.cuh\"\n"
          "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::WeightGemmParams p) {{\n"
          "  // The first round of weight loads before the wait (WeightStream.cuh: weights only).\n"
          "  const di::WeightGemmStream<{}> k(p);\n"
          "  di::grid_dependency_wait();\n"
          "  di::grid_launch_dependents();\n"
          "  k.run(p);\n"
          "}}\n",
          g->threads(), g->minBlocks(), baseName, g->st.templateArgs(s.epilogue));
      u.entries = {baseName};
      return u;
    }
    u.source = fmt::format(
        "#include \"WeightGemm.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::WeightGemmParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::weight_gemm_tile<{}, {}, {}>(p);\n"
        "}}\n",
        g->tile.threads(), g->tile.minBlocks(), baseName, g->tile.templateArgs(), s.epilogue, split ? "true" : "false");
    u.entries = {baseName};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    auto g = geometry(c, d);
    const Shape s = shapeOf(d);
    if (s.M == 0) return {};  // nothing to write
    LaunchStep main;
    main.entry = baseName;
    main.grid = {uint32_t(g->tilesPerGroup * s.G), uint32_t(g->mTiles), uint32_t(g->splits)};
    main.block = {uint32_t(g->threads()), 1, 1};
    main.dynamicSmem = uint32_t(g->smemBytes());
    return {main};
  }

  int64_t workspace(const Config& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    if (g->splits <= 1) return 0;
    const Shape s = shapeOf(d);
    return int64_t(g->splits) * s.M * s.N * (s.gated() ? 2 : 1) * 4;
  }

  // Split-K: one arrival counter per output tile (templates/WeightGemm.cuh).
  int64_t zeroedWorkspace(const WeightGemmConfig& c, const OpDesc& d) const override {
    auto g = geometry(c, d);
    if (g->splits <= 1) return 0;
    return g->tilesPerGroup * shapeOf(d).G * g->mTiles * 4;
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    return stridedParams(c, d, addrs, {});
  }

  // x may be any [M, K] view with contiguous rows (a column slice of a wider activation) and y
  // any [M, N] view with contiguous rows; rows stay 16-byte (x) and pair (y) aligned.
  Status checkStrides(const OpDesc& d, const std::string& name, const std::vector<int64_t>& strides) const override {
    if (name != "x" && name != "y") return KernelFamily::checkStrides(d, name, strides);
    const int64_t cols = name == "x" ? d.dim("x", 1) : d.dim("w", 0);
    const int64_t align = name == "x" ? 8 : 2;
    if (strides.size() != 2 || strides[1] != 1 || strides[0] < cols || strides[0] % align != 0)
      return Error{fmt::format("{}: '{}' strides [{}]: rows must be contiguous (stride 1 in dim 1) and at least {} "
                               "elements apart, a multiple of {}", kOp, name,
                               fmt::join(strides, ", "), cols, align)};
    return {};
  }

  Result<std::vector<uint8_t>> stridedParams(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs,
                                             const TensorStrides& strides) const override {
    auto g = geometry(c, d);
    const Shape s = shapeOf(d);
    di::WeightGemmParams p{};
    p.ldx = s.K;
    p.ldy = s.N;
    for (const auto& [name, st] : strides) {
      DI_TRY(checkStrides(d, name, st));
      (name == "x" ? p.ldx : p.ldy) = st[0];
    }
    auto addr = [&](const char* n, uint64_t align) -> Result<uint64_t> {
      auto it = addrs.find(n);
      if (it == addrs.end()) return Error{fmt::format("{}: no device address for tensor '{}'", kOp, n)};
      if (it->second % align != 0)
        return Error{fmt::format("{}: tensor '{}' at 0x{:x} is not {}-byte aligned", kOp, n, it->second, align)};
      return it->second;
    };
    // y is written as pairs: 8 bytes of f32, 4 of bf16.
    auto x = addr("x", 16), w = addr("w", 16), ws = addr("w_scale", 4), y = addr("y", s.epilogue == 0 ? 8 : 4);
    for (const auto* r : {&x, &w, &ws, &y})
      if (!r->ok()) return r->error();
    p.x = reinterpret_cast<const uint16_t*>(*x);
    p.w = reinterpret_cast<const uint8_t*>(*w);
    p.w_scale = reinterpret_cast<const uint8_t*>(*ws);
    p.y = reinterpret_cast<void*>(*y);
    if (s.gated()) {
      auto wu = addr("w_up", 16), wus = addr("w_up_scale", 4);
      for (const auto* r : {&wu, &wus})
        if (!r->ok()) return r->error();
      p.w_up = reinterpret_cast<const uint8_t*>(*wu);
      p.w_up_scale = reinterpret_cast<const uint8_t*>(*wus);
    }
    if (g->splits > 1) {
      auto ws2 = addr("__workspace", 16);
      if (!ws2.ok()) return ws2.error();
      p.partial = reinterpret_cast<float*>(*ws2);
      auto z = addr("__zeroed", 4);
      if (!z.ok()) return z.error();
      p.arrivals = reinterpret_cast<uint32_t*>(*z);
    }
    p.M = int32_t(s.M);
    p.N = int32_t(s.N);
    p.Kg = int32_t(s.Kg);
    p.Ng = int32_t(s.Ng);
    p.tiles_per_group = int32_t(g->tilesPerGroup);
    p.k_blocks = int32_t(g->kBlocks);
    p.kb_per_split = int32_t(g->kbPerSplit);
    p.splits = g->splits;
    p.limit = float(d.attrs.getFloat("swiglu_limit", 10.0));
    return paramBytes(p);
  }

  std::vector<ShapeParam> shapeParams() const override {
    return {{"M", 1, "rows of x (tokens)"},
            {"N", 1280, "output columns (all groups)"},
            {"K", 5120, "input columns (all groups)"},
            {"weight_bits", 8, "8: fp8 e4m3, 4: fp4 e2m1"},
            {"groups", 1, "column groups (wo_a: 8)"},
            {"epilogue", 0, "0: f32, 1: bf16, 2: SwiGLU of w and w_up (bf16)"}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    OpDesc d;
    d.op = opName();
    const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K"), G = std::max<int64_t>(p.at("groups"), 1);
    const bool fp4 = p.at("weight_bits") == 4;
    const int64_t Kg = K / G, wcols = fp4 ? Kg / 2 : Kg;
    const std::vector<int64_t> scale = fp4 ? std::vector<int64_t>{N, Kg / 32} : std::vector<int64_t>{cdiv(N, 32), cdiv(Kg, 32)};
    d.shapes["x"] = {M, K};
    d.shapes["w"] = {N, wcols};
    d.shapes["w_scale"] = scale;
    if (p.at("epilogue") == 2) {
      d.shapes["w_up"] = {N, wcols};
      d.shapes["w_up_scale"] = scale;
    }
    d.attrs.setInt("weight_bits", p.at("weight_bits"));
    d.attrs.setInt("groups", G);
    d.attrs.setInt("epilogue", p.at("epilogue"));
    return d;
  }

  // Both formats, every epilogue, the grouped form, decode and prefill tiles.
  std::vector<std::pair<std::string, ShapeParams>> compileShapes() const override {
    return {{"default", {}},
            {"fp4 M=12", {{"M", 12}, {"N", 2304}, {"weight_bits", 4}}},
            {"swiglu", {{"M", 4}, {"N", 2304}, {"epilogue", 2}}},
            {"g8 bf16", {{"M", 1}, {"N", 8192}, {"K", 32768}, {"groups", 8}, {"epilogue", 1}}},
            {"M=4096", {{"M", 4096}, {"N", 2304}}},
            {"fp4 M=4096", {{"M", 4096}, {"N", 2304}, {"weight_bits", 4}, {"epilogue", 1}}}};
  }
  // Tensor cores at every shape.
  PtxChecks ptxChecks(const OpDesc&) const override { return {true, false}; }

  // Tuned along the rows; the decode buckets (M <= 16) keep the one-row-tile kernels apart from
  // the tensor-core prefill ones. One op serves every projection of the model, whose best configs
  // differ with the matrix, so its buckets also carry the projection's class.
  std::optional<BucketAxis> bucketAxis() const override {
    return BucketAxis{"M", {1, 2, 4, 8, 16, 64, 256, 1024, 4096}};
  }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override { return dimOf(d, "x", 0); }
  std::string bucketClass(const OpDesc& d) const override {
    auto x = d.shapes.find("x"), w = d.shapes.find("w");
    if (x == d.shapes.end() || w == d.shapes.end() || x->second.size() != 2 || w->second.size() != 2) return "";
    const int64_t groups = d.attrs.getInt("groups", 1), epi = d.attrs.getInt("epilogue", 0);
    return fmt::format("{} {}x{}{} {}", d.attrs.getInt("weight_bits", 8) == 4 ? "fp4" : "fp8", w->second[0],
                       x->second[1], groups > 1 ? fmt::format(" g{}", groups) : "",
                       epi == 2 ? "swiglu" : epi == 1 ? "bf16" : "f32");
  }
  // The model's projections through weight_gemm, one class each: format, N, K, groups and the
  // epilogue the forward pass uses (f32 before a norm or RoPE, bf16 where the output is rounded,
  // SwiGLU for the shared expert's w1/w3).
  std::vector<TuneShape> tuneShapes(const ModelDims& m, int64_t v) const override {
    struct Proj {
      int64_t N, K, bits, groups, epilogue;
    };
    const Proj projs[] = {{m.qLoraRank, m.hidden, 8, 1, 0},                                 // wq_a
                          {m.heads * m.headDim, m.qLoraRank, 8, 1, 0},                      // wq_b
                          {m.headDim, m.hidden, 8, 1, 0},                                   // wkv
                          {m.oGroups * m.oLoraRank, m.heads * m.headDim, 8, m.oGroups, 1},  // wo_a
                          {m.hidden, m.oGroups * m.oLoraRank, 8, 1, 1},                     // wo_b
                          {m.moeIntermediate, m.hidden, 8, 1, 2},                           // shared expert w1/w3
                          {m.hidden, m.moeIntermediate, 8, 1, 0},                           // shared expert w2
                          {m.indexHeads * m.indexHeadDim, m.qLoraRank, 8, 1, 0}};           // indexer wq_b
    std::vector<TuneShape> out;
    for (const Proj& g : projs) {
      const ShapeParams p = {{"M", v},           {"N", g.N},          {"K", g.K},
                             {"weight_bits", g.bits}, {"groups", g.groups}, {"epilogue", g.epilogue}};
      out.push_back({p, p});
    }
    return out;
  }

  // Within the per-element bound derived from fp32 accumulation (reference/QuantGemmRef.h): f32
  // outputs tau(K) * sum|x w|; bf16 outputs bit-exact except at near-ties of the rounding, where
  // one bf16 step.
  AccuracyRule accuracy(const std::string&) const override {
    return {AccuracyRule::Kind::Bound, 1.0, "error / derived bound"};
  }

  // x ~ N(0, 1); the weight codes and scales of EncodedInputs.h (never NaN; kernel speed does not
  // depend on the values, the reference check covers them like any others), the up projection's
  // too for the SwiGLU epilogue. Rows of x are independent.
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t M = p.get("M", 1), N = p.get("N", 1280), K = p.get("K", 5120), bits = p.get("weight_bits", 8),
                  G = p.get("groups", 1), epi = p.get("epilogue", 0);
    DI_TRY(p.require(M >= 1 && N >= 1 && K >= 32 && G >= 1 && K % G == 0 && N % G == 0 && (bits == 4 || bits == 8) &&
                         epi >= 0 && epi <= 2,
                     "needs M, N >= 1, K >= 32, groups dividing N and K, weight_bits 4 or 8, epilogue 0..2"));
    const int64_t Kg = K / G;
    const auto pool = bf16NormalPool(rng);
    BenchInputs in;
    in.attrs.setInt("weight_bits", bits);
    in.attrs.setInt("groups", G);
    in.attrs.setInt("epilogue", epi);
    in.inputs["x"] = bf16FromPool(rng, pool, {M, K});
    const std::vector<int64_t> scale = bits == 8 ? std::vector<int64_t>{cdiv(N, 32), cdiv(Kg, 32)}
                                                 : std::vector<int64_t>{N, Kg / 32};
    in.inputs["w"] = quantCodes(rng, int(bits), N, Kg);
    in.inputs["w_scale"] = quantScales(rng, scale);
    if (epi == 2) {
      in.inputs["w_up"] = quantCodes(rng, int(bits), N, Kg);
      in.inputs["w_up_scale"] = quantScales(rng, scale);
    }
    auto bytes = denseBytes(*this, in);
    if (!bytes.ok()) return bytes.error();
    in.bytes = *bytes;
    in.flops = 2.0 * double(M) * double(N) * double(Kg) * (epi == 2 ? 2 : 1);
    in.rowSplit = BenchRowSplit{M, 2.0 * double(N) * double(Kg) * (epi == 2 ? 2 : 1), double(N), {"x"}};
    return in;
  }
};

}  // namespace

const KernelFamily& weightGemmFamily() {
  static const WeightGemmFamily f;
  return f;
}

}  // namespace deepinfer
