// sparse_mla_prefill cases: query heads 8 / 16 / 64 / 128, Kmax 640 (the real W) and odd
// sizes, rows with lens 0, full rows, rows whose entries are all invalid, -1 / negative /
// >= S indices and junk past lens, duplicate indices, T = 1, a dominant sink, and key-tile edges.
// q, kv ~ N(0, 1) with sm_scale = 512^-0.5 give logits ~ N(0, 1): realistic, not saturated.
#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"

namespace deepinfer::testing {
namespace {

struct PrefillSpec {
  std::string name;
  int64_t T, H, S, Kmax;
  double sinkMean = 0;
};

OpCase makeCase(Rng& rng, const PrefillSpec& s) {
  std::vector<int32_t> lens(static_cast<size_t>(s.T)), indices(size_t(s.T * s.Kmax));
  for (int64_t t = 0; t < s.T; ++t) {
    int32_t len = int32_t(rng.range(0, s.Kmax + 1));
    if (s.T == 1 || t == 1) len = int32_t(s.Kmax);  // full row
    if (t == 0 && s.T > 1) len = 0;                 // no entries: out 0, lse +inf
    lens[size_t(t)] = len;
    const bool allInvalid = t == 2 && s.T > 3;  // entries exist, none valid
    for (int64_t k = 0; k < s.Kmax; ++k) {
      int32_t& v = indices[size_t(t * s.Kmax + k)];
      const double u = rng.uniform();
      if (allInvalid)
        v = u < 0.5 ? -1 : int32_t(s.S + rng.range(0, 100));
      else if (u < 0.04)
        v = -1;
      else if (u < 0.05)
        v = -int32_t(rng.range(2, 50));
      else if (u < 0.07)
        v = int32_t(s.S + rng.range(0, 100));
      else
        v = int32_t(rng.range(0, s.S));
    }
  }
  OpCase c;
  c.name = s.name;
  c.op = "sparse_mla_prefill";
  c.attrs.setFloat("sm_scale", 1.0 / std::sqrt(512.0));
  c.inputs["q"] = bf16Normal(rng, {s.T, s.H, 512});
  c.inputs["kv"] = bf16Normal(rng, {s.S, 512});
  c.inputs["indices"] = i32Tensor({s.T, s.Kmax}, indices);
  c.inputs["lens"] = i32Tensor({s.T}, lens);
  c.inputs["attn_sink"] = f32Normal(rng, {s.H}, 1.0, s.sinkMean);
  return c;
}

// Key-tile edges for every block_n (16 / 32 / 64): lens one short of, at and one past a tile
// boundary, and runs of invalid entries that cover whole tiles (a row whose first valid key comes
// after one or two masked tiles, a masked tile between valid ones, valid keys only in a ragged last
// tile), so a tile with no valid key meets both an empty and a live online-softmax state.
OpCase makeTileEdgeCase(Rng& rng) {
  constexpr int64_t T = 14, H = 64, S = 900, Kmax = 200;
  const int32_t lensOf[T] = {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 200, 200, 150};
  std::vector<int32_t> lens(lensOf, lensOf + T), indices(size_t(T * Kmax));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < Kmax; ++k) {
      bool masked = rng.uniform() < 0.03;
      if (t == 11) masked = masked || k < 64;              // two 32-key tiles masked, then valid
      if (t == 12) masked = masked || (k >= 32 && k < 96);  // masked tiles between valid ones
      if (t == 13) masked = k < 128;                        // only the ragged tail is valid
      if (t == 10) masked = masked || (k >= 16 && k < 48);  // straddles two 32-key tiles
      indices[size_t(t * Kmax + k)] = masked ? (k % 2 ? -1 : int32_t(S + k)) : int32_t(rng.range(0, S));
    }
  OpCase c;
  c.name = "h64_t14_k200_tile_edges";
  c.op = "sparse_mla_prefill";
  c.attrs.setFloat("sm_scale", 1.0 / std::sqrt(512.0));
  c.inputs["q"] = bf16Normal(rng, {T, H, 512});
  c.inputs["kv"] = bf16Normal(rng, {S, 512});
  c.inputs["indices"] = i32Tensor({T, Kmax}, indices);
  c.inputs["lens"] = i32Tensor({T}, lens);
  c.inputs["attn_sink"] = f32Normal(rng, {H});
  return c;
}

}  // namespace

std::vector<OpCase> sparseMlaPrefillCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x7072656Full);
  const PrefillSpec specs[] = {
      {"h64_t24_k640", 24, 64, 3000, 640}, {"h128_t8_k512", 8, 128, 2048, 512},
      {"h8_t37_k203", 37, 8, 777, 203},    {"h16_t33_k1000", 33, 16, 5000, 1000},
      {"h64_t1_k128", 1, 64, 128, 128},    {"h64_t4_k64_sink_dominant", 4, 64, 64, 64, 6.0},
  };
  std::vector<OpCase> cases;
  for (const PrefillSpec& s : specs) cases.push_back(makeCase(rng, s));
  cases.push_back(makeTileEdgeCase(rng));
  return cases;
}

}  // namespace deepinfer::testing
