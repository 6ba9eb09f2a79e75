// The CPU reference forward pass on the `tiny` model (made by make-model into a temp dir):
// prefill/decode consistency, determinism, every mechanism engaged, finite logits over a long
// sequence, and the fp32-vs-fp64 flip rate of discrete decisions (docs/model.md §9).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "TinyModel.h"
#include "model/CpuForward.h"
#include "model/MakeModel.h"

using namespace deepinfer;
namespace fs = std::filesystem;

namespace {

using testing_tiny::randomPrompt;
using testing_tiny::tinyModel;

// Largest |a - b| relative to the largest |a| of the row.
double relDiff(const float* a, const float* b, int64_t n) {
  double mx = 0, scale = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    mx = std::max(mx, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return mx / scale;
}

bool allFinite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

CpuModel& tiny() { return *tinyModel().model; }

}  // namespace

class CpuForwardModel : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tinyModel().model) << tinyModel().error; }
};

// The tiny preset must cross every threshold within the lengths these tests use.
TEST_F(CpuForwardModel, TinyThresholdsAreSmall) {
  const ModelConfig& c = tiny().config();
  EXPECT_LE(c.slidingWindow, 32);
  EXPECT_LE(c.indexTopk, 32);
  EXPECT_GE(c.candidateSourceLayerId, 0);
  EXPECT_LE(int64_t(c.candidateTopkBlocks) * c.candidateBlockSize, 64);
  bool ratio2 = false, restricted = false, engram = false;
  for (int L = 0; L < c.numHiddenLayers; ++L) {
    ratio2 |= c.role(L).ratio == 2 && c.role(L).isKvSource;
    restricted |= c.role(L).candidateRestricted;
    engram |= c.role(L).isEngram;
  }
  EXPECT_TRUE(ratio2 && restricted && engram);
}

// Prefill of N tokens == prefill of N - k tokens and k decode steps == two prefill chunks,
// with N odd and past the window, the index top-k and the candidate-block thresholds.
TEST_F(CpuForwardModel, PrefillMatchesDecodeSteps) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize;
  const int64_t N = 77, k = 6;
  const std::vector<int32_t> ids = randomPrompt(N, 1234, V);

  CpuRequestState whole = m.newRequest();
  auto full = m.prefill(whole, ids);
  ASSERT_TRUE(full.ok()) << full.error().message;
  ASSERT_EQ(full->shape, (std::vector<int64_t>{N, V}));
  const float* fullRows = full->ptr<float>();

  CpuRequestState stepped = m.newRequest();
  auto head = m.prefill(stepped, std::vector<int32_t>(ids.begin(), ids.end() - k));
  ASSERT_TRUE(head.ok());
  for (int64_t i = 0; i < N - k; ++i)
    EXPECT_LE(relDiff(fullRows + i * V, head->ptr<float>() + i * V, V), 1e-4) << "position " << i;
  for (int64_t s = N - k; s < N; ++s) {
    auto row = m.decode(stepped, ids[size_t(s)]);
    ASSERT_TRUE(row.ok()) << row.error().message;
    EXPECT_LE(relDiff(fullRows + s * V, row->data(), V), 1e-4) << "decode at position " << s;
  }
  EXPECT_EQ(stepped.position(), N);
  // Decode steps at positions 71 (odd: completes a pair whose first token came from the
  // prefill) and 73, 75.
  EXPECT_GT(stepped.counters().oddTailsCarried, 0);
  EXPECT_EQ(whole.counters().oddTailsCarried, 0);

  CpuRequestState chunked = m.newRequest();
  const int64_t cut = 41;  // odd: position 40's compressor state is carried between chunks
  auto c1 = m.prefill(chunked, std::vector<int32_t>(ids.begin(), ids.begin() + cut));
  auto c2 = m.prefill(chunked, std::vector<int32_t>(ids.begin() + cut, ids.end()));
  ASSERT_TRUE(c1.ok() && c2.ok());
  for (int64_t i = cut; i < N; ++i)
    EXPECT_LE(relDiff(fullRows + i * V, c2->ptr<float>() + (i - cut) * V, V), 1e-4) << "position " << i;
  EXPECT_GT(chunked.counters().oddTailsCarried, 0);
  // The thresholds were crossed on the way.
  EXPECT_GT(whole.counters().windowSlides, 0);
  EXPECT_GT(whole.counters().indexerDrops, 0);
  EXPECT_GT(whole.counters().candidateBlocksDropped, 0);
}

TEST_F(CpuForwardModel, GreedyGenerationIsDeterministicAcrossThreadCounts) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize;
  const std::vector<int32_t> prompt = randomPrompt(23, 99, V);
  auto generate = [&](CpuModel& model, std::vector<float>* lastLogits) {
    CpuRequestState st = model.newRequest();
    auto logits = model.prefill(st, prompt);
    EXPECT_TRUE(logits.ok());
    std::vector<float> last(logits->ptr<float>() + (prompt.size() - 1) * V,
                            logits->ptr<float>() + prompt.size() * V);
    std::vector<int32_t> out;
    for (int i = 0; i < 12; ++i) {
      out.push_back(argmaxToken(last.data(), V));
      auto next = model.decode(st, out.back());
      EXPECT_TRUE(next.ok());
      last = std::move(*next);
    }
    *lastLogits = last;
    return out;
  };
  std::vector<float> a, b, c;
  const auto first = generate(m, &a);
  EXPECT_EQ(generate(m, &b), first);
  EXPECT_EQ(a, b);  // bit-identical
  auto single = CpuModel::load(tinyModel().dir, CpuModelOptions{1, false});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(generate(**single, &c), first);
  EXPECT_EQ(a, c);
  std::set<int32_t> distinct(first.begin(), first.end());
  EXPECT_GT(distinct.size(), 1u) << "greedy output collapsed to one token";
}

// Every mechanism demonstrably does something on a 100-token prompt.
TEST_F(CpuForwardModel, EveryMechanismEngages) {
  CpuModel& m = tiny();
  const ModelConfig& cfg = m.config();
  const int64_t N = 100;
  CpuDecisionTrace trace;
  CpuRequestState st = m.newRequest();
  st.setTrace(&trace);
  auto logits = m.prefill(st, randomPrompt(N, 7, cfg.vocabSize));
  ASSERT_TRUE(logits.ok());
  const CpuMechanismCounters& c = st.counters();
  EXPECT_GT(c.windowSlides, 0);
  EXPECT_GT(c.indexerDrops, 0);
  EXPECT_GT(c.candidateBlocksDropped, 0);
  EXPECT_GT(c.candidateEntriesMasked, 0);
  EXPECT_GT(c.engramLookups, 0);
  EXPECT_LE(c.indexerBoundaryTies, c.indexerDrops);
  std::printf("[ info ] %lld of %lld dropping index selections were decided by an exact score tie\n",
              (long long)c.indexerBoundaryTies, (long long)c.indexerDrops);
  int64_t expectedEntries = 0;
  for (int L = 0; L < cfg.numHiddenLayers; ++L)
    if (cfg.role(L).isKvSource) {
      expectedEntries += N / cfg.role(L).ratio;
      EXPECT_EQ(st.kvSource(L).compressed.size(), N / cfg.role(L).ratio) << "layer " << L;
      EXPECT_EQ(st.kvSource(L).indexKeys.size(), N / cfg.role(L).ratio) << "layer " << L;
      EXPECT_EQ(st.kvSource(L).hasTail, cfg.role(L).ratio == 2 && N % 2 == 1);
    }
  EXPECT_EQ(c.compressedEntries, expectedEntries);

  using K = CpuDecisionKind;
  auto get = [&](K kind, int layer, int64_t pos) -> const std::vector<int32_t>* {
    auto it = trace.decisions.find({int(kind), layer, pos});
    return it == trace.decisions.end() ? nullptr : &it->second;
  };
  const int cand = cfg.candidateSourceLayerId;
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    const LayerRole& r = cfg.role(L);
    // The router picks different experts for different tokens.
    std::set<std::vector<int32_t>> routerSets;
    for (int64_t p = 0; p < N; ++p) {
      const auto* ids = get(K::Router, L, p);
      ASSERT_TRUE(ids);
      EXPECT_EQ(int64_t(ids->size()), cfg.numExpertsPerTok);
      routerSets.insert(*ids);
    }
    EXPECT_GT(routerSets.size(), 2u) << "layer " << L;
    if (!r.isIndexSource) continue;
    const int ratio = cfg.role(r.indexKeyLayer).ratio;
    for (int64_t p = 0; p < N; ++p) {
      const auto* sel = get(K::IndexTopk, L, p);
      ASSERT_TRUE(sel);
      const int64_t visible = (p + 1) / ratio;
      EXPECT_LE(int64_t(sel->size()), std::min<int64_t>(visible, cfg.indexTopk));
      if (!r.candidateRestricted) {
        EXPECT_EQ(int64_t(sel->size()), std::min<int64_t>(visible, cfg.indexTopk)) << L << " " << p;
        continue;
      }
      // Restricted layers select only inside the candidate source's blocks for this token.
      const auto* blocks = get(K::CandidateBlocks, cand, p);
      ASSERT_TRUE(blocks);
      EXPECT_LE(int64_t(blocks->size()), cfg.candidateTopkBlocks);
      for (int32_t j : *sel)
        EXPECT_TRUE(std::binary_search(blocks->begin(), blocks->end(), j / cfg.candidateBlockSize))
            << "layer " << L << " pos " << p << " entry " << j;
    }
  }
  // The newest block is pinned at the candidate source.
  const auto* last = get(K::CandidateBlocks, cand, N - 1);
  ASSERT_TRUE(last);
  const int64_t visible = N / cfg.role(cand).ratio;
  EXPECT_EQ(last->back(), (visible - 1) / cfg.candidateBlockSize);
}

// A few hundred tokens (prefill + decode) stay finite; also reports the prefill time.
TEST_F(CpuForwardModel, LogitsStayFiniteOverLongSequences) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize;
  CpuRequestState st = m.newRequest();
  const auto t0 = std::chrono::steady_clock::now();
  auto logits = m.prefill(st, randomPrompt(256, 5, V));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(logits.ok());
  std::printf("[ info ] tiny: prefill of 256 tokens took %.2f s with %d threads\n", secs, m.threads());
  EXPECT_TRUE(allFinite(logits->ptr<float>(), logits->numel()));
  std::vector<float> last(logits->ptr<float>() + 255 * V, logits->ptr<float>() + 256 * V);
  for (int i = 0; i < 44; ++i) {
    auto next = m.decode(st, argmaxToken(last.data(), V));
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(allFinite(next->data(), V)) << "decode step " << i;
    last = std::move(*next);
  }
  EXPECT_EQ(st.position(), 300);
}

// Discrete decisions under fp32 vs fp64 accumulation over the same tokens (docs/model.md §9).
// Both runs quantize the window, compressed and index caches to e4m3, so a single bf16 flip
// upstream can move a tile's UE8M0 scale or an e4m3 code and shift index scores by ~1%: index
// and candidate decisions therefore flip more often than the router, whose margins the tiny
// preset makes wide. The router must stay under 1% (the spec's bar); index and candidate flips
// depend on the preset's index-score margins and are only bounded loosely here (a regression
// guard); the printed table is the measurement.
TEST_F(CpuForwardModel, FlipRateBetweenFp32AndFp64) {
  CpuModel& m = tiny();
  const std::vector<int32_t> ids = randomPrompt(128, 2024, m.config().vocabSize);
  CpuDecisionTrace t32, t64;
  CpuRequestState a = m.newRequest(), b = m.newRequest();
  a.setTrace(&t32);
  b.setTrace(&t64);
  ASSERT_TRUE(m.prefill(a, ids).ok());
  m.setFp64Accumulation(true);
  auto r = m.prefill(b, ids);
  m.setFp64Accumulation(false);
  ASSERT_TRUE(r.ok());
  const auto stats = compareDecisionTraces(t32, t64);
  std::printf("[ info ] fp32 vs fp64 decisions over 128 tokens:\n%s", formatFlipStats(stats).c_str());
  ASSERT_EQ(stats.count(CpuDecisionKind::Router), 1u);
  ASSERT_EQ(stats.count(CpuDecisionKind::IndexTopk), 1u);
  ASSERT_EQ(stats.count(CpuDecisionKind::CandidateBlocks), 1u);
  EXPECT_LT(stats.at(CpuDecisionKind::Router).memberRate(), 0.01);
  EXPECT_LT(stats.at(CpuDecisionKind::IndexTopk).memberRate(), 0.10);
  EXPECT_LT(stats.at(CpuDecisionKind::CandidateBlocks).memberRate(), 0.10);
  // Identical settings give identical decisions: the comparison itself can tell.
  CpuDecisionTrace again;
  CpuRequestState c = m.newRequest();
  c.setTrace(&again);
  ASSERT_TRUE(m.prefill(c, ids).ok());
  for (const auto& [kind, s] : compareDecisionTraces(t32, again)) EXPECT_EQ(s.setsDiffering, 0);
}

TEST_F(CpuForwardModel, RejectsBadInput) {
  CpuModel& m = tiny();
  CpuRequestState st = m.newRequest();
  auto bad = m.prefill(st, {1, 2, int32_t(m.config().vocabSize)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("index 2"), std::string::npos) << bad.error().message;
  EXPECT_EQ(st.position(), 0);
  EXPECT_FALSE(m.prefill(st, {}).ok());
  EXPECT_FALSE(m.decode(st, -1).ok());
  CpuRequestState foreign;
  EXPECT_FALSE(m.prefill(foreign, {1}).ok());
  auto missing = CpuModel::load(tinyModel().dir + "/does-not-exist");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("does-not-exist"), std::string::npos) << missing.error().message;
}
