// topk cases: k 512 over rows of 4096 and 262,144 scores, lens 0 / below / at / above k / N,
// rows shorter than k, many exact ties (small integers, -inf, and -0 against +0, which are
// equal), odd k and N, k = 2048, and the bisection plan's rows (N 4097 / 8192 / 16384, k = 1). Scores past lens[t] are junk (+inf, huge values, NaN) that
// must never be read.
#include <algorithm>
#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"

namespace deepinfer::testing {
namespace {

enum class Values { Normal, SmallIntegersAndNegInf, SignedZeros };

struct TopkSpec {
  std::string name;
  int64_t T, N, k;
  Values values = Values::Normal;
  bool shortRows = false;  // every lens[t] <= k
};

OpCase makeCase(Rng& rng, const TopkSpec& s) {
  HostTensor scores(DType::F32, {s.T, s.N});
  std::vector<int32_t> lens(static_cast<size_t>(s.T));
  const int64_t edges[] = {0, 1, s.k - 1, s.k, s.k + 1, s.N};
  for (int64_t t = 0; t < s.T; ++t) {
    int64_t len = t < 6 ? edges[t] : rng.range(0, s.N + 1);
    if (s.shortRows) len = std::min(len, s.k);
    len = std::clamp<int64_t>(len, 0, s.N);
    lens[size_t(t)] = int32_t(len);
    float* row = scores.ptr<float>() + t * s.N;
    for (int64_t i = 0; i < s.N; ++i) {
      float v = 0;
      switch (s.values) {
        case Values::Normal:
          v = float(rng.normal());
          break;
        case Values::SmallIntegersAndNegInf:
          v = rng.chance(0.1) ? -INFINITY : float(rng.range(0, 16));
          break;
        case Values::SignedZeros: {
          const float kChoices[] = {-0.f, 0.f, 1.f, -1.f};
          v = kChoices[rng.range(0, 4)];
          break;
        }
      }
      if (i >= len) {
        const float kJunk[] = {INFINITY, 1e30f, NAN};
        v = kJunk[rng.range(0, 3)];
      }
      row[i] = v;
    }
  }
  OpCase c;
  c.name = s.name;
  c.op = "topk";
  c.attrs.setInt("k", s.k);
  c.inputs["scores"] = std::move(scores);
  c.inputs["lens"] = i32Tensor({s.T}, lens);
  return c;
}

}  // namespace

std::vector<OpCase> topkCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x746F706Bull);
  const TopkSpec specs[] = {
      {"k512_n4096", 16, 4096, 512},
      {"k100_n1000_ties_neginf", 12, 1000, 100, Values::SmallIntegersAndNegInf},
      {"k512_n300_short_rows", 10, 300, 512, Values::Normal, true},
      {"k7_n77_odd", 13, 77, 7},
      {"k20_n64_signed_zero_ties", 8, 64, 20, Values::SignedZeros},
      {"k512_n262144", 8, 262144, 512},
      {"k2048_n65536_ties", 7, 65536, 2048, Values::SmallIntegersAndNegInf},
      // The bisection select's shapes (TopkFamily defaultFor): 512 threads x 16 keys (the
      // indexer's N = 8192), a row of 4097 (not a multiple of 4: scalar loads, 12 keys per
      // thread), the full 1024 x 16 keys with many ties, and k = 1.
      {"k512_n8192", 24, 8192, 512},
      {"k512_n4097_unaligned", 10, 4097, 512},
      {"k8000_n16384_ties", 8, 16384, 8000, Values::SmallIntegersAndNegInf},
      {"k1_n2000", 9, 2000, 1},
  };
  std::vector<OpCase> cases;
  for (const TopkSpec& s : specs) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
