#include "deepinfer/EncodedInputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "KvCacheLayout.h"
#include "deepinfer/Formats.h"

namespace deepinfer {

Result<HostTensor> writerBuiltKvCache(Rng& rng, int64_t numPages, int64_t blockSize,
                                      const std::vector<int64_t>& filledPages, double sigma,
                                      const HostOpReference& reference) {
  const int64_t tokens = int64_t(filledPages.size()) * blockSize;
  std::vector<int64_t> slots;
  slots.reserve(size_t(tokens));
  for (int64_t page : filledPages)
    for (int64_t o = 0; o < blockSize; ++o) slots.push_back(page * blockSize + o);
  TensorMap m;
  m["k"] = bf16Normal(rng, {tokens, kvcache::kHeadDim}, sigma);
  m["slot_mapping"] = i64Tensor({tokens}, slots);
  m["k_cache"] = HostTensor(DType::U8, {numPages, kvcache::pageBytes(blockSize)});
  OpAttrs a;
  a.setInt("block_size", blockSize);
  DI_TRY(reference("kv_quant_insert", a, m));
  return std::move(m["k_cache"]);
}

Result<HostTensor> tiledKvCache(Rng& rng, int64_t numPages, int64_t blockSize, const std::vector<int64_t>& filledPages,
                                const HostOpReference& reference, int64_t sourceTokens) {
  constexpr int64_t kSrcBs = 64;
  const int64_t srcPages = (std::max<int64_t>(sourceTokens, 1) + kSrcBs - 1) / kSrcBs;
  std::vector<int64_t> srcList(static_cast<size_t>(srcPages));
  for (int64_t p = 0; p < srcPages; ++p) srcList[size_t(p)] = p;
  auto src = writerBuiltKvCache(rng, srcPages, kSrcBs, srcList, 1.0, reference);
  if (!src.ok()) return src.error();
  const int64_t srcPageBytes = kvcache::pageBytes(kSrcBs), pageBytes = kvcache::pageBytes(blockSize);
  const int64_t srcTokens = srcPages * kSrcBs;
  constexpr int64_t kData = kvcache::kTokenBytes, kScale = kvcache::kScaleBytes;

  HostTensor cache(DType::U8, {numPages, pageBytes});
  const uint8_t* s = src->ptr<uint8_t>();
  uint8_t* d = cache.ptr<uint8_t>();
  for (int64_t page : filledPages) {
    uint8_t* dp = d + page * pageBytes;
    for (int64_t o = 0; o < blockSize; ++o) {
      const int64_t tok = rng.range(0, srcTokens);
      const uint8_t* sp = s + (tok / kSrcBs) * srcPageBytes;
      const int64_t so = tok % kSrcBs;
      std::memcpy(dp + o * kData, sp + so * kData, kData);
      std::memcpy(dp + blockSize * kData + o * kScale, sp + kSrcBs * kData + so * kScale, kScale);
    }
  }
  return cache;
}

HostTensor indexerKeyCache(Rng& rng, int64_t numPages, int64_t blockSize) {
  constexpr int64_t kDim = 128;
  HostTensor t(DType::U8, {numPages, blockSize * (kDim + 4)});
  std::vector<float> x(kDim);
  for (int64_t p = 0; p < numPages; ++p) {
    uint8_t* page = t.ptr<uint8_t>() + p * blockSize * (kDim + 4);
    for (int64_t o = 0; o < blockSize; ++o) {
      // Key magnitudes vary per token (as normed keys times RoPE do not, but scales must).
      const double sigma = std::exp(rng.normal());
      float amax = 0.f;
      for (auto& v : x) {
        v = bf16ToFloat(floatToBf16(float(sigma * rng.normal())));
        amax = std::max(amax, std::fabs(v));
      }
      const float scale = ue8m0ToFloat(ue8m0CeilEncode(std::max(amax, 1e-4f) / 448.f));
      for (int64_t d = 0; d < kDim; ++d)
        page[o * kDim + d] = e4m3Code(std::clamp(x[size_t(d)] / scale, -448.f, 448.f));
      std::memcpy(page + blockSize * kDim + o * 4, &scale, 4);
    }
  }
  return t;
}

HostTensor quantCodes(Rng& rng, int bits, int64_t rows, int64_t cols) {
  HostTensor t(DType::U8, {rows, bits == 8 ? cols : cols / 2});
  fillRandomBytes(rng, t.bytes.data(), int64_t(t.bytes.size()));
  if (bits == 8)
    for (uint8_t& b : t.bytes) b &= 0xBF;
  return t;
}

HostTensor quantScales(Rng& rng, std::vector<int64_t> shape) {
  HostTensor t(DType::U8, std::move(shape));
  for (uint8_t& b : t.bytes) b = uint8_t(118 + rng.range(0, 5));
  return t;
}

}  // namespace deepinfer
