// The CTA tile of the quantized-weight GEMMs (templates/QuantGemmTile.cuh) seen from the host:
// its knobs, the rules a config must meet, and the shared-memory and register figures the
// template's layout implies. Shared by WeightGemmFamily.cpp and MoeExpertsFamily.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "deepinfer/KernelFamily.h"

namespace deepinfer {

struct QuantTile {
  bool fp4 = false;    // e2m1 weights (else e4m3)
  bool gated = false;  // two weight matrices (SwiGLU gate and up)
  int bm = 16, bn = 64, bk = 128;  // CTA tile: rows, weight rows (output columns), K per stage
  int wm = 1, wn = 1, wk = 4;      // warps along M, N and (inside a stage) K
  int stages = 3;

  int warps() const { return wm * wn * wk; }
  int threads() const { return warps() * 32; }
  int mTiles() const { return bm < 16 ? 1 : bm / (16 * wm); }  // m16 tiles per warp (block_m < 16: one partial)
  int nTiles() const { return bn / (8 * wn); }   // n8 tiles per warp (per matrix)
  int accPerThread() const { return (gated ? 2 : 1) * mTiles() * nTiles() * 4; }
  // Mirrors qg::Tile::kBlockOrder: decode tiles whose warps take whole quads of k32 blocks
  // (a thread multiplies one whole k32 block of a weight row per quad).
  bool blockOrder() const { return bm <= 16 && (bk / 32 / wk) % 4 == 0; }
  int64_t stageBytes() const;
  int64_t weightBytesPerStage() const;
  // Prefill tiles (block_m > 16): one decoded bf16 stage of weights (qg::Tile::kDecBytes), held twice.
  int64_t decodedBytes() const;
  // Mirrors qg::Tile::kSmemBytes (pipeline or WK reduction, whichever is larger, + row table).
  int64_t smemBytes() const;
  // Register budget the emitted __launch_bounds__ allows, and the min-blocks argument giving it.
  int regsCap() const;
  int minBlocks() const;
  // "FP4, BM, BN, BK, WM, WN, WK, STAGES" for the template instantiation.
  std::string templateArgs() const;
};

// The tile knobs of a typed config (block_m, block_n, block_k, warps_m, warps_n, warps_k, stages);
// a family's config derives from it and lists these fields with its own.
struct QuantTileKnobs {
  int64_t blockM = 0, blockN = 0, blockK = 0, warpsM = 0, warpsN = 0, warpsK = 0, stages = 0;
};

// The tile of the knobs, with `bnScale` applied to block_n (moe_experts' second GEMM uses twice
// the first's), checked against the template's rules; the message names the knob and ends with
// the whole config `cfg`.
Result<QuantTile> quantTileOf(const QuantTileKnobs& k, const std::string& cfg, const std::string& op, bool fp4,
                              bool gated, int bnScale = 1);
// The knobs of a tile (inverse of the above for bnScale = 1).
void setTileKnobs(QuantTileKnobs& k, const QuantTile& t);

// A prefill tile (block_m > 16) fitted to the target's shared-memory cap: stages lowered to 3 at
// least, then block_n halved (warps_n kept within it) until it fits; `q` as given when nothing does.
QuantTile fitPrefillTile(QuantTile q, const TargetProfile& target);

// block_m of a decode tile for up to `rows` rows (at most 16): the next power of two.
int decodeBlockM(int64_t rows);

// How many CTAs of this tile the target keeps resident per SM (shared memory, registers, warps).
int tileCtasPerSm(const QuantTile& t, const TargetProfile& target);

}  // namespace deepinfer
