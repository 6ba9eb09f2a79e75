// References of sparse_mla_prefill (docs/ops.md §5) and sparse_mla_decode (§6): MQA over a
// per-token list of key rows, fp32 throughout, the sink in the softmax denominator only.
#include <algorithm>
#include <cmath>
#include <vector>

#include "deepinfer/Formats.h"
#include "reference/KvCacheLayout.h"
#include "reference/RefOps.h"

namespace deepinfer::ref {
namespace {

// One query row against its key rows (each 512 floats; V is the same row as K).
// No keys: out = 0, lse = +inf. `lse` excludes the sink; the weights include it.
void attend(const float* q, const std::vector<const float*>& keys, float sink, float smScale, uint16_t* out,
            float* lse) {
  if (keys.empty()) {
    std::fill(out, out + kHeadDim, floatToBf16(0.f));
    *lse = INFINITY;
    return;
  }
  std::vector<float> p(keys.size());
  float m = -INFINITY;
  for (size_t k = 0; k < keys.size(); ++k) {
    float dot = 0.f;  // one 512-wide product: NoPE and RoPE dims together
    for (int64_t d = 0; d < kHeadDim; ++d) dot += q[d] * keys[k][d];
    p[k] = smScale * dot;
    m = std::max(m, p[k]);
  }
  // log(sum exp(p)), shifted by the max so exp cannot overflow.
  float sum = 0.f;
  for (float v : p) sum += std::exp(v - m);
  const float l = m + std::log(sum);
  const float mx = std::max(l, sink);
  const float lseSink = mx + std::log(std::exp(l - mx) + std::exp(sink - mx));
  std::vector<float> acc(kHeadDim, 0.f);
  for (size_t k = 0; k < keys.size(); ++k) {
    const float w = std::exp(p[k] - lseSink);
    for (int64_t d = 0; d < kHeadDim; ++d) acc[d] += w * keys[k][d];
  }
  for (int64_t d = 0; d < kHeadDim; ++d) out[d] = floatToBf16(acc[d]);
  *lse = l;
}

std::vector<float> bf16RowToFloat(const uint16_t* x, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) f[size_t(i)] = bf16ToFloat(x[i]);
  return f;
}

// One decode key source: an fp8 cache with its per-query index lists and lengths.
struct DecodeSource {
  const uint8_t* pages = nullptr;
  int64_t numPages = 0, blockSize = 0, pageBytes = 0;
  const int32_t* indices = nullptr;  // [B, Sq, K]
  int64_t K = 0;
  const int32_t* lens = nullptr;  // [B] or [B, Sq]
  bool lensPerQuery = false;

  int64_t len(int64_t b, int64_t s, int64_t Sq) const { return lens[lensPerQuery ? b * Sq + s : b]; }
};

Result<DecodeSource> readSource(const RefArgs& a, const std::string& prefix, int64_t B, int64_t Sq,
                                int64_t blockSize) {
  DecodeSource src;
  src.blockSize = blockSize;
  src.pageBytes = mlaPageBytes(blockSize);
  const std::string bsAttr = prefix + "_block_size";
  REF_ASSIGN(cache,
             a.in(prefix + "_cache",
                  {anyDim("P"), dimOf(fmt::format("page_bytes({}={})", bsAttr, blockSize), src.pageBytes)}));
  REF_ASSIGN(idx, a.in(prefix + "_indices", {dimOf("B", B), dimOf("Sq", Sq), anyDim("K")}));
  const std::string lensName = prefix + "_lens";
  // Lengths per request [B] (the table's form) or per query token [B, Sq] (docs/ops.md §6 allows both).
  const HostTensor* given = a.find(lensName);
  if (given && given->shape.size() != 1 && given->shape.size() != 2)
    return a.fail("tensor '{}' has shape {}, expected [B={}] or [B={}, Sq={}]", lensName,
                  given->shapeString(), B, B, Sq);
  const bool perQuery = given && given->shape.size() == 2;
  REF_ASSIGN(lens,
             perQuery ? a.in(lensName, {dimOf("B", B), dimOf("Sq", Sq)}) : a.in(lensName, {dimOf("B", B)}));
  src.pages = cache->ptr<uint8_t>();
  src.numPages = cache->dim(0);
  src.indices = idx->ptr<int32_t>();
  src.K = idx->dim(2);
  src.lens = lens->ptr<int32_t>();
  src.lensPerQuery = perQuery;
  for (int64_t i = 0; i < lens->numel(); ++i)
    if (src.lens[i] < 0 || src.lens[i] > src.K)
      return a.fail("{}[{}] = {} is outside [0, K = {}] ('{}' has {} columns)", lensName, i, src.lens[i],
                    src.K, prefix + "_indices", src.K);
  return src;
}

// Appends the valid key rows of `src` for query (b, s) to `rows` (dequantized, NaN -> 0):
// entries at or beyond the length, -1 and indices past the cache are skipped.
void appendKeys(const DecodeSource& src, int64_t b, int64_t s, int64_t Sq, std::vector<float>& rows) {
  const int64_t n = src.len(b, s, Sq);
  const int32_t* idx = src.indices + (b * Sq + s) * src.K;
  std::vector<uint16_t> bits(kHeadDim);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = idx[k];
    if (i < 0 || i >= src.numPages * src.blockSize) continue;
    dequantizeKvToken(src.pages + (i / src.blockSize) * src.pageBytes, src.blockSize, i % src.blockSize,
                      bits.data());
    for (int64_t d = 0; d < kHeadDim; ++d) {
      const float v = bf16ToFloat(bits[size_t(d)]);
      rows.push_back(std::isnan(v) ? 0.f : v);
    }
  }
}

}  // namespace

Status sparseMlaPrefill(RefArgs& a) {
  REF_ASSIGN(smScale, a.floatAttr("sm_scale"));
  REF_ASSIGN(q, a.in("q", {anyDim("T"), anyDim("H"), exactDim(kHeadDim)}));
  const int64_t T = q->dim(0), H = q->dim(1);
  REF_ASSIGN(kv, a.in("kv", {anyDim("S"), exactDim(kHeadDim)}));
  const int64_t S = kv->dim(0);
  REF_ASSIGN(indices, a.in("indices", {dimOf("T", T), anyDim("Kmax")}));
  const int64_t Kmax = indices->dim(1);
  REF_ASSIGN(lens, a.in("lens", {dimOf("T", T)}));
  REF_ASSIGN(sink, a.in("attn_sink", {dimOf("H", H)}));
  const int32_t* len = lens->ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    if (len[t] < 0 || len[t] > Kmax)
      return a.fail("lens[{}] = {} is outside [0, Kmax = {}] ('indices' has {} columns)", t, len[t], Kmax,
                    Kmax);

  const std::vector<float> kvf = bf16RowToFloat(kv->ptr<uint16_t>(), S * kHeadDim);
  const int32_t* idx = indices->ptr<int32_t>();
  const float* sinks = sink->ptr<float>();
  const uint16_t* qb = q->ptr<uint16_t>();
  uint16_t* out = a.out("out", {T, H, kHeadDim}).ptr<uint16_t>();
  float* lse = a.out("lse", {T, H}).ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    std::vector<const float*> keys;
    for (int64_t k = 0; k < len[t]; ++k) {
      const int64_t i = idx[t * Kmax + k];
      if (i >= 0 && i < S) keys.push_back(kvf.data() + i * kHeadDim);
    }
    for (int64_t h = 0; h < H; ++h) {
      const int64_t row = t * H + h;
      const std::vector<float> qf = bf16RowToFloat(qb + row * kHeadDim, kHeadDim);
      attend(qf.data(), keys, sinks[h], float(smScale), out + row * kHeadDim, lse + row);
    }
  }
  return {};
}

Status sparseMlaDecode(RefArgs& a) {
  REF_ASSIGN(smScale, a.floatAttr("sm_scale"));
  REF_ASSIGN(q, a.in("q", {anyDim("B"), anyDim("Sq"), anyDim("H"), exactDim(kHeadDim)}));
  const int64_t B = q->dim(0), Sq = q->dim(1), H = q->dim(2);
  REF_ASSIGN(swaBs, a.intAttr("swa_block_size", 1, kMaxBlockSize));
  REF_ASSIGN(swa, readSource(a, "swa", B, Sq, swaBs));
  const int given = int(a.has("extra_cache")) + int(a.has("extra_indices")) + int(a.has("extra_lens"));
  if (given != 0 && given != 3)
    return a.fail(
        "the extra source needs all of 'extra_cache', 'extra_indices', 'extra_lens' or none "
        "(got {} of 3)",
        given);
  std::vector<DecodeSource> sources = {swa};
  if (given == 3) {
    REF_ASSIGN(extraBs, a.intAttr("extra_block_size", 1, kMaxBlockSize));
    REF_ASSIGN(extra, readSource(a, "extra", B, Sq, extraBs));
    sources.push_back(extra);
  }
  REF_ASSIGN(sink, a.in("attn_sink", {dimOf("H", H)}));

  const float* sinks = sink->ptr<float>();
  const uint16_t* qb = q->ptr<uint16_t>();
  uint16_t* out = a.out("out", {B, Sq, H, kHeadDim}).ptr<uint16_t>();
  float* lse = a.out("lse", {B, Sq, H}).ptr<float>();  // [B, Sq, H], not FlashMLA's [B, H, Sq]
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < Sq; ++s) {
      // One softmax over the window source's valid entries followed by the extra source's.
      std::vector<float> rows;
      for (const DecodeSource& src : sources) appendKeys(src, b, s, Sq, rows);
      std::vector<const float*> keys;
      for (size_t r = 0; r < rows.size(); r += kHeadDim) keys.push_back(rows.data() + r);
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = (b * Sq + s) * H + h;
        const std::vector<float> qf = bf16RowToFloat(qb + row * kHeadDim, kHeadDim);
        attend(qf.data(), keys, sinks[h], float(smScale), out + row * kHeadDim, lse + row);
      }
    }
  }
  return {};
}

}  // namespace deepinfer::ref
