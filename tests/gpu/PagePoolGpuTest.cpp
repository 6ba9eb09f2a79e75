// DevicePagePool on a GPU: one buffer of numPages * pageBytes, page p at base + p * pageBytes,
// pages independent (writing one leaves its neighbours alone). Skips visibly without a GPU.
#include <gtest/gtest.h>

#include <numeric>

#include "deepinfer/Device.h"
#include "model/gpu/PagePool.h"

using namespace deepinfer;

TEST(DevicePagePoolGpu, PagesAreSlicesOfOneBuffer) {
  auto dev = Device::open(0);
  if (!dev.ok()) GTEST_SKIP() << "no GPU, GPU test skipped: " << dev.error().message;
  const int64_t pages = 16, pageBytes = 4096 + 64;
  auto pool = DevicePagePool::create(pages, pageBytes);
  ASSERT_TRUE(pool.ok()) << pool.error().message;
  EXPECT_EQ(pool->numPages(), pages);
  EXPECT_EQ(int64_t(pool->buffer().size()), pages * pageBytes);
  ASSERT_NE(pool->baseAddr(), 0u);
  for (PagePool::PageId p = 0; p < pages; ++p)
    EXPECT_EQ(pool->pageAddr(p), pool->baseAddr() + uint64_t(p) * uint64_t(pageBytes));

  ASSERT_TRUE(pool->buffer().fill(0).ok());
  auto ids = pool->allocate(3);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  std::vector<uint8_t> pattern(static_cast<size_t>(pageBytes));
  std::iota(pattern.begin(), pattern.end(), uint8_t(1));
  const size_t off = size_t(pool->pageAddr((*ids)[1]) - pool->baseAddr());
  ASSERT_TRUE(pool->buffer().upload(pattern.data(), pattern.size(), off).ok());
  std::vector<uint8_t> all(static_cast<size_t>(pages * pageBytes));
  ASSERT_TRUE(pool->buffer().download(all.data(), all.size()).ok());
  for (size_t i = 0; i < all.size(); ++i) {
    const bool inPage = i >= off && i < off + size_t(pageBytes);
    ASSERT_EQ(int(all[i]), inPage ? int(pattern[i - off]) : 0) << "byte " << i;
  }
  EXPECT_EQ(pool->pages().usedCount(), 3);
  ASSERT_TRUE(pool->release(*ids).ok());
  EXPECT_EQ(pool->pages().freeCount(), pages);
  auto tooMany = pool->allocate(pages + 1);
  ASSERT_FALSE(tooMany.ok());
  EXPECT_EQ(tooMany.error().message, "out of KV pages: need 17, 16 free of 16");
}
