// The tensor ranks' persistent threads (runtime/model/parallel/RankPool.h): every rank's task
// runs at once on its own thread, the same thread every call (no thread per call), a failing or
// throwing rank is that rank's error while the others still finish, and the pool joins cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>

#include "model/parallel/RankPool.h"

namespace deepinfer {
namespace {

TEST(RankPool, RunsEveryRankConcurrentlyOnTheSameThreadsEveryCall) {
  constexpr int kRanks = 4;
  RankPool pool(kRanks);
  std::vector<std::thread::id> first(kRanks);
  for (int call = 0; call < 50; ++call) {
    std::vector<std::thread::id> ids(kRanks);
    std::atomic<int> arrived{0};
    auto st = pool.run([&](int r) -> Status {
      ids[size_t(r)] = std::this_thread::get_id();
      // A barrier: passes only if all ranks run at the same time (a sequential pool would spin out).
      ++arrived;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (arrived.load() < kRanks)
        if (std::chrono::steady_clock::now() > deadline) return Error{"ranks did not run concurrently"};
      return {};
    });
    ASSERT_EQ(st.size(), size_t(kRanks));
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << "call " << call << " rank " << r << ": " << st[size_t(r)].error().message;
    EXPECT_EQ(ids[0], std::this_thread::get_id()) << "rank 0 runs on the calling thread";
    EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), size_t(kRanks));
    if (call == 0) first = ids;
    EXPECT_EQ(ids, first) << "call " << call << ": a rank changed threads (threads spawned per call?)";
  }
  EXPECT_EQ(pool.calls(), 50);
}

TEST(RankPool, AFailingOrThrowingRankIsThatRanksErrorAndTheOthersFinish) {
  RankPool pool(3);
  std::atomic<int> finished{0};
  auto st = pool.run([&](int r) -> Status {
    if (r == 1) return Error{"rank one broke"};
    if (r == 2) throw std::runtime_error("rank two threw");
    ++finished;
    return {};
  });
  ASSERT_EQ(st.size(), 3u);
  EXPECT_TRUE(st[0].ok());
  ASSERT_FALSE(st[1].ok());
  EXPECT_EQ(st[1].error().message, "rank one broke");
  ASSERT_FALSE(st[2].ok());
  EXPECT_NE(st[2].error().message.find("tensor rank 2: exception: rank two threw"), std::string::npos)
      << st[2].error().message;
  EXPECT_EQ(finished.load(), 1);
  // The pool still works after a failed call, and the statuses are fresh.
  auto again = pool.run([](int) -> Status { return {}; });
  for (const Status& s : again) EXPECT_TRUE(s.ok());
}

TEST(RankPool, OneRankRunsOnTheCallerAndPoolsJoinCleanly) {
  {
    RankPool one(1);
    std::thread::id seen;
    auto st = one.run([&](int r) -> Status {
      seen = std::this_thread::get_id();
      return r == 0 ? Status{} : Status{Error{"unexpected rank"}};
    });
    ASSERT_EQ(st.size(), 1u);
    EXPECT_TRUE(st[0].ok());
    EXPECT_EQ(seen, std::this_thread::get_id());
  }
  // Destroyed idle, never run, and right after a call: each joins its workers without a hang.
  for (int i = 0; i < 20; ++i) {
    RankPool idle(8);
    if (i % 2) (void)idle.run([](int) -> Status { return {}; });
  }
  SUCCEED();
}

}  // namespace
}  // namespace deepinfer
