#include "cases/QuantCaseUtil.h"

#include "model/QuantEncode.h"

namespace deepinfer::testing {

QuantTensor quantWeights(Rng& rng, int bits, int64_t rows, int64_t cols, double sigma) {
  std::vector<float> w(size_t(rows * cols));
  for (float& v : w) v = float(sigma * rng.normal());
  QuantTensor q;
  if (bits == 8) {
    q.codes = HostTensor(DType::U8, {rows, cols});
    q.scales = HostTensor(DType::U8, {(rows + 31) / 32, (cols + 31) / 32});
    quantizeFp8Blocks(w.data(), rows, cols, q.codes.ptr<uint8_t>(), q.scales.ptr<uint8_t>());
  } else {
    q.codes = HostTensor(DType::U8, {rows, cols / 2});
    q.scales = HostTensor(DType::U8, {rows, cols / 32});
    quantizeFp4Rows(w.data(), rows, cols, q.codes.ptr<uint8_t>(), q.scales.ptr<uint8_t>());
  }
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
