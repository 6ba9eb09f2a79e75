#include "cases/QuantCaseUtil.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "model/QuantEncode.h"

namespace deepinfer::testing {

namespace {

// Model-size matrices (the large cases' 2304 x 5120 experts, 8192 x 32768 weights) are drawn and
// quantized in row chunks on worker threads, each chunk from its own generator seeded by one draw
// of `rng`: the bytes do not depend on the thread count, and smaller matrices keep the one
// sequential draw they always had (their bytes are unchanged).
constexpr int64_t kChunkedElements = int64_t(1) << 22;
constexpr int64_t kChunkRows = 64;  // whole 32-row blocks of the fp8 scales

void quantizeRows(const float* w, int bits, int64_t rows, int64_t cols, QuantTensor& q, int64_t r0) {
  uint8_t* codes = q.codes.ptr<uint8_t>();
  uint8_t* scales = q.scales.ptr<uint8_t>();
  if (bits == 8)
    quantizeFp8Blocks(w, rows, cols, codes + r0 * cols, scales + (r0 / 32) * ((cols + 31) / 32));
  else
    quantizeFp4Rows(w, rows, cols, codes + r0 * (cols / 2), scales + r0 * (cols / 32));
}

}  // namespace

QuantTensor quantWeights(Rng& rng, int bits, int64_t rows, int64_t cols, double sigma) {
  QuantTensor q;
  if (bits == 8) {
    q.codes = HostTensor(DType::U8, {rows, cols});
    q.scales = HostTensor(DType::U8, {(rows + 31) / 32, (cols + 31) / 32});
  } else {
    q.codes = HostTensor(DType::U8, {rows, cols / 2});
    q.scales = HostTensor(DType::U8, {rows, cols / 32});
  }
  if (rows * cols < kChunkedElements) {
    std::vector<float> w(size_t(rows * cols));
    for (float& v : w) v = float(sigma * rng.normal());
    quantizeRows(w.data(), bits, rows, cols, q, 0);
    return q;
  }
  const uint64_t base = rng.next();
  const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  std::atomic<int64_t> next{0};
  auto work = [&] {
    std::vector<float> w(size_t(kChunkRows * cols));
    for (int64_t c; (c = next++) < chunks;) {
      Rng chunkRng(base ^ (uint64_t(c + 1) * 0x9E3779B97F4A7C15ull));
      const int64_t r0 = c * kChunkRows, n = std::min(kChunkRows, rows - r0);
      for (int64_t i = 0; i < n * cols; ++i) w[size_t(i)] = float(sigma * chunkRng.normal());
      quantizeRows(w.data(), bits, n, cols, q, r0);
    }
  };
  std::vector<std::thread> pool;
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  return q;
}

void injectE4m3Subnormals(Rng& rng, QuantTensor& q, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    q.codes.ptr<uint8_t>()[rng.range(0, q.codes.numel())] = uint8_t(rng.range(1, 8) | (rng.chance(0.5) ? 0x80 : 0));
}

void injectE4m3Nans(Rng& rng, QuantTensor& q, const std::vector<int64_t>& rows) {
  const int64_t cols = q.codes.dim(1);
  for (int64_t r : rows) q.codes.ptr<uint8_t>()[r * cols + rng.range(0, cols)] = rng.chance(0.5) ? 0x7F : 0xFF;
}

void injectScaleBytes(Rng& rng, QuantTensor& q, const std::vector<uint8_t>& values) {
  for (uint8_t v : values) q.scales.ptr<uint8_t>()[rng.range(0, q.scales.numel())] = v;
}

}  // namespace deepinfer::testing
