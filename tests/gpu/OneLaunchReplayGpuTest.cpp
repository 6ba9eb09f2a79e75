// The last-arrival plans (templates/common/Arrival.cuh) launched again and again on one zeroed
// workspace, as the runtime does (zeroed once when allocated): sparse_mla_decode with merge = 1
// and the mHC one-launch plans (one_launch = 1). Each plan runs eagerly twice, then as a captured
// CUDA graph replayed twice, inputs re-uploaded and outputs and workspace poisoned before every
// launch. Every launch must give the first launch's bytes (a counter left non-zero would make no
// CTA the last one, and the outputs would stay poisoned), the first must match the C++
// reference, and the zeroed region must be zero at the end. Native target and the sm_80 / sm_86
// PTX specializations.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include "GpuTestDevice.h"
#include "cases/OpCases.h"
#include "deepinfer/DeviceGraph.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;

namespace {

// The config a case runs: sparse_mla_decode's default geometry with 5 splits merged by the last
// CTA; for mHC the fitting one-launch candidate with the most slices. Empty when the case has none.
std::optional<KernelConfig> oneLaunchConfig(const std::string& op, const Specialization& spec) {
  if (op == "sparse_mla_decode") {
    KernelConfig c = spec.chosen.config;
    c["kv_splits"] = 5;
    c["merge"] = 1;
    return c;
  }
  std::optional<KernelConfig> best;  // the most C slices: the most CTAs arriving per tile
  for (const auto& ch : spec.fitting)
    if (ch.config.count("one_launch") && ch.config.at("one_launch") == 1 &&
        (!best || ch.config.at("k_slices") > best->at("k_slices")))
      best = ch.config;
  return best;
}

void replayOp(const std::string& op, const std::string& caseName) {
  const auto& g = testing_util::gpuTestDevice();
  if (!g.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << g.why;
  ASSERT_TRUE(g.dev->use().ok());
  static Jit jit(g.dev);
  std::vector<TargetProfile> targets = {g.dev->info().profile};
  for (const char* n : {"sm_80", "sm_86"})
    if (targets[0].arch() != std::atoi(n + 3)) targets.push_back(*findTarget(n));
  const deepinfer::testing::OpCase* found = nullptr;
  const auto cases = deepinfer::testing::casesFor(op, g.seed, false);
  for (const auto& c : cases)
    if (c.name == caseName) found = &c;
  ASSERT_NE(found, nullptr) << op << ": no case " << caseName;
  const auto& c = *found;
  TensorMap ref = c.inputs;
  ASSERT_TRUE(runReference(op, c.attrs, ref).ok()) << c.name;
  auto d = describeOp(op, c.attrs, c.inputs);
  ASSERT_TRUE(d.ok()) << c.name << ": " << d.error().message;
  const OpSignature* sig = findOpSignature(op);
  ASSERT_NE(sig, nullptr);
  const OutputSpec outs = findKernelFamily(op)->outputs(*d);
  int runs = 0;
  for (const auto& target : targets) {
    auto spec = specialize(*d, target);
    ASSERT_TRUE(spec.ok()) << c.name << " on " << target.name << ": " << spec.error().message;
    const auto cfg = oneLaunchConfig(op, *spec);
    ASSERT_TRUE(cfg.has_value()) << op << " [" << c.name << "] on " << target.name << ": no one-launch candidate";
    const std::string where =
        fmt::format("{} [{}] on {} {{{}}} (seed {})", op, c.name, target.name, configToString(*cfg), g.seed);
    auto k = jit.get(*d, target, *cfg);
    ASSERT_TRUE(k.ok()) << where << ": " << k.error().message;
    ASSERT_EQ((*k)->kernel.plan.size(), 1u) << where << ": not one launch";
    const int64_t zeroedBytes = (*k)->kernel.zeroedBytes;
    ASSERT_GT(zeroedBytes, 0) << where << ": no arrival counters";

    std::map<std::string, DeviceBuffer> bufs;
    DeviceAddrMap addrs;
    auto alloc = [&](const std::string& name, size_t bytes) {
      auto b = DeviceBuffer::alloc(bytes);
      ASSERT_TRUE(b.ok()) << where;
      addrs[name] = b->addr();
      bufs[name] = std::move(*b);
    };
    for (const auto& in : sig->inputs)
      if (c.inputs.count(in.name)) alloc(in.name, c.inputs.at(in.name).bytes.size());
    for (const auto& [name, s] : outs)
      if (!bufs.count(name)) alloc(name, size_t(HostTensor(s.first, s.second).bytes.size()));
    if ((*k)->kernel.workspaceBytes > 0) alloc("__workspace", size_t((*k)->kernel.workspaceBytes));
    alloc("__zeroed", size_t(zeroedBytes));
    ASSERT_TRUE(bufs.at("__zeroed").fill(0).ok()) << where;  // once, as the runtime does

    // Inputs again (in/out tensors are overwritten by a launch), outputs and workspace poisoned.
    auto prepare = [&] {
      for (const auto& in : sig->inputs)
        if (c.inputs.count(in.name))
          ASSERT_TRUE(bufs.at(in.name).upload(c.inputs.at(in.name).bytes.data(), c.inputs.at(in.name).bytes.size()).ok());
      for (const auto& [name, s] : outs)
        if (!c.inputs.count(name)) ASSERT_TRUE(bufs.at(name).fill(0x7F).ok());
      if (bufs.count("__workspace")) ASSERT_TRUE(bufs.at("__workspace").fill(0x7F).ok());
      ASSERT_TRUE(g.dev->synchronize().ok());  // ordered before a launch on the real stream
    };
    auto outputs = [&] {
      TensorMap got;
      for (const auto& [name, s] : outs) {
        HostTensor t(s.first, s.second);
        EXPECT_TRUE(bufs.at(name).download(t.bytes.data(), t.bytes.size()).ok());
        got[name] = std::move(t);
      }
      return got;
    };
    auto stream = Stream::create();
    ASSERT_TRUE(stream.ok());

    TensorMap first;
    for (int eager = 0; eager < 2; ++eager) {
      prepare();
      ASSERT_TRUE(jit.launch(**k, addrs, stream->handle()).ok()) << where;
      ASSERT_TRUE(stream->synchronize().ok()) << where;
      const TensorMap got = outputs();
      if (eager == 0) {
        first = got;
        TensorMap all = c.inputs;  // what runOpOnGpu returns: the inputs, then every output
        for (const auto& [name, t] : got) all[name] = t;
        auto fromKernel = deepinfer::testing::expectedFromKernelOutputs(op, c.attrs, c.inputs, all);
        ASSERT_TRUE(fromKernel.ok()) << where << ": " << fromKernel.error().message;
        for (const auto& out : deepinfer::testing::outputNames(op)) {
          const HostTensor& want = fromKernel->count(out) ? fromKernel->at(out) : ref.at(out);
          auto rep = deepinfer::testing::compareOutputs(op, out, want, got.at(out), c.attrs, c.inputs);
          EXPECT_TRUE(rep.ok) << where << " '" << out << "': " << rep.metric << " " << rep.maxErr << ": "
                              << rep.detail;
        }
      } else {
        for (const auto& [name, t] : got)
          EXPECT_TRUE(t.bytes == first.at(name).bytes) << where << " '" << name << "': the second launch differs";
      }
      ++runs;
    }
    ASSERT_TRUE(DeviceGraph::beginCapture(stream->handle()).ok()) << where;
    const Status captured = jit.launch(**k, addrs, stream->handle());
    auto graph = DeviceGraph::endCapture(stream->handle());
    ASSERT_TRUE(captured.ok()) << where << ": " << captured.error().message;
    ASSERT_TRUE(graph.ok()) << where << ": " << graph.error().message;
    for (int replay = 0; replay < 2; ++replay) {
      prepare();
      ASSERT_TRUE(graph->launch(stream->handle()).ok()) << where;
      ASSERT_TRUE(stream->synchronize().ok()) << where;
      const TensorMap got = outputs();
      for (const auto& [name, t] : got)
        EXPECT_TRUE(t.bytes == first.at(name).bytes) << where << " '" << name << "': graph replay " << replay
                                                     << " differs from the first launch";
      ++runs;
    }
    std::vector<uint8_t> z(size_t(zeroedBytes), 0xFF);
    ASSERT_TRUE(bufs.at("__zeroed").download(z.data(), z.size()).ok());
    for (size_t i = 0; i < z.size(); ++i)
      ASSERT_EQ(z[i], 0) << where << ": byte " << i << " of the zeroed workspace is not zero after the launches";
  }
  fmt::print("{} [{}]: {} launches (eager twice, graph replayed twice) on {} targets, all equal (seed {})\n", op,
             c.name, runs, targets.size(), g.seed);
}

TEST(OneLaunchReplay, SparseMlaDecodeLastCtaMerge) { replayOp("sparse_mla_decode", "b3_sq1_h64_few_keys"); }
TEST(OneLaunchReplay, MhcPre) { replayOp("mhc_pre", "t6_c5120"); }
TEST(OneLaunchReplay, MhcPost) { replayOp("mhc_post", "t6_c5120"); }
TEST(OneLaunchReplay, MhcFusedPostPre) { replayOp("mhc_fused_post_pre", "t6_c5120"); }

}  // namespace
