// kv_quant_insert cases: block sizes 2 / 64 / 256, slots at page edges, -1 slots, tiles whose
// amax sits below the 1e-4 floor or below 0.0448, amax/448 exactly a power of two, e4m3
// rounding ties, and (large) slots whose byte offsets pass 2^31. The cache arrives filled with
// random bytes: bytes outside each written token's 576 + 8 bytes must keep them.
#include <algorithm>
#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"
#include "deepinfer/Formats.h"
#include "deepinfer/OpShapes.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::testing {
namespace {

constexpr int64_t kDim = ref::kHeadDim;

OpCase makeCase(const std::string& name, int64_t bs, HostTensor k, const std::vector<int64_t>& slots,
                HostTensor cache) {
  OpCase c;
  c.name = name;
  c.op = "kv_quant_insert";
  c.attrs.setInt("block_size", bs);
  c.inputs["slot_mapping"] = i64Tensor({int64_t(slots.size())}, slots);
  c.inputs["k"] = std::move(k);
  c.inputs["k_cache"] = std::move(cache);
  return c;
}

// T distinct slots of a [P pages x bs] cache in random order, about `skip` of them -1.
std::vector<int64_t> randomSlots(Rng& rng, int64_t T, int64_t P, int64_t bs, double skip) {
  std::vector<int64_t> all = shuffledRange(rng, P * bs), slots;
  for (int64_t t = 0; t < T; ++t) slots.push_back(rng.chance(skip) ? -1 : all[size_t(t)]);
  return slots;
}

OpCase randomCase(Rng& rng, const std::string& name, int64_t bs, int64_t P, int64_t T, double skip) {
  return makeCase(name, bs, bf16Normal(rng, {T, kDim}), randomSlots(rng, T, P, bs, skip),
                  randomBytes(rng, DType::U8, {P, mlaPageBytes(bs)}));
}

// Each token's seven tiles get different magnitudes, covering the scale edges of docs/ops.md §2.
HostTensor scaleEdgeRows(Rng& rng, int64_t T) {
  const double kMagnitudes[] = {1e-7, 3e-5, 2e-3, 0.04, 1.0, 300.0, 3e4, 1e30};
  HostTensor k = bf16Normal(rng, {T, kDim});
  uint16_t* p = k.ptr<uint16_t>();
  for (int64_t t = 0; t < T; ++t) {
    uint16_t* row = p + t * kDim;
    for (int64_t tile = 0; tile < 7; ++tile) {
      uint16_t* x = row + tile * 64;
      const int kind = int((t + tile) % 10);
      if (kind < 8) {
        for (int64_t d = 0; d < 64; ++d) x[d] = floatToBf16(float(kMagnitudes[kind] * rng.normal()));
      } else if (kind == 8) {
        // amax = 56 = 448 * 2^-3: amax/448 is a power of two, the scale must not round up.
        for (int64_t d = 0; d < 64; ++d) x[d] = floatToBf16(float(10.0 * rng.normal()));
        for (int64_t d = 0; d < 64; ++d)
          if (std::fabs(bf16ToFloat(x[d])) > 56.f) x[d] = floatToBf16(std::copysign(55.f, bf16ToFloat(x[d])));
        x[rng.range(0, 64)] = floatToBf16(rng.chance(0.5) ? 56.f : -56.f);
      } else {
        // amax = 448 (scale 1) and every other value halfway between two e4m3 codes: the
        // encoder's round-to-nearest-even decides each one.
        for (int64_t d = 0; d < 64; ++d) {
          const int c = int(rng.range(0, 0x7D));
          const float mid = 0.5f * (e4m3ToFloat(uint8_t(c)) + e4m3ToFloat(uint8_t(c + 1)));
          x[d] = floatToBf16(rng.chance(0.5) ? -mid : mid);
        }
        x[rng.range(0, 64)] = floatToBf16(448.f);
      }
    }
  }
  return k;
}

}  // namespace

std::vector<OpCase> kvQuantInsertCases(uint64_t seed, bool large) {
  Rng rng(seed ^ 0x6B7651ull);
  std::vector<OpCase> cases;
  cases.push_back(randomCase(rng, "bs64_t37", 64, 4, 37, 0.1));
  cases.push_back(randomCase(rng, "bs2_page_edges", 2, 8, 14, 0.1));
  cases.push_back(randomCase(rng, "bs256_t300", 256, 3, 300, 0.05));
  cases.push_back(randomCase(rng, "bs64_t1024", 64, 20, 1024, 0.02));
  {
    const int64_t T = 40;
    cases.push_back(makeCase("bs64_scale_edges", 64, scaleEdgeRows(rng, T), randomSlots(rng, T, 1, 64, 0.0),
                             randomBytes(rng, DType::U8, {1, mlaPageBytes(64)})));
  }
  cases.push_back(makeCase("bs64_t1_last_offset", 64, bf16Normal(rng, {1, kDim}), {2 * 64 - 1},
                           randomBytes(rng, DType::U8, {2, mlaPageBytes(64)})));
  cases.push_back(makeCase("bs64_all_skipped", 64, bf16Normal(rng, {5, kDim}), {-1, -1, -1, -1, -1},
                           randomBytes(rng, DType::U8, {1, mlaPageBytes(64)})));
  if (large) {
    // ~2.19 GB cache; the written pages start past byte 2^31. Only they are poisoned (the rest
    // stays zero, which keeps generation fast); a wrong 32-bit offset lands in the zero pages.
    const int64_t bs = 64, pageBytes = mlaPageBytes(bs);
    const int64_t firstHigh = (int64_t(1) << 31) / pageBytes + 1, P = firstHigh + 1200;
    HostTensor cache(DType::U8, {P, pageBytes});
    std::vector<int64_t> pages = {P - 1};
    for (int64_t i = 0; i < 7; ++i) pages.push_back(firstHigh + rng.range(0, 1199));
    std::vector<int64_t> slots;
    for (int64_t page : pages) {
      fillRandomBytes(rng, cache.ptr<uint8_t>() + page * pageBytes, pageBytes);
      for (int64_t o = 0; o < bs; o += 2) slots.push_back(page * bs + o + rng.range(0, 2));
    }
    std::sort(slots.begin(), slots.end());
    slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
    const int64_t T = int64_t(slots.size());
    cases.push_back(
        makeCase("bs64_high_pages_2GiB", bs, bf16Normal(rng, {T, kDim}), slots, std::move(cache)));
  }
  return cases;
}

}  // namespace deepinfer::testing
