// Host-side pieces the emulator tests share: buffers aligned like device allocations, reading
// which instantiation an emitted unit calls, and running an op's whole launch plan in the
// emulator the way the GPU tests run it on a device (poisoned outputs and workspace, a zeroed
// region that must be left zero).
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "SimtEmu.h"
#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Specialize.h"

namespace deepinfer::emu_test {

// A host buffer with an address aligned like a device allocation, filled with `fill` (poison).
struct Buffer {
  std::vector<uint8_t> bytes;
  uint8_t* data = nullptr;
  explicit Buffer(size_t n, uint8_t fill) : bytes(n + 256, fill) {
    data = bytes.data() + (256 - reinterpret_cast<uintptr_t>(bytes.data()) % 256) % 256;
  }
};

// The template arguments of `call<` in the emitted unit (e.g. "di::moe::w13<"); "" when absent.
inline std::string templateArgs(const std::string& source, const std::string& call) {
  const size_t at = source.find(call);
  if (at == std::string::npos) return "";
  const size_t b = at + call.size(), e = source.find(">(p)", b);
  return source.substr(b, e - b);
}

// "" when the `bytes` of a zeroed region are all zero, else which byte is not.
inline std::string leftZero(const Buffer& z, int64_t bytes) {
  for (int64_t i = 0; i < bytes; ++i)
    if (z.data[i] != 0) return fmt::format("byte {} of the zeroed workspace is {:#04x} after the plan", i, z.data[i]);
  return "";
}

// The host function that runs one thread of a plan step's kernel on the packed params, chosen by
// the test from the step's entry and the emitted source; an error names the missing instantiation.
using StepPicker =
    std::function<Result<std::function<void()>>(const LaunchStep& step, const std::string& source,
                                                 const std::vector<uint8_t>& params)>;

struct EmulatedRun {
  std::string error;     // empty when the plan ran (and left the zeroed region zero)
  TensorMap tensors;     // the inputs, then every output (in/out tensors hold the outputs)
  int64_t zeroedBytes = 0;
};

// Runs `op` on `inputs` through the family's plan in the emulator, its CTAs in grid order or, with
// a non-zero `ctaOrderSeed`, in a permutation of it. Outputs that are not also inputs start
// poisoned (0x7F bytes: large finite floats, since a kernel that skips a write must not pass),
// and so does the workspace; the "__zeroed" region starts zero and must end zero.
inline EmulatedRun runPlanEmulated(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs,
                                   const KernelConfig& cfg, const StepPicker& pick, uint64_t ctaOrderSeed = 0) {
  EmulatedRun r;
  auto d = describeOp(op, attrs, inputs);
  if (!d.ok()) return {d.error().message, {}, 0};
  auto k = emitKernel(*d, cfg);
  if (!k.ok()) return {k.error().message, {}, 0};
  const KernelFamily* fam = findKernelFamily(op);
  std::map<std::string, std::unique_ptr<Buffer>> bufs;
  DeviceAddrMap addrs;
  auto bind = [&](const std::string& name, size_t bytes, uint8_t fill) {
    bufs[name] = std::make_unique<Buffer>(bytes, fill);
    addrs[name] = reinterpret_cast<uint64_t>(bufs[name]->data);
    return bufs[name]->data;
  };
  for (const auto& [name, t] : inputs) std::memcpy(bind(name, t.bytes.size(), 0), t.bytes.data(), t.bytes.size());
  const OutputSpec outs = fam->outputs(*d);
  for (const auto& [name, spec] : outs)
    if (!inputs.count(name)) bind(name, HostTensor(spec.first, spec.second).bytes.size(), 0x7F);
  if (k->workspaceBytes > 0) bind("__workspace", size_t(k->workspaceBytes), 0x7F);
  r.zeroedBytes = k->zeroedBytes;
  if (k->zeroedBytes > 0) bind("__zeroed", size_t(k->zeroedBytes), 0);
  auto params = fam->packParams(cfg, *d, addrs);
  if (!params.ok()) return {params.error().message, {}, r.zeroedBytes};
  for (const LaunchStep& st : k->plan) {
    auto body = pick(st, k->unit.source, *params);
    if (!body.ok()) return {body.error().message, {}, r.zeroedBytes};
    try {
      di_emu::launch({st.grid[0], st.grid[1], st.grid[2]}, {st.block[0], st.block[1], st.block[2]}, st.dynamicSmem,
                     *body, ctaOrderSeed);
    } catch (const std::exception& e) {
      return {fmt::format("{}: {}", st.entry, e.what()), {}, r.zeroedBytes};
    }
  }
  if (k->zeroedBytes > 0)
    if (std::string e = leftZero(*bufs.at("__zeroed"), k->zeroedBytes); !e.empty()) return {e, {}, r.zeroedBytes};
  r.tensors = inputs;
  for (const auto& [name, spec] : outs) {
    HostTensor t(spec.first, spec.second);
    std::memcpy(t.bytes.data(), bufs[name]->data, t.bytes.size());
    r.tensors[name] = std::move(t);
  }
  return r;
}

// The same plan run again with its CTAs in another order (`again`) must give every output bit of
// `got`: another CTA of each tile arrives last, or finishes first, and the result must not depend
// on which (last-CTA reductions, warps summed in a fixed order).
inline void expectCtaOrderIndependent(const std::string& op, const EmulatedRun& got, const EmulatedRun& again,
                                      const std::string& where) {
  ASSERT_EQ(again.error, "") << where << " (CTAs shuffled)";
  for (const auto& out : deepinfer::testing::outputNames(op))
    EXPECT_TRUE(again.tensors.at(out).bytes == got.tensors.at(out).bytes)
        << where << " '" << out << "': the CTA order changed the result";
}

}  // namespace deepinfer::emu_test
