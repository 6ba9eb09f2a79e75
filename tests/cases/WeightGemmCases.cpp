// weight_gemm cases: e4m3 and e2m1 weights; decode rows (M = 1..5, 7, 8, 9, 12, 16) and prefill rows
// (M = 17 .. 300, not multiples of any tile: 17, 33 and 129 one row past a tile); N not a multiple
// of the tiles (72, 96, 136, 200);
// K not a multiple of 32 (272: a partial last k32 block and its scale), K large enough for
// split-K (5120); f32, bf16 and SwiGLU epilogues; groups (wo_a's form) including groups of 24
// rows, whose tiles start inside a 32-row scale block; e4m3 subnormal and NaN codes and scale
// bytes at and past the ends of the exact range (0, 1, 2, 127..140, 255 = NaN).
// x ~ N(0, 1); weights N(0, 1/sqrt(K)) quantized as checkpoints are. Large cases (the GPU
// tests): decode rows M = 1, 4, 12 at the model's projection shapes.
#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/QuantCaseUtil.h"

namespace deepinfer::testing {
namespace {

struct GemmSpec {
  std::string name;
  int64_t M, N, K;
  int bits = 8;
  int64_t groups = 1;
  int epilogue = 0;
  int64_t subnormals = 0;
  std::vector<int64_t> nanRows;
  std::vector<uint8_t> scaleBytes;
};

OpCase makeCase(Rng& rng, const GemmSpec& s) {
  const int64_t Kg = s.K / s.groups;
  OpCase c;
  c.name = s.name;
  c.op = "weight_gemm";
  c.attrs.setInt("weight_bits", s.bits);
  c.attrs.setInt("groups", s.groups);
  c.attrs.setInt("epilogue", s.epilogue);
  c.inputs["x"] = bf16Normal(rng, {s.M, s.K});
  auto weights = [&](const char* name, const char* scale) {
    QuantTensor q = quantWeights(rng, s.bits, s.N, Kg, 1.0 / std::sqrt(double(Kg)));
    if (s.bits == 8) {
      injectE4m3Subnormals(rng, q, s.subnormals);
      injectE4m3Nans(rng, q, s.nanRows);
    }
    injectScaleBytes(rng, q, s.scaleBytes);
    c.inputs[name] = std::move(q.codes);
    c.inputs[scale] = std::move(q.scales);
  };
  weights("w", "w_scale");
  if (s.epilogue == 2) weights("w_up", "w_up_scale");
  return c;
}

}  // namespace

std::vector<OpCase> weightGemmCases(uint64_t seed, bool large) {
  Rng rng(seed ^ 0x7767656D6Dull);
  const GemmSpec specs[] = {
      {"fp8_m1_n96_k256", 1, 96, 256},
      {"fp8_m5_n200_k272_bf16", 5, 200, 272, 8, 1, 1},
      {"fp4_m12_n160_k512", 12, 160, 512, 4},
      {"fp4_m40_n96_k320_bf16", 40, 96, 320, 4, 1, 1},
      {"fp8_m130_n136_k256", 130, 136, 256},
      {"fp8_swiglu_m7_n72_k256", 7, 72, 256, 8, 1, 2},
      {"fp4_swiglu_m33_n64_k256", 33, 64, 256, 4, 1, 2},
      {"fp8_groups4_m3_n128_k512_bf16", 3, 128, 512, 8, 4, 1},
      {"fp8_groups2_m20_n48_k192", 20, 48, 192, 8, 2, 0},
      {"fp8_edges_m9_n64_k256", 9, 64, 256, 8, 1, 0, 40, {5}, {0, 1, 2, 3, 134, 135, 140}},
      {"fp4_edges_m9_n64_k256", 9, 64, 256, 4, 1, 1, 0, {}, {0, 1, 127, 128, 129, 130, 140, 255}},
      {"fp4_m1_n2304_k5120", 1, 2304, 5120, 4},
      {"fp8_m16_n512_k5120_bf16", 16, 512, 5120, 8, 1, 1},
      {"fp8_m300_n256_k1024", 300, 256, 1024},
      // prefill edges: one row past a tile (17, 129 rows: a 1-row tail tile), partial column tiles
      {"fp4_m17_n136_k320", 17, 136, 320, 4},
      {"fp8_m129_n200_k272_bf16", 129, 200, 272, 8, 1, 1},
      {"fp4_m129_n96_k512", 129, 96, 512, 4},
      // Decode rows for the streaming schedule: M = 2, 3, 4, 8, 12, 16; N not a multiple of its
      // 16-row warp tiles, K not a multiple of its 64 (e4m3) / 128 (e2m1) column steps nor of 32;
      // groups of 24 rows (warp tiles straddling a 32-row scale block, half-empty tiles).
      {"fp8_m2_n40_k80", 2, 40, 80},
      {"fp4_m3_n24_k160_bf16", 3, 24, 160, 4, 1, 1},
      {"fp8_swiglu_m4_n56_k528", 4, 56, 528, 8, 1, 2},
      {"fp4_m8_n48_k384", 8, 48, 384, 4},
      {"fp8_groups3_m2_n72_k240", 2, 72, 240, 8, 3, 0},
      {"fp4_swiglu_m12_n48_k256", 12, 48, 256, 4, 1, 2},
      {"fp8_m16_n72_k208_bf16", 16, 72, 208, 8, 1, 1},
      // K at each format's minimum (one 16-byte chunk of a row: a step that is mostly past K)
      {"fp8_m1_n18_k16", 1, 18, 16},
      {"fp4_swiglu_m16_n34_k32", 16, 34, 32, 4, 1, 2},
  };
  std::vector<OpCase> cases;
  for (const GemmSpec& s : specs) cases.push_back(makeCase(rng, s));
  // Decode rows at the model's projections (large cases: the GPU tests).
  const GemmSpec model[] = {{"fp4_m4_n2304_k5120", 4, 2304, 5120, 4},
                            {"fp4_m12_n5120_k2304", 12, 5120, 2304, 4},
                            {"fp8_m12_n1280_k5120", 12, 1280, 5120},
                            {"fp8_swiglu_m1_n2304_k5120", 1, 2304, 5120, 8, 1, 2},
                            {"fp8_groups8_m4_n8192_k32768_bf16", 4, 8192, 32768, 8, 8, 1}};
  if (large)
    for (const GemmSpec& s : model) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
