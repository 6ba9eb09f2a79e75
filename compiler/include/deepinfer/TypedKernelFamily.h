// How a kernel family is written: its config is a struct of named integer knobs (the fields
// list names them), and every hook takes that struct. TypedKernelFamily turns it into the
// type-erased KernelFamily the passes and the JIT use: a knob map converts to the struct (an
// unknown or missing knob is an error), canImplement is asked before any other hook, and the
// struct converts back to the knob map #di.config and the tuning cache hold.
//
//   struct TopkConfig {
//     int64_t threads = 0, radixBits = 0;
//     static constexpr auto fields() {
//       return std::array{ConfigField<TopkConfig>{"threads", &TopkConfig::threads},
//                         ConfigField<TopkConfig>{"radix_bits", &TopkConfig::radixBits}};
//     }
//   };
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <array>
#include <string>
#include <vector>

#include "deepinfer/KernelFamily.h"

namespace deepinfer {

template <class C>
struct ConfigField {
  const char* name;  // the knob's name in #di.config and config strings
  int64_t C::*member;
};

template <class C>
KernelConfig toKnobs(const C& c) {
  KernelConfig k;
  for (const auto& f : C::fields()) k[f.name] = c.*(f.member);
  return k;
}

// The typed config of a knob map; the error names the op, the config and the knob.
template <class C>
Result<C> fromKnobs(const std::string& op, const KernelConfig& k) {
  C c{};
  std::string names;
  for (const auto& f : C::fields()) names += (names.empty() ? "" : ", ") + std::string(f.name);
  for (const auto& f : C::fields()) {
    auto it = k.find(f.name);
    if (it == k.end())
      return Error{fmt::format("{}: config {{{}}} lacks knob '{}' (knobs: {})", op, configToString(k), f.name, names)};
    // Families may hold a knob in an int: every knob is in 0..2^31-1 before the family looks.
    const int64_t v = it->second;  // a named value: `it->second < 0` reads as a template to GCC here
    if (v < 0 || v > INT32_MAX)
      return Error{fmt::format("{}: config {{{}}}: {} = {} is out of range (knobs are 0..{})", op, configToString(k),
                               f.name, v, INT32_MAX)};
    c.*(f.member) = v;
  }
  for (const auto& [name, v] : k) {
    const auto& fs = C::fields();
    if (std::none_of(fs.begin(), fs.end(), [&](const auto& f) { return name == f.name; }))
      return Error{fmt::format("{}: config {{{}}} has no knob '{}' (knobs: {})", op, configToString(k), name, names)};
  }
  return c;
}

template <class C>
class TypedKernelFamily : public KernelFamily {
 public:
  using Config = C;

  // ---- what a family implements (every hook but configs/defaultFor/canImplement may assume
  //      canImplement accepted the config for this description) ----
  // The configs worth trying; those canImplement rejects are dropped, so a family may
  // enumerate a grid and let canImplement prune it.
  virtual std::vector<C> configs(const OpDesc& d, const TargetProfile& t) const = 0;
  virtual C defaultFor(const OpDesc& d, const TargetProfile& t) const = 0;
  virtual Status canImplement(const C& c, const OpDesc& d) const = 0;
  virtual ResourceEstimate resources(const C& c, const OpDesc& d) const = 0;
  virtual CudaUnit unit(const C& c, const OpDesc& d, const std::string& baseName) const = 0;
  virtual std::vector<LaunchStep> plan(const C& c, const OpDesc& d, const std::string& baseName) const = 0;
  virtual int64_t workspace(const C&, const OpDesc&) const { return 0; }
  virtual int64_t zeroedWorkspace(const C&, const OpDesc&) const { return 0; }
  virtual Result<std::vector<uint8_t>> params(const C& c, const OpDesc& d, const DeviceAddrMap& addrs) const = 0;
  // Default: every strided tensor must pass checkStrides, then params.
  virtual Result<std::vector<uint8_t>> stridedParams(const C& c, const OpDesc& d, const DeviceAddrMap& addrs,
                                                     const TensorStrides& strides) const {
    for (const auto& [name, st] : strides) DI_TRY(checkStrides(d, name, st));
    return params(c, d, addrs);
  }

  // ---- the type-erased interface ----
  std::vector<KernelConfig> candidates(const OpDesc& d, const TargetProfile& t) const final {
    std::vector<KernelConfig> out;
    for (const C& c : configs(d, t))
      if (canImplement(c, d).ok()) out.push_back(toKnobs(c));
    return out;
  }
  KernelConfig defaultConfig(const OpDesc& d, const TargetProfile& t) const final { return toKnobs(defaultFor(d, t)); }
  Status canImplement(const KernelConfig& k, const OpDesc& d) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return {};
  }
  Result<ResourceEstimate> estimate(const KernelConfig& k, const OpDesc& d) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return resources(*c, d);
  }
  Result<CudaUnit> emit(const KernelConfig& k, const OpDesc& d, const std::string& baseName) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return unit(*c, d, baseName);
  }
  Result<std::vector<LaunchStep>> launchPlan(const KernelConfig& k, const OpDesc& d,
                                             const std::string& baseName) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return plan(*c, d, baseName);
  }
  Result<int64_t> workspaceBytes(const KernelConfig& k, const OpDesc& d) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return workspace(*c, d);
  }
  Result<int64_t> zeroedWorkspaceBytes(const KernelConfig& k, const OpDesc& d) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return zeroedWorkspace(*c, d);
  }
  Result<std::vector<uint8_t>> packParams(const KernelConfig& k, const OpDesc& d,
                                          const DeviceAddrMap& addrs) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return params(*c, d, addrs);
  }
  Result<std::vector<uint8_t>> packStridedParams(const KernelConfig& k, const OpDesc& d, const DeviceAddrMap& addrs,
                                                 const TensorStrides& strides) const final {
    auto c = typed(k, d);
    if (!c.ok()) return c.error();
    return stridedParams(*c, d, addrs, strides);
  }

 private:
  Result<C> typed(const KernelConfig& k, const OpDesc& d) const {
    auto c = fromKnobs<C>(opName(), k);
    if (!c.ok()) return c.error();
    DI_TRY(canImplement(*c, d));
    return c;
  }
};

}  // namespace deepinfer
