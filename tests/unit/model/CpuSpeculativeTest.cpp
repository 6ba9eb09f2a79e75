// DSpark speculative decoding in the CPU reference (docs/dspark.md §7) on the tiny model:
// greedy speculative output equals plain greedy output token for token (and logit for logit),
// whatever the drafts (the draft model's, the target's own continuation, a corrupted one);
// caches after a rejected draft equal caches that never saw it (and poisoned rejected rows are
// never read); requests batched with different acceptance lengths equal each alone; sampled
// acceptance keeps the target distribution (chi-square tests at a stated significance).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <map>
#include <random>

#include "TinyModel.h"
#include "model/CpuForward.h"
#include "model/MakeModel.h"
#include "model/Safetensors.h"
#include "model/SpecAccept.h"

using namespace deepinfer;
namespace fs = std::filesystem;

namespace {

using testing_tiny::randomPrompt;
using testing_tiny::tinyModel;
CpuModel& tiny() { return *tinyModel().model; }

std::vector<float> lastRow(const HostTensor& logits) {
  const int64_t V = logits.shape[1], n = logits.shape[0];
  return std::vector<float>(logits.ptr<float>() + (n - 1) * V, logits.ptr<float>() + n * V);
}

// Plain greedy generation of `count` tokens after `prompt`, with the logits at every position
// a generated token was fed at (prompt.size() + k for the k-th fed token).
struct Generation {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  int64_t steps = 0, accepted = 0;
};

Generation plainGreedy(CpuModel& m, const std::vector<int32_t>& prompt, int count) {
  Generation g;
  CpuRequestState st = m.newRequest();
  auto pre = m.prefill(st, prompt);
  EXPECT_TRUE(pre.ok()) << pre.error().message;
  std::vector<float> last = lastRow(*pre);
  const int64_t V = m.config().vocabSize;
  for (int i = 0; i < count; ++i) {
    g.tokens.push_back(argmaxToken(last.data(), V));
    if (i + 1 == count) break;
    auto next = m.decode(st, g.tokens.back());
    EXPECT_TRUE(next.ok()) << next.error().message;
    last = std::move(*next);
    g.logits.push_back(last);
  }
  return g;
}

enum class Drafts { Model, Oracle, CorruptedOracle };

// Greedy speculative generation of exactly `count` tokens. Oracle drafts are the plain
// continuation `oracle`; corrupted ones change the draft at index (step % (B + 1)) so every
// acceptance length 0 .. B occurs.
Generation specGreedy(CpuModel& m, const std::vector<int32_t>& prompt, int count, Drafts mode,
                      const std::vector<int32_t>& oracle = {}) {
  Generation g;
  auto st = m.newSpeculativeRequest();
  EXPECT_TRUE(st.ok()) << st.error().message;
  auto pre = m.prefill(*st, prompt);
  EXPECT_TRUE(pre.ok()) << pre.error().message;
  const int64_t V = m.config().vocabSize, B = m.draftBlockSize();
  std::vector<float> last = lastRow(*pre);
  g.tokens.push_back(argmaxToken(last.data(), V));
  while (int(g.tokens.size()) < count) {
    std::vector<CpuSpecStep> steps(1);
    CpuSpecStep& s = steps[0];
    s.state = &*st;
    s.next = g.tokens.back();
    s.maxDrafts = std::min<int64_t>(B, count - int64_t(g.tokens.size()) - 1);
    if (mode != Drafts::Model) {
      const size_t at = g.tokens.size();
      for (int64_t j = 0; j < s.maxDrafts; ++j) s.draftOverride.push_back(oracle.at(at + size_t(j)));
      if (mode == Drafts::CorruptedOracle) {
        const int64_t bad = g.steps % (B + 1);
        if (bad < s.maxDrafts) s.draftOverride[size_t(bad)] = (s.draftOverride[size_t(bad)] + 1) % int32_t(V);
      }
    }
    auto out = m.speculativeStep(steps);
    EXPECT_TRUE(out.ok()) << out.error().message;
    if (!out.ok()) break;
    const CpuSpecOutcome& o = (*out)[0];
    // Step self-consistency (§7.3).
    EXPECT_GE(o.emitted.size(), 1u);
    EXPECT_LE(int64_t(o.emitted.size()), s.maxDrafts + 1);
    EXPECT_EQ(o.emitted.size(), size_t(o.accepted) + 1);
    EXPECT_EQ(o.logits.shape[0], o.accepted + 1);
    for (int j = 1; j <= o.accepted; ++j)
      EXPECT_EQ(o.drafts[size_t(j - 1)], argmaxToken(o.logits.ptr<float>() + (j - 1) * V, V));
    if (o.accepted < int(o.drafts.size()))
      EXPECT_NE(o.drafts[size_t(o.accepted)], argmaxToken(o.logits.ptr<float>() + o.accepted * V, V));
    EXPECT_EQ(o.emitted.back(), argmaxToken(o.logits.ptr<float>() + o.accepted * V, V));
    for (int64_t r = 0; r < o.logits.shape[0]; ++r)
      g.logits.emplace_back(o.logits.ptr<float>() + r * V, o.logits.ptr<float>() + (r + 1) * V);
    g.tokens.insert(g.tokens.end(), o.emitted.begin(), o.emitted.end());
    ++g.steps;
    g.accepted += o.accepted;
  }
  return g;
}

// Bitwise equality of the state a rollback must restore, against a request that only ever saw
// the committed tokens. Window rows of positions P-W+1 .. P, every compressed and index-key
// byte, the ratio-2 tails, the engram history, the draft rings.
void expectSameCaches(const CpuModel& m, const CpuRequestState& a, const CpuRequestState& ref) {
  const ModelConfig& cfg = m.config();
  ASSERT_EQ(a.position(), ref.position());
  ASSERT_EQ(a.windowRingRows(), ref.windowRingRows());
  const int64_t P = a.position() - 1, W = cfg.slidingWindow, ring = a.windowRingRows();
  std::vector<float> x(512), y(512);
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    for (int64_t p = std::max<int64_t>(0, P - W + 1); p <= P; ++p) {
      a.windowCache(L).read(p % ring, x.data());
      ref.windowCache(L).read(p % ring, y.data());
      ASSERT_EQ(0, std::memcmp(x.data(), y.data(), 512 * 4)) << "layer " << L << " window row of position " << p;
    }
    if (!cfg.role(L).isKvSource) continue;
    const CpuKvSourceState& sa = a.kvSource(L);
    const CpuKvSourceState& sr = ref.kvSource(L);
    ASSERT_EQ(sa.compressed.size(), sr.compressed.size()) << "layer " << L;
    ASSERT_EQ(sa.compressed.bytes().numPages(), sr.compressed.bytes().numPages()) << "layer " << L;
    for (int64_t pg = 0; pg < sa.compressed.bytes().numPages(); ++pg)
      ASSERT_EQ(sa.compressed.bytes().page(pg), sr.compressed.bytes().page(pg)) << "layer " << L << " page " << pg;
    ASSERT_EQ(sa.indexKeys.size(), sr.indexKeys.size()) << "layer " << L;
    for (int64_t pg = 0; pg * 64 < sa.indexKeys.size(); ++pg)
      ASSERT_EQ(sa.indexKeys.page(pg), sr.indexKeys.page(pg)) << "layer " << L << " index page " << pg;
    ASSERT_EQ(sa.hasTail, sr.hasTail) << "layer " << L;
    if (sa.hasTail) {
      EXPECT_EQ(sa.tailPos, sr.tailPos);
      EXPECT_EQ(sa.tailKv, sr.tailKv) << "layer " << L;
      EXPECT_EQ(sa.tailGate, sr.tailGate) << "layer " << L;
    }
  }
  EXPECT_EQ(a.tokenClasses(), ref.tokenClasses());
  for (int s = 0; s < cfg.numNextnPredictLayers; ++s) {
    ASSERT_EQ(a.draftRing(s).numPages(), ref.draftRing(s).numPages());
    for (int64_t pg = 0; pg < a.draftRing(s).numPages(); ++pg)
      ASSERT_EQ(a.draftRing(s).page(pg), ref.draftRing(s).page(pg)) << "draft stage " << s << " page " << pg;
  }
}

// The chi-square quantile for `df` degrees of freedom at significance 1e-4 (Wilson-Hilferty;
// within 2% of the exact value for df >= 5, on the conservative side).
double chiSquareCritical(int df) {
  const double z = 3.719016, k = df;
  return k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
}

// Pearson's statistic of observed counts against expected probabilities; cells with expected
// count below 5 are pooled into one.
std::pair<double, int> chiSquare(const std::map<int64_t, int64_t>& observed, const std::map<int64_t, double>& prob,
                                 int64_t n) {
  double stat = 0, pooledE = 0, pooledO = 0;
  int cells = 0;
  for (const auto& [key, p] : prob) {
    const double e = p * double(n);
    auto it = observed.find(key);
    const double o = it == observed.end() ? 0 : double(it->second);
    if (e < 5) {
      pooledE += e;
      pooledO += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++cells;
  }
  for (const auto& [key, o] : observed)
    if (!prob.count(key)) pooledO += double(o);  // impossible outcomes land in the pooled cell
  if (pooledE > 0 || pooledO > 0) {
    stat += (pooledO - pooledE) * (pooledO - pooledE) / std::max(pooledE, 1e-9);
    ++cells;
  }
  return {stat, cells - 1};
}

}  // namespace

class CpuSpeculative : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tinyModel().model) << tinyModel().error;
    ASSERT_TRUE(tiny().hasDraft());
  }
};

// §7.1/§7.2: the output never depends on the drafts. Prompts of 3..60 tokens and 40 generated
// tokens cross the window (16), the ratio-2 pairs, the index top-k (16) and the candidate blocks
// (4 x 8 entries) at anchors of both parities.
TEST_F(CpuSpeculative, GreedyEqualsPlainGreedyWhateverTheDrafts) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize, B = m.draftBlockSize();
  const int count = 40;
  int64_t modelAccepted = 0, modelSteps = 0;
  for (const auto& [len, seed] : std::vector<std::pair<int64_t, uint64_t>>{{3, 11}, {33, 13}, {60, 14}}) {
    SCOPED_TRACE(fmt::format("prompt of {} tokens", len));
    const std::vector<int32_t> prompt = randomPrompt(len, seed, V);
    const Generation plain = plainGreedy(m, prompt, count);
    // A continuation that repeats itself would let wrong drafts be accepted by chance.
    ASSERT_GT(std::set<int32_t>(plain.tokens.begin(), plain.tokens.end()).size(), 4u);
    for (Drafts mode : {Drafts::Model, Drafts::Oracle, Drafts::CorruptedOracle}) {
      SCOPED_TRACE(int(mode));
      const Generation spec = specGreedy(m, prompt, count, mode, plain.tokens);
      ASSERT_EQ(spec.tokens, plain.tokens);
      // Logits at every position a token was fed at, bit for bit (the last token is never fed).
      ASSERT_EQ(spec.logits.size(), plain.logits.size());
      for (size_t k = 0; k < plain.logits.size(); ++k)
        ASSERT_EQ(0, std::memcmp(spec.logits[k].data(), plain.logits[k].data(), size_t(V) * 4)) << "position " << k;
      if (mode == Drafts::Oracle) {
        // The target's own continuation is always accepted: B per step, budget permitting.
        EXPECT_EQ(spec.steps, (count - 1 + B) / (B + 1));
        EXPECT_EQ(spec.accepted, count - 1 - spec.steps);
      }
      if (mode == Drafts::Model) {
        modelAccepted += spec.accepted;
        modelSteps += spec.steps;
      }
    }
  }
  std::printf("[ info ] tiny (random weights): the draft model's greedy drafts: %.3f accepted per step over %lld "
              "steps\n",
              double(modelAccepted) / double(modelSteps), (long long)modelSteps);
}

// §7.4: after every acceptance length 0..B at anchors of both parities, the caches equal those
// of a request that only saw the committed tokens; rows written for rejected positions are then
// poisoned and generation continues exactly like the reference.
TEST_F(CpuSpeculative, CachesAfterRejectedDraftEqualCachesThatNeverSawIt) {
  CpuModel& m = tiny();
  const ModelConfig& cfg = m.config();
  const int64_t V = cfg.vocabSize, B = m.draftBlockSize();
  for (int64_t len : {30, 47}) {  // anchors of both parities; P = len + a covers both again
    const std::vector<int32_t> prompt = randomPrompt(len, 100 + uint64_t(len), V);
    const Generation plain = plainGreedy(m, prompt, int(B) + 8);
    for (int64_t bad = 0; bad <= B; ++bad) {
      SCOPED_TRACE(fmt::format("prompt {}, draft {} wrong", len, bad));
      auto st = m.newSpeculativeRequest();
      ASSERT_TRUE(st.ok());
      ASSERT_TRUE(m.prefill(*st, prompt).ok());
      std::vector<CpuSpecStep> steps(1);
      steps[0].state = &*st;
      steps[0].next = plain.tokens[0];
      steps[0].draftOverride.assign(plain.tokens.begin() + 1, plain.tokens.begin() + 1 + B);
      if (bad < B) steps[0].draftOverride[size_t(bad)] = (steps[0].draftOverride[size_t(bad)] + 7) % int32_t(V);
      auto out = m.speculativeStep(steps);
      ASSERT_TRUE(out.ok()) << out.error().message;
      ASSERT_EQ((*out)[0].accepted, bad);
      const int64_t committed = len + bad + 1;
      ASSERT_EQ(st->position(), committed);

      // The reference: a speculative request (same ring sizes) that prefilled the committed
      // tokens in one call.
      std::vector<int32_t> seq = prompt;
      seq.insert(seq.end(), plain.tokens.begin(), plain.tokens.begin() + bad + 1);
      auto ref = m.newSpeculativeRequest();
      ASSERT_TRUE(ref.ok());
      ASSERT_TRUE(m.prefill(*ref, seq).ok());
      expectSameCaches(m, *st, *ref);

      // Sentinel: the window slots of the rejected positions get rows of 400s in every layer;
      // nothing may read them, so the next steps stay bit-identical to the reference.
      std::vector<float> poison(512, 400.f);
      for (int64_t p = committed; p < len + B + 1; ++p)
        for (int L = 0; L < cfg.numHiddenLayers; ++L) st->mutableWindowCache(L).write(p % st->windowRingRows(), poison.data());
      int32_t next = (*out)[0].emitted.back();
      for (int k = 0; k < 3; ++k) {
        auto a = m.decode(*st, next);
        auto r = m.decode(*ref, next);
        ASSERT_TRUE(a.ok() && r.ok());
        ASSERT_EQ(0, std::memcmp(a->data(), r->data(), size_t(V) * 4)) << "decode step " << k;
        next = argmaxToken(a->data(), V);
      }
      expectSameCaches(m, *st, *ref);
    }
  }
}

// §7.5: the rings after a prefill and speculative steps equal the rings of one prefill of the
// committed tokens (part of expectSameCaches); here also across several steps of the draft
// model's own drafts, and the rings hold the last W positions.
TEST_F(CpuSpeculative, RingsEqualPlainRunRings) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize;
  const std::vector<int32_t> prompt = randomPrompt(9, 77, V);
  auto st = m.newSpeculativeRequest();
  ASSERT_TRUE(st.ok());
  auto pre = m.prefill(*st, prompt);
  ASSERT_TRUE(pre.ok());
  std::vector<int32_t> committed = prompt;
  int32_t next = argmaxToken(lastRow(*pre).data(), V);
  for (int k = 0; k < 12; ++k) {
    std::vector<CpuSpecStep> steps(1);
    steps[0].state = &*st;
    steps[0].next = next;
    auto out = m.speculativeStep(steps);
    ASSERT_TRUE(out.ok()) << out.error().message;
    committed.push_back(next);
    committed.insert(committed.end(), (*out)[0].emitted.begin(), (*out)[0].emitted.end() - 1);
    next = (*out)[0].emitted.back();
  }
  auto ref = m.newSpeculativeRequest();
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(m.prefill(*ref, committed).ok());
  expectSameCaches(m, *st, *ref);
}

// §7.7 / §6.3: three requests stepped together, with different acceptance lengths, a sampled one
// among them, equal each stepped alone; the batched draft pass equals single draft passes.
TEST_F(CpuSpeculative, BatchedRequestsEqualEachAlone) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize, B = m.draftBlockSize();
  struct Req {
    std::vector<int32_t> prompt;
    int64_t bad;  // which oracle draft is corrupted (B: none, -1: the draft model's drafts)
    double temperature;
  };
  const std::vector<Req> reqs = {{randomPrompt(12, 1, V), 2, 0.0},
                                 {randomPrompt(29, 2, V), B, 0.0},
                                 {randomPrompt(20, 3, V), -1, 0.0},
                                 {randomPrompt(7, 4, V), -1, 0.8}};
  std::vector<Generation> oracle;
  for (const Req& r : reqs) oracle.push_back(plainGreedy(m, r.prompt, 4 * int(B) + 4));

  auto run = [&](const std::vector<size_t>& which) {
    std::vector<CpuRequestState> states;
    std::vector<std::vector<int32_t>> emitted(which.size());
    for (size_t i : which) {
      states.push_back(*m.newSpeculativeRequest());
      auto pre = m.prefill(states.back(), reqs[i].prompt);
      EXPECT_TRUE(pre.ok());
      emitted[states.size() - 1].push_back(argmaxToken(lastRow(*pre).data(), V));
    }
    std::vector<std::vector<CpuSpecOutcome>> outcomes(which.size());
    for (int step = 0; step < 3; ++step) {
      std::vector<CpuSpecStep> steps(which.size());
      for (size_t k = 0; k < which.size(); ++k) {
        const Req& r = reqs[which[k]];
        CpuSpecStep& s = steps[k];
        s.state = &states[k];
        s.next = emitted[k].back();
        s.sampling.temperature = r.temperature;
        s.sampling.seed = 1000 + which[k];
        if (r.bad >= 0) {
          const auto& o = oracle[which[k]].tokens;
          const size_t at = emitted[k].size();
          s.draftOverride.assign(o.begin() + int64_t(at), o.begin() + int64_t(at) + B);
          if (r.bad < B) s.draftOverride[size_t(r.bad)] = (s.draftOverride[size_t(r.bad)] + 1) % int32_t(V);
        }
      }
      auto out = m.speculativeStep(steps);
      EXPECT_TRUE(out.ok()) << out.error().message;
      for (size_t k = 0; k < which.size(); ++k) {
        emitted[k].insert(emitted[k].end(), (*out)[k].emitted.begin(), (*out)[k].emitted.end());
        outcomes[k].push_back((*out)[k]);
      }
    }
    return std::make_pair(emitted, outcomes);
  };
  const auto [together, outTogether] = run({0, 1, 2, 3});
  std::set<int> lengths;
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    const auto [alone, outAlone] = run({i});
    EXPECT_EQ(together[i], alone[0]);
    for (size_t s = 0; s < outAlone[0].size(); ++s) {
      const CpuSpecOutcome& a = outTogether[i][s];
      const CpuSpecOutcome& b = outAlone[0][s];
      EXPECT_EQ(a.drafts, b.drafts);
      EXPECT_EQ(a.confidence, b.confidence);
      EXPECT_EQ(a.accepted, b.accepted);
      ASSERT_EQ(a.logits.bytes, b.logits.bytes);
      lengths.insert(a.accepted);
    }
  }
  EXPECT_GE(lengths.size(), 2u) << "the batch should mix acceptance lengths";
  EXPECT_TRUE(lengths.count(int(B)));
}

// The draft pass itself: batched equals alone bit for bit, does not touch the request, yields
// finite logits and confidences, and right after a 1-token prompt sees a 1-row ring.
TEST_F(CpuSpeculative, DraftPassIsBatchInvariantAndPure) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize, B = m.draftBlockSize();
  std::vector<CpuRequestState> st;
  for (int64_t len : {1, 40}) {
    st.push_back(*m.newSpeculativeRequest());
    ASSERT_TRUE(m.prefill(st.back(), randomPrompt(len, 50 + uint64_t(len), V)).ok());
  }
  const CpuRequestState before = st[1];
  std::vector<CpuDraftInput> both = {{&st[0], 17, {}}, {&st[1], 23, {}}};
  both[1].sampling.temperature = 1.0;
  both[1].sampling.seed = 9;
  auto a = m.draft(both);
  ASSERT_TRUE(a.ok()) << a.error().message;
  for (size_t i = 0; i < 2; ++i) {
    auto one = m.draft({both[i]});
    ASSERT_TRUE(one.ok());
    EXPECT_EQ((*one)[0].tokens, (*a)[i].tokens);
    EXPECT_EQ((*one)[0].z, (*a)[i].z);
    EXPECT_EQ((*one)[0].confidence, (*a)[i].confidence);
    EXPECT_EQ((*one)[0].q, (*a)[i].q);
    ASSERT_EQ(int64_t((*a)[i].tokens.size()), B);
    for (float z : (*a)[i].z) ASSERT_TRUE(std::isfinite(z));
    for (float c : (*a)[i].confidence) ASSERT_TRUE(std::isfinite(c));
  }
  EXPECT_TRUE((*a)[0].q.empty());
  ASSERT_EQ(int64_t((*a)[1].q.size()), B);
  for (int64_t k = 0; k < B; ++k) EXPECT_GT((*a)[1].q[size_t(k)][size_t((*a)[1].tokens[size_t(k)])], 0.0);
  EXPECT_EQ(st[1].position(), before.position());
  for (int s = 0; s < m.config().numNextnPredictLayers; ++s)
    EXPECT_EQ(st[1].draftRing(s).page(0), before.draftRing(s).page(0));
  // Greedy drafts are the argmax of z_k, which includes the Markov bias of the previous pick.
  for (int64_t k = 0; k < B; ++k)
    EXPECT_EQ((*a)[0].tokens[size_t(k)], argmaxToken((*a)[0].z.data() + k * V, V));
}

// The Leviathan rule keeps the target's law exactly (§5): for random p and q over 8 tokens and
// drafts drawn from q, the first emitted token follows p_1 and the first two the chain p_1, p_2
// (the second token comes from the same step or, after a rejection, from the next step's
// bonus). Chi-square at significance 1e-4 over 200,000 trials (a correct rule fails with
// probability 1e-4 for a random seed; the seed is fixed, so the test is deterministic).
TEST(SpecAccept, SampledAcceptanceKeepsTheTargetLaw) {
  const int64_t V = 8, n = 1000;
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> nd(0, 1.2);
  auto randomDist = [&] {
    std::vector<double> p(static_cast<size_t>(V));
    double s = 0;
    for (double& x : p) s += (x = std::exp(nd(rng)));
    for (double& x : p) x /= s;
    return p;
  };
  // Target chain: p1, p2[x1]; draft chain: q1, q2[d1]. Target logits are log p (T = 1).
  const std::vector<double> p1 = randomDist(), q1 = randomDist();
  std::vector<std::vector<double>> p2(static_cast<size_t>(V)), q2(static_cast<size_t>(V));
  for (int64_t x = 0; x < V; ++x) {
    p2[size_t(x)] = randomDist();
    q2[size_t(x)] = randomDist();
  }
  auto logitsOf = [](const std::vector<double>& p) {
    std::vector<float> l(p.size());
    for (size_t i = 0; i < p.size(); ++i) l[i] = float(std::log(p[i]));
    return l;
  };
  // The exact probabilities the rows' fp32 logits stand for.
  SamplingOptions so;
  so.temperature = 1.0;
  const std::vector<float> l1 = logitsOf(p1);
  const std::vector<double> e1 = samplingDistribution(l1.data(), V, so);
  std::map<int64_t, double> probJoint, probFirst;
  for (int64_t a = 0; a < V; ++a) {
    const std::vector<float> l2 = logitsOf(p2[size_t(a)]);
    const std::vector<double> e2 = samplingDistribution(l2.data(), V, so);
    probFirst[a] = e1[size_t(a)];
    for (int64_t b = 0; b < V; ++b) probJoint[a * V + b] = e1[size_t(a)] * e2[size_t(b)];
  }
  const int64_t trials = 200000;
  std::map<int64_t, int64_t> first, joint;
  int64_t acceptedTotal = 0;
  for (int64_t t = 0; t < trials; ++t) {
    so.seed = uint64_t(t);
    const int32_t d1 = drawFrom(q1, keyedUniform(so.seed, n + 1, SpecDraw::Draft));
    const int32_t d2 = drawFrom(q2[size_t(d1)], keyedUniform(so.seed, n + 2, SpecDraw::Draft));
    std::vector<float> rows = l1;
    const std::vector<float> r1 = logitsOf(p2[size_t(d1)]);
    rows.insert(rows.end(), r1.begin(), r1.end());
    rows.insert(rows.end(), l1.begin(), l1.end());  // row 2 (after d2) is unused by the first two tokens
    const SpecAcceptance acc = acceptDrafts(rows.data(), V, {d1, d2}, {q1, q2[size_t(d1)]}, so, n);
    acceptedTotal += acc.accepted;
    const int32_t x1 = acc.accepted >= 1 ? d1 : acc.bonus;
    int32_t x2;
    if (acc.accepted >= 2) {
      x2 = d2;
    } else if (acc.accepted == 1) {
      x2 = acc.bonus;
    } else {
      // The next step with no drafts: its bonus from p2[x1], keyed at the next position.
      const std::vector<float> next = logitsOf(p2[size_t(x1)]);
      x2 = acceptDrafts(next.data(), V, {}, {}, so, n + 1).bonus;
    }
    ++first[x1];
    ++joint[x1 * V + x2];
  }
  const auto [s1, df1] = chiSquare(first, probFirst, trials);
  const auto [s2, df2] = chiSquare(joint, probJoint, trials);
  std::printf("[ info ] first token: chi2 %.1f (df %d, critical %.1f); first two: chi2 %.1f (df %d, critical %.1f); "
              "mean accepted %.3f\n",
              s1, df1, chiSquareCritical(df1), s2, df2, chiSquareCritical(df2), double(acceptedTotal) / double(trials));
  EXPECT_LT(s1, chiSquareCritical(df1));
  EXPECT_LT(s2, chiSquareCritical(df2));
  EXPECT_GT(acceptedTotal, trials / 4);  // the law holds while many drafts are accepted
}

// A draft drawn from the target's own distribution (q = p) is always accepted; a draft with
// p(d) = 0 never is; the greedy rule is the argmax prefix.
TEST(SpecAccept, EdgeRules) {
  const int64_t V = 5;
  const std::vector<float> rows = {0, 1, 2, 3, 4, 4, 3, 2, 1, 0, 1, 1, 5, 1, 1};
  SamplingOptions greedy;
  SpecAcceptance g = acceptDrafts(rows.data(), V, {4, 0}, {}, greedy, 0);
  EXPECT_EQ(g.accepted, 2);
  EXPECT_EQ(g.bonus, 2);
  g = acceptDrafts(rows.data(), V, {4, 1}, {}, greedy, 0);
  EXPECT_EQ(g.accepted, 1);
  EXPECT_EQ(g.bonus, 0);
  SamplingOptions s;
  s.temperature = 1.0;
  s.topP = 0.5;  // row 0's nucleus: {4} then {3}: p(0) = 0
  for (uint64_t seed = 0; seed < 200; ++seed) {
    s.seed = seed;
    const SpecAcceptance a = acceptDrafts(rows.data(), V, {0}, {}, s, 10);
    EXPECT_EQ(a.accepted, 0);
    EXPECT_NE(a.bonus, 0);
    const std::vector<double> p = samplingDistribution(rows.data(), V, s);
    const int32_t d = drawFrom(p, keyedUniform(seed, 11, SpecDraw::Draft));
    const SpecAcceptance b = acceptDrafts(rows.data(), V, {d}, {p}, s, 10);
    EXPECT_EQ(b.accepted, 1);
  }
}

// §7.8 on the model: over many seeds the first token of a sampled speculative step follows the
// target's distribution at the anchor (chi-square, significance 1e-4), and drafts drawn from the
// target's own p (the q = p hook) are all accepted.
TEST_F(CpuSpeculative, SampledStepKeepsTheTargetDistribution) {
  CpuModel& m = tiny();
  const int64_t V = m.config().vocabSize;
  SamplingOptions so;
  so.temperature = 0.6;
  so.topP = 0.95;
  const std::vector<int32_t> prompt = randomPrompt(21, 31, V);
  auto base = m.newSpeculativeRequest();
  ASSERT_TRUE(base.ok());
  auto pre = m.prefill(*base, prompt);
  ASSERT_TRUE(pre.ok());
  const int32_t anchor = argmaxToken(lastRow(*pre).data(), V);
  CpuRequestState probe = *base;
  auto l0 = m.decode(probe, anchor);
  ASSERT_TRUE(l0.ok());
  const std::vector<double> p1 = samplingDistribution(l0->data(), V, so);
  std::map<int64_t, double> prob;
  for (int64_t x = 0; x < V; ++x)
    if (p1[size_t(x)] > 0) prob[x] = p1[size_t(x)];

  const int64_t runs = 400;
  std::map<int64_t, int64_t> seen;
  int64_t accepted = 0;
  for (int64_t r = 0; r < runs; ++r) {
    CpuRequestState st = *base;
    std::vector<CpuSpecStep> steps(1);
    steps[0].state = &st;
    steps[0].next = anchor;
    steps[0].sampling = so;
    steps[0].sampling.seed = uint64_t(r) * 7919;
    steps[0].maxDrafts = 2;
    auto out = m.speculativeStep(steps);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ++seen[(*out)[0].emitted[0]];
    accepted += (*out)[0].accepted;
  }
  const auto [stat, df] = chiSquare(seen, prob, runs);
  std::printf("[ info ] sampled steps: first token chi2 %.1f (df %d, critical %.1f), %zu distinct, mean accepted "
              "%.3f\n",
              stat, df, chiSquareCritical(std::max(df, 1)), seen.size(), double(accepted) / double(runs));
  ASSERT_GE(df, 1);
  EXPECT_LT(stat, chiSquareCritical(df));

  // q = p: draw each draft from the target's distribution after the previous one.
  for (uint64_t seed : {3u, 4u, 5u}) {
    CpuRequestState st = *base, chain = *base;
    std::vector<CpuSpecStep> steps(1);
    steps[0].state = &st;
    steps[0].next = anchor;
    steps[0].sampling = so;
    steps[0].sampling.seed = seed;
    int32_t prev = anchor;
    const int64_t n = st.position();
    for (int64_t k = 1; k <= m.draftBlockSize(); ++k) {
      auto lk = m.decode(chain, prev);
      ASSERT_TRUE(lk.ok());
      std::vector<double> p = samplingDistribution(lk->data(), V, so);
      prev = drawFrom(p, keyedUniform(seed, uint64_t(n + k), SpecDraw::Draft));
      steps[0].draftOverride.push_back(prev);
      steps[0].qOverride.push_back(std::move(p));
    }
    auto out = m.speculativeStep(steps);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ((*out)[0].accepted, m.draftBlockSize()) << "seed " << seed;
  }
}

// Near max_position_embeddings the block does not fit: the step verifies no draft (a plain
// decode step), then no further position at all.
TEST_F(CpuSpeculative, PositionLimitFallsBackToPlainSteps) {
  const std::string dir = tinyModel().dir + "_maxpos";
  fs::create_directories(dir);
  for (const char* f : {"model.safetensors", "token_map.i32", "engram_hash.json"})
    fs::copy_file(tinyModel().dir + "/" + f, dir + "/" + f, fs::copy_options::overwrite_existing);
  ModelConfig cfg = tiny().config();
  cfg.maxPositionEmbeddings = 40;
  {
    std::ofstream(dir + "/config.json") << modelConfigToJson(cfg);
  }
  auto m = CpuModel::load(dir, CpuModelOptions{2, false});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const int64_t V = cfg.vocabSize;
  auto st = (*m)->newSpeculativeRequest();
  ASSERT_TRUE(st.ok());
  auto pre = (*m)->prefill(*st, randomPrompt(33, 5, V));
  ASSERT_TRUE(pre.ok());
  int32_t next = argmaxToken(lastRow(*pre).data(), V);
  std::vector<int64_t> verified;
  while (st->position() < 40) {
    std::vector<CpuSpecStep> steps(1);
    steps[0].state = &*st;
    steps[0].next = next;
    auto out = (*m)->speculativeStep(steps);
    ASSERT_TRUE(out.ok()) << out.error().message;
    verified.push_back(int64_t((*out)[0].drafts.size()));
    next = (*out)[0].emitted.back();
  }
  // n = 33: 33 + 5 <= 39 drafts; from n = 35 on the block no longer fits.
  EXPECT_EQ(verified.front(), 5);
  EXPECT_EQ(verified.back(), 0);
  std::vector<CpuSpecStep> steps(1);
  steps[0].state = &*st;
  steps[0].next = next;
  EXPECT_FALSE((*m)->speculativeStep(steps).ok());
  m->reset();
  fs::remove_all(dir);
}

TEST_F(CpuSpeculative, RejectsBadUse) {
  CpuModel& m = tiny();
  CpuRequestState plain = m.newRequest();
  ASSERT_TRUE(m.prefill(plain, {1, 2, 3}).ok());
  std::vector<CpuSpecStep> steps(1);
  steps[0].state = &plain;
  steps[0].next = 4;
  auto r = m.speculativeStep(steps);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not a speculative request"), std::string::npos) << r.error().message;
  EXPECT_FALSE(m.rollback(plain, 2).ok());

  auto st = m.newSpeculativeRequest();
  ASSERT_TRUE(st.ok());
  steps[0].state = &*st;
  r = m.speculativeStep(steps);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("prefill it first"), std::string::npos) << r.error().message;
  ASSERT_TRUE(m.prefill(*st, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}).ok());
  steps[0].next = int32_t(m.config().vocabSize);
  EXPECT_FALSE(m.speculativeStep(steps).ok());
  steps[0].next = 3;
  steps.push_back(steps[0]);
  r = m.speculativeStep(steps);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("twice"), std::string::npos);
  // A rollback only inside the last call and by at most the ring's spare rows.
  auto rb = m.rollback(*st, 4);
  ASSERT_FALSE(rb.ok());
  EXPECT_NE(rb.error().message.find("spare"), std::string::npos) << rb.error().message;
  EXPECT_FALSE(m.rollback(*st, 11).ok());
  EXPECT_TRUE(m.rollback(*st, 7).ok());
  EXPECT_EQ(st->position(), 7);
}

// Finite weights whose logits overflow (head.weight at bf16's largest value): a verify step stops
// with a message naming the request and position, and every request of the call becomes unusable
// (earlier ones advanced with their outcomes lost), so later calls fail instead of continuing from
// inconsistent caches.
TEST(CpuSpeculativeNonFinite, VerifyStopsAndMarksTheCallsRequestsUnusable) {
  const std::string dir = fs::path(::testing::TempDir()) / fmt::format("cpu_spec_overflow_{}", ::getpid());
  MakeModelOptions o;
  o.preset = "tiny";
  o.outDir = dir;
  o.seed = 3;
  ASSERT_TRUE(makeModel(o).ok());
  const std::string file = dir + "/model.safetensors";
  uint64_t headerLen = 0, begin = 0, end = 0;
  {
    auto st = SafetensorsFile::open(file);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const SafetensorsEntry* e = (*st)->find("head.weight");
    ASSERT_NE(e, nullptr);
    ASSERT_EQ(e->dtype, "BF16");
    begin = e->begin;
    end = e->end;
  }
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.read(reinterpret_cast<char*>(&headerLen), 8));
    f.seekp(std::streamoff(8 + headerLen + begin));
    const std::vector<char> big = [&] {
      std::vector<char> b(size_t(end - begin));
      for (size_t i = 0; i + 1 < b.size(); i += 2) b[i] = char(0x7f), b[i + 1] = char(0x7f);
      return b;
    }();
    ASSERT_TRUE(f.write(big.data(), std::streamsize(big.size())));
  }
  auto m = CpuModel::load(dir, CpuModelOptions{2, false});
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto a = (*m)->newSpeculativeRequest(), b = (*m)->newSpeculativeRequest();
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*m)->prefill(*a, {1, 2, 3}).ok());
  ASSERT_TRUE((*m)->prefill(*b, {4, 5, 6, 7}).ok());
  std::vector<CpuSpecStep> steps(2);
  steps[0].state = &*a;
  steps[0].next = 8;
  steps[1].state = &*b;
  steps[1].next = 9;
  auto r = (*m)->speculativeStep(steps);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not finite"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("no longer usable"), std::string::npos) << r.error().message;
  for (CpuRequestState* s : {&*a, &*b}) {
    std::vector<CpuSpecStep> again(1);
    again[0].state = s;
    again[0].next = 8;
    auto r2 = (*m)->speculativeStep(again);
    ASSERT_FALSE(r2.ok());
    EXPECT_NE(r2.error().message.find("unusable"), std::string::npos) << r2.error().message;
  }
  m->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}
