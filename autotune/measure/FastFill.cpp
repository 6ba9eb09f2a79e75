#include "FastFill.h"

#include "deepinfer/OpShapes.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::bench {
namespace {

constexpr int64_t kPoolSize = int64_t(1) << 18;

}  // namespace

ValuePool<uint16_t> bf16NormalPool(Rng& rng, double sigma, double mean) {
  std::vector<uint16_t> v(static_cast<size_t>(kPoolSize));
  for (auto& x : v) x = floatToBf16(float(mean + sigma * rng.normal()));
  return ValuePool<uint16_t>(std::move(v));
}

ValuePool<float> f32NormalPool(Rng& rng, double sigma, double mean) {
  std::vector<float> v(static_cast<size_t>(kPoolSize));
  for (auto& x : v) x = float(mean + sigma * rng.normal());
  return ValuePool<float>(std::move(v));
}

HostTensor bf16FromPool(Rng& rng, const ValuePool<uint16_t>& pool, std::vector<int64_t> shape) {
  HostTensor t(DType::BF16, std::move(shape));
  pool.fill(rng, t.ptr<uint16_t>(), t.numel());
  return t;
}

HostTensor f32FromPool(Rng& rng, const ValuePool<float>& pool, std::vector<int64_t> shape) {
  HostTensor t(DType::F32, std::move(shape));
  pool.fill(rng, t.ptr<float>(), t.numel());
  return t;
}

void stratifiedSorted(Rng& rng, int64_t range, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t lo = i * range / count, hi = (i + 1) * range / count;  // hi > lo as range >= count
    out[i] = int32_t(rng.range(lo, hi));
  }
}

HostTensor tiledKvCache(Rng& rng, int64_t numPages, int64_t blockSize, const std::vector<int64_t>& filledPages,
                        int64_t sourceTokens) {
  constexpr int64_t kSrcBs = 64;
  const int64_t srcPages = (std::max<int64_t>(sourceTokens, 1) + kSrcBs - 1) / kSrcBs;
  std::vector<int64_t> srcList(static_cast<size_t>(srcPages));
  for (int64_t p = 0; p < srcPages; ++p) srcList[size_t(p)] = p;
  const HostTensor src = testing::writerBuiltKvCache(rng, srcPages, kSrcBs, srcList);
  const int64_t srcPageBytes = mlaPageBytes(kSrcBs), pageBytes = mlaPageBytes(blockSize);
  const int64_t srcTokens = srcPages * kSrcBs;

  HostTensor cache(DType::U8, {numPages, pageBytes});
  const uint8_t* s = src.ptr<uint8_t>();
  uint8_t* d = cache.ptr<uint8_t>();
  for (int64_t page : filledPages) {
    uint8_t* dp = d + page * pageBytes;
    for (int64_t o = 0; o < blockSize; ++o) {
      const int64_t tok = rng.range(0, srcTokens);
      const uint8_t* sp = s + (tok / kSrcBs) * srcPageBytes;
      const int64_t so = tok % kSrcBs;
      std::memcpy(dp + o * ref::kTokenDataBytes, sp + so * ref::kTokenDataBytes, ref::kTokenDataBytes);
      std::memcpy(dp + blockSize * ref::kTokenDataBytes + o * ref::kTokenScaleBytes,
                  sp + kSrcBs * ref::kTokenDataBytes + so * ref::kTokenScaleBytes, ref::kTokenScaleBytes);
    }
  }
  return cache;
}

}  // namespace deepinfer::bench
