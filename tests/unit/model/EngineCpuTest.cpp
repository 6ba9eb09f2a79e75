// Engine on its cpu backend (the C++ reference behind the same request bookkeeping as the GPU):
// tokens and logits equal driving CpuModel by hand, exactly; chunked prefill and batching change
// nothing; speculative greedy equals plain greedy, logits row for row; bad options are errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "TinyModel.h"
#include "deepinfer/Engine.h"
#include "deepinfer/deepinfer.h"
#include "model/Sampling.h"

namespace deepinfer {
namespace {

using testing_tiny::randomPrompt;
using testing_tiny::tinyModel;

uint64_t seed() {
  const char* s = std::getenv("DI_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261201;
}

std::unique_ptr<Engine> cpuEngine(bool speculative, int64_t chunk = 256, int maxRequests = 4) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.speculative = speculative;
  o.maxChunkTokens = chunk;
  o.maxRequests = maxRequests;
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  if (!e.ok()) return nullptr;
  Status st = (*e)->loadModel(tinyModel().dir);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return st.ok() ? std::move(*e) : nullptr;
}

struct Generation {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // every position's, [prompt + generated, V]
};

Generation runEngine(Engine& e, const std::vector<int32_t>& prompt, int64_t maxNew) {
  RequestParams p;
  p.prompt = prompt;
  p.maxNewTokens = maxNew;
  p.keepAllLogits = true;
  auto id = e.addRequest(p);
  EXPECT_TRUE(id.ok()) << id.error().message;
  if (!id.ok()) return {};
  while (!e.finished(*id)) {
    auto ev = e.step();
    EXPECT_TRUE(ev.ok()) << ev.error().message;
    if (!ev.ok()) return {};
  }
  Generation g;
  g.tokens = e.tokens(*id);
  g.logits = *e.allLogits(*id);
  EXPECT_TRUE(e.removeRequest(*id).ok());
  return g;
}

// Greedy generation by hand: one prefill of the prompt, then one decode per token, the last
// token fed back for its row.
Generation runByHand(const std::vector<int32_t>& prompt, int64_t maxNew) {
  CpuModel& m = *tinyModel().model;
  const int64_t V = m.config().vocabSize;
  CpuRequestState st = m.newRequest();
  auto first = m.prefill(st, prompt);
  EXPECT_TRUE(first.ok()) << first.error().message;
  Generation g;
  g.logits.assign(first->ptr<float>(), first->ptr<float>() + first->numel());
  std::vector<float> last(g.logits.end() - V, g.logits.end());
  for (int64_t i = 0; i < maxNew; ++i) {
    g.tokens.push_back(sampleToken(last.data(), V, SamplingOptions{}, uint64_t(i)));
    auto next = m.decode(st, g.tokens.back());
    EXPECT_TRUE(next.ok()) << next.error().message;
    last = *next;
    g.logits.insert(g.logits.end(), last.begin(), last.end());
  }
  return g;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EngineCpu, GreedyTokensAndEveryLogitsRowEqualCpuModelByHand) {
  ASSERT_TRUE(tinyModel().model) << tinyModel().error;
  auto e = cpuEngine(false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->describe(), "cpu, 2 threads");
  EXPECT_EQ(e->kvCapacityTokens(), 0);
  const std::vector<int32_t> prompt = randomPrompt(37, seed(), e->vocabSize());
  const Generation want = runByHand(prompt, 7);
  const Generation got = runEngine(*e, prompt, 7);
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.logits.size(), size_t(37 + 7) * size_t(e->vocabSize()));
  EXPECT_TRUE(sameBits(got.logits, want.logits)) << "keepAllLogits rows differ from CpuModel's";
}

TEST(EngineCpu, ChunkedPrefillAndBatchedRequestsChangeNoBit) {
  ASSERT_TRUE(tinyModel().model) << tinyModel().error;
  auto whole = cpuEngine(false);
  auto chunked = cpuEngine(false, /*chunk=*/5);
  ASSERT_TRUE(whole && chunked);
  const int64_t V = whole->vocabSize();
  const std::vector<std::vector<int32_t>> prompts = {randomPrompt(23, seed() + 1, V), randomPrompt(3, seed() + 2, V),
                                                     randomPrompt(11, seed() + 3, V)};
  std::vector<Generation> alone;
  for (const auto& p : prompts) alone.push_back(runEngine(*whole, p, 5));
  // The three together in 5-token chunks: requests at different phases share every step.
  std::vector<int64_t> ids;
  for (const auto& p : prompts) {
    RequestParams rp;
    rp.prompt = p;
    rp.maxNewTokens = 5;
    rp.keepAllLogits = true;
    auto id = chunked->addRequest(rp);
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.push_back(*id);
  }
  int steps = 0;
  while (!chunked->finished(ids[0]) || !chunked->finished(ids[1]) || !chunked->finished(ids[2])) {
    auto ev = chunked->step();
    ASSERT_TRUE(ev.ok()) << ev.error().message;
    ASSERT_LT(++steps, 100);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(chunked->tokens(ids[i]), alone[i].tokens) << "request " << i;
    EXPECT_TRUE(sameBits(*chunked->allLogits(ids[i]), alone[i].logits)) << "request " << i;
  }
}

TEST(EngineCpu, SpeculativeGreedyEqualsPlainGreedyRowForRow) {
  ASSERT_TRUE(tinyModel().model) << tinyModel().error;
  ASSERT_TRUE(tinyModel().model->hasDraft());
  auto plain = cpuEngine(false);
  auto spec = cpuEngine(true);
  ASSERT_TRUE(plain && spec);
  EXPECT_FALSE(plain->speculative());
  EXPECT_TRUE(spec->speculative());
  // Long enough to cross tiny's window (128) and several compression blocks while speculating.
  const std::vector<int32_t> prompt = randomPrompt(120, seed() + 4, plain->vocabSize());
  const Generation a = runEngine(*plain, prompt, 24);
  const Generation b = runEngine(*spec, prompt, 24);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_TRUE(sameBits(b.logits, a.logits));
  const SpeculationStats s = spec->speculationStats();
  EXPECT_GT(s.steps, 0);
  EXPECT_LE(s.steps, 23);
  EXPECT_EQ(s.accepted + s.steps, 23) << "every token after the first comes from a speculative step";
}

TEST(EngineCpu, BadOptionsAndMissingDeviceFeaturesAreClearErrors) {
  ASSERT_TRUE(tinyModel().model) << tinyModel().error;
  EngineOptions o;
  o.backend = "tpu";
  auto bad = Engine::create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown backend 'tpu' (cuda, cpu)"), std::string::npos);
  o.backend = "cpu";
  o.target = "sm_80";
  bad = Engine::create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("target applies to the cuda backend only"), std::string::npos);
  o.target.clear();
  o.maxChunkTokens = 0;
  bad = Engine::create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("maxChunkTokens 0 < 1"), std::string::npos);

  auto e = cpuEngine(false, 256, /*maxRequests=*/1);
  ASSERT_TRUE(e);
  RequestParams p;
  p.prompt = {1, 2};
  p.maxNewTokens = 1;
  auto id = e->addRequest(p);
  ASSERT_TRUE(id.ok());
  auto second = e->addRequest(p);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("request slots"), std::string::npos) << second.error().message;
  ASSERT_TRUE(e->step().ok());
  auto dev = e->stepLogits();
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.error().message.find("cpu backend has no device logits"), std::string::npos);
  auto all = e->allLogits(*id);
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.error().message.find("does not keep all logits"), std::string::npos);
  auto op = e->runOp("topk", {}, {});
  ASSERT_FALSE(op.ok());
  EXPECT_NE(op.error().message.find("cuda backend only"), std::string::npos);
}

TEST(EngineCpu, TheCApiRunsTheCpuBackend) {
  ASSERT_TRUE(tinyModel().model) << tinyModel().error;
  di_engine_options o{};
  o.backend = "cpu";
  o.threads = 2;
  o.no_speculative = 1;
  di_engine* e = nullptr;
  ASSERT_EQ(di_engine_create(&o, &e), 0) << di_last_error();
  ASSERT_EQ(di_engine_load_model(e, tinyModel().dir.c_str()), 0) << di_last_error();
  const std::vector<int32_t> prompt = randomPrompt(9, seed() + 5, di_engine_vocab_size(e));
  int64_t id = 0;
  ASSERT_EQ(di_request_add(e, prompt.data(), prompt.size(), 4, 0.0, 1.0, 0, &id), 0) << di_last_error();
  di_step_event events[4];
  size_t n = 0;
  for (int step = 0; step < 10 && !di_request_finished(e, id); ++step)
    ASSERT_EQ(di_engine_step(e, nullptr, events, 4, &n), 0) << di_last_error();
  int32_t tokens[8];
  size_t count = 0;
  ASSERT_EQ(di_request_tokens(e, id, tokens, 8, &count), 0) << di_last_error();
  EXPECT_EQ(std::vector<int32_t>(tokens, tokens + count), runByHand(prompt, 4).tokens);
  di_engine_destroy(e);
  o.backend = "gpu";
  EXPECT_NE(di_engine_create(&o, &e), 0);
  EXPECT_NE(std::string(di_last_error()).find("unknown backend 'gpu'"), std::string::npos) << di_last_error();
}

}  // namespace
}  // namespace deepinfer
