// The quantized-weight GEMM templates (weight_gemm, moe_experts) executed on the CPU by the SIMT
// emulator (SimtEmu.h) and compared with the C++ references by the GPU tests' rule: the same
// template code, the family's own launch plan, workspace and packed parameters, every case of
// tests/cases, the sm_80 default config and alternative tiles (split-K, warps over K and N,
// block_k 32..256, 2 x 2 prefill warps, SwiGLU pairs, groups). This checks the kernels' data flow
// (fragment orders, swizzles, scale addressing, the device-side grouping, and split-K's sums by
// the last CTA to arrive: the same bits in any CTA order, the zeroed workspace left zero) where
// no GPU is available; the GPU tests check the compiled kernels themselves.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <regex>

#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TargetProfile.h"
// clang-format off
#include "EmuCuda.h"
#include "EmuHarness.h"
#include "WeightGemm.cuh"
#include "WeightStream.cuh"
#include "MoeExperts.cuh"
#include "MoeStream.cuh"
// clang-format on

namespace {

using namespace deepinfer;
using emu_test::Buffer;
using emu_test::expectCtaOrderIndependent;
using emu_test::EmulatedRun;
using emu_test::runPlanEmulated;
using emu_test::templateArgs;

using WgFn = void (*)(const di::WeightGemmParams&);
using MoeFn = void (*)(const di::MoeExpertsParams&);

template <bool F, int BM, int BN, int BK, int WM, int WN, int WK, int S, int E, bool SP>
void wgTile(const di::WeightGemmParams& p) {
  di::weight_gemm_tile<F, BM, BN, BK, WM, WN, WK, S, E, SP>(p);
}
template <int BM>
void moeRoute(const di::MoeExpertsParams& p) {
  di::moe::route<BM>(p);
}
template <int BM, int BN, int BK, int WM, int WN, int WK, int S>
void moeW13(const di::MoeExpertsParams& p) {
  di::moe::w13<BM, BN, BK, WM, WN, WK, S>(p);
}
template <int BM, int BN, int BK, int WM, int WN, int WK, int S>
void moeW2(const di::MoeExpertsParams& p) {
  di::moe::w2<BM, BN, BK, WM, WN, WK, S>(p);
}

// The instantiations the emulator can run, by the template arguments the emitted unit spells.
#define DI_WG(F, BM, BN, BK, WM, WN, WK, S, E, SP) \
  {#F ", " #BM ", " #BN ", " #BK ", " #WM ", " #WN ", " #WK ", " #S ", " #E ", " #SP, &wgTile<F, BM, BN, BK, WM, WN, WK, S, E, SP>}
#define DI_WG_SPLITS(F, BM, BN, BK, WM, WN, WK, S, E) \
  DI_WG(F, BM, BN, BK, WM, WN, WK, S, E, true), DI_WG(F, BM, BN, BK, WM, WN, WK, S, E, false)
const std::map<std::string, WgFn>& wgTiles() {
  static const std::map<std::string, WgFn> m = {
      // decode tiles (the sm_80 defaults): e4m3 block_n 64, e2m1 128, halved for SwiGLU
      DI_WG_SPLITS(false, 16, 64, 128, 1, 1, 4, 3, 0), DI_WG_SPLITS(false, 16, 64, 128, 1, 1, 4, 3, 1),
      DI_WG_SPLITS(false, 16, 32, 128, 1, 1, 4, 3, 2), DI_WG_SPLITS(true, 16, 128, 128, 1, 1, 4, 3, 0),
      DI_WG_SPLITS(true, 16, 128, 128, 1, 1, 4, 3, 1), DI_WG_SPLITS(true, 16, 64, 128, 1, 1, 4, 3, 2),
      // prefill tiles (sm_80 defaults): 2 x 2 warps, block_k 32, 3 stages
      DI_WG_SPLITS(false, 32, 128, 32, 1, 2, 1, 3, 0), DI_WG_SPLITS(false, 64, 128, 32, 2, 2, 1, 3, 0),
      DI_WG_SPLITS(false, 128, 128, 32, 2, 2, 1, 3, 0), DI_WG_SPLITS(true, 64, 128, 32, 2, 2, 1, 3, 1),
      DI_WG_SPLITS(true, 64, 64, 32, 2, 2, 1, 3, 2),
      // alternatives: 2 x 2 decode warps, block_k 256 over 8 warps, narrow tiles, wide prefill K
      DI_WG_SPLITS(false, 16, 64, 128, 1, 2, 2, 3, 0), DI_WG_SPLITS(true, 16, 64, 256, 1, 1, 8, 2, 1),
      DI_WG_SPLITS(false, 16, 16, 128, 1, 1, 4, 2, 0), DI_WG_SPLITS(true, 32, 64, 64, 1, 2, 1, 3, 2),
      DI_WG_SPLITS(false, 32, 64, 64, 1, 2, 1, 3, 2),
      DI_WG_SPLITS(false, 64, 64, 64, 2, 2, 1, 3, 1),
      // prefill tiles, weights decoded once per CTA (sm_80 defaults: 48 KB, 128-row tiles at block_n 64)
      DI_WG_SPLITS(true, 64, 128, 32, 2, 2, 1, 4, 1), DI_WG_SPLITS(false, 128, 64, 32, 2, 2, 1, 3, 0),
      DI_WG_SPLITS(false, 128, 64, 32, 2, 2, 1, 3, 1), DI_WG_SPLITS(true, 64, 64, 32, 2, 2, 1, 4, 2),
      DI_WG_SPLITS(false, 32, 128, 32, 1, 2, 1, 4, 0), DI_WG_SPLITS(true, 32, 128, 32, 1, 2, 1, 4, 0),
      DI_WG_SPLITS(true, 128, 64, 32, 2, 2, 1, 4, 0),
      // prefill alternatives: 256 rows on 4 x 2 warps, 256 columns on 2 x 4, one n8 tile per warp
      // (ldmatrix .x2), block_k 64 and 128, 8 warps over N
      DI_WG_SPLITS(false, 256, 64, 32, 4, 2, 1, 3, 0), DI_WG_SPLITS(true, 128, 256, 32, 2, 4, 1, 3, 1),
      DI_WG_SPLITS(false, 64, 16, 32, 2, 2, 1, 3, 0), DI_WG_SPLITS(true, 64, 128, 64, 2, 2, 1, 3, 1),
      DI_WG_SPLITS(false, 32, 64, 128, 1, 2, 1, 3, 0), DI_WG_SPLITS(true, 64, 32, 32, 2, 4, 1, 3, 2),
      DI_WG_SPLITS(false, 128, 64, 64, 2, 2, 1, 3, 0),
      // decode tiles of 1..8 rows (sm_80 defaults for M = 1..8, and alternatives)
      DI_WG_SPLITS(false, 1, 64, 128, 1, 1, 4, 5, 0), DI_WG_SPLITS(false, 8, 64, 128, 1, 1, 4, 4, 1),
      DI_WG_SPLITS(false, 8, 32, 128, 1, 1, 4, 4, 2), DI_WG_SPLITS(false, 4, 64, 128, 1, 1, 4, 5, 1),
      DI_WG_SPLITS(true, 1, 128, 128, 1, 1, 4, 5, 0), DI_WG_SPLITS(false, 2, 32, 128, 1, 1, 4, 4, 0),
      DI_WG_SPLITS(false, 4, 64, 256, 1, 1, 8, 2, 0), DI_WG_SPLITS(true, 1, 64, 128, 1, 2, 2, 3, 1),
      DI_WG_SPLITS(false, 4, 32, 128, 1, 1, 4, 3, 2), DI_WG_SPLITS(true, 4, 32, 128, 1, 1, 4, 3, 2),
      DI_WG_SPLITS(false, 8, 64, 128, 1, 1, 4, 3, 1),
      // block order (a thread multiplies whole k32 blocks): the sm_80 decode defaults, 4 warps over N
      DI_WG_SPLITS(false, 16, 64, 128, 1, 4, 1, 3, 0), DI_WG_SPLITS(false, 16, 64, 128, 1, 4, 1, 3, 1),
      DI_WG_SPLITS(false, 16, 32, 128, 1, 4, 1, 3, 2), DI_WG_SPLITS(true, 16, 128, 128, 1, 4, 1, 3, 0),
      DI_WG_SPLITS(true, 16, 128, 128, 1, 4, 1, 3, 1), DI_WG_SPLITS(true, 16, 64, 128, 1, 4, 1, 3, 2),
      DI_WG_SPLITS(false, 1, 64, 128, 1, 4, 1, 5, 0), DI_WG_SPLITS(false, 8, 64, 128, 1, 4, 1, 4, 1),
      DI_WG_SPLITS(false, 8, 32, 128, 1, 4, 1, 4, 2), DI_WG_SPLITS(false, 4, 64, 128, 1, 4, 1, 5, 1),
      DI_WG_SPLITS(true, 1, 128, 128, 1, 4, 1, 5, 0), DI_WG_SPLITS(false, 2, 64, 128, 1, 4, 1, 5, 0),
      DI_WG_SPLITS(false, 4, 32, 128, 1, 4, 1, 4, 2), DI_WG_SPLITS(true, 4, 64, 128, 1, 4, 1, 4, 2),
      DI_WG_SPLITS(false, 8, 64, 128, 1, 4, 1, 3, 1), DI_WG_SPLITS(false, 4, 64, 128, 1, 4, 1, 5, 0),
      DI_WG_SPLITS(false, 8, 64, 128, 1, 4, 1, 4, 0), DI_WG_SPLITS(true, 8, 128, 128, 1, 4, 1, 4, 1),
      // block order alternatives: 2 x 2 warps, 4 warps over K with whole quads each, 2 rows
      DI_WG_SPLITS(false, 2, 32, 128, 1, 4, 1, 4, 0), DI_WG_SPLITS(false, 4, 64, 256, 1, 2, 2, 2, 0),
      DI_WG_SPLITS(false, 8, 32, 512, 1, 1, 4, 2, 0), DI_WG_SPLITS(true, 1, 64, 256, 1, 2, 2, 3, 1),
      DI_WG_SPLITS(true, 16, 128, 128, 1, 4, 1, 2, 1), DI_WG_SPLITS(false, 4, 32, 256, 1, 2, 2, 2, 2),
      DI_WG_SPLITS(true, 4, 32, 256, 1, 2, 2, 2, 2),
      // block order on 8 warps: 4 over N x 2 over K, and one launch with 2 over N x 4 over K
      DI_WG_SPLITS(false, 1, 64, 256, 1, 4, 2, 3, 0), DI_WG_SPLITS(false, 1, 16, 512, 1, 2, 4, 4, 0),
      DI_WG_SPLITS(true, 16, 16, 512, 1, 2, 4, 2, 1), DI_WG_SPLITS(false, 8, 16, 512, 1, 2, 4, 2, 2),
      DI_WG_SPLITS(true, 8, 16, 512, 1, 2, 4, 2, 2),
  };
  return m;
}
// The entry's two phases (weights before the wait, the rest after; no wait in the emulator).
template <bool F, int NT8, int WN, int WK, int U, int E, bool PIPE, bool SPLIT = false>
void wgStream(const di::WeightGemmParams& p) {
  const di::WeightGemmStream<F, NT8, WN, WK, U, E, PIPE, SPLIT> k(p);
  k.run(p);
}
// The streaming schedule's instantiations: both formats and every epilogue of one geometry,
// single-buffered (stream = 1) and double-buffered (stream = 2).
#define DI_WS2(F, NT8, WN, WK, U, E, P) \
  {#F ", " #NT8 ", " #WN ", " #WK ", " #U ", " #E ", " #P, &wgStream<F, NT8, WN, WK, U, E, P>}
#define DI_WS1(F, NT8, WN, WK, U, E) DI_WS2(F, NT8, WN, WK, U, E, false), DI_WS2(F, NT8, WN, WK, U, E, true)
#define DI_WS(NT8, WN, WK, U)                                                                         \
  DI_WS1(false, NT8, WN, WK, U, 0), DI_WS1(false, NT8, WN, WK, U, 1), DI_WS1(false, NT8, WN, WK, U, 2), \
      DI_WS1(true, NT8, WN, WK, U, 0), DI_WS1(true, NT8, WN, WK, U, 1), DI_WS1(true, NT8, WN, WK, U, 2)
// K split over CTAs (the entry's arguments end with ", true").
#define DI_WSS1(F, NT8, WN, WK, U, E, P) \
  {#F ", " #NT8 ", " #WN ", " #WK ", " #U ", " #E ", " #P ", true", &wgStream<F, NT8, WN, WK, U, E, P, true>}
#define DI_WSS(NT8, WN, WK, U, P)                                                                            \
  DI_WSS1(false, NT8, WN, WK, U, 0, P), DI_WSS1(false, NT8, WN, WK, U, 1, P), DI_WSS1(false, NT8, WN, WK, U, 2, P), \
      DI_WSS1(true, NT8, WN, WK, U, 0, P), DI_WSS1(true, NT8, WN, WK, U, 1, P), DI_WSS1(true, NT8, WN, WK, U, 2, P)
const std::map<std::string, WgFn>& wgStreams() {
  static const std::map<std::string, WgFn> m = {
      // the sm_80 defaults of the cases (8 or 16 rows of x; 4 warps over N, or fewer over N and
      // some over K) and the alternatives the tests name
      DI_WS(1, 4, 1, 4), DI_WS(2, 4, 1, 4), DI_WS(1, 2, 1, 4), DI_WS(2, 2, 1, 4), DI_WS(1, 1, 1, 4), DI_WS(1, 1, 1, 1),
      DI_WS(1, 1, 2, 2), DI_WS(1, 1, 8, 1), DI_WS(1, 2, 2, 1), DI_WS(1, 4, 1, 1), DI_WS(1, 1, 1, 2), DI_WS(1, 2, 1, 2),
      DI_WS(1, 1, 2, 1),
      // K splits over CTAs: one step per round, double-buffered with warps over K, 16 rows
      DI_WSS(1, 1, 1, 1, false), DI_WSS(1, 1, 2, 2, true), DI_WSS(2, 2, 1, 4, false),
      DI_WS(2, 1, 1, 4), DI_WS(1, 2, 2, 4), DI_WS(2, 2, 2, 4), DI_WS(1, 1, 4, 4), DI_WS(2, 1, 4, 4),
      DI_WS(1, 1, 8, 4), DI_WS(2, 1, 8, 4), DI_WS(1, 1, 2, 4), DI_WS(2, 1, 2, 4), DI_WS(1, 1, 4, 1),
      DI_WS(2, 2, 4, 2), DI_WS(1, 4, 2, 8), DI_WS(2, 1, 16, 1), DI_WS(1, 4, 4, 2), DI_WS2(true, 2, 2, 1, 1, 2, false),
      // SwiGLU pairs: 2 steps per round (e4m3, or 8 rows), 1 (e2m1 with 16 rows)
      DI_WS(1, 2, 2, 2), DI_WS(1, 1, 4, 2), DI_WS(2, 2, 2, 1), DI_WS(1, 4, 1, 2), DI_WS(2, 4, 1, 1),
      DI_WS(1, 1, 8, 2), DI_WS(2, 1, 8, 1), DI_WS(2, 1, 4, 1), DI_WS(2, 2, 2, 2), DI_WS(2, 1, 4, 2),
  };
  return m;
}

// The ring (stream = 3): the entry constructs the kernel (its first rounds) before the wait.
template <bool F, int NT8, int WN, int WK, int U, int S, int E>
void wgRing(const di::WeightGemmParams& p) {
  di::WeightGemmRing<F, NT8, WN, WK, U, S, E> k(p);
  k.run(p);
}
#define DI_WR1(F, NT8, WN, WK, U, S, E) \
  {#F ", " #NT8 ", " #WN ", " #WK ", " #U ", " #S ", " #E, &wgRing<F, NT8, WN, WK, U, S, E>}
#define DI_WR(NT8, WN, WK, U, S)                                                                              \
  DI_WR1(false, NT8, WN, WK, U, S, 0), DI_WR1(false, NT8, WN, WK, U, S, 1), DI_WR1(false, NT8, WN, WK, U, S, 2), \
      DI_WR1(true, NT8, WN, WK, U, S, 0), DI_WR1(true, NT8, WN, WK, U, S, 1), DI_WR1(true, NT8, WN, WK, U, S, 2)
const std::map<std::string, WgFn>& wgRings() {
  static const std::map<std::string, WgFn> m = {
      // the test's configs: 2 slots, 8 slots with 1-step rounds, 16 rows, warps over K (some
      // warps without rounds), 8 steps per round (512-byte rows per copy), warps over N past the tiles
      DI_WR(1, 1, 1, 1, 2), DI_WR(1, 1, 1, 1, 8), DI_WR(2, 2, 2, 2, 4), DI_WR(1, 1, 16, 1, 3), DI_WR(1, 4, 1, 8, 3),
      DI_WR(2, 4, 2, 2, 5), DI_WR(1, 2, 4, 4, 3),
      // the ring candidate of each decode case on sm_80 (ringTile; the default once measured)
      DI_WR1(false, 1, 1, 1, 2, 2, 0), DI_WR1(true, 2, 2, 1, 1, 2, 2), DI_WR1(false, 1, 1, 4, 1, 4, 2), DI_WR1(false, 1, 2, 1, 2, 2, 0), DI_WR1(false, 1, 2, 2, 1, 3, 2),
      DI_WR1(false, 1, 4, 1, 2, 3, 0), DI_WR1(false, 1, 4, 1, 2, 4, 1), DI_WR1(false, 2, 1, 8, 2, 2, 1),
      DI_WR1(false, 2, 4, 1, 2, 3, 0), DI_WR1(false, 2, 4, 1, 2, 3, 1), DI_WR1(true, 1, 1, 1, 2, 2, 1),
      DI_WR1(true, 1, 1, 8, 2, 2, 0), DI_WR1(true, 1, 2, 1, 2, 3, 0), DI_WR1(true, 2, 2, 2, 1, 2, 2),
      DI_WR1(true, 2, 4, 1, 2, 2, 1), DI_WR1(true, 2, 4, 1, 2, 3, 0),
  };
  return m;
}

#define DI_MOE(BM, BN, BK, WM, WN, WK, S)                                                          \
  {#BM ", " #BN ", " #BK ", " #WM ", " #WN ", " #WK ", " #S,                                      \
   std::pair<MoeFn, MoeFn>{&moeW13<BM, BN, BK, WM, WN, WK, S>, &moeW2<BM, 2 * BN, BK, WM, WN, WK, S>}}
const std::map<std::string, std::pair<MoeFn, MoeFn>>& moeTiles() {
  static const std::map<std::string, std::pair<MoeFn, MoeFn>> m = {
      DI_MOE(16, 64, 128, 1, 1, 4, 3), DI_MOE(64, 64, 32, 2, 2, 1, 3), DI_MOE(128, 64, 32, 2, 2, 1, 3),
      DI_MOE(16, 32, 128, 1, 2, 2, 2), DI_MOE(32, 64, 64, 1, 2, 1, 3),
      // decode tiles: block_m = T rounded up (sm_80 defaults), block_n 32 for few active experts
      DI_MOE(1, 32, 128, 1, 1, 4, 8), DI_MOE(4, 32, 128, 1, 1, 4, 8), DI_MOE(8, 32, 128, 1, 1, 4, 7),
      DI_MOE(16, 32, 128, 1, 1, 4, 5), DI_MOE(2, 32, 128, 1, 1, 4, 3), DI_MOE(4, 64, 128, 1, 2, 2, 2),
      // block order: the sm_80 decode defaults (4 warps over N) and alternatives
      DI_MOE(1, 32, 128, 1, 4, 1, 8), DI_MOE(4, 32, 128, 1, 4, 1, 8), DI_MOE(8, 32, 128, 1, 4, 1, 7),
      DI_MOE(16, 32, 128, 1, 4, 1, 5), DI_MOE(2, 32, 128, 1, 4, 1, 8), DI_MOE(16, 64, 128, 1, 4, 1, 3),
      DI_MOE(2, 32, 128, 1, 4, 1, 3), DI_MOE(4, 32, 256, 1, 2, 2, 2), DI_MOE(16, 16, 128, 1, 2, 1, 3),
      DI_MOE(1, 32, 256, 1, 4, 2, 4),
      // prefill: the sm_80 defaults (48 KB) and alternatives (256 rows, 8 warps with one n8 tile
      // per w13 warp, block_k 64)
      DI_MOE(128, 32, 32, 2, 2, 1, 4), DI_MOE(64, 64, 32, 2, 2, 1, 4), DI_MOE(256, 32, 32, 4, 2, 1, 3),
      DI_MOE(128, 32, 32, 2, 4, 1, 3), DI_MOE(64, 32, 64, 2, 2, 1, 3),
      // prefill, 8 warps over twice the columns and 256 rows, both at block_k 64
      DI_MOE(128, 64, 64, 2, 4, 1, 3), DI_MOE(256, 32, 64, 4, 2, 1, 3),
  };
  return m;
}

template <int NT8, int WN, int WK, int U, bool P>
void moeW13Stream(const di::MoeExpertsParams& p) {
  di::moe::w13_stream<NT8, WN, WK, U, P>(p);
}
template <int NT8, int WN, int WK, int U, bool P>
void moeW2Stream(const di::MoeExpertsParams& p) {
  di::moe::w2_stream<NT8, WN, WK, U, P>(p);
}
// moe_experts' streaming GEMMs by w13's template arguments; w2 keeps twice w13's steps per round,
// at most 4 (MoeExpertsFamily.cpp's StreamGemms::u2).
#define DI_MOE_WS2(NT8, WN, WK, U, P)                                                         \
  {#NT8 ", " #WN ", " #WK ", " #U ", " #P,                                                       \
   std::pair<MoeFn, MoeFn>{&moeW13Stream<NT8, WN, WK, U, P>, &moeW2Stream<NT8, WN, WK, (2 * U < 4 ? 2 * U : 4), P>}}
#define DI_MOE_WS(NT8, WN, WK, U) DI_MOE_WS2(NT8, WN, WK, U, false), DI_MOE_WS2(NT8, WN, WK, U, true)
const std::map<std::string, std::pair<MoeFn, MoeFn>>& moeStreams() {
  static const std::map<std::string, std::pair<MoeFn, MoeFn>> m = {
      DI_MOE_WS(1, 4, 1, 2), DI_MOE_WS(1, 4, 2, 2), DI_MOE_WS(1, 4, 4, 2), DI_MOE_WS(1, 2, 1, 2),
      DI_MOE_WS(1, 2, 2, 2), DI_MOE_WS(1, 2, 4, 2), DI_MOE_WS(2, 4, 1, 1), DI_MOE_WS(2, 4, 2, 1),
      DI_MOE_WS(1, 4, 1, 4), DI_MOE_WS(1, 4, 1, 1), DI_MOE_WS(1, 4, 2, 4), DI_MOE_WS(1, 4, 2, 1),
      DI_MOE_WS(1, 1, 4, 1), DI_MOE_WS(2, 1, 16, 1), DI_MOE_WS(2, 1, 4, 1),
  };
  return m;
}

template <int NT8, int WN, int WK, int U, int S>
void moeW13Ring(const di::MoeExpertsParams& p) {
  di::moe::w13_ring<NT8, WN, WK, U, S>(p);
}
template <int NT8, int WN, int WK, int U, int S>
void moeW2Ring(const di::MoeExpertsParams& p) {
  di::moe::w2_ring<NT8, WN, WK, U, S>(p);
}
// The ring's GEMMs by w13's template arguments (the last is the slot count); w2 keeps twice
// w13's steps per round, at most 4.
#define DI_MOE_WR(NT8, WN, WK, U, S)                                                                     \
  {#NT8 ", " #WN ", " #WK ", " #U ", " #S,                                                                  \
   std::pair<MoeFn, MoeFn>{&moeW13Ring<NT8, WN, WK, U, S>, &moeW2Ring<NT8, WN, WK, (2 * U < 4 ? 2 * U : 4), S>}}
const std::map<std::string, std::pair<MoeFn, MoeFn>>& moeRings() {
  static const std::map<std::string, std::pair<MoeFn, MoeFn>> m = {
      DI_MOE_WR(1, 4, 1, 1, 3), DI_MOE_WR(1, 4, 1, 1, 4), DI_MOE_WR(1, 4, 1, 1, 5), DI_MOE_WR(1, 4, 1, 1, 6),
      DI_MOE_WR(1, 4, 1, 1, 7), DI_MOE_WR(1, 4, 1, 1, 8), DI_MOE_WR(1, 4, 1, 1, 2), DI_MOE_WR(2, 2, 2, 1, 4),
      DI_MOE_WR(1, 1, 8, 2, 3), DI_MOE_WR(2, 1, 16, 1, 2), DI_MOE_WR(1, 4, 2, 1, 4), DI_MOE_WR(1, 4, 2, 1, 3),
      DI_MOE_WR(1, 4, 4, 1, 3), DI_MOE_WR(1, 4, 2, 1, 5), DI_MOE_WR(1, 4, 4, 1, 4), DI_MOE_WR(1, 4, 4, 1, 5),
  };
  return m;
}

// The weight_gemm tile or the moe_experts step (route, w13, w2) of a plan step, by the template
// arguments the emitted unit spells.
Result<std::function<void()>> pickQuantGemm(const std::string& op, const LaunchStep& st, const std::string& src,
                                            const std::vector<uint8_t>& params) {
  if (op == "weight_gemm") {
    if (params.size() != sizeof(di::WeightGemmParams)) return Error{"packed params are not a WeightGemmParams"};
    const auto* p = reinterpret_cast<const di::WeightGemmParams*>(params.data());
    if (src.find("di::WeightGemmRing<") != std::string::npos) {
      // The entry spells `di::WeightGemmRing<ARGS> k(p);` (its wait follows).
      const size_t at = src.find("di::WeightGemmRing<") + std::string("di::WeightGemmRing<").size();
      const std::string args = src.substr(at, src.find("> k(p);", at) - at);
      auto it = wgRings().find(args);
      if (it == wgRings().end()) return Error{"the emulator test has no instantiation of WeightGemmRing<" + args + ">"};
      return std::function<void()>([fn = it->second, p] { fn(*p); });
    }
    if (src.find("di::WeightGemmStream<") != std::string::npos) {
      // The entry spells `const di::WeightGemmStream<ARGS> k(p);` (its wait follows).
      const size_t at = src.find("di::WeightGemmStream<") + std::string("di::WeightGemmStream<").size();
      const std::string args = src.substr(at, src.find("> k(p);", at) - at);
      auto it = wgStreams().find(args);
      if (it == wgStreams().end())
        return Error{"the emulator test has no instantiation of WeightGemmStream<" + args + ">"};
      return std::function<void()>([fn = it->second, p] { fn(*p); });
    }
    const std::string args = templateArgs(src, "di::weight_gemm_tile<");
    auto it = wgTiles().find(args);
    if (it == wgTiles().end()) return Error{"the emulator test has no instantiation of weight_gemm_tile<" + args + ">"};
    return std::function<void()>([fn = it->second, p] { fn(*p); });
  }
  if (params.size() != sizeof(di::MoeExpertsParams)) return Error{"packed params are not a MoeExpertsParams"};
  const auto* p = reinterpret_cast<const di::MoeExpertsParams*>(params.data());
  const std::string bm = templateArgs(src, "di::moe::route<");
  const bool ring = src.find("di::moe::w13_ring<") != std::string::npos;
  const bool streamed = src.find("di::moe::w13_stream<") != std::string::npos;
  const std::string kernel = ring ? "w13_ring<" : streamed ? "w13_stream<" : "w13<";
  const std::string args = templateArgs(src, "di::moe::" + kernel);
  const auto& gemms = ring ? moeRings() : streamed ? moeStreams() : moeTiles();
  auto it = gemms.find(args);
  if (it == gemms.end()) return Error{"the emulator test has no instantiation of moe " + kernel + args + ">"};
  const std::string tail = st.entry.substr(st.entry.rfind('_'));
  if (tail == "_route") {
    const std::map<std::string, MoeFn> routes = {{"1", &moeRoute<1>},   {"2", &moeRoute<2>},   {"4", &moeRoute<4>},
                                                 {"8", &moeRoute<8>},   {"16", &moeRoute<16>}, {"32", &moeRoute<32>},
                                                 {"64", &moeRoute<64>}, {"128", &moeRoute<128>},
                                                 {"256", &moeRoute<256>}};
    if (!routes.count(bm)) return Error{"the emulator test has no instantiation of moe route<" + bm + ">"};
    return std::function<void()>([fn = routes.at(bm), p] { fn(*p); });
  }
  return std::function<void()>([fn = tail == "_w13" ? it->second.first : it->second.second, p] { fn(*p); });
}

// Runs `op` through its plan in the emulator, its CTAs in grid order or, with a non-zero
// `ctaOrderSeed`, in a permutation of it.
EmulatedRun runEmulated(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs, const KernelConfig& cfg,
                        uint64_t ctaOrderSeed = 0) {
  auto pick = [&op](const LaunchStep& st, const std::string& src, const std::vector<uint8_t>& params) {
    return pickQuantGemm(op, st, src, params);
  };
  return runPlanEmulated(op, attrs, inputs, cfg, pick, ctaOrderSeed);
}

uint64_t seed() {
  const char* s = std::getenv("DI_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261130;
}

// Every case, with the config `cfgFor` gives (the sm_80 default when it returns nullopt).
void checkOp(const std::string& op, const std::function<std::vector<KernelConfig>(const OpDesc&)>& configsFor) {
  const TargetProfile sm80 = *findTarget("sm_80");
  int compared = 0, shuffled = 0;
  const bool all = std::getenv("DI_EMU_ALL") != nullptr;
  for (const auto& c : deepinfer::testing::casesFor(op, seed(), false)) {
    // The emulator runs about 10^6 mma per second: the largest cases only when asked.
    auto d0 = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d0.ok()) << c.name << ": " << d0.error().message;
    const double work = op == "weight_gemm" ? double(d0->dim("x", 0)) * d0->dim("w", 0) * d0->dim("x", 1)
                                            : 3.0 * d0->dim("x", 0) * d0->dim("ids", 1) * d0->dim("x", 1) * d0->dim("w1", 1);
    if (work > 6e7 && !all) {
      fmt::print("{} [{}]: not emulated (set DI_EMU_ALL=1)\n", op, c.name);
      continue;
    }
    TensorMap want = c.inputs;
    ASSERT_TRUE(runReference(op, c.attrs, want).ok()) << c.name;
    auto d = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.error().message;
    std::vector<KernelConfig> configs = {findKernelFamily(op)->defaultConfig(*d, sm80)};
    for (const auto& extra : configsFor(*d)) configs.push_back(extra);
    for (const KernelConfig& cfg : configs) {
      const std::string where = fmt::format("{} [{}] {{{}}} (seed {})", op, c.name, configToString(cfg), seed());
      auto got = runEmulated(op, c.attrs, c.inputs, cfg);
      ASSERT_EQ(got.error, "") << where;
      for (const auto& out : deepinfer::testing::outputNames(op)) {
        auto rep = deepinfer::testing::compareOutputs(op, out, want.at(out), got.tensors.at(out), c.attrs, c.inputs);
        EXPECT_TRUE(rep.ok) << where << " '" << out << "': " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
        ++compared;
      }
      // A split-K plan (a zeroed workspace of arrival counters) again with its CTAs shuffled: another
      // CTA of each tile arrives last and reduces, and every output bit must be the same.
      // The streaming schedule too (one writer per element, warps over K summed in a fixed order).
      const bool streamed = cfg.count("stream") && cfg.at("stream") != 0;
      if (got.zeroedBytes > 0 || streamed) {
        expectCtaOrderIndependent(op, got, runEmulated(op, c.attrs, c.inputs, cfg, seed() * 2654435761u + 1), where);
        ++shuffled;
      }
    }
  }
  fmt::print("{}: {} emulated comparisons, {} split-K or streaming plans re-run with their CTAs shuffled (seed {})\n", op, compared,
             shuffled, seed());
}

KernelConfig tile(int bm, int bn, int bk, int wm, int wn, int wk, int stages, int splits = 0) {
  KernelConfig c{{"block_m", bm}, {"block_n", bn}, {"block_k", bk}, {"warps_m", wm},
                 {"warps_n", wn}, {"warps_k", wk}, {"stages", stages}};
  if (splits > 0) {  // weight_gemm: the cp.async tile schedule
    c["splits"] = splits;
    c["stream"] = 0;
  }
  return c;
}

// weight_gemm's streaming schedule: rows of x per CTA (8, 16), warps over N and K, steps per round.
// pipe: the double-buffered rounds (stream = 2); splits: K over the grid's z CTAs.
KernelConfig stream(int rows, int wn, int wk, int unroll, bool fp4, bool pipe = false, int splits = 1) {
  return {{"block_m", rows}, {"block_n", 16 * wn}, {"block_k", unroll * (fp4 ? 128 : 64)}, {"warps_m", 1},
          {"warps_n", wn},   {"warps_k", wk},      {"stages", 1},                             {"splits", splits},
          {"stream", pipe ? 2 : 1}};
}

// The first ring candidate (stream = 3) the family lists for `d` on sm_80: its sized ring.
KernelConfig firstRing(const std::string& op, const OpDesc& d) {
  for (const KernelConfig& c : findKernelFamily(op)->candidates(d, *findTarget("sm_80")))
    if (c.count("stream") && c.at("stream") == 3) return c;
  ADD_FAILURE() << op << ": no ring candidate";
  return findKernelFamily(op)->defaultConfig(d, *findTarget("sm_80"));
}

// The ring (stream = 3): `slots` slots of `unroll` steps per warp.
KernelConfig ring(int rows, int wn, int wk, int unroll, int slots, bool fp4) {
  return {{"block_m", rows}, {"block_n", 16 * wn}, {"block_k", unroll * (fp4 ? 128 : 64)}, {"warps_m", 1},
          {"warps_n", wn},   {"warps_k", wk},      {"stages", slots},                         {"splits", 1},
          {"stream", 3}};
}

TEST(QuantGemmEmu, WeightGemmMatchesReference) {
  checkOp("weight_gemm", [](const OpDesc& d) {
    const int epi = int(d.attrs.getInt("epilogue", 0));
    const bool fp4 = d.attrs.getInt("weight_bits", 8) == 4;
    const int64_t work = d.dim("x", 0) * d.dim("w", 0) * d.dim("x", 1);
    std::vector<KernelConfig> v;
    if (work > (int64_t(1) << 26)) return v;  // large cases: the default config only
    if (d.dim("x", 0) <= 16) {
      // Streaming: 16 rows of x per CTA for few rows (zero B columns), 8 rows for more (several
      // row blocks), warps over K summed in the CTA (more warps than steps: some have none),
      // one step per round, 8 steps per round (past K: zero chunks), warps over N past the tiles.
      v.push_back(stream(16, 2, 2, 4, fp4));
      v.push_back(stream(8, 1, 4, 1, fp4));
      v.push_back(stream(16, 1, 16, 1, fp4));
      v.push_back(stream(8, 4, 2, 8, fp4));
      v.push_back(stream(16, 2, 4, 2, fp4));
      v.push_back(stream(8, 4, 4, 2, fp4));
      // Double-buffered rounds: an odd and an even number of rounds per warp, one step per round
      // with warps over K (rounds past the end load nothing), 16 rows.
      v.push_back(stream(8, 1, 1, 1, fp4, true));
      v.push_back(stream(16, 2, 2, 4, fp4, true));
      v.push_back(stream(8, 1, 4, 2, fp4, true));
      v.push_back(stream(16, 1, 16, 1, fp4, true));
      // K splits over CTAs (the last to arrive sums in split order; the shuffled re-run makes
      // another CTA last): one step each of up to 3, two rounds of 2 steps per split on 2 warps
      // over K, 4-step rounds in 4 splits of 16 rows (fewer where K has fewer rounds).
      v.push_back(stream(8, 1, 1, 1, fp4, false, 3));
      v.push_back(stream(8, 1, 2, 2, fp4, true, 2));
      v.push_back(stream(16, 2, 1, 4, fp4, false, 4));
      // The ring: 2 slots (nothing in flight past the next round), 8 slots of one step (more slots
      // than most warps have rounds: empty groups), 16 rows on 2 x 2 warps, 16 warps over K (some
      // with no round), 8-step rounds (one row of 512 bytes per copy; past K: zero-filled chunks),
      // 16 rows on 4 x 2 warps, 4-step rounds on 2 x 4 warps.
      v.push_back(ring(8, 1, 1, 1, 2, fp4));
      v.push_back(ring(8, 1, 1, 1, 8, fp4));
      v.push_back(ring(16, 2, 2, 2, 4, fp4));
      v.push_back(ring(8, 1, 16, 1, 3, fp4));
      v.push_back(ring(8, 4, 1, 8, 3, fp4));
      v.push_back(ring(16, 4, 2, 2, 5, fp4));
      v.push_back(ring(8, 2, 4, 4, 3, fp4));
      // and the family's own ring candidate (ringTile) of ungrouped weights
      if (d.attrs.getInt("groups", 1) == 1) v.push_back(firstRing("weight_gemm", d));
    }
    if (epi == 0 && !fp4) {
      v.push_back(tile(2, 32, 128, 1, 1, 4, 4, 3));   // 2-row tiles (several per M), split-K
      v.push_back(tile(4, 64, 256, 1, 1, 8, 2, 2));   // 4-row tiles, block_k 256 over 8 warps
      v.push_back(tile(16, 64, 128, 1, 2, 2, 3, 3));  // 2 x 2 warps, split-K
      v.push_back(tile(16, 16, 128, 1, 1, 4, 2, 1));  // a 16-row tile inside a 32-row scale block
      v.push_back(tile(128, 128, 32, 2, 2, 1, 3, 2));
      v.push_back(tile(2, 32, 128, 1, 4, 1, 4, 3));  // block order: 2-row tiles, one n8 tile per warp, split-K
      v.push_back(tile(4, 64, 256, 1, 2, 2, 2, 2));  // block order on 2 x 2 warps (K partials summed in the CTA)
      v.push_back(tile(8, 32, 512, 1, 1, 4, 2, 2));  // block order, 4 warps over K with a quad each
      v.push_back(tile(1, 64, 256, 1, 4, 2, 3, 2));  // block order on 8 warps (4 over N, 2 over K)
      v.push_back(tile(1, 16, 512, 1, 2, 4, 4, 1));  // one launch: 16-row tiles, 8 warps, whole K
    }
    if (epi == 1 && fp4) {
      v.push_back(tile(1, 64, 128, 1, 2, 2, 3, 2));   // one-row tiles on 2 x 2 warps
      v.push_back(tile(16, 64, 256, 1, 1, 8, 2, 2));  // block_k 256 over 8 warps
      v.push_back(tile(64, 128, 32, 2, 2, 1, 3, 1));
      v.push_back(tile(1, 64, 256, 1, 2, 2, 3, 2));    // block order, one row, 2 x 2 warps
      v.push_back(tile(16, 128, 128, 1, 4, 1, 2, 1));  // block order, 16 rows, one launch
      v.push_back(tile(16, 16, 512, 1, 2, 4, 2, 1));   // one launch: 16-row tiles, 8 warps, whole K
    }
    if (epi == 0 && !fp4 && d.dim("x", 0) > 16) {
      v.push_back(tile(256, 64, 32, 4, 2, 1, 3, 1));  // 256 rows on 4 x 2 warps
      v.push_back(tile(64, 16, 32, 2, 2, 1, 3, 1));   // one n8 tile per warp (ldmatrix .x2)
      v.push_back(tile(32, 64, 128, 1, 2, 1, 3, 2));  // block_k 128: four k32 blocks per decode round
      v.push_back(tile(128, 64, 64, 2, 2, 1, 3, 1));
    }
    if (epi == 1 && fp4 && d.dim("x", 0) > 16) {
      v.push_back(tile(128, 256, 32, 2, 4, 1, 3, 1));  // 256 columns on 2 x 4 warps
      v.push_back(tile(64, 128, 64, 2, 2, 1, 3, 2));
    }
    if (epi == 2 && d.dim("x", 0) > 16) v.push_back(tile(64, 32, 32, 2, 4, 1, 3, 1));  // SwiGLU pairs, 8 warps
    if (epi == 1 && !fp4) {
      v.push_back(tile(64, 64, 64, 2, 2, 1, 3, 2));
      v.push_back(tile(8, 64, 128, 1, 1, 4, 3, 2));  // 8-row tiles, split-K
    }
    if (epi == 2) {
      v.push_back(tile(32, 64, 64, 1, 2, 1, 3, 2));
      v.push_back(tile(4, 32, 128, 1, 1, 4, 3, 2));  // 4-row SwiGLU pairs, split-K
      v.push_back(tile(4, 32, 256, 1, 2, 2, 2, 2));  // block order SwiGLU pairs on 2 x 2 warps
      v.push_back(tile(8, 16, 512, 1, 2, 4, 2, 2));  // block order SwiGLU pairs on 8 warps
    }
    return v;
  });
}

TEST(QuantGemmEmu, MoeExpertsMatchesReference) {
  checkOp("moe_experts", [](const OpDesc& d) {
    std::vector<KernelConfig> v;
    const int64_t entries = d.dim("x", 0) * d.dim("ids", 1);
    if (entries > 200 && entries <= 500) {  // prefill-sized row blocks: the other prefill tiles
      v.push_back(tile(256, 32, 32, 4, 2, 1, 3));  // 256 rows on 4 x 2 warps
      v.push_back(tile(128, 32, 32, 2, 4, 1, 3));  // 8 warps: one n8 tile per w13 warp (ldmatrix .x2)
      v.push_back(tile(64, 32, 64, 2, 2, 1, 3));   // block_k 64
      v.push_back(tile(128, 64, 64, 2, 4, 1, 3));  // 8 warps over twice the columns, block_k 64
      v.push_back(tile(256, 32, 64, 4, 2, 1, 3));  // 256 rows, block_k 64
    }
    if (entries > 200) {
      for (KernelConfig& c : v) c["stream"] = 0;
      return v;
    }
    v.push_back(tile(2, 32, 128, 1, 1, 4, 3));  // 2-row blocks: experts of several blocks
    v.push_back(tile(4, 64, 128, 1, 2, 2, 2));
    v.push_back(tile(16, 32, 128, 1, 2, 2, 2));
    v.push_back(tile(32, 64, 64, 1, 2, 1, 3));
    v.push_back(tile(64, 64, 32, 2, 2, 1, 3));
    v.push_back(tile(2, 32, 128, 1, 4, 1, 3));   // block order: several row blocks per expert
    v.push_back(tile(4, 32, 256, 1, 2, 2, 2));   // block order on 2 x 2 warps
    v.push_back(tile(16, 16, 128, 1, 2, 1, 3));  // block order, narrow tiles (w2: 32 columns)
    v.push_back(tile(1, 32, 256, 1, 4, 2, 4));   // block order on 8 warps (4 over N, 2 over K)
    for (KernelConfig& c : v) c["stream"] = 0;
    // Streaming: 8-row blocks (experts of several blocks), 16-row blocks, warps over K summed in
    // the CTA, one step per round, warps over N past the rows (w2: 2 steps per round, w13 1).
    auto stream = [](int rows, int wn, int wk, int u13, bool pipe = false) {
      return KernelConfig{{"block_m", rows}, {"block_n", 16 * wn}, {"block_k", 128 * u13}, {"warps_m", 1},
                          {"warps_n", wn},   {"warps_k", wk},      {"stages", 1},          {"stream", pipe ? 2 : 1}};
    };
    v.push_back(stream(8, 2, 2, 2));
    v.push_back(stream(16, 4, 2, 1));
    v.push_back(stream(8, 1, 4, 1));
    v.push_back(stream(16, 1, 16, 1));
    v.push_back(stream(8, 4, 2, 4));
    v.push_back(stream(8, 4, 1, 2, true));  // double-buffered rounds
    v.push_back(stream(16, 1, 4, 1, true));
    // The ring: 2 slots, 16-row blocks on 2 x 2 warps, 2 steps per w13 round (w2: 4) on 8 warps over
    // K, 16 warps over K with 16 rows (warps without rounds).
    auto ring = [&](int rows, int wn, int wk, int u13, int slots) {
      KernelConfig c = stream(rows, wn, wk, u13);
      c["stages"] = slots;
      c["stream"] = 3;
      return c;
    };
    v.push_back(ring(8, 4, 1, 1, 2));
    v.push_back(ring(16, 2, 2, 1, 4));
    v.push_back(ring(8, 1, 8, 2, 3));
    v.push_back(ring(16, 1, 16, 1, 2));
    v.push_back(firstRing("moe_experts", d));  // the family's own (ringDefault)
    return v;
  });
}

// x read through a column slice of a wider activation and y written into a column slice of a
// wider output: the view's elements match the reference, the rest keeps its poison.
TEST(QuantGemmEmu, WeightGemmStridedViews) {
  const TargetProfile sm80 = *findTarget("sm_80");
  for (const auto& c : deepinfer::testing::casesFor("weight_gemm", seed(), false)) {
    if (c.name != "fp8_m5_n200_k272_bf16" && c.name != "fp4_m40_n96_k320_bf16" && c.name != "fp8_m1_n96_k256") continue;
    const HostTensor& x = c.inputs.at("x");
    const int64_t M = x.dim(0), K = x.dim(1), N = c.inputs.at("w").dim(0);
    const int64_t ldx = K + 24, ldy = N + 6, xOff = 16, yOff = 2;  // 32-byte / 4-element column offsets
    TensorMap want = c.inputs;
    ASSERT_TRUE(runReference("weight_gemm", c.attrs, want).ok());
    auto d = describeOp("weight_gemm", c.attrs, c.inputs);
    ASSERT_TRUE(d.ok());
    const KernelFamily* fam = findKernelFamily("weight_gemm");
    const KernelConfig cfg = fam->defaultConfig(*d, sm80);
    auto k = emitKernel(*d, cfg);
    ASSERT_TRUE(k.ok());
    const size_t ysz = dtypeSize(want.at("y").dtype);
    Buffer wideX(size_t(M * ldx * 2), 0x7F), wideY(size_t(M * ldy) * ysz, 0x5A);
    for (int64_t m = 0; m < M; ++m) std::memcpy(wideX.data + (m * ldx + xOff) * 2, x.bytes.data() + m * K * 2, K * 2);
    std::map<std::string, std::unique_ptr<Buffer>> bufs;
    DeviceAddrMap addrs;
    for (const auto& [name, t] : c.inputs) {
      if (name == "x") continue;
      bufs[name] = std::make_unique<Buffer>(t.bytes.size(), 0);
      std::memcpy(bufs[name]->data, t.bytes.data(), t.bytes.size());
      addrs[name] = reinterpret_cast<uint64_t>(bufs[name]->data);
    }
    addrs["x"] = reinterpret_cast<uint64_t>(wideX.data + xOff * 2);
    addrs["y"] = reinterpret_cast<uint64_t>(wideY.data + yOff * ysz);
    Buffer ws(size_t(std::max<int64_t>(k->workspaceBytes, 16)), 0x7F);
    addrs["__workspace"] = reinterpret_cast<uint64_t>(ws.data);
    Buffer zeroed(size_t(std::max<int64_t>(k->zeroedBytes, 16)), 0);
    addrs["__zeroed"] = reinterpret_cast<uint64_t>(zeroed.data);
    auto params = fam->packStridedParams(cfg, *d, addrs, {{"x", {ldx, 1}}, {"y", {ldy, 1}}});
    ASSERT_TRUE(params.ok()) << params.error().message;
    for (const LaunchStep& st : k->plan) {
      auto fn = pickQuantGemm("weight_gemm", st, k->unit.source, *params);
      ASSERT_TRUE(fn.ok()) << fn.error().message;
      di_emu::launch({st.grid[0], st.grid[1], st.grid[2]}, {st.block[0], st.block[1], st.block[2]}, st.dynamicSmem,
                     *fn);
    }
    EXPECT_EQ(emu_test::leftZero(zeroed, k->zeroedBytes), "") << c.name;
    HostTensor got(want.at("y").dtype, {M, N});
    for (int64_t m = 0; m < M; ++m)
      for (int64_t col = 0; col < ldy; ++col) {
        const uint8_t* e = wideY.data + (m * ldy + col) * ysz;
        if (col >= yOff && col < yOff + N)
          std::memcpy(got.bytes.data() + (m * N + col - yOff) * ysz, e, ysz);
        else
          for (size_t b = 0; b < ysz; ++b) ASSERT_EQ(e[b], 0x5A) << c.name << ": row " << m << " column " << col << " outside the view was written";
      }
    auto rep = deepinfer::testing::compareOutputs("weight_gemm", "y", want.at("y"), got, c.attrs, c.inputs);
    EXPECT_TRUE(rep.ok) << c.name << ": " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
  }
}

}  // namespace
