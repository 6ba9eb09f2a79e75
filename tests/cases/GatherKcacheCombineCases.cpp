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
#include "cases/CombineRowsCase.h"
#include "cases/OpCases.h"
#include "deepinfer/OpShapes.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::testing {
namespace {

struct FusedSpec {
  std::string name;
  int64_t bs = 64;
  CombineRowsSpec rows;
  bool rawBytes = false;
  bool unreadPagesMinusOne = false;
};

OpCase makeCase(Rng& rng, const FusedSpec& s) {
  OpCase c;
  c.name = s.name;
  c.op = "gather_kcache_combine";
  c.attrs.setInt("block_size", s.bs);
  // The gather covers exactly the first query token's window, as attendPrefill runs it.
  const int64_t M = addCombineRows(rng, s.rows, 1, c);
  const int32_t* gatherLens = c.inputs.at("gather_lens").ptr<int32_t>();
  const int64_t R = int64_t(s.rows.queryLens.size()), bs = s.bs;
  int64_t maxPages = 1, totalPages = 0;
  for (int64_t b = 0; b < R; ++b) {
    const int64_t n = (s.rows.seqLens[size_t(b)] + bs - 1) / bs;
    maxPages = std::max(maxPages, n + 1);  // one spare column, -1
    totalPages += n;
  }
  // Pages in random order from a pool a little larger than needed.
  const int64_t P = totalPages + 3;
  std::vector<int64_t> order = shuffledRange(rng, P);
  std::vector<int32_t> table(size_t(R * maxPages), -1);
  std::vector<int64_t> used;
  size_t next = 0;
  for (int64_t b = 0; b < R; ++b) {
    const int64_t seq = s.rows.seqLens[size_t(b)], g = gatherLens[b];
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
  c.inputs["k_cache"] = s.rawBytes ? randomBytes(rng, DType::U8, {P, mlaPageBytes(bs)}) : writerBuiltKvCache(rng, P, bs, used);
  c.inputs["block_table"] = i32Tensor({R, maxPages}, table);
  c.inputs["out"] = randomBytes(rng, DType::BF16, {R, M, ref::kHeadDim});
  return c;
}

}  // namespace

std::vector<OpCase> gatherKcacheCombineCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x6763636Full);
  std::vector<FusedSpec> specs = {
      {"bs64_r4_chunks", 64, {4, 128, 512, 8192, 0, {37, 1, 100}, {37, 500, 2000}}, false, true},
      {"bs64_t1", 64, {4, 128, 512, 8192, 0, {1}, {777}}},
      {"bs64_t1_fresh", 64, {4, 128, 512, 8192, 5, {1}, {1}}},
      {"bs2_page_edges_odd", 2, {2, 3, 7, 64, 0, {9, 4, 1}, {9, 20, 1}}, false, true},
      {"bs256_window_crosses_page", 256, {1, 128, 512, 4096, 17, {200, 30}, {700, 300}}},
      {"bs64_r0_window_only", 64, {0, 128, 512, 8192, 0, {50, 70}, {50, 300}}},
      {"bs64_empty_window_and_no_tokens", 64, {4, 128, 512, 8192, 1000, {5, 0, 64, 3}, {5, 0, 64, 4000}}},
      {"bs64_raw_bytes_nan", 64, {2, 128, 512, 4096, 0, {20, 7}, {1030, 7}}, true},
  };
  FusedSpec big{"bs64_t1536_offset_16k", 64, {4, 128, 512, 65536, 0, {1536}, {6000}}};
  specs.push_back(big);
  FusedSpec batch{"bs64_t1536_8_requests", 64, {4, 128, 512, 16384, 0, {}, {}}, false, true};
  for (int b = 0; b < 8; ++b) {
    batch.rows.queryLens.push_back(192);
    batch.rows.seqLens.push_back(int32_t(rng.range(192, 5000)));
  }
  specs.push_back(batch);
  // More requests than threads per CTA (128 / 256): requests past the first CTA-wide batch are
  // found after the rows' barrier and resolved in the gather's second prefix chunk.
  FusedSpec many{"bs64_300_requests", 64, {4, 128, 512, 8192, 11, {}, {}}, false, true};
  for (int b = 0; b < 300; ++b) {
    const int32_t q = int32_t(rng.range(0, 3));
    many.rows.queryLens.push_back(q);
    many.rows.seqLens.push_back(int32_t(rng.range(q, 3000)));
  }
  specs.push_back(many);
  std::vector<OpCase> cases;
  for (const FusedSpec& s : specs) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
