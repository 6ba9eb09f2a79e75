// A config tuned for one model is never applied to another (label gpu; skips visibly without a
// GPU). `deepinfer-jit tune` times V4.1-Flash's sparse_mla_decode (64 heads) and mhc_post
// (C = 5120) for one bucket each into a fresh cache; the tiny model (8 heads, C = 256) then runs
// with that tuning cache, which at 079ff15 failed at its first decode step ("heads_per_cta=16
// must be a multiple of 8 ... dividing the 8 heads"). Also: a winner planted under tiny's own key
// that cannot serve it falls back to the family's default (the check before reuse is the one
// every launch runs).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "GpuTestDevice.h"
#include "deepinfer/Jit.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/ShapeBuckets.h"
#include "deepinfer/TuningCache.h"
#include "deepinfer/TuningDims.h"
#include "model/gpu/GpuModel.h"
#include "model/CpuForward.h"
#include "model/MakeModel.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

#define NEED_GPU()                                 \
  const auto& g = testing_util::gpuTestDevice();   \
  if (!g.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << g.why

// deepinfer-jit next to this test binary (build/bin and dist/bin both hold the two).
std::string jitTool() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "deepinfer-jit";
  self[n] = '\0';
  return (fs::path(self).parent_path() / "deepinfer-jit").string();
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / fmt::format("di_tuned_{}_{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace);
  return d;
}

const std::string& tinyDir() {
  static const std::string dir = [] {
    const fs::path d = scratch("tiny_model");
    MakeModelOptions o;
    o.preset = "tiny";
    o.outDir = d.string();
    o.seed = 11;
    Status st = makeModel(o);
    EXPECT_TRUE(st.ok()) << st.error().message;
    return d.string();
  }();
  return dir;
}

// Prefill and a few greedy decode steps of tiny with the given JIT options; logits finite.
void runTiny(const JitOptions& jo, const std::string& what) {
  GpuModelOptions go;
  go.kvCacheBytes = int64_t(256) << 20;
  go.maxRequests = 2;
  go.maxChunkTokens = 64;
  go.jit = jo;
  auto m = GpuModel::load(tinyDir(), testing_util::gpuTestDevice().dev, go);
  ASSERT_TRUE(m.ok()) << what << ": " << m.error().message;
  auto r = (*m)->newRequest();
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 37 + 5) % (*m)->config().vocabSize));
  auto p = (*m)->prefill(*r, prompt, /*lastOnly=*/true);
  ASSERT_TRUE(p.ok()) << what << ": prefill: " << p.error().message;
  int32_t next = argmaxToken(p->ptr<float>(), (*m)->config().vocabSize);
  for (int s = 0; s < 6; ++s) {
    auto d = (*m)->decode(*r, next);
    ASSERT_TRUE(d.ok()) << what << ": decode step " << s << ": " << d.error().message;
    for (float x : *d) ASSERT_TRUE(std::isfinite(x)) << what << ": decode step " << s;
    next = argmaxToken(d->data(), (*m)->config().vocabSize);
  }
  EXPECT_TRUE((*m)->releaseRequest(*r).ok());
}

TEST(TunedConfigs, TuneForV41FlashThenRunTiny) {
  NEED_GPU();
  const fs::path cache = scratch("cache");
  const std::string log = (cache.parent_path() / fmt::format("di_tuned_log_{}", ::getpid())).string();
  const std::string cmd =
      fmt::format("env DEEPINFER_JIT_CACHE_DIR={} {} tune --op sparse_mla_decode --bucket B=1 --op mhc_post "
                  "--bucket T=1 --samples 3 --warmup 1 > {} 2>&1",
                  cache.string(), jitTool(), log);
  const int st = std::system(cmd.c_str());
  std::ifstream lf(log);
  const std::string out((std::istreambuf_iterator<char>(lf)), {});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd << "\n" << out;
  fmt::print("{}\n", out);

  // The winners are recorded under V4.1-Flash's dims, and only there.
  const TargetProfile& local = g.dev->info().profile;
  auto tc = TuningCache::open(TuningMetadata::forLocalGpu(local), (cache / "tuning").string());
  ASSERT_TRUE(tc.ok()) << tc.error().message;
  int winners = 0;
  for (const auto& [k, e] : tc->entries()) {
    fmt::print("tuned {} -> {}\n", k.str(), e.winner.empty() ? "(none)" : e.winner);
    winners += !e.winner.empty();
    if (k.op == "sparse_mla_decode") EXPECT_NE(k.dims.find("H=64,"), std::string::npos) << k.str();
    if (k.op == "mhc_post") EXPECT_EQ(k.dims, "C=5120") << k.str();
  }
  EXPECT_EQ(winners, 2);

  // The JIT reuses a winner for V4.1-Flash's shapes and never for tiny's.
  JitOptions jo;
  jo.cacheDir = cache.string();
  Jit jit(g.dev, jo);
  auto v41 = makeOpDesc("sparse_mla_decode", {{"B", 1}}, {});
  auto tinyDecode = makeOpDesc("sparse_mla_decode", {{"B", 1}, {"H", 8}}, {});
  ASSERT_TRUE(v41.ok() && tinyDecode.ok());
  EXPECT_TRUE(jit.tunedConfig(*v41, local).has_value());
  EXPECT_FALSE(jit.tunedConfig(*tinyDecode, local).has_value());

  runTiny(jo, "tiny after tuning V4.1-Flash");
}

TEST(TunedConfigs, PlantedWinnerThatCannotServeFallsBackToTheDefault) {
  NEED_GPU();
  const fs::path cache = scratch("planted");
  const TargetProfile& local = g.dev->info().profile;
  auto tiny = makeOpDesc("sparse_mla_decode", {{"B", 1}, {"H", 8}, {"swa_k", 128}, {"extra_k", 512}}, {});
  ASSERT_TRUE(tiny.ok());
  // A 64-head winner filed under tiny's own key (a stale or hand-edited tuning file).
  auto tc = TuningCache::open(TuningMetadata::forLocalGpu(local), (cache / "tuning").string());
  ASSERT_TRUE(tc.ok()) << tc.error().message;
  const TuningKey key{local.name, "sparse_mla_decode", opDtypes("sparse_mla_decode"), bucketFor(*tiny)->label(),
                      *tuningDims(*tiny)};
  CandidateTiming t;
  t.medianUs = t.minUs = t.p90Us = 1;
  t.samples = 3;
  t.checked = t.checkOk = true;
  const std::string planted = "heads_per_cta=16,keys_per_tile=16,kv_splits=4,merge=0,schedule=0,stages=2,threads=256";
  tc->record(key, planted, t);
  ASSERT_TRUE(tc->save().ok());
  ASSERT_EQ(tc->winner(key).value_or(""), planted);

  JitOptions jo;
  jo.cacheDir = cache.string();
  Jit jit(g.dev, jo);
  EXPECT_FALSE(jit.tunedConfig(*tiny, local).has_value()) << "a winner that cannot serve tiny was reused";
  runTiny(jo, "tiny with a planted 64-head winner");
}

}  // namespace
}  // namespace deepinfer
