// templates/Topk.cuh's one-launch plans (splits = 1) under the host SIMT emulator (SimtEmu.h):
// every topk case against the C++ reference, with every fitting sm_80 candidate whose template
// instantiation is listed below. Every bisection candidate (radix_bits = 1) of the cases must be
// listed, so the bisection select is checked at each thread count and keys-per-thread the family
// offers for these rows; the radix plans are checked at the sm_80 pools. The GPU suite
// (tests/gpu/GpuOpsTest.cpp) runs the same cases on the device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "cases/OpCases.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TargetProfile.h"

// clang-format off
#include "EmuCuda.h"
#include "Topk.cuh"
// clang-format on

namespace {

using namespace deepinfer;

using TopkFn = void (*)(const di::TopkParams&);

struct alignas(16) U32x4Storage {
  uint32_t w[4];
};

template <int THREADS, int BITS, int POOL>
void topkDirect(const di::TopkParams& p) {
  di::topk_kernel<THREADS, BITS, POOL, di::topk::kDirect>(p);
}

struct Instance {
  int64_t threads, radixBits, poolKeys;
  TopkFn fn;
};

// The bisection candidates of the cases' rows (TopkFamily::configs: threads x 4..32 keys per
// thread, rounded to tiles of 4) and the sm_80 radix pools.
const Instance kInstances[] = {
    {256, 1, 1024, &topkDirect<256, 1, 1024>},     {512, 1, 2048, &topkDirect<512, 1, 2048>},
    {1024, 1, 4096, &topkDirect<1024, 1, 4096>},   {256, 1, 2048, &topkDirect<256, 1, 2048>},
    {256, 1, 4096, &topkDirect<256, 1, 4096>},     {512, 1, 4096, &topkDirect<512, 1, 4096>},
    {256, 1, 5120, &topkDirect<256, 1, 5120>},     {512, 1, 6144, &topkDirect<512, 1, 6144>},
    {1024, 1, 8192, &topkDirect<1024, 1, 8192>},   {256, 1, 8192, &topkDirect<256, 1, 8192>},
    {512, 1, 8192, &topkDirect<512, 1, 8192>},     {512, 1, 16384, &topkDirect<512, 1, 16384>},
    {1024, 1, 16384, &topkDirect<1024, 1, 16384>}, {512, 11, 9984, &topkDirect<512, 11, 9984>},
    {256, 8, 11776, &topkDirect<256, 8, 11776>},
};

const Instance* findInstance(const KernelConfig& c) {
  for (const Instance& i : kInstances)
    if (c.at("threads") == i.threads && c.at("radix_bits") == i.radixBits && c.at("pool_keys") == i.poolKeys)
      return &i;
  return nullptr;
}

uint64_t seed() {
  const char* s = std::getenv("DI_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261202;
}

TEST(TopkEmu, OneLaunchPlansMatchReference) {
  const TargetProfile sm80 = *findTarget("sm_80");
  int compared = 0, bisect = 0;
  for (const auto& c : deepinfer::testing::casesFor("topk", seed(), false)) {
    TensorMap want = c.inputs;
    ASSERT_TRUE(runReference("topk", c.attrs, want).ok()) << c.name;
    auto d = describeOp("topk", c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.error().message;
    auto spec = specialize(*d, sm80);
    ASSERT_TRUE(spec.ok()) << c.name << ": " << spec.error().message;
    const HostTensor& scores = c.inputs.at("scores");
    const HostTensor& lens = c.inputs.at("lens");
    const int64_t T = scores.shape[0], N = scores.shape[1], k = c.attrs.getInt("k", 1);
    for (const auto& ch : spec->fitting) {
      const KernelConfig& cfg = ch.config;
      if (cfg.at("splits") != 1) continue;  // the split plan's two launches: the GPU suite
      const std::string where = fmt::format("topk [{}] {{{}}} (seed {})", c.name, configToString(cfg), seed());
      const Instance* inst = findInstance(cfg);
      if (cfg.at("radix_bits") == 1) {
        ASSERT_NE(inst, nullptr) << where << ": no emulator instantiation of this bisection candidate";
        ++bisect;
      }
      if (inst == nullptr) continue;
      // 16-byte aligned copies, like the device buffers; indices poisoned.
      std::vector<U32x4Storage> sbuf(size_t((scores.bytes.size() + 15) / 16));
      std::memcpy(sbuf.data(), scores.bytes.data(), scores.bytes.size());
      std::vector<int32_t> lbuf(static_cast<size_t>(T));
      std::vector<int32_t> out(static_cast<size_t>(T * k), 0x7F7F7F7F);
      std::memcpy(lbuf.data(), lens.bytes.data(), lens.bytes.size());
      di::TopkParams p{};
      p.scores = reinterpret_cast<const float*>(sbuf.data());
      p.lens = lbuf.data();
      p.indices = out.data();
      p.num_rows = int32_t(T);
      p.row_len = int32_t(N);
      p.k = int32_t(k);
      p.splits = 1;
      p.chunk_len = int32_t(N);
      try {
        di_emu::launch({unsigned(T), 1, 1}, {unsigned(inst->threads), 1, 1}, 0, [&] { inst->fn(p); });
      } catch (const std::exception& e) {
        FAIL() << where << ": " << e.what();
      }
      HostTensor got(DType::I32, {T, k});
      std::memcpy(got.bytes.data(), out.data(), got.bytes.size());
      auto rep = deepinfer::testing::compareOutputs("topk", "indices", want.at("indices"), got, c.attrs, c.inputs);
      EXPECT_TRUE(rep.ok) << where << ": " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
      ++compared;
    }
  }
  EXPECT_GT(bisect, 0);
  fmt::print("topk: {} emulated comparisons, {} of bisection candidates (seed {})\n", compared, bisect, seed());
}

}  // namespace
