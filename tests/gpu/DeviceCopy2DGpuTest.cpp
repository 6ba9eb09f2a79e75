// copyDevice2D (deepinfer/DeviceCopy.h): one pitched device copy, as the tensor ranks' logits
// layout uses it ([rank, rows, V/tp] gathered -> [rows, V]). Every copied byte matches the
// source, and every destination byte outside the copied rows' widths keeps its poison; odd
// widths and pitches, one row, width equal to the pitch; bad pitches are an error.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "GpuTestDevice.h"
#include "deepinfer/Device.h"
#include "deepinfer/DeviceCopy.h"

namespace deepinfer {
namespace {

#define NEED_GPU() DI_NEED_GPU_DEVICE()

TEST(DeviceCopy2D, CopiesEveryRowAndLeavesTheGapsAlone) {
  NEED_GPU();
  std::mt19937_64 rng(g.seed);
  struct Shape {
    size_t width, srcPitch, dstPitch, rows;
  };
  // The TP2 / TP4 logits shapes of tiny16 (V = 1024 f32: Vr = 512 / 256 columns), odd widths and
  // pitches, one row, width equal to both pitches (a contiguous block).
  const std::vector<Shape> shapes = {{2048, 2048, 4096, 7},  {1024, 1024, 4096, 33}, {13, 17, 29, 5},
                                     {1, 1, 3, 64},           {4096, 4096, 4096, 9},  {100, 300, 100, 1},
                                     {2048, 2048, 4096, 256}};
  for (const Shape& sh : shapes) {
    const size_t srcBytes = sh.srcPitch * (sh.rows - 1) + sh.width, dstBytes = sh.dstPitch * sh.rows + 64;
    std::vector<uint8_t> src(srcBytes);
    for (uint8_t& b : src) b = uint8_t(rng());
    auto s = DeviceBuffer::alloc(srcBytes);
    auto d = DeviceBuffer::alloc(dstBytes);
    ASSERT_TRUE(s.ok() && d.ok());
    ASSERT_TRUE(s->upload(src.data(), srcBytes).ok());
    ASSERT_TRUE(d->fill(0xA5).ok());  // poison
    const size_t off = 32;            // the destination starts inside the buffer: bytes before it stay poisoned
    ASSERT_TRUE(copyDevice2D(d->addr() + off, sh.dstPitch, s->addr(), sh.srcPitch, sh.width, sh.rows, nullptr).ok());
    std::vector<uint8_t> out(dstBytes);
    ASSERT_TRUE(d->download(out.data(), dstBytes).ok());
    size_t wrong = 0, touched = 0;
    for (size_t i = 0; i < dstBytes; ++i) {
      const bool inside = i >= off && (i - off) / sh.dstPitch < sh.rows && (i - off) % sh.dstPitch < sh.width;
      if (inside) {
        const size_t row = (i - off) / sh.dstPitch, col = (i - off) % sh.dstPitch;
        wrong += out[i] != src[row * sh.srcPitch + col];
      } else {
        touched += out[i] != 0xA5;
      }
    }
    EXPECT_EQ(wrong, 0u) << "width " << sh.width << " pitches " << sh.srcPitch << "/" << sh.dstPitch << " rows " << sh.rows;
    EXPECT_EQ(touched, 0u) << "width " << sh.width << " pitches " << sh.srcPitch << "/" << sh.dstPitch << " rows " << sh.rows;
  }
}

TEST(DeviceCopy2D, EmptyCopiesDoNothingAndBadPitchesAreErrors) {
  NEED_GPU();
  auto d = DeviceBuffer::alloc(256);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->fill(0x5A).ok());
  EXPECT_TRUE(copyDevice2D(d->addr(), 64, d->addr() + 128, 64, 0, 4, nullptr).ok());
  EXPECT_TRUE(copyDevice2D(d->addr(), 64, d->addr() + 128, 64, 16, 0, nullptr).ok());
  std::vector<uint8_t> out(256);
  ASSERT_TRUE(d->download(out.data(), 256).ok());
  for (uint8_t b : out) ASSERT_EQ(b, 0x5A);
  Status st = copyDevice2D(d->addr(), 8, d->addr() + 128, 64, 16, 2, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("must be at least the row width"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace deepinfer
