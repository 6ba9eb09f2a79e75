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
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/Jit.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Specialize.h"

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

// The kernels of `op` on `cases` x `targets` whose candidates `keep(config, specialization)`
// accepts (e.g. every fitting one, or only `spec.chosen`). A case that does not describe or
// specialize is left out: the test's own loop reports it with its name.
template <class Case, class Keep>
std::vector<KernelToCompile> candidateKernels(const std::string& op, const std::vector<Case>& cases,
                                              const std::vector<TargetProfile>& targets, Keep keep) {
  std::vector<KernelToCompile> kernels;
  for (const auto& c : cases) {
    auto d = describeOp(op, c.attrs, c.inputs);
    if (!d.ok()) continue;
    for (const auto& target : targets) {
      auto spec = specialize(*d, target);
      if (!spec.ok()) continue;
      for (const auto& ch : spec->fitting)
        if (keep(ch.config, *spec)) kernels.push_back({*d, target, ch.config});
    }
  }
  return kernels;
}

// Each target's default kernel for every case.
template <class Case>
std::vector<KernelToCompile> defaultKernels(const std::string& op, const std::vector<Case>& cases,
                                            const std::vector<TargetProfile>& targets) {
  std::vector<KernelToCompile> kernels;
  for (const auto& c : cases) {
    auto d = describeOp(op, c.attrs, c.inputs);
    if (!d.ok()) continue;
    for (const auto& target : targets)
      if (auto spec = specialize(*d, target); spec.ok()) kernels.push_back({*d, target, spec->chosen.config});
  }
  return kernels;
}

// The GPU's own arch and the sm_80 / sm_86 specializations (as PTX) where the GPU is not one of
// those: the targets every kernel test covers.
inline std::vector<TargetProfile> testTargets(const Device& dev) {
  std::vector<TargetProfile> t = {dev.info().profile};
  for (const char* n : {"sm_80", "sm_86"})
    if (t[0].arch() != std::atoi(n + 3)) t.push_back(*findTarget(n));
  return t;
}

// One of testTargets by name, for tests split per target so that shards run them side by side:
// "native" (the GPU's own arch), "sm_80" or "sm_86"; nullopt where that is the GPU's own arch
// (the native instance covers it).
inline std::optional<TargetProfile> namedTestTarget(const Device& dev, const std::string& name) {
  const TargetProfile& local = dev.info().profile;
  if (name == "native") return local;
  if (local.arch() == std::atoi(name.c_str() + 3)) return std::nullopt;
  return findTarget(name);
}

// The target names of namedTestTarget, for INSTANTIATE_TEST_SUITE_P.
inline const std::vector<std::string>& testTargetNames() {
  static const std::vector<std::string> names = {"native", "sm_80", "sm_86"};
  return names;
}

}  // namespace deepinfer::testing_util
