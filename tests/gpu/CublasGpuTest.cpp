// The cuBLAS wrapper against an fp64 loop on random bf16 inputs: odd sizes, M = 1, M = 0, row
// strides above K and N (whose padding holds 1e4 in the inputs and poison in the output, so a
// read or write outside the rows shows), beta = 1 accumulation, strided batches (one sharing W),
// and bitwise repeatability. Skips visibly without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "GpuTestDevice.h"
#include "deepinfer/Device.h"
#include "deepinfer/Formats.h"
#include "deepinfer/Tensor.h"
#include "lib/Cublas.h"

using namespace deepinfer;

namespace {

constexpr uint32_t kPoison = 0x7FC0DEADu;  // a NaN no GEMM produces

struct Env {
  std::shared_ptr<Device> dev;
  std::unique_ptr<Cublas> blas;
  std::string why;
  uint64_t seed = 0;
};

Env& env() {
  static Env e = [] {
    Env e;
    const auto& g = testing_util::gpuTestDevice();
    e.seed = g.seed;
    if (!g.dev) {
      e.why = g.why;
      return e;
    }
    e.dev = g.dev;
    auto b = Cublas::create(e.dev);
    if (!b.ok()) {
      e.why = b.error().message;
      e.dev.reset();
      return e;
    }
    e.blas = std::move(*b);
    fmt::print("cuBLAS tests on {} (sm_{}), seed {}\n", e.dev->info().profile.gpuName, e.dev->info().profile.arch(),
               e.seed);
    return e;
  }();
  return e;
}

#define REQUIRE_GPU()                                                       \
  do {                                                                      \
    if (!env().dev) {                                                       \
      if (env().why.find("cuBLAS") != std::string::npos) FAIL() << env().why; \
      GTEST_SKIP() << "no GPU, GPU test skipped: " << env().why;            \
    }                                                                       \
  } while (0)

struct Gemm {
  int64_t M, N, K, ldx, ldw, ldy;
  float alpha = 1.f, beta = 0.f;
  int64_t batch = 1, strideX = 0, strideW = 0, strideY = 0;
};

std::string describe(const Gemm& g) {
  return fmt::format("M={} N={} K={} ldx={} ldw={} ldy={} alpha={} beta={} batch={} strides x/w/y={}/{}/{}", g.M, g.N,
                     g.K, g.ldx, g.ldw, g.ldy, g.alpha, g.beta, g.batch, g.strideX, g.strideW, g.strideY);
}

// Host operands laid out with the strides; padding of x and W holds 1e4, of y poison (or, for
// beta != 0, random values that must come out untouched).
struct Operands {
  std::vector<uint16_t> x, W;
  std::vector<uint32_t> y0;  // f32 bits
};

size_t extent(int64_t batch, int64_t stride, int64_t rows, int64_t ld) {
  if (rows == 0 || batch == 0) return 1;
  return size_t((batch - 1) * stride + rows * ld);
}

Operands makeOperands(const Gemm& g, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Operands o;
  const uint16_t pad = floatToBf16(1e4f);
  o.x.assign(extent(g.batch, g.strideX, g.M, g.ldx), pad);
  o.W.assign(extent(g.batch, g.strideW, g.N, g.ldw), pad);
  o.y0.assign(extent(g.batch, g.strideY, g.M, g.ldy), kPoison);
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t k = 0; k < g.K; ++k) o.x[size_t(b * g.strideX + m * g.ldx + k)] = floatToBf16(u(rng));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t k = 0; k < g.K; ++k) o.W[size_t(b * g.strideW + n * g.ldw + k)] = floatToBf16(u(rng));
    if (g.beta != 0.f)
      for (int64_t m = 0; m < g.M; ++m)
        for (int64_t n = 0; n < g.N; ++n) o.y0[size_t(b * g.strideY + m * g.ldy + n)] = floatToBits(4.f * u(rng));
  }
  return o;
}

DeviceBuffer upload(const void* p, size_t bytes) {
  auto b = DeviceBuffer::alloc(bytes);
  EXPECT_TRUE(b.ok()) << b.error().message;
  if (!b.ok()) return {};
  auto st = b->upload(p, bytes);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return std::move(*b);
}

float floatAt(const std::vector<uint32_t>& v, size_t i) { return bitsToFloat(v[i]); }

// Runs `g` on a fresh stream (through the strided-batch call when `batched`) and returns y's bits.
std::vector<uint32_t> run(const Gemm& g, const Operands& o, bool batched) {
  Env& e = env();
  DeviceBuffer dx = upload(o.x.data(), o.x.size() * 2);
  DeviceBuffer dw = upload(o.W.data(), o.W.size() * 2);
  DeviceBuffer dy = upload(o.y0.data(), o.y0.size() * 4);
  // Pageable uploads may still be in flight; the GEMM's non-blocking stream would not wait.
  auto synced = e.dev->synchronize();
  EXPECT_TRUE(synced.ok()) << synced.error().message;
  auto stream = Stream::create();
  EXPECT_TRUE(stream.ok());
  Status st = batched ? e.blas->gemmBf16F32Batched(dx.addr(), g.ldx, g.strideX, dw.addr(), g.ldw, g.strideW, dy.addr(),
                                                   g.ldy, g.strideY, g.M, g.N, g.K, g.batch, stream->handle())
                      : e.blas->gemmBf16F32(dx.addr(), g.ldx, dw.addr(), g.ldw, dy.addr(), g.ldy, g.M, g.N, g.K,
                                            stream->handle(), g.alpha, g.beta);
  EXPECT_TRUE(st.ok()) << describe(g) << ": " << st.error().message;
  auto sync = stream->synchronize();
  EXPECT_TRUE(sync.ok()) << sync.error().message;
  std::vector<uint32_t> y(o.y0.size());
  auto dl = dy.download(y.data(), y.size() * 4);
  EXPECT_TRUE(dl.ok()) << dl.error().message;
  return y;
}

// y against alpha * x W^T + beta * y0 in fp64; padding must be as it was.
void check(const Gemm& g, const Operands& o, const std::vector<uint32_t>& y) {
  double worst = 0;
  int bad = 0;
  std::vector<bool> inside(y.size(), false);
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t n = 0; n < g.N; ++n) {
        const size_t yi = size_t(b * g.strideY + m * g.ldy + n);
        inside[yi] = true;
        double acc = 0, mag = 0;
        for (int64_t k = 0; k < g.K; ++k) {
          const double p = double(bf16ToFloat(o.x[size_t(b * g.strideX + m * g.ldx + k)])) *
                           double(bf16ToFloat(o.W[size_t(b * g.strideW + n * g.ldw + k)]));
          acc += p;
          mag += std::fabs(p);
        }
        const double y0 = g.beta != 0.f ? double(floatAt(o.y0, yi)) : 0.0;
        const double want = double(g.alpha) * acc + double(g.beta) * y0;
        const double scale = std::fabs(double(g.alpha)) * mag + std::fabs(double(g.beta) * y0);
        const double got = double(floatAt(y, yi));
        // fp32 accumulation of K exact products, in any order: at most ~K roundings (2^-24
        // each; twice that for truncating accumulators) of the magnitude sum, plus the beta term.
        const double tol = 3e-7 * double(g.K + 4) * scale + 1e-30;
        const double err = std::isfinite(got) ? std::fabs(got - want) : INFINITY;
        worst = std::max(worst, scale > 0 ? err / scale : err);
        if (!(err <= tol) && bad++ < 5)
          ADD_FAILURE() << describe(g) << ": y[" << b << "][" << m << "][" << n << "] = " << got << ", want " << want
                        << " (tol " << tol << ")";
      }
  for (size_t i = 0; i < y.size(); ++i)
    if (!inside[i] && y[i] != o.y0[i] && bad++ < 10)
      ADD_FAILURE() << describe(g) << ": padding element " << i << " of y was written";
  EXPECT_EQ(bad, 0) << describe(g) << " (worst error / magnitude " << worst << ")";
}

TEST(CublasGpu, GemmMatchesFp64) {
  REQUIRE_GPU();
  std::mt19937_64 rng(env().seed);
  const std::vector<Gemm> cases = {
      {1, 1, 1, 1, 1, 1},
      {1, 257, 129, 129, 129, 257},        // M = 1 (decode)
      {7, 33, 65, 65, 65, 33},             // odd everything
      {13, 31, 17, 22, 20, 38},            // strides above K and N
      {64, 96, 256, 256, 256, 96},
      {5, 1000, 1024, 1030, 1024, 1001},   // long K
      {37, 129, 7, 9, 7, 200, 0.5f, 1.f},  // accumulate: y = 0.5 x W^T + y
      {3, 17, 40, 40, 48, 17, 1.f, 1.f},   // beta = 1 at M = 3
      {2, 9, 11, 11, 11, 9, -2.f, 0.25f},
  };
  for (const Gemm& g : cases) {
    Operands o = makeOperands(g, rng);
    check(g, o, run(g, o, false));
  }
}

TEST(CublasGpu, EmptyMIsANoOp) {
  REQUIRE_GPU();
  std::mt19937_64 rng(env().seed + 1);
  Gemm g{0, 16, 32, 32, 32, 16};
  Operands o = makeOperands(g, rng);
  auto y = run(g, o, false);
  EXPECT_EQ(y, o.y0);
  // Nothing is touched: null addresses are fine at M = 0, batched too.
  auto st = env().blas->gemmBf16F32(0, 32, 0, 32, 0, 16, 0, 16, 32, nullptr);
  EXPECT_TRUE(st.ok()) << st.error().message;
  st = env().blas->gemmBf16F32Batched(0, 32, 0, 0, 32, 0, 0, 16, 0, 0, 16, 32, 4, nullptr);
  EXPECT_TRUE(st.ok()) << st.error().message;
  Gemm gb{0, 16, 32, 32, 32, 16, 1.f, 0.f, 3, 64, 512, 64};
  Operands ob = makeOperands(gb, rng);
  EXPECT_EQ(run(gb, ob, true), ob.y0);
}

TEST(CublasGpu, BatchedMatchesFp64) {
  REQUIRE_GPU();
  std::mt19937_64 rng(env().seed + 2);
  std::vector<Gemm> cases;
  // Packed batches.
  cases.push_back({4, 64, 128, 128, 128, 64, 1.f, 0.f, 3, 4 * 128, 64 * 128, 4 * 64});
  // Odd sizes, strides with gaps between batches and rows.
  cases.push_back({7, 33, 65, 70, 66, 40, 1.f, 0.f, 5, 7 * 70 + 11, 33 * 66 + 5, 7 * 40 + 3});
  // M = 1 per batch (e.g. one token per head group).
  cases.push_back({1, 129, 31, 31, 31, 129, 1.f, 0.f, 8, 31, 129 * 31, 129});
  // One W shared by every batch (stride 0).
  cases.push_back({9, 17, 23, 23, 23, 17, 1.f, 0.f, 4, 9 * 23, 0, 9 * 17});
  // Column slices of shared rows: batch b reads columns [b*K, (b+1)*K) of x and writes
  // columns [b*N, (b+1)*N) of y (the grouped output projection's layout).
  cases.push_back({5, 24, 32, 4 * 32 + 3, 32, 4 * 24 + 1, 1.f, 0.f, 4, 32, 24 * 32, 24});
  // A single batch through the batched call.
  cases.push_back({6, 10, 12, 12, 12, 10, 1.f, 0.f, 1, 0, 0, 0});
  for (const Gemm& g : cases) {
    Operands o = makeOperands(g, rng);
    check(g, o, run(g, o, true));
  }
}

TEST(CublasGpu, RepeatedCallsAreBitwiseEqual) {
  REQUIRE_GPU();
  std::mt19937_64 rng(env().seed + 3);
  Gemm g{48, 320, 640, 640, 640, 320};
  Operands o = makeOperands(g, rng);
  auto a = run(g, o, false);
  auto b = run(g, o, false);
  EXPECT_EQ(a, b);
}

TEST(CublasGpu, BadArgumentsAreErrorsWithShapes) {
  REQUIRE_GPU();
  Cublas& blas = *env().blas;
  auto st = blas.gemmBf16F32(0x1000, 16, 0x1000, 32, 0x1000, 8, 4, 8, 32, nullptr);  // ldx < K
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("ldx"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("M=4 N=8 K=32"), std::string::npos) << st.error().message;
  st = blas.gemmBf16F32(0x1000, 32, 0x1000, 32, 0x1000, 4, 4, 8, 32, nullptr);  // ldy < N
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("ldy"), std::string::npos) << st.error().message;
  st = blas.gemmBf16F32(0x1000, 32, 0x1000, 32, 0x1000, 8, -1, 8, 32, nullptr);
  EXPECT_FALSE(st.ok());
  // Batches writing over each other: rows of one batch over the next, column slices running
  // past the row, a shared output.
  for (int64_t strideY : {int64_t(4), int64_t(16), int64_t(0)}) {
    st = blas.gemmBf16F32Batched(0x1000, 32, 128, 0x1000, 32, 256, 0x1000, 20, strideY, 4, 8, 32, 2, nullptr);
    ASSERT_FALSE(st.ok()) << strideY;
    EXPECT_NE(st.error().message.find("overlap"), std::string::npos) << st.error().message;
  }
}

}  // namespace
