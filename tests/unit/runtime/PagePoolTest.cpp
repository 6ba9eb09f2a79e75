// The KV page allocator's bookkeeping (no GPU): random allocate/release cycles keep the
// invariants (free + used = total, no page handed out twice, nothing leaks), exhaustion and bad
// releases are errors that leave the pool unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "model/gpu/PagePool.h"

using namespace deepinfer;

namespace {

using PageId = PagePool::PageId;

// Every invariant the pool must keep, given the pages the test believes are out.
void expectConsistent(const PagePool& pool, const std::set<PageId>& held) {
  ASSERT_EQ(pool.usedCount(), int64_t(held.size()));
  ASSERT_EQ(pool.freeCount() + pool.usedCount(), pool.totalCount());
  ASSERT_GE(pool.highWater(), pool.usedCount());
  for (PageId p = 0; p < pool.totalCount(); ++p) ASSERT_EQ(pool.isAllocated(p), held.count(p) == 1) << "page " << p;
}

TEST(PagePool, FreshPoolHandsOutLowestIdsFirst) {
  PagePool pool(8);
  EXPECT_EQ(pool.totalCount(), 8);
  EXPECT_EQ(pool.freeCount(), 8);
  EXPECT_EQ(pool.usedCount(), 0);
  EXPECT_EQ(pool.highWater(), 0);
  auto a = pool.allocate(3);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(*a, (std::vector<PageId>{0, 1, 2}));
  EXPECT_EQ(pool.usedCount(), 3);
  EXPECT_EQ(pool.highWater(), 3);
  auto none = pool.allocate(0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(pool.release(std::vector<PageId>{1}).ok());
  auto b = pool.allocate(1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<PageId>{1}));  // most recently released first
  EXPECT_EQ(pool.highWater(), 3);
}

TEST(PagePool, RandomCyclesKeepInvariantsAndLeakNothing) {
  std::mt19937_64 rng(20261129);
  for (PageId total : {1, 7, 64, 1000}) {
    PagePool pool(total);
    std::vector<std::vector<PageId>> owners;  // allocations still held, as sequences would
    std::set<PageId> held;
    int64_t maxUsed = 0;
    for (int step = 0; step < 4000; ++step) {
      const bool doAlloc = owners.empty() || rng() % 5 < 3;
      if (doAlloc) {
        const int64_t n = int64_t(rng() % uint64_t(std::max<PageId>(2, total / 4)));
        auto r = pool.allocate(n);
        if (n > total - int64_t(held.size())) {
          ASSERT_FALSE(r.ok());
          continue;
        }
        ASSERT_TRUE(r.ok()) << r.error().message;
        ASSERT_EQ(int64_t(r->size()), n);
        for (PageId p : *r) {
          ASSERT_GE(p, 0);
          ASSERT_LT(p, total);
          ASSERT_TRUE(held.insert(p).second) << "page " << p << " handed out twice";
        }
        owners.push_back(*r);
      } else {
        const size_t i = size_t(rng() % owners.size());
        std::vector<PageId> pages = owners[i];
        std::shuffle(pages.begin(), pages.end(), rng);
        auto st = pool.release(pages);
        ASSERT_TRUE(st.ok()) << st.error().message;
        for (PageId p : pages) held.erase(p);
        owners.erase(owners.begin() + std::ptrdiff_t(i));
      }
      maxUsed = std::max<int64_t>(maxUsed, int64_t(held.size()));
      ASSERT_EQ(pool.highWater(), maxUsed);
      if (step % 97 == 0) expectConsistent(pool, held);
    }
    expectConsistent(pool, held);
    for (const auto& o : owners) ASSERT_TRUE(pool.release(o).ok());
    EXPECT_EQ(pool.freeCount(), total) << "leaked pages";
    EXPECT_EQ(pool.usedCount(), 0);
    // Every page can be taken again at once, each exactly once.
    auto all = pool.allocate(total);
    ASSERT_TRUE(all.ok()) << all.error().message;
    std::set<PageId> distinct(all->begin(), all->end());
    EXPECT_EQ(int64_t(distinct.size()), int64_t(total));
    EXPECT_EQ(pool.freeCount(), 0);
  }
}

TEST(PagePool, ExhaustionIsAnErrorAndAllocatesNothing) {
  PagePool pool(10);
  auto a = pool.allocate(7);
  ASSERT_TRUE(a.ok());
  auto r = pool.allocate(4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "out of KV pages: need 4, 3 free of 10");
  EXPECT_EQ(pool.freeCount(), 3);
  EXPECT_EQ(pool.usedCount(), 7);
  EXPECT_EQ(pool.highWater(), 7);
  // The three free pages are still the ones handed out next.
  auto b = pool.allocate(3);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<PageId>{7, 8, 9}));
  EXPECT_FALSE(pool.allocate(1).ok());
  EXPECT_FALSE(pool.allocate(-1).ok());

  PagePool empty(0);
  auto e = empty.allocate(1);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "out of KV pages: need 1, 0 free of 0");
  EXPECT_TRUE(empty.allocate(0).ok());
}

TEST(PagePool, DoubleFreeAndForeignIdsAreErrorsThatReleaseNothing) {
  PagePool pool(6);
  auto a = pool.allocate(4);  // 0 1 2 3
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pool.release(PageId(2)).ok());

  auto dbl = pool.release(PageId(2));
  ASSERT_FALSE(dbl.ok());
  EXPECT_NE(dbl.error().message.find("page 2 is not allocated (double free)"), std::string::npos) << dbl.error().message;

  // A valid page listed before the bad one stays allocated.
  auto mixed = pool.release(std::vector<PageId>{0, 2});
  ASSERT_FALSE(mixed.ok());
  EXPECT_TRUE(pool.isAllocated(0));
  EXPECT_EQ(pool.usedCount(), 3);

  auto twice = pool.release(std::vector<PageId>{1, 3, 1});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("page 1 is listed twice"), std::string::npos) << twice.error().message;
  EXPECT_TRUE(pool.isAllocated(1));
  EXPECT_TRUE(pool.isAllocated(3));

  for (PageId bad : {PageId(-1), PageId(6), PageId(1 << 30)}) {
    auto f = pool.release(std::vector<PageId>{0, bad});
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("not in this pool of 6 pages"), std::string::npos) << f.error().message;
    EXPECT_TRUE(pool.isAllocated(0));
  }
  // A never-allocated page of the pool is also a double free.
  EXPECT_FALSE(pool.release(PageId(5)).ok());
  EXPECT_EQ(pool.usedCount(), 3);
  EXPECT_EQ(pool.freeCount(), 3);

  ASSERT_TRUE(pool.release(std::vector<PageId>{0, 1, 3}).ok());
  EXPECT_EQ(pool.usedCount(), 0);
  EXPECT_EQ(pool.highWater(), 4);
  pool.resetHighWater();
  EXPECT_EQ(pool.highWater(), 0);
}

TEST(DevicePagePool, RejectsBadSizesBeforeTouchingTheDevice) {
  auto zero = DevicePagePool::create(4, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("invalid size"), std::string::npos);
  EXPECT_FALSE(DevicePagePool::create(-1, 64).ok());
  EXPECT_FALSE(DevicePagePool::create(int64_t(1) << 32, 64).ok());
}

}  // namespace
