#include "QuantTileGeometry.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "deepinfer/Specialize.h"

namespace deepinfer {
namespace {

int64_t align16(int64_t b) { return (b + 15) / 16 * 16; }
bool pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

int64_t QuantTile::weightBytesPerStage() const {
  return (gated ? 2 : 1) * int64_t(bn) * (bk / 32) * (fp4 ? 16 : 32);
}

int64_t QuantTile::stageBytes() const {
  const int kb = bk / 32;
  const int64_t sRows = fp4 ? bn : (bn + 31) / 32 + 1;
  const int64_t sRow = 4 * ((kb + 6) / 4);
  const int64_t mat = int64_t(bn) * kb * (fp4 ? 16 : 32) + align16(sRows * sRow);
  return int64_t(bm) * bk * 2 + (gated ? 2 : 1) * mat;
}

int64_t QuantTile::decodedBytes() const { return bm > 16 ? (gated ? 2 : 1) * int64_t(bn) * bk * 2 : 0; }

int64_t QuantTile::smemBytes() const {
  const int64_t pipe = stages * stageBytes() + 2 * decodedBytes();
  const int64_t red = wk > 1 ? int64_t(wk - 1) * wm * wn * accPerThread() * 32 * 4 : 0;
  return align16(std::max(pipe, red)) + align16(int64_t(bm) * 12);
}

// Accumulators, the warp's A fragments (8 registers per m16 tile), one decoded B tile and the
// addressing (decode tiles, block_m <= 16, keep 4 registers per 16-byte copy of a stage: the
// hoisted addresses of StageCopier); ptxas lands near this for the tiles here, and the cap leaves
// it a quarter more.
// Block order keeps a quad's A registers (4 chunks: 16 per row half, rows g + 8 only for 16-row
// tiles) and a whole decoded k32 block (16).
int QuantTile::regsCap() const {
  int need = accPerThread() + 8 * mTiles() + 56;
  if (blockOrder()) need += (bm >= 16 ? 32 : 16) + 16 - 8;
  if (bm <= 16) {
    const int aCopies = (bm * bk / 8 + threads() - 1) / threads();
    const int wCopies = (bn * (bk / 32) * (fp4 ? 16 : 32) / 16 + threads() - 1) / threads();
    need += 4 * (aCopies + (gated ? 2 : 1) * wCopies);
  }
  const int cap = std::min(255, (need * 5 / 4 + 7) / 8 * 8);
  return std::max(cap, 64);
}

int QuantTile::minBlocks() const { return std::max(1, 65536 / (threads() * regsCap())); }

std::string QuantTile::templateArgs() const {
  return fmt::format("{}, {}, {}, {}, {}, {}, {}, {}", fp4 ? "true" : "false", bm, bn, bk, wm, wn, wk, stages);
}

Result<QuantTile> quantTileOf(const QuantTileKnobs& k, const std::string& cfg, const std::string& op, bool fp4,
                              bool gated, int bnScale) {
  QuantTile t;
  t.fp4 = fp4;
  t.gated = gated;
  t.bm = int(k.blockM);  // knobs are in 0..2^31-1 (fromKnobs)
  t.bn = int(std::min<int64_t>(k.blockN * bnScale, INT32_MAX));
  t.bk = int(k.blockK);
  t.wm = int(k.warpsM);
  t.wn = int(k.warpsN);
  t.wk = int(k.warpsK);
  t.stages = int(k.stages);
  if (t.bm < 1 || t.bm > 256 || !pow2(t.bm))
    return Error{fmt::format("{}: block_m = {} must be a power of two in 1..256 ({})", op, t.bm, cfg)};
  if (t.bn < 8 || t.bn > 512 || !pow2(t.bn))
    return Error{fmt::format("{}: block_n = {} must be a power of two in 8..512 ({})", op, t.bn, cfg)};
  if (t.bk < 32 || t.bk > 512 || !pow2(t.bk))
    return Error{fmt::format("{}: block_k = {} must be a power of two in 32..512 ({})", op, t.bk, cfg)};
  if (t.wm < 1 || t.wn < 1 || t.wk < 1 || !pow2(t.wm) || !pow2(t.wn) || !pow2(t.wk))
    return Error{fmt::format("{}: warps_m/n/k = {}/{}/{} must be powers of two ({})", op, t.wm, t.wn, t.wk, cfg)};
  if (t.warps() > 16) return Error{fmt::format("{}: {} warps per CTA, at most 16 ({})", op, t.warps(), cfg)};
  if (t.bm < 16 ? t.wm != 1 : t.bm % (16 * t.wm) != 0)
    return Error{fmt::format("{}: block_m = {} is not whole m16 tiles for {} warps_m (block_m under 16 is one "
                             "partial m16 tile: warps_m = 1) ({})", op, t.bm, t.wm, cfg)};
  if (t.bn % (8 * t.wn) != 0)
    return Error{fmt::format("{}: block_n = {} is not whole n8 tiles for {} warps_n ({})", op, t.bn, t.wn, cfg)};
  if ((t.bk / 32) % t.wk != 0)
    return Error{fmt::format("{}: block_k = {} has {} k32 blocks, not a multiple of warps_k = {} ({})", op, t.bk,
                             t.bk / 32, t.wk, cfg)};
  if (t.stages < 2 || t.stages > 8)
    return Error{fmt::format("{}: stages = {} must be in 2..8 ({})", op, t.stages, cfg)};
  // Prefill tiles decode a stage's weights one iteration ahead of its multiplies (QuantGemmTile.cuh).
  if (t.bm > 16 && (t.wk != 1 || t.stages < 3))
    return Error{fmt::format("{}: block_m = {} (a prefill tile) needs warps_k = 1 and stages >= 3, not {} and {} ({})",
                             op, t.bm, t.wk, t.stages, cfg)};
  // 32 m16n8 tiles are 128 accumulator registers: more leaves ptxas no room and it spills.
  if (t.mTiles() * t.nTiles() * (gated ? 2 : 1) > 32)
    return Error{fmt::format("{}: a warp would hold {} accumulator tiles (at most 32) ({})", op,
                             t.mTiles() * t.nTiles() * (gated ? 2 : 1), cfg)};
  return t;
}

void setTileKnobs(QuantTileKnobs& k, const QuantTile& t) {
  k.blockM = t.bm;
  k.blockN = t.bn;
  k.blockK = t.bk;
  k.warpsM = t.wm;
  k.warpsN = t.wn;
  k.warpsK = t.wk;
  k.stages = t.stages;
}

QuantTile fitPrefillTile(QuantTile q, const TargetProfile& target) {
  for (QuantTile t = q; t.bn >= 8 * t.wn; t.bn /= 2) {
    QuantTile f = t;
    while (f.smemBytes() > target.smemPerCtaCap && f.stages > 3) --f.stages;
    if (f.smemBytes() <= target.smemPerCtaCap) return f;
  }
  return q;
}

int decodeBlockM(int64_t rows) {
  int bm = 1;
  while (bm < 16 && bm < rows) bm *= 2;
  return bm;
}

int tileCtasPerSm(const QuantTile& t, const TargetProfile& target) {
  ResourceEstimate e;
  e.smemBytes = t.smemBytes();
  e.threadsPerCta = t.threads();
  e.regsPerThread = t.regsCap();
  return occupancy(e, target);
}

}  // namespace deepinfer
