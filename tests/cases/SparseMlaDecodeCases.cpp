// sparse_mla_decode cases: batch 1 to 64 (1, 2, 3, 4, 6, 7, 12, 24, 64), s_q 1 and 2, query
// heads 8 / 16 / 64 / 128, with and without the extra (compressed) source, extra block sizes 2 / 64 / 256, odd K, fewer keys than
// a tile, lens 0 and full, -1 / negative / past-the-cache indices and valid-looking junk past
// lens, queries with no valid entry at all, NaN codes and NaN scales in key rows (they count as 0), and (large) a
// window cache whose pages lie past byte 2^31. Caches are written by the kv_quant_insert
// reference from N(0, 1) rows.
#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"
#include "deepinfer/OpShapes.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::testing {
namespace {

struct SourceSpec {
  int64_t bs = 64, pages = 4, K = 128;
  int64_t firstPage = 0;  // pages below are never referenced (the large case)
};

struct DecodeSpec {
  std::string name;
  int64_t B, Sq, H;
  SourceSpec swa;
  bool extra = false;
  SourceSpec ext;
  bool nanCodes = false;
  bool allEmpty = false;
};

// Sets a few e4m3 codes and scale bytes of written tokens to NaN patterns.
void injectNaNs(Rng& rng, HostTensor& cache, const SourceSpec& s) {
  const int64_t pageBytes = mlaPageBytes(s.bs);
  uint8_t* p = cache.ptr<uint8_t>();
  for (int64_t page = s.firstPage; page < s.firstPage + s.pages; ++page) {
    for (int64_t o = 0; o < s.bs; ++o) {
      if (!rng.chance(0.1)) continue;
      uint8_t* base = p + page * pageBytes;
      if (rng.chance(0.5))
        base[o * ref::kTokenDataBytes + rng.range(0, ref::kNopeDims)] = rng.chance(0.5) ? 0x7F : 0xFF;
      else
        base[s.bs * ref::kTokenDataBytes + o * ref::kTokenScaleBytes + rng.range(0, ref::kScaleTiles)] = 0xFF;
    }
  }
}

void addSource(Rng& rng, OpCase& c, const std::string& prefix, const DecodeSpec& d, const SourceSpec& s) {
  const int64_t B = d.B, Sq = d.Sq, total = s.firstPage + s.pages, valid = total * s.bs;
  std::vector<int64_t> filled;
  for (int64_t p = s.firstPage; p < total; ++p) filled.push_back(p);
  HostTensor cache = writerBuiltKvCache(rng, total, s.bs, filled);
  if (d.nanCodes) injectNaNs(rng, cache, s);
  std::vector<int32_t> lens(static_cast<size_t>(B)), idx(size_t(B * Sq * s.K));
  for (int64_t b = 0; b < B; ++b) {
    int32_t len = int32_t(rng.range(0, s.K + 1));
    if (b == 0) len = int32_t(s.K);
    if (b == 1) len = 0;
    if (d.allEmpty) len = b % 2 ? 0 : int32_t(s.K);  // even b: entries exist but all invalid
    lens[size_t(b)] = len;
    for (int64_t k = 0; k < Sq * s.K; ++k) {
      int32_t& v = idx[size_t(b * Sq * s.K + k)];
      const double u = rng.uniform();
      if (d.allEmpty)
        v = u < 0.5 ? -1 : int32_t(valid + rng.range(0, 64));
      else if (u < 0.04)
        v = -1;
      else if (u < 0.05)
        v = -int32_t(rng.range(2, 50));
      else if (u < 0.07)
        v = int32_t(valid + rng.range(0, 64));
      else
        v = int32_t(s.firstPage * s.bs + rng.range(0, s.pages * s.bs));
    }
  }
  c.attrs.setInt(prefix + "_block_size", s.bs);
  c.inputs[prefix + "_cache"] = std::move(cache);
  c.inputs[prefix + "_indices"] = i32Tensor({B, Sq, s.K}, idx);
  c.inputs[prefix + "_lens"] = i32Tensor({B}, lens);
}

OpCase makeCase(Rng& rng, const DecodeSpec& d) {
  OpCase c;
  c.name = d.name;
  c.op = "sparse_mla_decode";
  c.attrs.setFloat("sm_scale", 1.0 / std::sqrt(512.0));
  c.inputs["q"] = bf16Normal(rng, {d.B, d.Sq, d.H, 512});
  addSource(rng, c, "swa", d, d.swa);
  if (d.extra) addSource(rng, c, "extra", d, d.ext);
  c.inputs["attn_sink"] = f32Normal(rng, {d.H});
  return c;
}

}  // namespace

std::vector<OpCase> sparseMlaDecodeCases(uint64_t seed, bool large) {
  Rng rng(seed ^ 0x6465636Full);
  std::vector<DecodeSpec> specs = {
      {"b1_sq1_h64_swa_only", 1, 1, 64, {64, 3, 128}, false, {}},
      {"b6_sq2_h64_extra_bs64", 6, 2, 64, {64, 8, 128}, true, {64, 12, 512}},
      {"b12_sq1_h128_extra_bs2", 12, 1, 128, {64, 8, 128}, true, {2, 300, 512}},
      {"b64_sq1_h8_extra_bs256", 64, 1, 8, {64, 16, 128}, true, {256, 6, 512}},
      {"b7_sq2_h16_nan_odd_k", 7, 2, 16, {64, 5, 100}, true, {64, 9, 333}, true},
      {"b24_sq1_h64_swa_only", 24, 1, 64, {64, 30, 128}, false, {}},
      // Odd K on both sources at 64 heads (all heads in one CTA with q in shared memory).
      {"b2_sq1_h64_odd_k", 2, 1, 64, {64, 3, 77}, true, {64, 5, 201}},
      {"b4_sq2_h64_no_valid_entry", 4, 2, 64, {64, 2, 128}, true, {64, 2, 64}, false, true},
      // Fewer keys than one tile (5 window + 3 compressed): split plans have empty splits.
      {"b3_sq1_h64_few_keys", 3, 1, 64, {64, 2, 5}, true, {64, 2, 3}},
  };
  if (large) {
    // ~2.19 GB window cache; every referenced page lies past byte 2^31.
    const int64_t firstHigh = (int64_t(1) << 31) / mlaPageBytes(64) + 1;
    specs.push_back({"b2_sq1_h64_high_pages_2GiB", 2, 1, 64, {64, 8, 128, firstHigh + 1190}, false, {}});
  }
  std::vector<OpCase> cases;
  for (const DecodeSpec& s : specs) cases.push_back(makeCase(rng, s));
  return cases;
}

}  // namespace deepinfer::testing
