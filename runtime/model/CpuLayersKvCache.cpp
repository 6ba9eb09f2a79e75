#include <algorithm>
#include <cmath>
#include <cstring>

#include "CpuForwardCaches.h"
#include "QuantEncode.h"
#include "deepinfer/Formats.h"
#include "deepinfer/OpShapes.h"

namespace deepinfer {
namespace {

// e4m3 code of x / scale, clamped to the finite range first.
uint8_t quantizeScaled(float x, float scale) {
  return encodeE4m3(std::clamp(x / scale, -448.f, 448.f));
}

float amaxOf(const float* x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

}  // namespace

int64_t kvPageBytes(int64_t blockSize) { return mlaPageBytes(blockSize); }

void encodeKvRow(const float* row, uint8_t* page, int64_t blockSize, int64_t offset) {
  uint8_t* data = page + offset * kKvRowBytes;
  uint8_t* scales = page + blockSize * kKvRowBytes + offset * kKvScaleBytes;
  for (int tile = 0; tile < kKvNopeDim / kKvTile; ++tile) {
    const float* x = row + tile * kKvTile;
    // vLLM's writer floors amax (not amax / 448) at 1e-4 (docs/ops.md §2).
    const uint8_t e = ue8m0CeilEncode(std::max(amaxOf(x, kKvTile), 1e-4f) / 448.f);
    const float scale = ue8m0ToFloat(e);
    for (int i = 0; i < kKvTile; ++i) data[tile * kKvTile + i] = quantizeScaled(x[i], scale);
    scales[tile] = e;
  }
  scales[kKvScaleBytes - 1] = 0;
  for (int i = 0; i < kKvDim - kKvNopeDim; ++i) {
    const uint16_t b = floatToBf16(row[kKvNopeDim + i]);
    std::memcpy(data + kKvNopeDim + 2 * i, &b, 2);  // little-endian host, as the GPU layout
  }
}

void decodeKvRow(const uint8_t* page, int64_t blockSize, int64_t offset, float* out) {
  const uint8_t* data = page + offset * kKvRowBytes;
  const uint8_t* scales = page + blockSize * kKvRowBytes + offset * kKvScaleBytes;
  for (int i = 0; i < kKvNopeDim; ++i) {
    const float v = bf16ToFloat(dequantE4m3ToBf16(data[i], scales[i / kKvTile]));
    out[i] = std::isnan(v) ? 0.f : v;
  }
  for (int i = 0; i < kKvDim - kKvNopeDim; ++i) {
    uint16_t b;
    std::memcpy(&b, data + kKvNopeDim + 2 * i, 2);
    const float v = bf16ToFloat(b);
    out[kKvNopeDim + i] = std::isnan(v) ? 0.f : v;
  }
}

void PagedKvCache::write(int64_t slot, const float* row) {
  const int64_t p = slot / blockSize_;
  while (int64_t(pages_.size()) <= p) pages_.emplace_back(size_t(kvPageBytes(blockSize_)), 0);
  encodeKvRow(row, pages_[size_t(p)].data(), blockSize_, slot % blockSize_);
}

void PagedKvCache::read(int64_t slot, float* out) const {
  decodeKvRow(pages_.at(size_t(slot / blockSize_)).data(), blockSize_, slot % blockSize_, out);
}

void PagedKvCache::clearFrom(int64_t slot) {
  slot = std::max<int64_t>(slot, 0);
  const int64_t keepPages = (slot + blockSize_ - 1) / blockSize_;
  if (int64_t(pages_.size()) > keepPages) pages_.resize(size_t(keepPages));
  if (slot % blockSize_ == 0 || pages_.empty() || keepPages > int64_t(pages_.size())) return;
  uint8_t* page = pages_.back().data();
  for (int64_t off = slot % blockSize_; off < blockSize_; ++off) {
    std::memset(page + off * kKvRowBytes, 0, kKvRowBytes);
    std::memset(page + blockSize_ * kKvRowBytes + off * kKvScaleBytes, 0, kKvScaleBytes);
  }
}

void CompressedKvCache::truncate(int64_t n) {
  if (n >= count_) return;
  n = std::max<int64_t>(n, 0);
  cache_.clearFrom(n);
  decoded_.resize(size_t(n * kKvDim));
  count_ = n;
}

void IndexKeyCache::truncate(int64_t n) {
  if (n >= count_) return;
  n = std::max<int64_t>(n, 0);
  const int64_t keepPages = (n + blockSize_ - 1) / blockSize_;
  pages_.resize(size_t(keepPages));
  if (n % blockSize_ != 0) {
    uint8_t* page = pages_.back().data();
    for (int64_t off = n % blockSize_; off < blockSize_; ++off) {
      std::memset(page + off * dim_, 0, size_t(dim_));
      std::memset(page + blockSize_ * dim_ + off * 4, 0, 4);
    }
  }
  values_.resize(size_t(n * dim_));
  scales_.resize(size_t(n));
  count_ = n;
}

void CompressedKvCache::append(const float* row) {
  cache_.write(count_, row);
  decoded_.resize(size_t((count_ + 1) * kKvDim));
  cache_.read(count_, decoded_.data() + count_ * kKvDim);
  ++count_;
}

void IndexKeyCache::append(const float* key) {
  const int64_t p = count_ / blockSize_, off = count_ % blockSize_;
  const size_t pageBytes = size_t(blockSize_ * (dim_ + 4));
  while (int64_t(pages_.size()) <= p) pages_.emplace_back(pageBytes, 0);
  uint8_t* page = pages_[size_t(p)].data();
  uint8_t* codes = page + off * dim_;
  const float scale = ue8m0ToFloat(ue8m0CeilEncode(std::max(amaxOf(key, dim_), 1e-4f) / 448.f));
  for (int64_t i = 0; i < dim_; ++i) codes[i] = quantizeScaled(key[i], scale);
  std::memcpy(page + blockSize_ * dim_ + off * 4, &scale, 4);
  // Read back from the bytes just written.
  values_.resize(size_t((count_ + 1) * dim_));
  for (int64_t i = 0; i < dim_; ++i) values_[size_t(count_ * dim_ + i)] = e4m3ToFloat(codes[i]);
  float stored;
  std::memcpy(&stored, page + blockSize_ * dim_ + off * 4, 4);
  scales_.push_back(stored);
  ++count_;
}

float quantizeIndexQuery(const float* q, int64_t dim, float* out) {
  const float scale = ue8m0ToFloat(ue8m0CeilEncode(std::max(amaxOf(q, dim), 1e-4f) / 448.f));
  for (int64_t i = 0; i < dim; ++i) out[i] = e4m3ToFloat(quantizeScaled(q[i], scale));
  return scale;
}

}  // namespace deepinfer
