// indexer_logits cases: indexer heads 4 / 32 / 64, block sizes 2 / 64 / 256, visible 0 and
// Nmax (every position) and values off page edges, several requests sharing a block table
// (token_to_req), unused block-table entries -1, T = 1 and a decode-like batch of 64.
// Queries hold e4m3 values (exact in bf16) as the caller quantizes them; their power-of-two
// scale is folded into the weights, as in docs/model.md §9.
#include <algorithm>
#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"
#include "deepinfer/Formats.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::testing {
namespace {

struct IndexerSpec {
  std::string name;
  int64_t T, Hi, R, bs, maxPages;
};

OpCase makeCase(Rng& rng, const IndexerSpec& s) {
  const int64_t Nmax = s.maxPages * s.bs, P = s.R * s.maxPages + 2;
  std::vector<int32_t> toReq(static_cast<size_t>(s.T)), visible(static_cast<size_t>(s.T));
  for (int64_t t = 0; t < s.T; ++t) {
    toReq[size_t(t)] = s.R == s.T ? int32_t(t) : int32_t(rng.range(0, s.R));
    int64_t v = rng.range(0, Nmax + 1);
    if (t == 0) v = Nmax;
    if (t == 1) v = 0;
    if (t == 2) v = s.bs + 1;  // one position into the second page
    visible[size_t(t)] = int32_t(std::min(v, Nmax));
  }
  // Each request's pages in random order; entries past its furthest visible position are -1.
  std::vector<int64_t> need(size_t(s.R), 0);
  for (int64_t t = 0; t < s.T; ++t)
    need[size_t(toReq[size_t(t)])] =
        std::max<int64_t>(need[size_t(toReq[size_t(t)])], (visible[size_t(t)] + s.bs - 1) / s.bs);
  std::vector<int64_t> order = shuffledRange(rng, P);
  std::vector<int32_t> table(size_t(s.R * s.maxPages), -1);
  size_t next = 0;
  for (int64_t r = 0; r < s.R; ++r)
    for (int64_t pi = 0; pi < need[size_t(r)]; ++pi)
      table[size_t(r * s.maxPages + pi)] = int32_t(order[next++]);

  HostTensor q(DType::BF16, {s.T, s.Hi, 128});
  HostTensor w(DType::F32, {s.T, s.Hi});
  const double headScale = 1.0 / std::sqrt(double(s.Hi) * 128.0);
  for (int64_t row = 0; row < s.T * s.Hi; ++row) {
    float x[128], amax = 0.f;
    for (float& v : x) {
      v = bf16ToFloat(floatToBf16(float(rng.normal())));  // the bf16 activation before quantization
      amax = std::max(amax, std::fabs(v));
    }
    const float qScale = ue8m0ToFloat(ue8m0CeilEncode(std::max(amax, 1e-4f) / 448.f));
    for (int64_t d = 0; d < 128; ++d)
      q.ptr<uint16_t>()[row * 128 + d] =
          floatToBf16(e4m3ToFloat(e4m3Code(std::clamp(x[d] / qScale, -448.f, 448.f))));
    w.ptr<float>()[row] = float(rng.normal() * headScale * qScale);
  }
  OpCase c;
  c.name = s.name;
  c.op = "indexer_logits";
  c.attrs.setInt("block_size", s.bs);
  c.inputs["q"] = std::move(q);
  c.inputs["weights"] = std::move(w);
  c.inputs["k_cache"] = indexerKeyCache(rng, P, s.bs);
  c.inputs["block_table"] = i32Tensor({s.R, s.maxPages}, table);
  c.inputs["token_to_req"] = i32Tensor({s.T}, toReq);
  c.inputs["visible"] = i32Tensor({s.T}, visible);
  return c;
}

}  // namespace

std::vector<OpCase> indexerLogitsCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x696E6478ull);
  const IndexerSpec specs[] = {
      {"h32_bs64_t20", 20, 32, 3, 64, 16},     {"h4_bs2_t9_odd", 9, 4, 2, 2, 37},
      {"h64_bs256_t16", 16, 64, 2, 256, 5},    {"h32_bs64_t1", 1, 32, 1, 64, 8},
      {"h32_bs64_batch64", 64, 32, 64, 64, 8},
  };
  std::vector<OpCase> cases;
  for (const IndexerSpec& s : specs) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
