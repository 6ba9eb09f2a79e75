// Large random inputs built in milliseconds, not minutes: values drawn once into a pool and copied
// in short runs from random offsets (every row differs, no element is drawn twice over), sorted
// distinct index sets by stratified sampling, and fp8 caches tiled from tokens that the
// kv_quant_insert reference wrote (so every byte is one the real writer could produce).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cases/CaseUtil.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::bench {

using testing::Rng;

template <class T>
class ValuePool {
 public:
  explicit ValuePool(std::vector<T> values) : v_(std::move(values)) {}
  // Runs of kRun pool values, each run from a random offset.
  void fill(Rng& rng, T* dst, int64_t n) const {
    const int64_t size = int64_t(v_.size());
    for (int64_t i = 0; i < n;) {
      const int64_t len = std::min({kRun, n - i, size});
      const int64_t start = rng.range(0, size - len + 1);
      std::memcpy(dst + i, v_.data() + start, size_t(len) * sizeof(T));
      i += len;
    }
  }

 private:
  static constexpr int64_t kRun = 256;
  std::vector<T> v_;
};

// N(mean, sigma^2) pools (bf16 bits / fp32) of 2^18 values.
ValuePool<uint16_t> bf16NormalPool(Rng& rng, double sigma = 1.0, double mean = 0.0);
ValuePool<float> f32NormalPool(Rng& rng, double sigma = 1.0, double mean = 0.0);

HostTensor bf16FromPool(Rng& rng, const ValuePool<uint16_t>& pool, std::vector<int64_t> shape);
HostTensor f32FromPool(Rng& rng, const ValuePool<float>& pool, std::vector<int64_t> shape);

// `count` distinct integers of [0, range), ascending (count <= range): one from each of `count`
// equal strata, the shape of an indexer's sorted top-k.
void stratifiedSorted(Rng& rng, int64_t range, int64_t count, int32_t* out);

// An fp8_ds_mla cache [numPages, page_bytes] whose `filledPages` hold tokens copied from a pool of
// `sourceTokens` N(0, 1) tokens written by the kv_quant_insert reference; other pages are zero
// (never read).
HostTensor tiledKvCache(Rng& rng, int64_t numPages, int64_t blockSize, const std::vector<int64_t>& filledPages,
                        int64_t sourceTokens = 1024);

}  // namespace deepinfer::bench
