#include "cases/CaseUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "deepinfer/Formats.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/Reference.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::testing {

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

HostTensor i32Tensor(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  HostTensor t(DType::I32, std::move(shape));
  if (size_t(t.numel()) != values.size())
    throw std::logic_error("i32Tensor: value count does not match the shape");
  std::memcpy(t.bytes.data(), values.data(), values.size() * 4);
  return t;
}

HostTensor i64Tensor(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  HostTensor t(DType::I64, std::move(shape));
  if (size_t(t.numel()) != values.size())
    throw std::logic_error("i64Tensor: value count does not match the shape");
  std::memcpy(t.bytes.data(), values.data(), values.size() * 8);
  return t;
}

std::vector<int64_t> shuffledRange(Rng& rng, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(v[size_t(i)], v[size_t(rng.range(0, i + 1))]);
  return v;
}

void runReferenceOrThrow(const std::string& op, const OpAttrs& attrs, TensorMap& tensors,
                         const std::string& what) {
  Status s = runReference(op, attrs, tensors);
  if (!s.ok()) throw std::runtime_error(what + ": the reference rejected the case: " + s.error().message);
}

HostTensor writerBuiltKvCache(Rng& rng, int64_t numPages, int64_t blockSize,
                              const std::vector<int64_t>& filledPages, double sigma) {
  const int64_t tokens = int64_t(filledPages.size()) * blockSize;
  std::vector<int64_t> slots;
  slots.reserve(size_t(tokens));
  for (int64_t page : filledPages)
    for (int64_t o = 0; o < blockSize; ++o) slots.push_back(page * blockSize + o);
  TensorMap m;
  m["k"] = bf16Normal(rng, {tokens, ref::kHeadDim}, sigma);
  m["slot_mapping"] = i64Tensor({tokens}, slots);
  m["k_cache"] = HostTensor(DType::U8, {numPages, mlaPageBytes(blockSize)});
  OpAttrs a;
  a.setInt("block_size", blockSize);
  runReferenceOrThrow("kv_quant_insert", a, m, "writerBuiltKvCache");
  return std::move(m["k_cache"]);
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
        page[o * kDim + d] = ref::e4m3Code(std::clamp(x[size_t(d)] / scale, -448.f, 448.f));
      std::memcpy(page + blockSize * kDim + o * 4, &scale, 4);
    }
  }
  return t;
}

}  // namespace deepinfer::testing
