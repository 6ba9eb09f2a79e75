// NCCL through the runtime's loader with one rank (the one-GPU machine's share of issue 17): an
// all-reduce and an all-gather over one rank copy their input bit for bit (out of place and in
// place, F32 and BF16, odd sizes, outputs poisoned first), bad calls are clear errors, and a rank
// that stays busy past the timeout aborts the group with an error instead of hanging.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "GpuTestDevice.h"
#include "deepinfer/DeviceModule.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/Nvrtc.h"
#include "lib/Nccl.h"

namespace deepinfer {
namespace {

#define NEED_NCCL()                                                                      \
  const auto& g = testing_util::gpuTestDevice();                                         \
  if (!g.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << g.why;                      \
  auto lib = ncclLibrary();                                                              \
  if (!lib.ok()) GTEST_SKIP() << "no NCCL on this machine: " << lib.error().message;     \
  fmt::print("{}\n", describeNccl(**lib))

std::vector<uint32_t> randomWords(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> w(n);
  for (auto& x : w) x = uint32_t(rng()) & 0xBFFFFFFFu;  // finite floats (exponent never all ones)
  return w;
}

TEST(NcclOneRank, CollectivesOfOneRankCopyTheirInputBitForBit) {
  NEED_NCCL();
  auto group = NcclGroup::create({g.dev});
  ASSERT_TRUE(group.ok()) << group.error().message;
  ASSERT_EQ((*group)->size(), 1);
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  for (DType t : {DType::F32, DType::BF16}) {
    const size_t count = (size_t(1) << 20) + 3, bytes = count * dtypeSize(t);
    const std::vector<uint32_t> words = randomWords((bytes + 3) / 4, g.seed + size_t(t));
    auto in = DeviceBuffer::alloc(bytes);
    auto out = DeviceBuffer::alloc(bytes);
    ASSERT_TRUE(in.ok() && out.ok());
    ASSERT_TRUE(in->upload(words.data(), bytes).ok());
    std::vector<uint8_t> got(bytes);
    // Out of place, then in place, then an all-gather of one rank.
    for (int mode = 0; mode < 3; ++mode) {
      ASSERT_TRUE(out->fill(0xA5).ok());
      // The poison is written on the legacy stream, which a non-blocking stream does not wait for:
      // without this, the fill could land after the collective (seen on the H200 with 3 suites
      // side by side).
      ASSERT_TRUE(g.dev->synchronize().ok());
      const uint64_t dst = mode == 1 ? in->addr() : out->addr();
      Status st = mode == 2 ? (*group)->allGather({in->addr()}, {dst}, count, t, {stream->handle()})
                            : (*group)->allReduceSum({in->addr()}, {dst}, count, t, {stream->handle()});
      ASSERT_TRUE(st.ok()) << st.error().message;
      ASSERT_TRUE((*group)->synchronize({stream->handle()}, 30).ok());
      ASSERT_TRUE((mode == 1 ? *in : *out).download(got.data(), bytes).ok());
      EXPECT_EQ(std::memcmp(got.data(), words.data(), bytes), 0) << dtypeName(t) << " mode " << mode;
    }
  }
}

TEST(NcclOneRank, BadCallsAreClearErrors) {
  NEED_NCCL();
  auto twice = NcclGroup::create({g.dev, g.dev});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("appears twice"), std::string::npos) << twice.error().message;
  EXPECT_FALSE(NcclGroup::create({}).ok());
  auto group = NcclGroup::create({g.dev});
  ASSERT_TRUE(group.ok()) << group.error().message;
  auto buf = DeviceBuffer::alloc(64);
  ASSERT_TRUE(buf.ok());
  Status st = (*group)->allReduceSum({buf->addr(), buf->addr()}, {buf->addr()}, 4, DType::F32, {nullptr});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("2 send, 1 recv buffers and 1 streams for 1 ranks"), std::string::npos)
      << st.error().message;
  st = (*group)->allReduceSum({buf->addr()}, {buf->addr()}, 4, DType::I32, {nullptr});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("F32 or BF16"), std::string::npos) << st.error().message;
  st = (*group)->allGather({0}, {buf->addr()}, 4, DType::F32, {nullptr});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank 0 has a null buffer"), std::string::npos) << st.error().message;
}

// A stuck rank: its stream is held by a kernel that spins for 3 s; synchronize with a 0.3 s
// timeout must return an error naming the rank (not wait), abort the group, and refuse later
// calls. (No collective is queued behind the spin: with one GPU there is no peer to fail, and
// the point is the bounded wait and the abort.)
TEST(NcclOneRank, AStuckRankIsAnErrorNotAHang) {
  NEED_NCCL();
  CudaUnit u;
  u.source =
      "extern \"C\" __global__ void di_test_spin(unsigned long long ns) {\n"
      "  unsigned long long t0; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
      "  for (;;) { unsigned long long t; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
      "    if (t - t0 >= ns) break; }\n"
      "}\n";
  u.entries = {"di_test_spin"};
  auto compiled = compileUnit(u, "spin.cu", g.dev->info().profile.arch(), /*cubin=*/true);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  auto mod = DeviceModule::load(*g.dev, compiled->cubin.data(), "spin");
  ASSERT_TRUE(mod.ok()) << mod.error().message;
  auto group = NcclGroup::create({g.dev});
  ASSERT_TRUE(group.ok()) << group.error().message;
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  auto buf = DeviceBuffer::alloc(4096);
  ASSERT_TRUE(buf.ok());
  const uint64_t ns = 3'000'000'000ull;
  std::vector<uint8_t> params(sizeof ns);
  std::memcpy(params.data(), &ns, sizeof ns);
  ASSERT_TRUE(mod->launch("di_test_spin", {1, 1, 1}, {1, 1, 1}, 0, params, stream->handle()).ok());
  const auto t0 = std::chrono::steady_clock::now();
  Status st = (*group)->synchronize({stream->handle()}, 0.3);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank 0 (GPU"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("still busy after 0.3 s"), std::string::npos) << st.error().message;
  EXPECT_LT(waited, 2.0) << "synchronize waited for the spinning kernel";
  EXPECT_TRUE((*group)->aborted());
  Status later = (*group)->allReduceSum({buf->addr()}, {buf->addr()}, 1024, DType::F32, {stream->handle()});
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.error().message.find("was aborted"), std::string::npos) << later.error().message;
  EXPECT_TRUE(stream->synchronize().ok());  // the spin ends; nothing else is left on the stream
}

}  // namespace
}  // namespace deepinfer
