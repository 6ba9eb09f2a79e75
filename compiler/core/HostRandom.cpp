#include "deepinfer/HostRandom.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace deepinfer {
namespace {

constexpr int64_t kPoolSize = int64_t(1) << 18;

}  // namespace

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int64_t Rng::range(int64_t lo, int64_t hi) { return lo + int64_t(next() % uint64_t(hi - lo)); }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

HostTensor bf16Normal(Rng& rng, std::vector<int64_t> shape, double sigma, double mean) {
  HostTensor t(DType::BF16, std::move(shape));
  uint16_t* p = t.ptr<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = floatToBf16(float(mean + sigma * rng.normal()));
  return t;
}

HostTensor f32Normal(Rng& rng, std::vector<int64_t> shape, double sigma, double mean) {
  HostTensor t(DType::F32, std::move(shape));
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(mean + sigma * rng.normal());
  return t;
}

HostTensor f32Uniform(Rng& rng, std::vector<int64_t> shape, double lo, double hi) {
  HostTensor t(DType::F32, std::move(shape));
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(lo + (hi - lo) * rng.uniform());
  return t;
}

void fillRandomBytes(Rng& rng, uint8_t* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = rng.next();
    std::memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = uint8_t(rng.next());
}

HostTensor randomBytes(Rng& rng, DType dtype, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  fillRandomBytes(rng, t.bytes.data(), int64_t(t.bytes.size()));
  return t;
}

namespace {
template <class T>
HostTensor intTensor(const char* what, DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  HostTensor t(dtype, std::move(shape));
  if (size_t(t.numel()) != values.size())
    throw std::logic_error(std::string(what) + ": value count does not match the shape");
  std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(T));
  return t;
}
}  // namespace

HostTensor i32Tensor(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  return intTensor("i32Tensor", DType::I32, std::move(shape), values);
}

HostTensor i64Tensor(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  return intTensor("i64Tensor", DType::I64, std::move(shape), values);
}

std::vector<int64_t> shuffledRange(Rng& rng, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(v[size_t(i)], v[size_t(rng.range(0, i + 1))]);
  return v;
}

void stratifiedSorted(Rng& rng, int64_t range, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t lo = i * range / count, hi = (i + 1) * range / count;  // hi > lo as range >= count
    out[i] = int32_t(rng.range(lo, hi));
  }
}

void prefillTopkRows(Rng& rng, const std::vector<int32_t>& qsl, int64_t context, int64_t ratio, int64_t N,
                     int64_t K, int32_t* out) {
  for (size_t b = 0; b + 1 < qsl.size(); ++b) {
    const int64_t q = qsl[b + 1] - qsl[b];
    for (int64_t j = 0; j < q; ++j) {
      int32_t* row = out + (qsl[b] + j) * K;
      const int64_t pos = context - q + j;
      const int64_t visible = ratio > 0 ? std::min((pos + 1) / ratio, N) : 0;
      const int64_t n = std::min(visible, K);
      stratifiedSorted(rng, visible, n, row);
      std::fill(row + n, row + K, -1);
    }
  }
}

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

}  // namespace deepinfer
