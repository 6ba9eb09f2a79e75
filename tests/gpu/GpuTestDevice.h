// What every GPU test file starts from: the GPU (or why there is none, for the skip message)
// and the run's seed.
//
// Seeds: DI_TEST_SEED, else a random one. Any value works: a decimal or 0x-hex integer is used
// as is, any other text is hashed (FNV-1a) into one. The seed is printed at start, and every
// failure of a GPU test is followed by the line that reruns it ("DI_TEST_SEED=..."), so a
// failure on one seed reproduces. scripts/gpu-check.sh seeds runs the suite on three seeds.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "deepinfer/Device.h"

namespace deepinfer::testing_util {

struct GpuTestDevice {
  std::shared_ptr<Device> dev;  // null: no GPU
  std::string why;              // why there is none
  uint64_t seed = 0;
  std::string seedSource;       // how the seed was chosen, for the reproduction line
};

// The seed from DI_TEST_SEED's text (see above).
inline uint64_t parseTestSeed(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  if (!text.empty() && text[0] != '-' && errno == 0 && end && *end == '\0') return uint64_t(v);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

inline const GpuTestDevice& gpuTestDevice() {
  static const GpuTestDevice g = [] {
    GpuTestDevice g;
    if (const char* s = std::getenv("DI_TEST_SEED")) {
      g.seed = parseTestSeed(s);
      g.seedSource = fmt::format("DI_TEST_SEED={}", s);
    } else {
      g.seed = std::random_device{}();
      g.seedSource = fmt::format("DI_TEST_SEED={} (random this run)", g.seed);
    }
    auto d = Device::open(0);
    if (d.ok()) g.dev = *d;
    else g.why = d.error().message;
    return g;
  }();
  return g;
}

// Follows every failed assertion with the seed that reproduces it.
class SeedOnFailure : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed()) fmt::print("    [seed] rerun with {} to reproduce this failure\n", gpuTestDevice().seedSource);
  }
};
inline const bool kSeedOnFailureRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SeedOnFailure);
  return true;
}();

}  // namespace deepinfer::testing_util

// The start of a GPU test that needs only the device: `g` is the test device; skips without a GPU
// (saying why) and makes the device current.
#define DI_NEED_GPU_DEVICE()                                        \
  const auto& g = ::deepinfer::testing_util::gpuTestDevice();      \
  if (!g.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << g.why; \
  ASSERT_TRUE(g.dev->use().ok())
