// Every model-kernel launcher (runtime/model/gpu/ModelKernels.h) against the CPU reference it names,
// on the local GPU's cubin and on the sm_80 PTX build: seeded random inputs (never all zeros),
// outputs poisoned before each launch, edge sizes (one row, odd widths, nothing visible, blocks
// with a partial tail, ties). Elementwise kernels must match bit for bit; reductions (RMSNorm,
// engram gate, router weights) within a stated tolerance, with the number of differing elements
// printed. Without a GPU every test skips with the reason.
//
// Environment: DI_TEST_SEED (reuse a seed; printed at start).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>

#include "GpuTestDevice.h"
#include "deepinfer/Formats.h"
#include "model/gpu/ModelKernels.h"
#include "model/CpuForward.h"
#include "model/CpuForwardCaches.h"
#include "model/CpuForwardMath.h"
#include "model/Rope.h"

using namespace deepinfer;

namespace {

struct MkEnv {
  std::shared_ptr<Device> dev;
  std::string why;
  uint64_t seed = 0;
  std::vector<std::pair<std::string, std::unique_ptr<ModelKernels>>> kernels;  // by target name
  std::string loadError;
};

MkEnv& mkEnv() {
  static MkEnv e = [] {
    MkEnv e;
    const auto& g = testing_util::gpuTestDevice();
    e.seed = g.seed;
    if (!g.dev) {
      e.why = g.why;
      return e;
    }
    e.dev = g.dev;
    const TargetProfile local = e.dev->info().profile;
    std::vector<TargetProfile> targets = {local};
    if (local.arch() != 80) targets.push_back(*findTarget("sm_80"));
    for (const auto& t : targets) {
      auto mk = ModelKernels::load(e.dev, t);
      if (!mk.ok()) {
        e.loadError = fmt::format("{}: {}", t.archName(), mk.error().message);
        break;
      }
      fmt::print("model kernels for {} ({}, {})\n", t.archName(), (*mk)->fromPtx() ? "PTX" : "cubin",
                 (*mk)->compiledNow() ? "compiled now" : "from the disk cache");
      e.kernels.emplace_back(fmt::format("{}{}", t.archName(), (*mk)->fromPtx() ? " PTX" : " cubin"),
                             std::move(mk.value()));
    }
    fmt::print("GPU: {} (sm_{}), model-kernel seed {}\n", local.gpuName, local.arch(), e.seed);
    return e;
  }();
  return e;
}

// A per-test random stream derived from the run's seed and the test's name.
std::mt19937_64 rngFor(const char* test) {
  uint64_t h = mkEnv().seed;
  for (const char* c = test; *c; ++c) h = h * 1099511628211ull ^ uint64_t(uint8_t(*c));
  return std::mt19937_64(h);
}

#define DI_GPU_PRELUDE()                                                          \
  MkEnv& env = mkEnv();                                                           \
  if (!env.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << env.why;           \
  ASSERT_TRUE(env.loadError.empty()) << "loading the model kernels: " << env.loadError; \
  ASSERT_TRUE(env.dev->use().ok())

// Random non-zero floats with magnitude in [lo, hi) and a random sign.
std::vector<float> randomF32(std::mt19937_64& rng, size_t n, float lo = 0.01f, float hi = 2.f) {
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
  return v;
}
std::vector<float> randomBf16Values(std::mt19937_64& rng, size_t n, float lo = 0.01f, float hi = 2.f) {
  auto v = randomF32(rng, n, lo, hi);
  for (float& x : v) x = roundBf16(x);
  return v;
}
std::vector<uint16_t> toBf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = floatToBf16(v[i]);
  return b;
}
std::vector<float> fromBf16(const std::vector<uint16_t>& b) {
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = bf16ToFloat(b[i]);
  return v;
}

// Device buffers: uploads of host vectors and poisoned outputs (0xFF bytes: NaN floats and
// bf16, -1 integers, unless another byte is asked for).
template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  auto b = DeviceBuffer::alloc(std::max<size_t>(v.size() * sizeof(T), 16));
  EXPECT_TRUE(b.ok()) << b.error().message;
  if (!b.ok()) return {};
  if (!v.empty()) {
    auto s = b->upload(v.data(), v.size() * sizeof(T));
    EXPECT_TRUE(s.ok()) << s.error().message;
  }
  return std::move(b.value());
}
DeviceBuffer poisoned(size_t bytes, uint8_t byte = 0xFF) {
  auto b = DeviceBuffer::alloc(std::max<size_t>(bytes, 16));
  EXPECT_TRUE(b.ok()) << b.error().message;
  if (!b.ok()) return {};
  auto s = b->fill(byte);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return std::move(b.value());
}
template <class T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  auto s = b.download(v.data(), n * sizeof(T));
  EXPECT_TRUE(s.ok()) << s.error().message;
  return v;
}
void sync(const MkEnv& env) {
  auto s = env.dev->synchronize();
  ASSERT_TRUE(s.ok()) << s.error().message;
}

uint32_t bitsOf(float f) { return floatToBits(f); }

// Bit-exact comparison; reports the count and the first mismatches.
template <class T>
void expectSame(const std::vector<T>& want, const std::vector<T>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < want.size(); ++i) {
    bool same;
    if constexpr (std::is_same_v<T, float>) same = bitsOf(want[i]) == bitsOf(got[i]);
    else same = want[i] == got[i];
    if (!same) {
      if (bad < 5) first += fmt::format(" [{}] want {} got {};", i, want[i], got[i]);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size() << " differ:" << first;
}

// Distance in bf16 steps between two finite bf16 values (sign-magnitude to an ordered line).
int64_t bf16Ulps(uint16_t a, uint16_t b) {
  auto ord = [](uint16_t x) { return (x & 0x8000) ? -int64_t(x & 0x7FFF) : int64_t(x); };
  return std::llabs(ord(a) - ord(b));
}

// Reductions: every element within `maxUlps` bf16 steps and at most `maxFrac` of them differing.
// With rowLen > 0, an element may be further off when its absolute error is at most 2^-14 of
// its row's largest magnitude (fp32 cancellation near zero, the rule docs/ops.md §8 uses).
void expectBf16Close(const std::vector<uint16_t>& want, const std::vector<uint16_t>& got, const std::string& what,
                     int64_t maxUlps = 1, double maxFrac = 0.01, size_t rowLen = 0) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t differ = 0, tooFar = 0;
  int64_t worst = 0;
  std::string first;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == got[i]) continue;
    ++differ;
    const bool nan = std::isnan(bf16ToFloat(want[i])) || std::isnan(bf16ToFloat(got[i]));
    const int64_t u = nan ? INT64_MAX : bf16Ulps(want[i], got[i]);
    worst = std::max(worst, u);
    bool cancellation = false;
    if (u > maxUlps && rowLen > 0 && !nan) {
      const size_t r0 = i / rowLen * rowLen;
      double rowMax = 0;
      for (size_t j = r0; j < std::min(want.size(), r0 + rowLen); ++j)
        rowMax = std::max(rowMax, double(std::fabs(bf16ToFloat(want[j]))));
      cancellation = std::fabs(double(bf16ToFloat(want[i])) - double(bf16ToFloat(got[i]))) <= rowMax * 0x1p-14;
    }
    if (u > maxUlps && !cancellation) {
      if (tooFar < 5)
        first += fmt::format(" [{}] want {} got {};", i, bf16ToFloat(want[i]), bf16ToFloat(got[i]));
      ++tooFar;
    }
  }
  fmt::print("  {}: {} of {} differ (worst {} bf16 ulp)\n", what, differ, want.size(), worst);
  EXPECT_EQ(tooFar, 0u) << what << ": " << tooFar << " elements beyond " << maxUlps << " bf16 ulp:" << first;
  EXPECT_LE(double(differ), maxFrac * double(want.size()) + 1.0) << what << ": too many differing elements";
}

// Elementwise kernels with exp in them (pair pool): the GPU evaluates exp in fp64 and
// rounds once (the nearest fp32), glibc's expf is within 0.502 ulp of it, so a rare fp32 one-ulp
// difference can survive the bf16 rounding. Allowed: at most 1 bf16 step, in at most 1e-4 of
// the elements (in practice none).
void expectBf16NearlySame(const std::vector<uint16_t>& want, const std::vector<uint16_t>& got,
                          const std::string& what) {
  expectBf16Close(want, got, what, 1, 1e-4);
}

template <class F>
void forEachTarget(MkEnv& env, F&& body) {
  for (auto& [name, mk] : env.kernels) {
    SCOPED_TRACE(name);
    body(*mk, name);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST(ModelKernelsGpu, EmbedStreams) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("EmbedStreams");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t C : {5120, 7}) {
      for (int64_t T : {1, 19}) {
        const int64_t V = 37;
        const auto embed = toBf16(randomF32(rng, size_t(V * C)));
        std::vector<int32_t> ids(static_cast<size_t>(T));
        std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
        for (auto& i : ids) i = pick(rng);
        ids[0] = int32_t(V - 1);
        auto dIds = upload(ids), dEmbed = upload(embed);
        auto dX = poisoned(size_t(T * 4 * C * 2));
        ASSERT_TRUE(mk.embedStreams(dIds.addr(), dEmbed.addr(), dX.addr(), T, C, nullptr).ok());
        sync(env);
        std::vector<uint16_t> want(size_t(T * 4 * C));
        for (int64_t t = 0; t < T; ++t)
          for (int s = 0; s < 4; ++s)
            for (int64_t d = 0; d < C; ++d)
              want[size_t((t * 4 + s) * C + d)] = floatToBf16(roundBf16(bf16ToFloat(embed[size_t(ids[size_t(t)] * C + d)])));
        expectSame(want, download<uint16_t>(dX, want.size()), fmt::format("embed T={} C={}", T, C));
      }
    }
  });
}

TEST(ModelKernelsGpu, RmsNorm) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("RmsNorm");
  struct Shape { int64_t rows, n, xPad, outPad; double eps; };
  const Shape shapes[] = {{1, 5120, 0, 0, 1e-20}, {37, 5120, 8, 3, 1e-20}, {64, 1280, 0, 0, 1e-20},
                          {33, 512, 4, 0, 1e-6},  {70, 128, 0, 1, 1e-20}, {5, 33, 2, 5, 1e-20},
                          {3, 1, 0, 0, 1e-6},     {9, 1025, 0, 0, 1e-20}};
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Shape& s : shapes) {
      const int64_t xs = s.n + s.xPad, os = s.n + s.outPad;
      const auto x = randomF32(rng, size_t(s.rows * xs), 0.001f, 4.f);
      const auto w = randomBf16Values(rng, size_t(s.n), 0.1f, 2.f);
      std::vector<float> want(size_t(s.rows * os), 0.f);
      for (int64_t r = 0; r < s.rows; ++r) rmsNorm(CpuExec{}, &x[size_t(r * xs)], s.n, w.data(), s.eps, &want[size_t(r * os)]);
      auto dx = upload(x), dw = upload(toBf16(w));
      // bf16 output
      auto dOut = poisoned(size_t(s.rows * os * 2));
      ASSERT_TRUE(mk.rmsNormF32(dx.addr(), xs, dw.addr(), s.rows, s.n, s.eps, dOut.addr(), os, nullptr).ok());
      sync(env);
      auto got = download<uint16_t>(dOut, size_t(s.rows * os));
      std::vector<uint16_t> wantB, gotB;
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t i = 0; i < s.n; ++i) {
          wantB.push_back(floatToBf16(want[size_t(r * os + i)]));
          gotB.push_back(got[size_t(r * os + i)]);
        }
      expectBf16Close(wantB, gotB, fmt::format("rmsNormF32 rows={} n={}", s.rows, s.n));
      // Row padding is left alone.
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t i = s.n; i < os; ++i) ASSERT_EQ(got[size_t(r * os + i)], 0xFFFF) << "padding written";
      // f32 output (bf16 values)
      auto dOutF = poisoned(size_t(s.rows * os * 4));
      ASSERT_TRUE(mk.rmsNormF32ToF32(dx.addr(), xs, dw.addr(), s.rows, s.n, s.eps, dOutF.addr(), os, nullptr).ok());
      sync(env);
      auto gotF = download<float>(dOutF, size_t(s.rows * os));
      std::vector<uint16_t> gotFB;
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t i = 0; i < s.n; ++i) {
          const float v = gotF[size_t(r * os + i)];
          ASSERT_EQ(roundBf16(v), v) << "f32 output is not a bf16 value";
          gotFB.push_back(floatToBf16(v));
        }
      expectBf16Close(wantB, gotFB, fmt::format("rmsNormF32ToF32 rows={} n={}", s.rows, s.n));
    }
  });
}

namespace {

// RopeTable::rotate of dims [width - R, width) of each row, then one bf16 rounding of the row
// (CpuLayersAttention / CpuLayersCompressor / CpuLayersIndexer).
std::vector<uint16_t> ropeReference(const std::vector<float>& x, int64_t xs, int64_t rows, int64_t width,
                                    const RopeTable& rope, const std::function<int64_t(int64_t)>& posOf,
                                    bool inverse) {
  std::vector<uint16_t> out(size_t(rows * width));
  std::vector<float> v(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(&x[size_t(r * xs)], width, v.data());
    rope.rotate(v.data() + width - rope.ropeDim(), posOf(r), inverse);
    for (int64_t i = 0; i < width; ++i) out[size_t(r * width + i)] = floatToBf16(v[size_t(i)]);
  }
  return out;
}

}  // namespace

TEST(ModelKernelsGpu, Rope) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("Rope");
  auto yarn = RopeTable::yarn(64, 160000, 16, 32, 1, 65536);
  auto plain = RopeTable::plain(64, 10000);
  auto small = RopeTable::plain(16, 10000);
  ASSERT_TRUE(yarn.ok() && plain.ok() && small.ok());
  struct Case { const RopeTable* rope; int64_t rows, width, xPad; ModelKernels::RopePositions pos; bool explicitPos; };
  const Case cases[] = {
      {&*yarn, 6 * 8, 512, 0, {8, 1000, 1, 0}, false},     // per head, prefill positions
      {&*plain, 1, 512, 0, {1, 777777, 1, 0}, false},      // one row, a large position
      {&*yarn, 10, 128, 3, {1, 40, 2, 0}, false},          // compressed entries j * ratio
      {&*plain, 12, 71, 1, {3, 0, 1, 0}, true},            // odd NoPE part, explicit positions
      {&*small, 5, 16, 0, {1, 0, 1, 0}, true},             // RoPE over the whole row
  };
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      const int64_t R = c.rope->ropeDim(), xs = c.width + c.xPad;
      std::vector<int64_t> positions;
      ModelKernels::RopePositions pos = c.pos;
      if (c.explicitPos) {
        std::uniform_int_distribution<int64_t> pd(0, 1000000);
        positions.resize(size_t(c.rows / pos.rowsPerPos));
        for (auto& p : positions) p = pd(rng);
        positions[0] = 0;
      }
      auto posOf = [&](int64_t r) {
        const int64_t k = r / pos.rowsPerPos;
        return c.explicitPos ? positions[size_t(k)] : pos.posBase + k * pos.posStride;
      };
      auto dFreq = upload(c.rope->invFreq());
      auto dPos = upload(positions);
      if (c.explicitPos) pos.positions = dPos.addr();
      const std::string what = fmt::format("rows={} width={} R={}", c.rows, c.width, R);

      // f32 -> bf16 forward.
      const auto x = randomF32(rng, size_t(c.rows * xs), 0.01f, 8.f);
      auto dx = upload(x);
      auto dOut = poisoned(size_t(c.rows * c.width * 2));
      ASSERT_TRUE(mk.ropeF32ToBf16(dx.addr(), xs, c.rows, c.width, R, dFreq.addr(), pos, dOut.addr(), c.width, nullptr).ok());
      sync(env);
      expectSame(ropeReference(x, xs, c.rows, c.width, *c.rope, posOf, false),
                 download<uint16_t>(dOut, size_t(c.rows * c.width)), "ropeF32ToBf16 " + what);

      // bf16 in place, forward and inverse; the row padding must stay as it was.
      for (bool inverse : {true, false}) {
        const auto xb = toBf16(randomF32(rng, size_t(c.rows * xs), 0.01f, 8.f));
        auto dxb = upload(xb);
        ASSERT_TRUE(mk.ropeBf16InPlace(dxb.addr(), xs, c.rows, c.width, R, dFreq.addr(), pos, inverse, nullptr).ok());
        sync(env);
        const auto got = download<uint16_t>(dxb, xb.size());
        const auto want = ropeReference(fromBf16(xb), xs, c.rows, c.width, *c.rope, posOf, inverse);
        std::vector<uint16_t> gotRows;
        for (int64_t r = 0; r < c.rows; ++r) {
          for (int64_t i = 0; i < c.width; ++i) gotRows.push_back(got[size_t(r * xs + i)]);
          for (int64_t i = c.width; i < xs; ++i) ASSERT_EQ(got[size_t(r * xs + i)], xb[size_t(r * xs + i)]);
        }
        expectSame(want, gotRows, fmt::format("ropeBf16InPlace inverse={} {}", inverse, what));
      }
    }
  });
}

TEST(ModelKernelsGpu, RoundToBf16) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("RoundToBf16");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t n : {1, 1000003}) {
      auto x = randomF32(rng, size_t(n), 1e-6f, 1e6f);
      if (n > 10) {  // exact ties and the largest finite values
        x[1] = bitsToFloat(0x3F808000u);  // halfway, even below
        x[2] = bitsToFloat(0x3F818000u);  // halfway, odd below
        x[3] = bitsToFloat(0x7F7FFFFFu);  // rounds to inf
        x[4] = -bitsToFloat(0x00000001u);
      }
      std::vector<uint16_t> want(static_cast<size_t>(n));
      std::vector<float> wantF(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        want[size_t(i)] = floatToBf16(x[size_t(i)]);
        wantF[size_t(i)] = roundBf16(x[size_t(i)]);
      }
      auto dx = upload(x);
      auto dOut = poisoned(size_t(n * 2));
      ASSERT_TRUE(mk.roundToBf16(dx.addr(), dOut.addr(), n, nullptr).ok());
      ASSERT_TRUE(mk.roundF32InPlace(dx.addr(), n, nullptr).ok());
      sync(env);
      expectSame(want, download<uint16_t>(dOut, size_t(n)), fmt::format("roundToBf16 n={}", n));
      expectSame(wantF, download<float>(dx, size_t(n)), fmt::format("roundF32InPlace n={}", n));
    }
  });
}

namespace {

// The router of CpuLayersMoe.cpp (fp32 path).
void routerReference(const std::vector<float>& logits, const std::vector<float>& bias, int64_t T, int64_t E, int64_t k,
                     bool norm, double scaling, std::vector<int32_t>& ids, std::vector<float>& wts) {
  ids.assign(size_t(T * k), -1);
  wts.assign(size_t(T * k), 0.f);
  std::vector<float> s(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      s[size_t(e)] = std::sqrt(softplus(logits[size_t(t * E + e)]));
      biased[size_t(e)] = s[size_t(e)] + bias[size_t(e)];
    }
    const auto chosen = topkAscending(biased.data(), E, k);
    float sumF = 0;
    for (int32_t e : chosen) sumF += s[size_t(e)];
    const float denom = norm ? sumF + 1e-20f : 1.f;
    for (size_t r = 0; r < chosen.size(); ++r) {
      ids[size_t(t * k) + r] = chosen[r];
      wts[size_t(t * k) + r] = s[size_t(chosen[r])] / denom * float(scaling);
    }
  }
}

}  // namespace

TEST(ModelKernelsGpu, RouterTopk) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("RouterTopk");
  struct Case { int64_t T, E, k; bool norm; double scaling; bool ties; };
  const Case cases[] = {{33, 384, 6, true, 1.5, false}, {1, 384, 6, true, 1.5, true}, {17, 7, 7, true, 1.0, false},
                        {9, 64, 1, false, 2.5, true},   {5, 13, 6, false, 1.5, false}};
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      auto logits = randomF32(rng, size_t(c.T * c.E), 0.01f, 6.f);
      auto bias = randomF32(rng, size_t(c.E), 0.001f, 0.3f);
      if (c.ties) {
        // Experts 2/5 and 9/4 (mod E) share logits and bias in every token: the lower id wins.
        for (int64_t t = 0; t < c.T; ++t) {
          logits[size_t(t * c.E + 5 % c.E)] = logits[size_t(t * c.E + 2 % c.E)] = 9.f;
          logits[size_t(t * c.E + 9 % c.E)] = logits[size_t(t * c.E + 4 % c.E)] = 8.f;
        }
        bias[size_t(5 % c.E)] = bias[size_t(2 % c.E)];
        bias[size_t(9 % c.E)] = bias[size_t(4 % c.E)];
      }
      std::vector<int32_t> wantIds;
      std::vector<float> wantW;
      routerReference(logits, bias, c.T, c.E, c.k, c.norm, c.scaling, wantIds, wantW);
      auto dl = upload(logits), db = upload(bias);
      auto dIds = poisoned(size_t(c.T * c.k * 4), 0x5A), dW = poisoned(size_t(c.T * c.k * 4));
      ASSERT_TRUE(mk.routerTopk(dl.addr(), db.addr(), c.T, c.E, c.k, c.norm, c.scaling, dIds.addr(), dW.addr(), nullptr).ok());
      sync(env);
      const std::string what = fmt::format("router T={} E={} k={} norm={}", c.T, c.E, c.k, c.norm);
      expectSame(wantIds, download<int32_t>(dIds, wantIds.size()), what + " ids");
      // Weights: s = sqrt(softplus) may differ by an ulp (fp64-rounded exp/log1p vs glibc's), the
      // rest is the reference's own order: relative 4e-7 (about 3 fp32 ulp).
      const auto gotW = download<float>(dW, wantW.size());
      size_t differ = 0;
      for (size_t i = 0; i < wantW.size(); ++i) {
        differ += bitsOf(gotW[i]) != bitsOf(wantW[i]);
        EXPECT_NEAR(gotW[i], wantW[i], 4e-7 * std::fabs(wantW[i])) << what << " weight " << i;
      }
      fmt::print("  {} weights: {} of {} differ\n", what, differ, wantW.size());
    }
  });
}

TEST(ModelKernelsGpu, GatherScatterRows) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("GatherScatterRows");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t C : {5120, 7, 12}) {
      const int64_t V = 50, n = 23;
      std::vector<int32_t> idx(static_cast<size_t>(n));
      std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
      for (auto& i : idx) i = pick(rng);
      idx[3] = -1;
      // Gather bf16.
      const auto src = toBf16(randomF32(rng, size_t(V * C)));
      auto dSrc = upload(src), dIdx = upload(idx);
      auto dOut = poisoned(size_t(n * C * 2));
      ASSERT_TRUE(mk.gatherRowsBf16(dSrc.addr(), dIdx.addr(), n, C, dOut.addr(), nullptr).ok());
      sync(env);
      std::vector<uint16_t> want(size_t(n * C));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t d = 0; d < C; ++d)
          want[size_t(r * C + d)] = idx[size_t(r)] < 0 ? 0 : src[size_t(idx[size_t(r)] * C + d)];
      expectSame(want, download<uint16_t>(dOut, want.size()), fmt::format("gatherRowsBf16 C={}", C));

      // Scatter f32 to distinct rows of a larger destination; rows not targeted keep their values.
      std::vector<int32_t> perm(static_cast<size_t>(V));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<int32_t> tgt(perm.begin(), perm.begin() + n);
      tgt[5] = -1;
      const auto rows = randomF32(rng, size_t(n * C));
      const auto before = randomF32(rng, size_t(V * C));
      auto dRows = upload(rows), dTgt = upload(tgt), dDst = upload(before);
      ASSERT_TRUE(mk.scatterRowsF32(dRows.addr(), dTgt.addr(), n, C, dDst.addr(), nullptr).ok());
      sync(env);
      std::vector<float> wantDst = before;
      for (int64_t r = 0; r < n; ++r)
        if (tgt[size_t(r)] >= 0) std::copy_n(&rows[size_t(r * C)], C, &wantDst[size_t(tgt[size_t(r)] * C)]);
      expectSame(wantDst, download<float>(dDst, wantDst.size()), fmt::format("scatterRowsF32 C={}", C));
    }
  });
}

TEST(ModelKernelsGpu, MoeSum) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("MoeSum");
  struct Case { int64_t T, k, C; bool shared; };
  const Case cases[] = {{9, 6, 5120, true}, {1, 6, 5120, false}, {4, 1, 7, true}, {3, 6, 33, false}};
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      const auto shared = randomF32(rng, size_t(c.T * c.C), 0.01f, 3.f);
      const auto routed = randomF32(rng, size_t(c.T * c.k * c.C), 0.01f, 3.f);
      std::vector<uint16_t> want(size_t(c.T * c.C));
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t d = 0; d < c.C; ++d) {  // CpuLayersMoe: y = shared (or 0), += routed in rank order
          float acc = c.shared ? shared[size_t(t * c.C + d)] : 0.f;
          for (int64_t r = 0; r < c.k; ++r) acc += routed[size_t((t * c.k + r) * c.C + d)];
          want[size_t(t * c.C + d)] = floatToBf16(acc);
        }
      auto dS = upload(shared), dR = upload(routed);
      auto dOut = poisoned(want.size() * 2);
      ASSERT_TRUE(mk.moeSum(c.shared ? dS.addr() : 0, dR.addr(), c.T, c.k, c.C, dOut.addr(), nullptr).ok());
      sync(env);
      expectSame(want, download<uint16_t>(dOut, want.size()),
                 fmt::format("moeSum T={} k={} C={} shared={}", c.T, c.k, c.C, c.shared));
      // The unrounded f32 sum (a tensor rank's partial output), in the same order.
      std::vector<float> wantF(size_t(c.T * c.C));
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t d = 0; d < c.C; ++d) {
          float acc = c.shared ? shared[size_t(t * c.C + d)] : 0.f;
          for (int64_t r = 0; r < c.k; ++r) acc += routed[size_t((t * c.k + r) * c.C + d)];
          wantF[size_t(t * c.C + d)] = acc;
        }
      auto dOutF = poisoned(wantF.size() * 4);
      ASSERT_TRUE(
          mk.moeSum(c.shared ? dS.addr() : 0, dR.addr(), c.T, c.k, c.C, dOutF.addr(), nullptr, /*f32Out=*/true).ok());
      sync(env);
      expectSame(wantF, download<float>(dOutF, wantF.size()),
                 fmt::format("moeSum f32 T={} k={} C={} shared={}", c.T, c.k, c.C, c.shared));
    }
  });
}

TEST(ModelKernelsGpu, EngramGate) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("EngramGate");
  struct Case { int64_t T, C; double eps; };
  const Case cases[] = {{5, 5120, 1e-20}, {1, 5120, 1e-20}, {3, 33, 1e-6}, {2, 256, 1e-20}};
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      const int64_t C = c.C;
      const auto X = randomBf16Values(rng, size_t(c.T * 4 * C), 0.01f, 2.f);
      const auto kv = randomBf16Values(rng, size_t(c.T * 5 * C), 0.01f, 2.f);
      const auto qw = randomBf16Values(rng, size_t(4 * C), 0.2f, 1.5f);
      const auto kw = randomBf16Values(rng, size_t(4 * C), 0.2f, 1.5f);
      // CpuLayersEngram.cpp, fp32 path.
      std::vector<float> want = X;
      const double invSqrtC = 1.0 / std::sqrt(double(C));
      std::vector<float> prod(static_cast<size_t>(C));
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t s = 0; s < 4; ++s) {
          float* x = &want[size_t((t * 4 + s) * C)];
          const float* key = &kv[size_t(t * 5 * C + s * C)];
          const float* value = &kv[size_t(t * 5 * C + 4 * C)];
          for (int64_t d = 0; d < C; ++d) prod[size_t(d)] = x[d] * qw[size_t(s * C + d)] * kw[size_t(s * C + d)];
          const float rx = 1.0f / std::sqrt(dotF32(x, x, C) / float(C) + float(c.eps));
          const float rk = 1.0f / std::sqrt(dotF32(key, key, C) / float(C) + float(c.eps));
          const float dotv = dotF32(prod.data(), key, C) * rx * rk * float(invSqrtC);
          const float root = (dotv < 0 ? -1.f : 1.f) * std::sqrt(std::max(std::fabs(dotv), 1e-6f));
          const float g = sigmoid(root);
          for (int64_t d = 0; d < C; ++d) x[d] = roundBf16(x[d] + g * value[d]);
        }
      auto dX = upload(toBf16(X)), dKv = upload(kv), dQ = upload(toBf16(qw)), dK = upload(toBf16(kw));
      ASSERT_TRUE(mk.engramGate(dX.addr(), dKv.addr(), dQ.addr(), dK.addr(), c.T, C, c.eps, nullptr).ok());
      sync(env);
      // The three row sums are reduced in another order: g may move by a few fp32 ulp.
      expectBf16Close(toBf16(want), download<uint16_t>(dX, want.size()), fmt::format("engramGate T={} C={}", c.T, C), 1, 0.01, size_t(C));
    }
  });
}

TEST(ModelKernelsGpu, PairPool) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("PairPool");
  struct Case { int64_t r0, n, D; };
  const Case cases[] = {{-1, 6, 512}, {0, 1, 512}, {3, 4, 5}, {-1, 1, 7}};
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      const int64_t rows = c.r0 + 2 * c.n + 2, D = c.D;
      const auto kv = randomF32(rng, size_t(rows * D), 0.01f, 3.f);
      const auto gate = randomF32(rng, size_t(rows * D), 0.01f, 6.f);
      const auto tailKv = randomF32(rng, size_t(D), 0.01f, 3.f);
      const auto tailGate = randomF32(rng, size_t(D), 0.01f, 6.f);
      std::vector<float> want(size_t(c.n * D));
      for (int64_t i = 0; i < c.n; ++i) {  // CpuLayersCompressor.cpp, ratio 2
        const int64_t first = c.r0 + 2 * i, second = first + 1;
        for (int64_t ch = 0; ch < D; ++ch) {
          const float s0 = first < 0 ? tailGate[size_t(ch)] : gate[size_t(first * D + ch)];
          const float k0 = first < 0 ? tailKv[size_t(ch)] : kv[size_t(first * D + ch)];
          const float s1 = gate[size_t(second * D + ch)], k1 = kv[size_t(second * D + ch)];
          const float mx = std::max(s0, s1);
          const float e0 = std::exp(s0 - mx), e1 = std::exp(s1 - mx);
          const float sum = e0 + e1;
          want[size_t(i * D + ch)] = roundBf16(e0 / sum * k0 + e1 / sum * k1);
        }
      }
      auto dKv = upload(kv), dG = upload(gate), dTk = upload(tailKv), dTg = upload(tailGate);
      auto dOut = poisoned(want.size() * 4);
      ASSERT_TRUE(mk.pairPool(dKv.addr(), dG.addr(), dTk.addr(), dTg.addr(), c.r0, c.n, D, dOut.addr(), nullptr).ok());
      sync(env);
      const auto got = download<float>(dOut, want.size());
      for (float v : got) ASSERT_EQ(roundBf16(v), v) << "pairPool output is not a bf16 value";
      expectBf16NearlySame(toBf16(want), toBf16(got), fmt::format("pairPool r0={} n={} D={}", c.r0, c.n, D));
    }
  });
}

TEST(ModelKernelsGpu, IndexQueryQuant) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("IndexQueryQuant");
  struct Case { int64_t rows, Di; };
  const Case cases[] = {{32 * 5, 128}, {1, 128}, {7, 33}};
  const double headScale = 1.0 / std::sqrt(128.0) / std::sqrt(32.0);
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      // Rows of very different magnitudes (scales from 2^-20 to 2^10, and rows under the 1e-4 floor).
      std::vector<float> q(size_t(c.rows * c.Di));
      std::uniform_int_distribution<int> ex(-20, 10);
      for (int64_t r = 0; r < c.rows; ++r) {
        const float m = r % 5 == 4 ? 1e-6f : std::ldexp(1.f, ex(rng));
        const auto row = randomF32(rng, size_t(c.Di), 0.001f, 1.f);
        for (int64_t i = 0; i < c.Di; ++i) q[size_t(r * c.Di + i)] = roundBf16(row[size_t(i)] * m);
      }
      const auto w = randomF32(rng, size_t(c.rows), 0.01f, 2.f);
      std::vector<float> wantQ(q.size()), wantW(w.size());
      for (int64_t r = 0; r < c.rows; ++r) {
        const float scale = quantizeIndexQuery(&q[size_t(r * c.Di)], c.Di, &wantQ[size_t(r * c.Di)]);
        wantW[size_t(r)] = w[size_t(r)] * float(headScale) * scale;  // CpuLayersIndexer.cpp
      }
      auto dq = upload(toBf16(q)), dw = upload(w);
      ASSERT_TRUE(mk.indexQueryQuant(dq.addr(), c.rows, c.Di, dw.addr(), headScale, nullptr).ok());
      sync(env);
      const std::string what = fmt::format("indexQueryQuant rows={} Di={}", c.rows, c.Di);
      expectSame(toBf16(wantQ), download<uint16_t>(dq, q.size()), what + " q");
      expectSame(wantW, download<float>(dw, w.size()), what + " weights");
    }
  });
}

TEST(ModelKernelsGpu, IndexKeyInsert) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("IndexKeyInsert");
  struct Case { int64_t n, Di, bs, pages; };
  const Case cases[] = {{70, 128, 64, 3}, {1, 128, 64, 1}, {9, 36, 3, 5}};
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      const int64_t pageBytes = c.bs * (c.Di + 4), slotsTotal = c.bs * c.pages;
      ASSERT_LE(c.n, slotsTotal);
      std::vector<float> keys(size_t(c.n * c.Di));
      std::uniform_int_distribution<int> ex(-12, 6);
      for (int64_t r = 0; r < c.n; ++r) {
        const float m = r % 7 == 6 ? 1e-6f : std::ldexp(1.f, ex(rng));
        const auto row = randomF32(rng, size_t(c.Di), 0.001f, 1.f);
        for (int64_t i = 0; i < c.Di; ++i) keys[size_t(r * c.Di + i)] = roundBf16(row[size_t(i)] * m);
      }
      std::vector<int64_t> perm(static_cast<size_t>(slotsTotal));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<int64_t> slots(perm.begin(), perm.begin() + c.n);
      if (c.n > 2) slots[1] = -1;
      // Expected bytes: the poisoned cache with each key's codes and scale where IndexKeyCache
      // puts them (one single-key cache per key gives the row's bytes at offset 0).
      std::vector<uint8_t> want(size_t(pageBytes * c.pages), 0xA5);
      for (int64_t r = 0; r < c.n; ++r) {
        if (slots[size_t(r)] < 0) continue;
        IndexKeyCache one(c.Di, c.bs);
        one.append(&keys[size_t(r * c.Di)]);
        const auto& src = one.page(0);
        const int64_t page = slots[size_t(r)] / c.bs, off = slots[size_t(r)] % c.bs;
        uint8_t* base = &want[size_t(page * pageBytes)];
        std::copy_n(src.begin(), c.Di, base + off * c.Di);
        std::copy_n(src.begin() + c.bs * c.Di, 4, base + c.bs * c.Di + off * 4);
      }
      auto dKeys = upload(toBf16(keys)), dSlots = upload(slots);
      auto dCache = poisoned(want.size(), 0xA5);
      ASSERT_TRUE(mk.indexKeyInsert(dKeys.addr(), dSlots.addr(), c.n, c.Di, dCache.addr(), c.bs, nullptr).ok());
      sync(env);
      expectSame(want, download<uint8_t>(dCache, want.size()),
                 fmt::format("indexKeyInsert n={} Di={} bs={}", c.n, c.Di, c.bs));
    }
  });
}

TEST(ModelKernelsGpu, CandidateBlockScores) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("CandidateBlockScores");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t bs : {8, 5, 1}) {
      const int64_t N = 64, stride = 67;
      const std::vector<int32_t> visible = {0, 1, 7, 8, 9, 61, 64, -3};
      const int64_t T = int64_t(visible.size()), width = (N + bs - 1) / bs + 2;
      auto scores = randomF32(rng, size_t(T * stride), 0.01f, 5.f);
      for (size_t i = 0; i < scores.size(); i += 11) scores[i] = -INFINITY;
      // A whole block of -inf in row 6 (not the pinned one).
      for (int64_t j = bs; j < 2 * bs; ++j) scores[size_t(6 * stride + j)] = -INFINITY;
      std::vector<float> want(size_t(T * width));
      std::vector<int32_t> wantLens(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) {  // CpuLayersIndexer candidateBlocksOf, padded to width with -inf
        const int64_t v = visible[size_t(t)];
        const int64_t nb = v > 0 ? (v + bs - 1) / bs : 0;
        wantLens[size_t(t)] = int32_t(nb);
        std::vector<float> blockScore(size_t(width), -INFINITY);
        for (int64_t j = 0; j < v; ++j)
          blockScore[size_t(j / bs)] = std::max(blockScore[size_t(j / bs)], scores[size_t(t * stride + j)]);
        if (v > 0) blockScore[size_t((v - 1) / bs)] = INFINITY;
        std::copy(blockScore.begin(), blockScore.end(), &want[size_t(t * width)]);
      }
      auto dS = upload(scores), dV = upload(visible);
      auto dOut = poisoned(want.size() * 4), dLens = poisoned(size_t(T * 4), 0x5A);
      ASSERT_TRUE(mk.candidateBlockScores(dS.addr(), stride, dV.addr(), T, bs, dOut.addr(), width, dLens.addr(), nullptr).ok());
      sync(env);
      expectSame(want, download<float>(dOut, want.size()), fmt::format("candidateBlockScores bs={}", bs));
      expectSame(wantLens, download<int32_t>(dLens, size_t(T)), fmt::format("candidateBlockScores lens bs={}", bs));
    }
  });
}

TEST(ModelKernelsGpu, MaskToBlocks) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("MaskToBlocks");
  struct Case { int64_t bs, stride, KB; std::vector<int32_t> visible; };
  const Case cases[] = {
      {8, 67, 4, {0, 1, 9, 40, 64, 67}},
      {3, 20, 3, {20, 2, 19}},
      {1, 70003, 50, {70003, 40000}},  // more blocks than one shared bitmap pass holds
  };
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (const Case& c : cases) {
      const int64_t T = int64_t(c.visible.size());
      const auto scores = randomF32(rng, size_t(T * c.stride), 0.01f, 5.f);
      std::vector<int32_t> kept(size_t(T * c.KB), -1);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t nb = (c.visible[size_t(t)] + c.bs - 1) / c.bs;
        std::uniform_int_distribution<int32_t> pick(0, int32_t(std::max<int64_t>(nb + 2, 1)));
        for (int64_t i = 0; i + 1 < c.KB; ++i) kept[size_t(t * c.KB + i)] = pick(rng);  // last one stays -1
        if (c.bs == 1 && nb > 40000) kept[size_t(t * c.KB)] = int32_t(nb - 1);  // a block in the last pass
      }
      std::vector<float> want = scores;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t v = std::min<int64_t>(c.visible[size_t(t)], c.stride);
        for (int64_t j = 0; j < v; ++j) {
          const int64_t b = j / c.bs;
          bool in = false;
          for (int64_t i = 0; i < c.KB; ++i) in |= kept[size_t(t * c.KB + i)] == b;
          if (!in) want[size_t(t * c.stride + j)] = -INFINITY;
        }
      }
      auto dS = upload(scores), dV = upload(c.visible), dK = upload(kept);
      ASSERT_TRUE(mk.maskToBlocks(dS.addr(), c.stride, dV.addr(), T, dK.addr(), c.KB, c.bs, nullptr).ok());
      sync(env);
      expectSame(want, download<float>(dS, want.size()), fmt::format("maskToBlocks bs={} stride={}", c.bs, c.stride));
    }
  });
}

TEST(ModelKernelsGpu, DropNegInf) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("DropNegInf");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t K : {512, 37, 1}) {
      const int64_t T = 5, N = 900;
      auto scores = randomF32(rng, size_t(T * N), 0.01f, 5.f);
      std::bernoulli_distribution masked(0.3);
      for (auto& s : scores)
        if (masked(rng)) s = -INFINITY;
      std::vector<int32_t> sel(size_t(T * K), -1);
      for (int64_t t = 0; t < T; ++t) {
        // Row t holds K - 3t ascending entries (row 4 of K = 1 holds none), -1 padded.
        const int64_t used = std::max<int64_t>(K - 3 * t, 0);
        std::vector<int32_t> all(static_cast<size_t>(N));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        std::sort(all.begin(), all.begin() + used);
        std::copy_n(all.begin(), used, &sel[size_t(t * K)]);
      }
      if (K == 37)  // a row whose entries are all -inf
        for (int64_t i = 0; i < K; ++i)
          if (sel[size_t(K + i)] >= 0) scores[size_t(1 * N + sel[size_t(K + i)])] = -INFINITY;
      std::vector<int32_t> want(sel.size(), -1);
      for (int64_t t = 0; t < T; ++t) {
        int64_t o = 0;
        for (int64_t i = 0; i < K; ++i) {
          const int32_t e = sel[size_t(t * K + i)];
          if (e >= 0 && scores[size_t(t * N + e)] != -INFINITY) want[size_t(t * K + o++)] = e;
        }
      }
      auto dSel = upload(sel), dS = upload(scores);
      ASSERT_TRUE(mk.dropNegInf(dSel.addr(), T, K, dS.addr(), N, nullptr).ok());
      sync(env);
      expectSame(want, download<int32_t>(dSel, want.size()), fmt::format("dropNegInf K={}", K));
    }
  });
}

TEST(ModelKernelsGpu, Argmax) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("Argmax");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t V : {129280, 1, 33}) {
      const int64_t T = 4;
      auto logits = randomF32(rng, size_t(T * V), 0.01f, 20.f);
      if (V > 2) {
        std::uniform_int_distribution<int64_t> pick(0, V - 1);
        // Row 1: the maximum twice (ties to the lower index).
        const int64_t a = pick(rng), b = pick(rng);
        logits[size_t(V + a)] = logits[size_t(V + b)] = 1000.f;
        // Row 2: NaNs around a maximum; row 3: NaN at index 0 (argmaxToken answers 0).
        logits[size_t(2 * V + 1)] = NAN;
        logits[size_t(2 * V + V - 1)] = 999.f;
        logits[size_t(3 * V)] = NAN;
      }
      std::vector<int32_t> want(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) want[size_t(t)] = argmaxToken(&logits[size_t(t * V)], V);
      const std::vector<int32_t> want0 = want;
      auto dL = upload(logits);
      // Row 0 gets an infinity where V allows (finite flags: 1 0 0 0; all 1 for V <= 2).
      if (V > 2) logits[size_t(V / 2)] = -INFINITY;
      std::vector<int32_t> wantFinite(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) {
        want[size_t(t)] = argmaxToken(&logits[size_t(t * V)], V);
        wantFinite[size_t(t)] = std::all_of(&logits[size_t(t * V)], &logits[size_t(t * V)] + V,
                                            [](float x) { return std::isfinite(x); });
      }
      auto dL2 = upload(logits);
      auto dOut = poisoned(size_t(T * 4), 0x5A), dOut2 = poisoned(size_t(T * 4), 0x5A),
           dFinite = poisoned(size_t(T * 4), 0x5A);
      ASSERT_TRUE(mk.argmax(dL.addr(), T, V, dOut.addr(), nullptr).ok());
      ASSERT_TRUE(mk.argmax(dL2.addr(), T, V, dOut2.addr(), nullptr, dFinite.addr()).ok());
      sync(env);
      expectSame(want0, download<int32_t>(dOut, size_t(T)), fmt::format("argmax V={}", V));
      expectSame(want, download<int32_t>(dOut2, size_t(T)), fmt::format("argmax with finite flags V={}", V));
      expectSame(wantFinite, download<int32_t>(dFinite, size_t(T)), fmt::format("argmax finite flags V={}", V));
    }
  });
}

// DSpark's target feature (CpuForwardPass::captureTap): bit-exact, into a column slice of a wider
// row (the taps sit side by side), the other columns untouched.
TEST(ModelKernelsGpu, StreamMean) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("StreamMean");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t C : {5120, 7}) {
      for (int64_t T : {1, 19}) {
        const int64_t taps = 3, at = 1;
        const auto X = randomBf16Values(rng, size_t(T * 4 * C), 0.01f, 30.f);
        auto dX = upload(toBf16(X));
        auto dOut = poisoned(size_t(T * taps * C * 2), 0x5A);
        ASSERT_TRUE(mk.streamMean(dX.addr(), T, C, dOut.addr() + uint64_t(at * C * 2), taps * C, nullptr).ok());
        sync(env);
        std::vector<uint16_t> want(size_t(T * taps * C), 0x5A5A);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < C; ++d) {
            const float* x = &X[size_t(t * 4 * C + d)];
            want[size_t(t * taps * C + at * C + d)] = floatToBf16((((x[0] + x[C]) + x[2 * C]) + x[3 * C]) * 0.25f);
          }
        expectSame(want, download<uint16_t>(dOut, want.size()), fmt::format("streamMean T={} C={}", T, C));
      }
    }
  });
}

TEST(ModelKernelsGpu, BadSizesAreErrorsNamingTheKernel) {
  DI_GPU_PRELUDE();
  const ModelKernels& mk = *env.kernels.front().second;
  auto dBuf = poisoned(1 << 16);
  const uint64_t a = dBuf.addr();
  auto expectError = [](const Status& s, const std::string& kernel, const std::string& value) {
    ASSERT_FALSE(s.ok()) << kernel;
    EXPECT_NE(s.error().message.find(kernel), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find(value), std::string::npos) << s.error().message;
  };
  expectError(mk.rmsNormF32(a, 8, a, 2, 16, 1e-6, a, 16, nullptr), "rmsNormF32", "xStride = 8");
  expectError(mk.ropeF32ToBf16(a, 64, 2, 64, 63, a, {}, a, 64, nullptr), "ropeF32ToBf16", "ropeDim = 63");
  expectError(mk.ropeBf16InPlace(a, 64, 2, 64, 128, a, {}, false, nullptr), "ropeBf16InPlace", "ropeDim = 128");
  expectError(mk.routerTopk(a, a, 1, 8, 9, true, 1.5, a, a, nullptr), "routerTopk", "k = 9");
  expectError(mk.pairPool(a, a, 0, 0, -1, 1, 8, a, nullptr), "pairPool", "tailKv");
  expectError(mk.indexKeyInsert(a, a, 1, 30, a, 64, nullptr), "indexKeyInsert", "Di = 30");
  expectError(mk.argmax(a, 1, 0, a, nullptr), "argmax", "V = 0");
  expectError(mk.streamMean(a, 2, 16, a, 8, nullptr), "streamMean", "outStride = 8");
  expectError(mk.embedStreams(0, a, a, 3, 8, nullptr), "embedStreams", "ids");
  expectError(mk.candidateBlockScores(a, 8, a, 1, 0, a, 1, a, nullptr), "candidateBlockScores", "blockSize = 0");
  // Empty work is not an error and launches nothing.
  EXPECT_TRUE(mk.roundToBf16(0, 0, 0, nullptr).ok());
  EXPECT_TRUE(mk.argmax(0, 0, 10, 0, nullptr).ok());
}

// Tensor parallelism: the logical-rank collective's elementwise sum (f32, and bf16 summed in f32
// and rounded once) and the expert-parallel id map, against the host, outputs poisoned, sizes
// from empty to odd, in place and out of place.
TEST(ModelKernelsGpu, AddElems) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("AddElems");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(4096 * 4 + 3), int64_t(1) << 20}) {
      // Mixed magnitudes and signs: cancellations and roundings at every exponent.
      const auto a = randomF32(rng, size_t(n), 1e-3f, 1e4f), b = randomF32(rng, size_t(n), 1e-3f, 1e4f);
      std::vector<float> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) want[size_t(i)] = a[size_t(i)] + b[size_t(i)];
      auto dA = upload(a), dB = upload(b);
      auto dOut = poisoned(size_t(n) * 4);
      ASSERT_TRUE(mk.addElems(dA.addr(), dB.addr(), dOut.addr(), n, false, nullptr).ok());
      ASSERT_TRUE(mk.addElems(dA.addr(), dB.addr(), dA.addr(), n, false, nullptr).ok());  // in place
      sync(env);
      expectSame(want, download<float>(dOut, want.size()), fmt::format("addElems f32 n={}", n));
      expectSame(want, download<float>(dA, want.size()), fmt::format("addElems f32 in place n={}", n));
      const auto ab = toBf16(randomF32(rng, size_t(n), 1e-3f, 1e4f)), bb = toBf16(randomF32(rng, size_t(n), 1e-3f, 1e4f));
      std::vector<uint16_t> wantB(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        wantB[size_t(i)] = floatToBf16(bf16ToFloat(ab[size_t(i)]) + bf16ToFloat(bb[size_t(i)]));
      auto dAb = upload(ab), dBb = upload(bb);
      auto dOutB = poisoned(size_t(n) * 2);
      ASSERT_TRUE(mk.addElems(dAb.addr(), dBb.addr(), dOutB.addr(), n, true, nullptr).ok());
      sync(env);
      expectSame(wantB, download<uint16_t>(dOutB, wantB.size()), fmt::format("addElems bf16 n={}", n));
    }
    EXPECT_TRUE(mk.addElems(0, 0, 0, 0, false, nullptr).ok());  // empty: nothing launched
    auto one = poisoned(8);
    Status bad = mk.addElems(one.addr() + 2, one.addr(), one.addr(), 1, false, nullptr);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("not 4-byte aligned"), std::string::npos) << bad.error().message;
  });
}

TEST(ModelKernelsGpu, LocalExpertIds) {
  DI_GPU_PRELUDE();
  auto rng = rngFor("LocalExpertIds");
  forEachTarget(env, [&](const ModelKernels& mk, const std::string&) {
    struct Case { int64_t n, E, begin, end; };
    for (const Case& c : {Case{1, 8, 0, 4}, Case{37, 8, 4, 8}, Case{6 * 4096 + 5, 384, 96, 192}, Case{9, 16, 3, 3}}) {
      std::uniform_int_distribution<int32_t> pick(-1, int32_t(c.E - 1));  // -1: a router pad
      std::vector<int32_t> ids(size_t(c.n));
      for (auto& i : ids) i = pick(rng);
      ids[0] = int32_t(c.begin);
      std::vector<int32_t> want(ids.size());
      for (size_t i = 0; i < ids.size(); ++i)
        want[i] = ids[i] >= c.begin && ids[i] < c.end ? int32_t(ids[i] - c.begin) : -1;
      auto d = upload(ids);
      ASSERT_TRUE(mk.localExpertIds(d.addr(), c.n, c.begin, c.end, nullptr).ok());
      sync(env);
      expectSame(want, download<int32_t>(d, want.size()),
                 fmt::format("localExpertIds n={} [{}, {})", c.n, c.begin, c.end));
    }
    Status bad = mk.localExpertIds(0, 4, 5, 3, nullptr);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("end = 3 is outside [5,"), std::string::npos) << bad.error().message;
  });
}

