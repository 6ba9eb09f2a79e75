// combine_topk_swa cases: ratios 0 / 1 / 2 / 4, K 512 with window 128 (W = 640) and a small odd
// K + window (W = 128), query_start_loc[0] non-zero, a request with no query tokens, fresh
// prefills (positions from 0), top-k lengths crossing K, invalid top-k entries (-1, other
// negatives, >= N) and junk past each row's top-k length, T = 1536, and 300 requests (more than
// a CTA's threads).
#include <algorithm>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/CombineRowsCase.h"
#include "cases/OpCases.h"

namespace deepinfer::testing {
namespace {

struct CombineSpec {
  std::string name;
  CombineRowsSpec rows;
};

OpCase makeCase(Rng& rng, const CombineSpec& s) {
  OpCase c;
  c.name = s.name;
  c.op = "combine_topk_swa";
  // The gathered window covers the first query token's window (and sometimes a bit more).
  c.attrs.setInt("M", addCombineRows(rng, s.rows, 3, c));
  return c;
}

}  // namespace

std::vector<OpCase> combineTopkSwaCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x636F6D62ull);
  std::vector<CombineSpec> specs = {
      {"r4_w128_k512", {4, 128, 512, 8192, 0, {37, 1, 100}, {37, 500, 2000}}},
      {"r4_qsl0_nonzero", {4, 128, 512, 8192, 1000, {5, 0, 64, 3}, {5, 10, 64, 4000}}},
      {"r0_window_only", {0, 128, 512, 8192, 0, {50, 70}, {50, 300}}},
      {"r1_w128_k512", {1, 128, 512, 4096, 17, {200, 30}, {700, 30}}},
      {"r2_w3_k7_odd", {2, 3, 7, 64, 0, {9, 4, 1}, {9, 20, 1}}},
      {"r2_topk_len_crosses_k", {2, 128, 512, 4096, 0, {10, 1}, {1030, 1025}}},
      {"r4_r1_t1", {4, 128, 512, 8192, 3, {1}, {777}}},
  };
  CombineSpec big{"r4_t1536", {4, 128, 512, 16384, 0, {}, {}}};
  for (int b = 0; b < 8; ++b) {
    big.rows.queryLens.push_back(192);
    big.rows.seqLens.push_back(int32_t(rng.range(192, 5000)));
  }
  specs.push_back(big);
  // More requests than threads per CTA (160 for W = 640, 64 for W = 128): requests past the
  // first CTA-wide batch are looked up after the barrier, the rest before it. Query lengths
  // 0..2, so tokens land on both sides of request 160 (and of 64).
  for (int64_t K : {int64_t(512), int64_t(7)}) {
    CombineSpec many{K == 512 ? "r4_300_requests" : "r2_w3_k7_300_requests",
                     {K == 512 ? 4 : 2, K == 512 ? 128 : 3, K, 8192, 11, {}, {}}};
    for (int b = 0; b < 300; ++b) {
      const int32_t q = int32_t(rng.range(0, 3));
      many.rows.queryLens.push_back(q);
      many.rows.seqLens.push_back(int32_t(rng.range(std::max(q, 1), 6000)));
    }
    specs.push_back(many);
  }
  std::vector<OpCase> cases;
  for (const CombineSpec& s : specs) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
