// The strided gather_kcache reference (reference/KvCacheRef.h) against the dense one on every
// GPU case: the same rows land at the view's strides, and nothing else in the buffer changes.
#include <gtest/gtest.h>

#include "cases/OpCases.h"
#include "deepinfer/Reference.h"
#include "reference/KvCacheRef.h"

namespace deepinfer::testing {
namespace {

TEST(GatherKcacheStridedRef, MatchesDenseRowsAndLeavesTheRestAlone) {
  constexpr int64_t kRowPad = 2, kColPad = 8, kWidth = 512 + 2 * kColPad;
  for (const auto& c : casesFor("gather_kcache", 11, false)) {
    TensorMap dense = c.inputs;
    ASSERT_TRUE(runReference("gather_kcache", c.attrs, dense).ok()) << c.name;
    const HostTensor& want = dense.at("out");
    const int64_t R = want.dim(0), M = want.dim(1), rowsAll = M + 2 * kRowPad;

    HostTensor buf(DType::BF16, {R * rowsAll * kWidth});
    for (size_t i = 0; i < buf.bytes.size(); ++i) buf.bytes[i] = uint8_t(i * 131 + 7);
    // Rows of a request are written at view rows [offset, offset + g): compare the view's rows
    // with the dense result (whose untouched rows hold the case's random bits, so copy those in).
    TensorMap strided = c.inputs;
    uint16_t* b = buf.ptr<uint16_t>();
    for (int64_t r = 0; r < R; ++r)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < 512; ++k)
          b[(r * rowsAll + kRowPad + m) * kWidth + kColPad + k] = c.inputs.at("out").ptr<uint16_t>()[(r * M + m) * 512 + k];
    const HostTensor seeded = buf;
    strided["out"] = buf;
    auto s = ref::gatherKcacheStrided(c.attrs, strided, kRowPad * kWidth + kColPad, {R, M, 512},
                                      {rowsAll * kWidth, kWidth, 1});
    ASSERT_TRUE(s.ok()) << c.name << ": " << s.error().message;
    const uint16_t* got = strided.at("out").ptr<uint16_t>();
    const uint16_t* seed = seeded.ptr<uint16_t>();
    const uint16_t* w = want.ptr<uint16_t>();
    int64_t bad = 0;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t row = 0; row < rowsAll; ++row)
        for (int64_t col = 0; col < kWidth; ++col) {
          const int64_t i = (r * rowsAll + row) * kWidth + col;
          const int64_t m = row - kRowPad, k = col - kColPad;
          const bool inView = m >= 0 && m < M && k >= 0 && k < 512;
          const uint16_t expect = inView ? w[(r * M + m) * 512 + k] : seed[i];
          bad += got[i] != expect;
        }
    EXPECT_EQ(bad, 0) << c.name;
  }
}

TEST(GatherKcacheStridedRef, RejectsAViewPastTheBuffer) {
  auto cases = casesFor("gather_kcache", 11, false);
  const auto& c = cases.front();
  TensorMap m = c.inputs;
  const HostTensor& out = c.inputs.at("out");
  const int64_t R = out.dim(0), M = out.dim(1);
  m["out"] = HostTensor(DType::BF16, {R * M * 512 + 7});
  auto s = ref::gatherKcacheStrided(c.attrs, m, 8, {R, M, 512}, {M * 512, 512, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("past the"), std::string::npos) << s.error().message;
  auto split = ref::gatherKcacheStrided(c.attrs, m, 0, {R, M, 512}, {M * 1024, 1024, 2});
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.error().message.find("dim 2 stride 1"), std::string::npos) << split.error().message;
}

}  // namespace
}  // namespace deepinfer::testing
