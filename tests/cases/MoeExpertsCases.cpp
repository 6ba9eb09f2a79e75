// moe_experts cases: decode steps (T = 1 and 3, k = 6), prefill-like batches whose experts get
// more rows than a tile (T = 70 over 4 experts: 105 rows each; T = 129 over 2: 129 each), experts that stay empty (T = 5
// over 32), every token on one expert (plus the other ranks spread), a token choosing the same
// expert twice, ids of -1 (no expert: a zero row), C and I not multiples of the tiles
// (C = 160, I = 96), skewed prefill routing (experts of 0, 1 and 150 rows), and activations
// large enough that the SwiGLU clamp at 10 engages.
// x ~ N(0, 1); expert weights N(0, sigma/sqrt(C)) quantized to e2m1 with 1x32 scales; routing
// weights U(0.1, 1.5). Large cases (the GPU tests): decode steps of T = 1, 4, 12 at the model's
// C = 5120, I = 2304.
#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/QuantCaseUtil.h"

namespace deepinfer::testing {
namespace {

enum class Routing { Random, OneExpert, Duplicates, SomeNone, Skewed };

struct MoeSpec {
  std::string name;
  int64_t T, k, E, C, I;
  Routing routing = Routing::Random;
  double sigma = 1.0;  // weight scale relative to 1/sqrt(fan-in)
};

OpCase makeCase(Rng& rng, const MoeSpec& s) {
  std::vector<int32_t> ids(size_t(s.T * s.k));
  for (int64_t t = 0; t < s.T; ++t) {
    // k distinct experts in random order (as the router gives, before any edits).
    std::vector<int64_t> order = shuffledRange(rng, s.E);
    for (int64_t r = 0; r < s.k; ++r) ids[size_t(t * s.k + r)] = int32_t(order[size_t(r % s.E)]);
    if (s.routing == Routing::OneExpert) ids[size_t(t * s.k)] = 2;  // rank 0 of every token
    if (s.routing == Routing::Duplicates && t % 3 == 0 && s.k > 1) ids[size_t(t * s.k + 1)] = ids[size_t(t * s.k)];
    if (s.routing == Routing::SomeNone && (t % 2 == 0)) ids[size_t(t * s.k + s.k - 1)] = -1;
    if (s.routing == Routing::Skewed) {
      // k = 2, E = 8: expert 2 takes the first 150 tokens (two row blocks of 128, the second
      // partial), expert 3 the rest, expert 0 only token 0's second choice (one row), expert 1
      // nothing, experts 4..7 the other second choices.
      ids[size_t(t * s.k)] = t < 150 ? 2 : 3;
      ids[size_t(t * s.k + 1)] = t == 0 ? 0 : int32_t(4 + t % 4);
    }
  }
  OpCase c;
  c.name = s.name;
  c.op = "moe_experts";
  c.inputs["x"] = bf16Normal(rng, {s.T, s.C});
  c.inputs["ids"] = i32Tensor({s.T, s.k}, ids);
  c.inputs["weights"] = f32Uniform(rng, {s.T, s.k}, 0.1, 1.5);
  auto expertWeights = [&](const char* name, const char* scale, int64_t rows, int64_t cols) {
    HostTensor codes(DType::U8, {s.E, rows, cols / 2}), scales(DType::U8, {s.E, rows, cols / 32});
    for (int64_t e = 0; e < s.E; ++e) {
      QuantTensor q = quantWeights(rng, 4, rows, cols, s.sigma / std::sqrt(double(cols)));
      std::copy(q.codes.bytes.begin(), q.codes.bytes.end(), codes.bytes.begin() + e * rows * (cols / 2));
      std::copy(q.scales.bytes.begin(), q.scales.bytes.end(), scales.bytes.begin() + e * rows * (cols / 32));
    }
    c.inputs[name] = std::move(codes);
    c.inputs[scale] = std::move(scales);
  };
  expertWeights("w1", "w1_scale", s.I, s.C);
  expertWeights("w3", "w3_scale", s.I, s.C);
  expertWeights("w2", "w2_scale", s.C, s.I);
  return c;
}

}  // namespace

std::vector<OpCase> moeExpertsCases(uint64_t seed, bool large) {
  Rng rng(seed ^ 0x6D6F6578ull);
  const MoeSpec specs[] = {
      {"t1_k6_e8", 1, 6, 8, 256, 128},
      {"t3_k6_e16_c160_i96", 3, 6, 16, 160, 96},
      {"t5_k2_e32_empty_experts", 5, 2, 32, 256, 64},
      {"t70_k6_e4_full_blocks", 70, 6, 4, 128, 64},
      {"t40_k4_e16_one_expert", 40, 4, 16, 128, 96, Routing::OneExpert},
      {"t12_k3_e8_duplicates", 12, 3, 8, 192, 64, Routing::Duplicates},
      {"t9_k4_e8_no_expert", 9, 4, 8, 128, 64, Routing::SomeNone},
      {"t6_k6_e8_clamped", 6, 6, 8, 128, 64, Routing::Random, 24.0},
      {"t300_k6_e16_c512_i256", 300, 6, 16, 512, 256},
      // prefill tiles: both experts of every token, 129 rows each (a 1-row tail block), C = 160
      // (a partial w2 column tile)
      {"t129_k2_e2_c160_i96", 129, 2, 2, 160, 96},
      // prefill tiles (40 rows per expert on average): an expert of one row, an empty one, one of
      // 150 rows; C = 160 and I = 96 are not multiples of block_k 64 (a partial last stage)
      {"t160_k2_e8_skewed_c160_i96", 160, 2, 8, 160, 96, Routing::Skewed},
  };
  std::vector<OpCase> cases;
  for (const MoeSpec& s : specs) cases.push_back(makeCase(rng, s));
  // The model's decode steps at its hidden and intermediate sizes (fewer experts, so that the
  // host holds them; the tiles, rows per block and active column tiles are the E = 128 ones).
  const MoeSpec model[] = {{"t1_k6_e8_c5120_i2304", 1, 6, 8, 5120, 2304},
                           {"t4_k6_e16_c5120_i2304", 4, 6, 16, 5120, 2304},
                           {"t12_k6_e16_c5120_i2304", 12, 6, 16, 5120, 2304}};
  if (large)
    for (const MoeSpec& s : model) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
