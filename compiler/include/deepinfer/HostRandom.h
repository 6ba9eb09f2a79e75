// Seeded random host tensors, the same bytes on every machine: what the test cases and the
// kernel families' benchmark inputs (BenchInputs.h) are built from. Large tensors come from value
// pools: values drawn once and copied in short runs from random offsets (every row differs, no
// element is drawn twice over), so a 200 MB input takes a fraction of a second.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "deepinfer/Tensor.h"

namespace deepinfer {

// SplitMix64 with Box-Muller normals: small, fast and the same everywhere (unlike
// std::normal_distribution, whose algorithm the standard leaves open).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                       // [0, 1)
  int64_t range(int64_t lo, int64_t hi);  // [lo, hi), hi > lo
  double normal();                        // N(0, 1)
  bool chance(double p) { return uniform() < p; }

 private:
  uint64_t state_;
};

HostTensor bf16Normal(Rng& rng, std::vector<int64_t> shape, double sigma = 1.0, double mean = 0.0);
HostTensor f32Normal(Rng& rng, std::vector<int64_t> shape, double sigma = 1.0, double mean = 0.0);
HostTensor f32Uniform(Rng& rng, std::vector<int64_t> shape, double lo, double hi);
// Random bits of any dtype (for poisoned outputs and raw-byte caches).
HostTensor randomBytes(Rng& rng, DType dtype, std::vector<int64_t> shape);
void fillRandomBytes(Rng& rng, uint8_t* p, int64_t n);
// Tensors of given values; std::logic_error when the count does not match the shape.
HostTensor i32Tensor(std::vector<int64_t> shape, const std::vector<int32_t>& values);
HostTensor i64Tensor(std::vector<int64_t> shape, const std::vector<int64_t>& values);

// The integers [0, n) in random order.
std::vector<int64_t> shuffledRange(Rng& rng, int64_t n);

// `count` distinct integers of [0, range), ascending (count <= range): one from each of `count`
// equal strata, the shape of an indexer's sorted top-k.
void stratifiedSorted(Rng& rng, int64_t range, int64_t count, int32_t* out);

// A prefill's indexer top-k rows [T, K] (T = qsl.back()): request b's tokens are the last
// qsl[b+1] - qsl[b] positions of a `context`-token prompt; a token at position pos sees
// min((pos + 1) / ratio, N) compressed entries (none when ratio == 0) and selects up to K of them
// (stratifiedSorted), the rest of its row -1.
void prefillTopkRows(Rng& rng, const std::vector<int32_t>& qsl, int64_t context, int64_t ratio, int64_t N,
                     int64_t K, int32_t* out);

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

}  // namespace deepinfer
