// gather_kcache_combine cases: the window gather and the index rows of a prefill chunk, as
// attendPrefill runs them (gather_lens = min(seq, q + window - 1), out rows N + window + max q),
// and around them: block sizes 2 / 64 / 256 with windows crossing page edges, T = 1 and a
// 1536-token chunk, prefixes shorter than the window (fresh prefills from position 0), a request
// with no query tokens and an empty window (seq 0), ratios 0 / 1 / 2 / 4, invalid top-k entries (-1, other negatives, >= N),
// query_start_loc[0] non-zero, 300 requests (more than a CTA's threads), block-table entries of
// unread pages -1, and a cache of raw random bytes (NaN codes, scale bytes 0 and 0xFF). `out`
// arrives as random bits: rows the gather does not write must keep them.
#include <algorithm>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"
#include "deepinfer/OpShapes.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::testing {
namespace {

struct FusedSpec {
  std::string name;
  int64_t bs = 64, ratio = 4, window = 128, K = 512, maxModelLen = 8192;
  int32_t qsl0 = 0;
  std::vector<int32_t> queryLens, seqLens;
  bool rawBytes = false;
  bool unreadPagesMinusOne = false;
};

OpCase makeCase(Rng& rng, const FusedSpec& s) {
  const int64_t R = int64_t(s.queryLens.size()), bs = s.bs;
  const int64_t N = s.ratio > 0 ? (s.maxModelLen + s.ratio - 1) / s.ratio : 0;
  std::vector<int32_t> qsl = {s.qsl0}, gatherLens;
  int64_t maxQ = 0, maxPages = 1, totalPages = 0;
  for (int64_t b = 0; b < R; ++b) {
    const int32_t q = s.queryLens[size_t(b)], seq = s.seqLens[size_t(b)];
    qsl.push_back(qsl.back() + q);
    maxQ = std::max<int64_t>(maxQ, q);
    gatherLens.push_back(int32_t(std::min<int64_t>(seq, q + s.window - 1)));
    const int64_t n = (seq + bs - 1) / bs;
    maxPages = std::max(maxPages, n + 1);  // one spare column, -1
    totalPages += n;
  }
  const int64_t T = qsl.back() - s.qsl0;
  const int64_t M = N + s.window + maxQ + 4;  // N + window + max_batched_tokens (+ slack)

  // Pages in random order from a pool a little larger than needed.
  const int64_t P = totalPages + 3;
  std::vector<int64_t> order = shuffledRange(rng, P);
  std::vector<int32_t> table(size_t(R * maxPages), -1);
  std::vector<int64_t> used;
  size_t next = 0;
  for (int64_t b = 0; b < R; ++b) {
    const int64_t seq = s.seqLens[size_t(b)], g = gatherLens[size_t(b)];
    for (int64_t pi = 0; pi * bs < seq; ++pi) {
      const int64_t page = order[next++];
      const bool read = (pi + 1) * bs > seq - g;
      const bool inTable = read || !s.unreadPagesMinusOne;
      table[size_t(b * maxPages + pi)] = inTable ? int32_t(page) : -1;
      // Pages no table entry names stay zero: writing tokens into them (quantized normals) was
      // most of the 300-request case's cost, for bytes no kernel may read.
      if (inTable) used.push_back(page);
    }
  }
  std::vector<int32_t> topk(size_t(T * s.K));
  for (auto& v : topk) {
    const double u = rng.uniform();
    if (u < 0.05)
      v = -1;
    else if (u < 0.07)
      v = -int32_t(rng.range(2, 1000));
    else if (u < 0.10)
      v = int32_t(N + rng.range(0, 1000));
    else
      v = N > 0 ? int32_t(rng.range(0, N)) : int32_t(rng.range(0, 1000));
  }
  OpCase c;
  c.name = s.name;
  c.op = "gather_kcache_combine";
  c.attrs.setInt("block_size", bs);
  c.attrs.setInt("window", s.window);
  c.attrs.setInt("ratio", s.ratio);
  c.attrs.setInt("topk", s.K);
  c.attrs.setInt("N", N);
  c.inputs["k_cache"] = s.rawBytes ? randomBytes(rng, DType::U8, {P, mlaPageBytes(bs)}) : writerBuiltKvCache(rng, P, bs, used);
  c.inputs["seq_lens"] = i32Tensor({R}, s.seqLens);
  c.inputs["gather_lens"] = i32Tensor({R}, gatherLens);
  c.inputs["block_table"] = i32Tensor({R, maxPages}, table);
  c.inputs["out"] = randomBytes(rng, DType::BF16, {R, M, ref::kHeadDim});
  c.inputs["topk_indices"] = i32Tensor({T, s.K}, topk);
  c.inputs["query_start_loc"] = i32Tensor({R + 1}, qsl);
  return c;
}

}  // namespace

std::vector<OpCase> gatherKcacheCombineCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x6763636Full);
  std::vector<FusedSpec> specs = {
      {"bs64_r4_chunks", 64, 4, 128, 512, 8192, 0, {37, 1, 100}, {37, 500, 2000}, false, true},
      {"bs64_t1", 64, 4, 128, 512, 8192, 0, {1}, {777}},
      {"bs64_t1_fresh", 64, 4, 128, 512, 8192, 5, {1}, {1}},
      {"bs2_page_edges_odd", 2, 2, 3, 7, 64, 0, {9, 4, 1}, {9, 20, 1}, false, true},
      {"bs256_window_crosses_page", 256, 1, 128, 512, 4096, 17, {200, 30}, {700, 300}},
      {"bs64_r0_window_only", 64, 0, 128, 512, 8192, 0, {50, 70}, {50, 300}},
      {"bs64_empty_window_and_no_tokens", 64, 4, 128, 512, 8192, 1000, {5, 0, 64, 3}, {5, 0, 64, 4000}},
      {"bs64_raw_bytes_nan", 64, 2, 128, 512, 4096, 0, {20, 7}, {1030, 7}, true},
  };
  FusedSpec big{"bs64_t1536_offset_16k", 64, 4, 128, 512, 65536, 0, {1536}, {6000}};
  specs.push_back(big);
  FusedSpec batch{"bs64_t1536_8_requests", 64, 4, 128, 512, 16384, 0, {}, {}, false, true};
  for (int b = 0; b < 8; ++b) {
    batch.queryLens.push_back(192);
    batch.seqLens.push_back(int32_t(rng.range(192, 5000)));
  }
  specs.push_back(batch);
  // More requests than threads per CTA (128 / 256): requests past the first CTA-wide batch are
  // found after the rows' barrier and resolved in the gather's second prefix chunk.
  FusedSpec many{"bs64_300_requests", 64, 4, 128, 512, 8192, 11, {}, {}, false, true};
  for (int b = 0; b < 300; ++b) {
    const int32_t q = int32_t(rng.range(0, 3));
    many.queryLens.push_back(q);
    many.seqLens.push_back(int32_t(rng.range(q, 3000)));
  }
  specs.push_back(many);
  std::vector<OpCase> cases;
  for (const FusedSpec& s : specs) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
