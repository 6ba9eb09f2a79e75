// gather_kcache cases: block sizes 2 / 64 / 256, gathers that start and end on page edges,
// gather_lens absent and given (with lens 0 and full), a row offset, block-table entries of
// unread pages set to -1, a cache of raw random bytes (NaN codes, scale bytes 0 and 0xFF),
// batch 1 and 64, gathers large enough for each default schedule (one row per warp, one wave
// of four rows per warp, balanced steps), and (large) pages past byte 2^31. `out` arrives as random bits: rows outside
// [offset, offset + g) of each request must keep them.
#include <algorithm>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"
#include "deepinfer/OpShapes.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::testing {
namespace {

struct GatherSpec {
  std::string name;
  int64_t bs = 64;
  std::vector<int32_t> seqLens;
  std::vector<int32_t> gatherLens;  // empty: the optional tensor is absent
  int64_t offset = 0;
  bool rawBytes = false;  // random cache bytes instead of writer-built tokens
  bool unreadPagesMinusOne = false;
  int64_t highPagesFrom = -1;  // >= 0: cache pages start there (the large case)
};

OpCase makeCase(Rng& rng, const GatherSpec& s) {
  const int64_t R = int64_t(s.seqLens.size()), bs = s.bs;
  auto gatherLen = [&](int64_t r) {
    return s.gatherLens.empty() ? s.seqLens[size_t(r)] : s.gatherLens[size_t(r)];
  };
  int64_t maxPages = 1, totalPages = 0, maxG = 0;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = (s.seqLens[size_t(r)] + bs - 1) / bs;
    maxPages = std::max(maxPages, n + 1);  // one spare column, -1
    totalPages += n;
    maxG = std::max<int64_t>(maxG, gatherLen(r));
  }
  // Pages are handed out in random order from a pool a little larger than needed.
  const int64_t pool = totalPages + 3;
  const int64_t base = s.highPagesFrom >= 0 ? s.highPagesFrom : 0;
  const int64_t P = base + pool;
  std::vector<int64_t> order = shuffledRange(rng, pool);
  std::vector<int32_t> table(size_t(R * maxPages), -1);
  std::vector<int64_t> used;
  size_t next = 0;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t seq = s.seqLens[size_t(r)], g = gatherLen(r);
    for (int64_t pi = 0; pi * bs < seq; ++pi) {
      const int64_t page = base + order[next++];
      const bool read = (pi + 1) * bs > seq - g;
      table[size_t(r * maxPages + pi)] = (s.unreadPagesMinusOne && !read) ? -1 : int32_t(page);
      used.push_back(page);
    }
  }
  OpCase c;
  c.name = s.name;
  c.op = "gather_kcache";
  c.attrs.setInt("block_size", bs);
  c.attrs.setInt("offset", s.offset);
  if (s.rawBytes) {
    c.inputs["k_cache"] = randomBytes(rng, DType::U8, {P, mlaPageBytes(bs)});
  } else {
    c.inputs["k_cache"] = writerBuiltKvCache(rng, P, bs, used);
  }
  c.inputs["seq_lens"] = i32Tensor({R}, s.seqLens);
  if (!s.gatherLens.empty()) c.inputs["gather_lens"] = i32Tensor({R}, s.gatherLens);
  c.inputs["block_table"] = i32Tensor({R, maxPages}, table);
  const int64_t M = s.offset + maxG + 3;  // untouched rows on both sides of the written ones
  c.inputs["out"] = randomBytes(rng, DType::BF16, {R, M, ref::kHeadDim});
  return c;
}

}  // namespace

std::vector<OpCase> gatherKcacheCases(uint64_t seed, bool large) {
  Rng rng(seed ^ 0x67617468ull);
  std::vector<GatherSpec> specs = {
      {"bs64_full", 64, {130, 64, 1}, {}, 0},
      {"bs64_window_offset", 64, {300, 129, 5, 0}, {128, 128, 5, 0}, 40, false, true},
      {"bs2_odd", 2, {7, 10, 2}, {3, 10, 1}, 1, false, true},
      {"bs256_page_edges", 256, {513, 256}, {257, 256}, 0},
      {"bs64_raw_bytes_nan", 64, {100, 64}, {}, 5, true},
      {"bs64_r1_len0", 64, {0}, {}, 0},
      {"bs64_r1_one_token", 64, {1}, {1}, 7},
      // The default schedule follows the rows R * (M - offset) (GatherKcacheFamily defaultFor):
      // up to one wave of 4-warp CTAs at one row per warp (<= 4032 rows on sm_86, 6912 on sm_80,
      // 8448 on an H200: every case above), one wave of 8-warp CTAs at four rows per warp
      // (9,606 rows: <= 10752 / 13824 / 16896), and several balanced steps (21,009 rows).
      {"bs64_one_wave_4_rows_per_warp", 64, {4800, 4700}, {4800, 4637}, 0},
      {"bs64_balanced_steps", 64, {7000, 6000, 6500}, {7000, 5999, 1}, 3, false, true},
  };
  GatherSpec batch{"bs64_batch64", 64, {}, {}, 16};
  for (int r = 0; r < 64; ++r) {
    const int32_t seq = int32_t(rng.range(0, 300));
    batch.seqLens.push_back(seq);
    batch.gatherLens.push_back(int32_t(std::min<int64_t>(seq, rng.range(0, 200))));
  }
  specs.push_back(batch);
  if (large) {
    // ~2.19 GB cache; every page read lies past byte 2^31, other pages stay zero.
    const int64_t firstHigh = (int64_t(1) << 31) / mlaPageBytes(64) + 1;
    GatherSpec high{"bs64_high_pages_2GiB", 64, {640, 1000, 64, 1}, {}, 0};
    high.highPagesFrom = firstHigh + 1150;
    specs.push_back(high);
  }
  std::vector<OpCase> cases;
  for (const GatherSpec& s : specs) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
