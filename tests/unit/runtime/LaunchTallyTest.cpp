// deepinfer/LaunchTally.h: per-thread counts of what the runtime enqueues; reports take
// differences around a piece of work (GpuModel::lastCallLaunches, deepinfer-bench's kernels per
// launch).
#include <gtest/gtest.h>

#include <thread>

#include "deepinfer/DeviceCopy.h"
#include "deepinfer/LaunchTally.h"

using namespace deepinfer;

TEST(LaunchTally, DifferencesAndSums) {
  const LaunchTally a{10, 3, 7}, b{4, 1, 2};
  EXPECT_EQ(a - b, (LaunchTally{6, 2, 5}));
  EXPECT_EQ((a - b).launches(), 8);  // kernels + one per cuBLAS call
  LaunchTally s = b;
  s += a - b;
  EXPECT_EQ(s, a);
}

TEST(LaunchTally, EachThreadCountsItsOwn) {
  LaunchTally& mine = threadLaunchTally();
  const LaunchTally before = mine;
  std::thread([] {
    EXPECT_EQ(threadLaunchTally(), LaunchTally{});  // a new thread starts at zero
    threadLaunchTally().kernels += 5;
  }).join();
  EXPECT_EQ(threadLaunchTally(), before);
  EXPECT_EQ(&threadLaunchTally(), &mine);
}

TEST(LaunchTally, NothingEnqueuedNothingCounted) {
  // Empty copies and fills return before reaching the driver (no GPU needed) and count nothing.
  const LaunchTally before = threadLaunchTally();
  EXPECT_TRUE(copyHostToDevice(0, nullptr, 0, nullptr).ok());
  EXPECT_TRUE(fillDevice8(0, 0, 0, nullptr).ok());
  EXPECT_EQ(threadLaunchTally() - before, LaunchTally{});
}
