#include "GpuContext.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

namespace deepinfer::py {

Result<GpuContext*> gpuContext(int ordinal) {
  static std::mutex mu;
  // Never destroyed: unloading modules from static destructors at interpreter exit can run after
  // the CUDA driver has shut down; the process exit releases everything.
  static auto* contexts = new std::map<int, GpuContext*>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = contexts->find(ordinal); it != contexts->end()) return it->second;
  auto dev = Device::open(ordinal);
  if (!dev.ok()) return Error{fmt::format("GPU {}: {}", ordinal, dev.error().message)};
  auto* c = new GpuContext{*dev, std::make_unique<Jit>(*dev)};
  (*contexts)[ordinal] = c;
  return c;
}

Result<TargetProfile> launchTarget(const Device& dev, const std::string& name) {
  const TargetProfile& local = dev.info().profile;
  if (name.empty() || name == "local" || name == "auto") return local;
  auto t = findTarget(name);
  if (!t) {
    std::string names;
    for (const auto& p : targetPresets()) names += (names.empty() ? "" : ", ") + p.name;
    return Error{fmt::format("unknown target '{}' (known: {}, local)", name, names)};
  }
  if (t->arch() > local.arch())
    return Error{fmt::format("target {} ({}) cannot run on GPU {} ({}, {})", name, t->archName(), dev.ordinal(),
                             local.gpuName, local.archName())};
  return *t;
}

}  // namespace deepinfer::py
