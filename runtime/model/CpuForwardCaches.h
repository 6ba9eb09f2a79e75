// The caches of one request in the CPU reference, in the byte formats the GPU runtime uses:
// the 584-byte `fp8_ds_mla` KV layout of docs/ops.md §2 (window and compressed caches) and the
// 132-byte index-key layout of docs/ops.md §7. Rows are written quantized and read back by decoding
// the bytes, so the forward pass sees exactly what a kernel reading the cache would see.
#pragma once
#include <cstdint>
#include <vector>

namespace deepinfer {

constexpr int kKvDim = 512;       // the cache format's row width (448 e4m3 + 64 bf16)
constexpr int kKvNopeDim = 448;
constexpr int kKvTile = 64;       // one UE8M0 scale per 64 NoPE dims
constexpr int kKvRowBytes = 576;  // 448 e4m3 + 64 bf16
constexpr int kKvScaleBytes = 8;  // 7 scales + 1 pad byte

// ceil(BS * 584 / 576) * 576.
int64_t kvPageBytes(int64_t blockSize);

// kv_quant_insert of one row (512 bf16-valued floats) into token `offset` of a page.
void encodeKvRow(const float* row, uint8_t* page, int64_t blockSize, int64_t offset);
// Dequantizes token `offset` of a page (docs/ops.md §3, bit-exact); a NaN element reads as 0, as
// sparse_mla_decode treats it.
void decodeKvRow(const uint8_t* page, int64_t blockSize, int64_t offset, float* out);

// A paged fp8_ds_mla cache addressed by slot = page * blockSize + offset; pages are added on
// demand. The window cache uses it as a ring (slot = pos % window), the compressed cache as a
// growing list (slot = entry index).
class PagedKvCache {
 public:
  explicit PagedKvCache(int64_t blockSize = 64) : blockSize_(blockSize) {}
  void write(int64_t slot, const float* row);
  void read(int64_t slot, float* out) const;
  // Makes slots >= `slot` as if never written: their bytes zeroed, pages past them dropped.
  void clearFrom(int64_t slot);
  int64_t blockSize() const { return blockSize_; }
  int64_t numPages() const { return int64_t(pages_.size()); }
  const std::vector<uint8_t>& page(int64_t p) const { return pages_.at(size_t(p)); }

 private:
  int64_t blockSize_;
  std::vector<std::vector<uint8_t>> pages_;
};

// The compressed KV cache of a kv source: entries only grow and never change, so each one is
// decoded once when written and kept as fp32 for the attention readers.
class CompressedKvCache {
 public:
  explicit CompressedKvCache(int64_t blockSize = 64) : cache_(blockSize) {}
  void append(const float* row);
  int64_t size() const { return count_; }
  const float* row(int64_t j) const { return decoded_.data() + j * kKvDim; }
  // Keeps entries [0, n): the cache then equals one that only ever held them (speculative
  // rollback, docs/dspark.md §5).
  void truncate(int64_t n);
  const PagedKvCache& bytes() const { return cache_; }

 private:
  PagedKvCache cache_;
  int64_t count_ = 0;
  std::vector<float> decoded_;
};

// Index keys: per page [BS * dim e4m3][BS fp32 scale]; scale = UE8M0-ceil(max(amax, 1e-4) /
// 448) per row. Decoded e4m3 values and scales are kept for scoring.
class IndexKeyCache {
 public:
  IndexKeyCache(int64_t dim = 128, int64_t blockSize = 64) : dim_(dim), blockSize_(blockSize) {}
  void append(const float* key);
  int64_t size() const { return count_; }
  void truncate(int64_t n);  // keeps entries [0, n), bytes as if the rest were never written
  int64_t dim() const { return dim_; }
  const float* values(int64_t j) const { return values_.data() + j * dim_; }  // e4m3 decoded
  float scale(int64_t j) const { return scales_[size_t(j)]; }
  const std::vector<uint8_t>& page(int64_t p) const { return pages_.at(size_t(p)); }

 private:
  int64_t dim_, blockSize_;
  int64_t count_ = 0;
  std::vector<std::vector<uint8_t>> pages_;
  std::vector<float> values_;
  std::vector<float> scales_;
};

// Per-(token, head) index-query quantization of docs/model.md §9: e4m3 codes with the scale
// UE8M0-ceil(max(amax, 1e-4) / 448). Writes the decoded e4m3 values into `out` and returns the
// scale (a power of two).
float quantizeIndexQuery(const float* q, int64_t dim, float* out);

}  // namespace deepinfer
