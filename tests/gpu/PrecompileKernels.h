// Compiles a test's kernels on worker threads before it launches them one by one.
//
// The GPU suite is compile-bound: a test that walks (case, target, candidate) triples compiles
// each kernel when it first launches it, one at a time. Jit::precompile runs the same pipeline and
// fills the disk cache under the same key (per-key file locks let concurrent test processes share
// a compile), so the launches afterwards only load. A compile that fails here fails again, with
// its message, where the test loads that kernel: the result is ignored on purpose.
#pragma once
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "deepinfer/Jit.h"

namespace deepinfer::testing_util {

struct KernelToCompile {
  OpDesc desc;
  TargetProfile target;
  KernelConfig config;
};

inline void precompileKernels(Jit& jit, const std::vector<KernelToCompile>& kernels) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  // A quarter of the cores: the suite runs as several shard processes side by side, and each
  // NVRTC compile holds a few hundred MB.
  const unsigned threads = std::clamp(std::thread::hardware_concurrency() / 4, 1u, 8u);
  for (unsigned w = 0; w < threads; ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < kernels.size();)
        (void)jit.precompile(kernels[i].desc, kernels[i].target, kernels[i].config);
    });
  for (auto& th : pool) th.join();
}

}  // namespace deepinfer::testing_util
