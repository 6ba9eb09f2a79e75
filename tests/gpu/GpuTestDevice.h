// What every GPU test file starts from: the GPU (or why there is none, for the skip message)
// and the run's seed (DI_TEST_SEED, else random; printed by the tests so a failure reproduces).
#pragma once
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
};

inline const GpuTestDevice& gpuTestDevice() {
  static const GpuTestDevice g = [] {
    GpuTestDevice g;
    const char* s = std::getenv("DI_TEST_SEED");
    g.seed = s ? std::strtoull(s, nullptr, 0) : std::random_device{}();
    auto d = Device::open(0);
    if (d.ok()) g.dev = *d;
    else g.why = d.error().message;
    return g;
  }();
  return g;
}

}  // namespace deepinfer::testing_util
