// The GPU forward pass on the `tiny` model against the CPU reference forward (label gpu; skips
// visibly without a GPU): prefill and 32 greedy decode steps, prefill-then-decode against a
// full prefill, concurrent requests against each alone, a 4K context that engages candidate
// filtering, the YOCO metadata counter, the sm_80 PTX specialization, and no page or device
// memory leak over 1,000 requests. Errors are reported relative to the row's largest logit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "GpuTestDevice.h"
#include "model/gpu/GpuModel.h"
#include "model/CpuForward.h"
#include "model/MakeModel.h"

namespace deepinfer {
namespace {

// Agreement of one logits row with the CPU's: the largest absolute difference over the row's
// largest |logit| (logits of the tiny model are O(1..10)).
constexpr double kLogitTolerance = 3e-2;

struct ModelEnv {
  std::shared_ptr<Device> dev;
  std::string why, dir;
  std::unique_ptr<CpuModel> cpu;
  std::unique_ptr<GpuModel> gpu;
  uint64_t seed = 0;
};

ModelEnv& env() {
  static ModelEnv e = [] {
    ModelEnv e;
    const auto& g = testing_util::gpuTestDevice();
    e.seed = g.seed;
    if (!g.dev) {
      e.why = g.why;
      return e;
    }
    e.dev = g.dev;
    e.dir = (std::filesystem::path(::testing::TempDir()) / fmt::format("di_gpu_model_{}", ::getpid())).string();
    MakeModelOptions mo;
    mo.preset = "tiny";
    mo.outDir = e.dir;
    if (auto st = makeModel(mo); !st.ok()) {
      e.why = "make-model tiny: " + st.error().message;
      e.dev.reset();
      return e;
    }
    auto cpu = CpuModel::load(e.dir);
    if (!cpu.ok()) {
      e.why = "cpu model: " + cpu.error().message;
      e.dev.reset();
      return e;
    }
    e.cpu = std::move(*cpu);
    GpuModelOptions go;
    go.kvCacheBytes = int64_t(1) << 30;
    go.maxChunkTokens = 128;
    auto gpu = GpuModel::load(e.dir, e.dev, go);
    if (!gpu.ok()) {
      e.why = "gpu model: " + gpu.error().message;
      ADD_FAILURE() << e.why;
      e.dev.reset();
      return e;
    }
    e.gpu = std::move(*gpu);
    fmt::print("GPU model: {} on {} (sm_{}), KV capacity {} tokens, seed {}\n", e.dir, e.dev->info().profile.gpuName,
               e.dev->info().profile.arch(), e.gpu->capacity().tokens, e.seed);
    return e;
  }();
  return e;
}

#define NEED_GPU()                                                  \
  ModelEnv& e = env();                                              \
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why

std::vector<int32_t> randomIds(int64_t n, uint64_t seed, int64_t V) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = int32_t(rng() % uint64_t(V));
  return ids;
}

double rowError(const float* gpu, const float* cpu, int64_t V) {
  double maxAbs = 1e-30, maxDiff = 0;
  for (int64_t i = 0; i < V; ++i) {
    maxAbs = std::max(maxAbs, double(std::fabs(cpu[i])));
    maxDiff = std::max(maxDiff, double(std::fabs(gpu[i] - cpu[i])));
  }
  return maxDiff / maxAbs;
}

void recordResult(const std::string& row) {
  const char* path = std::getenv("DI_GPU_RESULTS");
  fmt::print("{}\n", row);
  if (!path) return;
  std::ofstream f(path, std::ios::app);
  f << row << "\n";
}

// One row's comparison: the largest absolute difference, and whether the GPU's greedy choice
// must equal the CPU's. It must whenever the CPU's top-2 margin exceeds twice the largest
// difference (no perturbation that small can reorder them); closer calls are near-ties.
struct RowCheck {
  double relErr = 0;
  bool decisive = false, same = false;
};
RowCheck checkRow(const float* gpu, const float* cpu, int64_t V) {
  RowCheck r;
  r.relErr = rowError(gpu, cpu, V);
  double maxDiff = 0, maxAbs = 1e-30;
  for (int64_t i = 0; i < V; ++i) {
    maxDiff = std::max(maxDiff, double(std::fabs(gpu[i] - cpu[i])));
    maxAbs = std::max(maxAbs, double(std::fabs(cpu[i])));
  }
  const int32_t top = argmaxToken(cpu, V);
  double second = -INFINITY;
  for (int64_t i = 0; i < V; ++i)
    if (i != top) second = std::max(second, double(cpu[i]));
  r.decisive = double(cpu[top]) - second > 2 * maxDiff;
  r.same = argmaxToken(gpu, V) == top;
  return r;
}

// Prefill `prompt`, then `steps` decodes fed with the CPU's greedy tokens (both backends see
// the same inputs); every row compared. Greedy choices must agree on every decisive row.
void compareGreedy(GpuModel& gpu, CpuModel& cpu, const std::vector<int32_t>& prompt, int steps, const std::string& tag) {
  const int64_t V = cpu.config().vocabSize, n = int64_t(prompt.size());
  CpuRequestState cr = cpu.newRequest();
  auto cl = cpu.prefill(cr, prompt);
  ASSERT_TRUE(cl.ok()) << cl.error().message;
  auto req = gpu.newRequest();
  ASSERT_TRUE(req.ok()) << req.error().message;
  auto gl = gpu.prefill(*req, prompt);
  ASSERT_TRUE(gl.ok()) << gl.error().message;
  double worstPrefill = 0, worstDecode = 0;
  int nearTies = 0, decisiveMismatches = 0, mismatchesAll = 0;
  auto account = [&](const RowCheck& r, double& worst, int64_t where) {
    worst = std::max(worst, r.relErr);
    if (!r.same) ++mismatchesAll;
    if (!r.decisive) ++nearTies;
    if (r.decisive && !r.same) {
      ++decisiveMismatches;
      ADD_FAILURE() << tag << ": greedy choice differs at position " << where << " although the CPU's margin is decisive";
    }
  };
  for (int64_t t = 0; t < n; ++t)
    account(checkRow(gl->ptr<float>() + t * V, cl->ptr<float>() + t * V, V), worstPrefill, t);
  int32_t next = argmaxToken(cl->ptr<float>() + (n - 1) * V, V);
  for (int s = 0; s < steps; ++s) {
    auto g = gpu.decode(*req, next);
    ASSERT_TRUE(g.ok()) << g.error().message;
    auto c = cpu.decode(cr, next);
    ASSERT_TRUE(c.ok()) << c.error().message;
    account(checkRow(g->data(), c->data(), V), worstDecode, n + s);
    next = argmaxToken(c->data(), V);
  }
  recordResult(fmt::format(R"({{"test":"{}","prompt":{},"decode_steps":{},"max_rel_err_prefill":{:.3e},)"
                           R"("max_rel_err_decode":{:.3e},"greedy_differs":{},"near_ties":{},"decisive_mismatches":{}}})",
                           tag, n, steps, worstPrefill, worstDecode, mismatchesAll, nearTies, decisiveMismatches));
  EXPECT_LE(worstPrefill, kLogitTolerance) << tag;
  EXPECT_LE(worstDecode, kLogitTolerance) << tag;
  ASSERT_TRUE(gpu.releaseRequest(*req).ok());
}

TEST(GpuModel, PrefillAnd32DecodesMatchCpu) {
  NEED_GPU();
  const auto before = e.gpu->counters();
  compareGreedy(*e.gpu, *e.cpu, randomIds(150, e.seed, e.cpu->config().vocabSize), 32, "tiny_prefill150_decode32");
  // YOCO: the compressed cache of each kv source is gathered once per forward (not per
  // consumer layer), and combined index rows are built once per index source.
  const auto after = e.gpu->counters();
  const int64_t forwards = after.forwards - before.forwards;
  const int layers = e.cpu->config().numHiddenLayers;
  int sources = 0, indexGroups = 0;
  for (int L = 0; L < layers; ++L) {
    sources += e.cpu->config().role(L).isKvSource;
    indexGroups += e.cpu->config().role(L).isIndexSource;
  }
  // Every layer attends; the source metadata is built once per source per forward (the first
  // forward's first chunk sees no compressed entries yet), not once per consuming layer.
  EXPECT_EQ(after.attentionLayers - before.attentionLayers, forwards * layers);
  EXPECT_LE(after.kvMetadataBuilds - before.kvMetadataBuilds, forwards * sources);
  EXPECT_GE(after.kvMetadataBuilds - before.kvMetadataBuilds, (forwards - 1) * sources);
  EXPECT_LE(after.indexRowBuilds - before.indexRowBuilds, forwards * (indexGroups + 1));
  recordResult(fmt::format(R"({{"test":"yoco_counter","forwards":{},"kv_sources":{},"kv_metadata_builds":{},)"
                           R"("index_row_builds":{},"attention_layers":{}}})",
                           forwards, sources, after.kvMetadataBuilds - before.kvMetadataBuilds,
                           after.indexRowBuilds - before.indexRowBuilds,
                           after.attentionLayers - before.attentionLayers));
}

TEST(GpuModel, PrefillThenDecodeEqualsFullPrefill) {
  NEED_GPU();
  const int64_t V = e.cpu->config().vocabSize;
  const auto ids = randomIds(90, e.seed + 1, V);
  auto full = e.gpu->newRequest();
  ASSERT_TRUE(full.ok());
  auto fl = e.gpu->prefill(*full, ids);
  ASSERT_TRUE(fl.ok()) << fl.error().message;
  auto part = e.gpu->newRequest();
  ASSERT_TRUE(part.ok());
  const int64_t k = 7;
  auto pl = e.gpu->prefill(*part, std::vector<int32_t>(ids.begin(), ids.end() - k));
  ASSERT_TRUE(pl.ok()) << pl.error().message;
  double worst = 0;
  for (int64_t i = int64_t(ids.size()) - k; i < int64_t(ids.size()); ++i) {
    auto row = e.gpu->decode(*part, ids[size_t(i)]);
    ASSERT_TRUE(row.ok()) << row.error().message;
    const float* f = fl->ptr<float>() + i * V;
    const RowCheck c = checkRow(row->data(), f, V);
    worst = std::max(worst, c.relErr);
    EXPECT_TRUE(!c.decisive || c.same) << "position " << i << ": greedy choice differs on a decisive row";
  }
  recordResult(fmt::format(R"({{"test":"prefill_then_decode_vs_full","max_rel_err":{:.3e}}})", worst));
  EXPECT_LE(worst, kLogitTolerance);
  EXPECT_TRUE(e.gpu->releaseRequest(*full).ok());
  EXPECT_TRUE(e.gpu->releaseRequest(*part).ok());
}

TEST(GpuModel, BatchedRequestsMatchEachAlone) {
  NEED_GPU();
  // Three requests of different lengths prefilled in ONE forward call, then decoded together
  // (one call per step, one token each), with a fourth request's prefill joining a decode step
  // (continuous batching). Each row is compared with the same request run alone; inputs are the
  // alone run's greedy tokens, so both see identical tokens.
  const int64_t V = e.cpu->config().vocabSize;
  const std::vector<int64_t> lens = {5, 33, 70, 20};
  const int steps = 12, joinAt = 6;
  std::vector<std::vector<int32_t>> prompts, tokens(lens.size());
  std::vector<std::vector<std::vector<float>>> aloneRows(lens.size());
  for (size_t i = 0; i < lens.size(); ++i) {
    prompts.push_back(randomIds(lens[i], e.seed + 10 + i, V));
    auto r = e.gpu->newRequest();
    ASSERT_TRUE(r.ok());
    auto l = e.gpu->prefill(*r, prompts[i], /*lastOnly=*/true);
    ASSERT_TRUE(l.ok()) << l.error().message;
    aloneRows[i].emplace_back(l->ptr<float>(), l->ptr<float>() + V);
    const int n = i == 3 ? steps - joinAt - 1 : steps;
    for (int s = 0; s < n; ++s) {
      tokens[i].push_back(argmaxToken(aloneRows[i].back().data(), V));
      auto d = e.gpu->decode(*r, tokens[i].back());
      ASSERT_TRUE(d.ok()) << d.error().message;
      aloneRows[i].push_back(std::move(*d));
    }
    ASSERT_TRUE(e.gpu->releaseRequest(*r).ok());
  }
  std::vector<int64_t> reqs;
  for (size_t i = 0; i < lens.size(); ++i) {
    auto r = e.gpu->newRequest();
    ASSERT_TRUE(r.ok());
    reqs.push_back(*r);
  }
  double worst = 0;
  int decisiveMismatches = 0, rowsCompared = 0;
  auto compare = [&](size_t i, size_t step, const HostTensor& got) {
    const RowCheck c = checkRow(got.ptr<float>(), aloneRows[i][step].data(), V);
    worst = std::max(worst, c.relErr);
    ++rowsCompared;
    if (c.decisive && !c.same) {
      ++decisiveMismatches;
      ADD_FAILURE() << "request " << i << " step " << step << ": batched greedy choice differs from alone";
    }
  };
  auto first = e.gpu->forward({{reqs[0], prompts[0]}, {reqs[1], prompts[1]}, {reqs[2], prompts[2]}}, true);
  ASSERT_TRUE(first.ok()) << first.error().message;
  for (size_t i = 0; i < 3; ++i) compare(i, 0, (*first)[i]);
  for (int s = 0; s < steps; ++s) {
    std::vector<std::pair<int64_t, std::vector<int32_t>>> work;
    for (size_t i = 0; i < 3; ++i) work.push_back({reqs[i], {tokens[i][size_t(s)]}});
    const bool join = s == joinAt, joined = s > joinAt;
    if (join) work.push_back({reqs[3], prompts[3]});
    if (joined) work.push_back({reqs[3], {tokens[3][size_t(s - joinAt - 1)]}});
    auto out = e.gpu->forward(work, true);
    ASSERT_TRUE(out.ok()) << out.error().message;
    for (size_t i = 0; i < 3; ++i) compare(i, size_t(s + 1), (*out)[i]);
    if (join) compare(3, 0, (*out)[3]);
    if (joined) compare(3, size_t(s - joinAt), (*out)[3]);
  }
  recordResult(fmt::format(R"({{"test":"batched_vs_alone","rows":{},"max_rel_err":{:.3e},"decisive_mismatches":{}}})",
                           rowsCompared, worst, decisiveMismatches));
  EXPECT_LE(worst, kLogitTolerance);
  for (int64_t r : reqs) ASSERT_TRUE(e.gpu->releaseRequest(r).ok());
  // Same request twice in one call, and a chunk beyond the limit: clear errors.
  auto r = e.gpu->newRequest();
  ASSERT_TRUE(r.ok());
  auto twice = e.gpu->forward({{*r, {1}}, {*r, {2}}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("twice"), std::string::npos) << twice.error().message;
  auto big = e.gpu->forward({{*r, randomIds(129, 1, V)}});
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(e.gpu->releaseRequest(*r).ok());
}

TEST(GpuModel, LongContextEngagesCandidateFiltering) {
  NEED_GPU();
  // 4K tokens: the candidate source keeps 4 of up to 512 blocks, so restricted layers score
  // only inside them, and every indexer drops entries.
  compareGreedy(*e.gpu, *e.cpu, randomIds(4096, e.seed + 2, e.cpu->config().vocabSize), 4, "tiny_context4096");
}

TEST(GpuModel, Sm80PtxSpecializationMatchesCpu) {
  NEED_GPU();
  if (e.dev->info().profile.arch() < 80) GTEST_SKIP() << "GPU older than sm_80";
  GpuModelOptions go;
  go.target = "sm_80";
  go.kvCacheBytes = int64_t(256) << 20;
  go.maxRequests = 2;
  go.maxChunkTokens = 64;
  auto gpu = GpuModel::load(e.dir, e.dev, go);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  EXPECT_EQ((*gpu)->targetName(), "sm_80");
  compareGreedy(**gpu, *e.cpu, randomIds(100, e.seed + 3, e.cpu->config().vocabSize), 8, "tiny_sm80_ptx");
}

TEST(GpuModel, DecodeGraphsMatchEagerBitForBit) {
  NEED_GPU();
  // The shared model replays decode steps as CUDA graphs; a second instance runs them eagerly.
  // Same kernels in the same order: the logits must be identical, bit for bit, every step,
  // including steps where a new shape forces a fresh capture.
  GpuModelOptions go;
  go.kvCacheBytes = int64_t(256) << 20;
  go.maxRequests = 2;
  go.maxChunkTokens = 128;
  go.cudaGraphs = false;
  auto eager = GpuModel::load(e.dir, e.dev, go);
  ASSERT_TRUE(eager.ok()) << eager.error().message;
  const int64_t V = e.cpu->config().vocabSize;
  const auto prompt = randomIds(60, e.seed + 4, V);
  auto rg = e.gpu->newRequest();
  auto re = (*eager)->newRequest();
  ASSERT_TRUE(rg.ok() && re.ok());
  auto pg = e.gpu->prefill(*rg, prompt, true);
  auto pe = (*eager)->prefill(*re, prompt, true);
  ASSERT_TRUE(pg.ok() && pe.ok());
  const auto before = e.gpu->counters();
  int32_t next = argmaxToken(pe->ptr<float>(), V);
  int differing = 0;
  for (int s = 0; s < 24; ++s) {  // crosses a 64-entry page: new page-table widths, a new graph
    auto g = e.gpu->decode(*rg, next);
    auto x = (*eager)->decode(*re, next);
    ASSERT_TRUE(g.ok()) << g.error().message;
    ASSERT_TRUE(x.ok()) << x.error().message;
    differing += std::memcmp(g->data(), x->data(), size_t(V) * 4) != 0;
    next = argmaxToken(x->data(), V);
  }
  const auto after = e.gpu->counters();
  recordResult(fmt::format(R"({{"test":"decode_graphs_vs_eager","steps":24,"graph_launches":{},"graph_captures":{},)"
                           R"("steps_differing":{}}})",
                           after.graphLaunches - before.graphLaunches, after.graphCaptures - before.graphCaptures,
                           differing));
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(after.graphLaunches - before.graphLaunches, 24) << "every decode step should replay a graph";
  EXPECT_LT(after.graphCaptures - before.graphCaptures, 24) << "graphs should be reused across steps";
  EXPECT_EQ((*eager)->counters().graphLaunches, 0);
  EXPECT_TRUE(e.gpu->releaseRequest(*rg).ok());
}

TEST(GpuModel, NoLeakOver1000Requests) {
  NEED_GPU();
  const int64_t V = e.cpu->config().vocabSize;
  auto cycle = [&](int i) {
    auto r = e.gpu->newRequest();
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto l = e.gpu->prefill(*r, randomIds(1 + i % 5, e.seed + uint64_t(i), V));
    ASSERT_TRUE(l.ok()) << l.error().message;
    auto d = e.gpu->decode(*r, 3);
    ASSERT_TRUE(d.ok()) << d.error().message;
    ASSERT_TRUE(e.gpu->releaseRequest(*r).ok());
  };
  for (int i = 0; i < 10; ++i) cycle(i);  // scratch buffers reach their size
  auto before = e.dev->memInfo();
  ASSERT_TRUE(before.ok());
  for (int i = 0; i < 1000; ++i) {
    cycle(i);
    if (HasFatalFailure()) return;
  }
  auto after = e.dev->memInfo();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(e.gpu->pagesInUse(), 0);
  EXPECT_EQ(after->first, before->first) << "device memory changed over 1,000 requests";
  recordResult(fmt::format(R"({{"test":"leak_1000_requests","pages_in_use":{},"free_before":{},"free_after":{}}})",
                           e.gpu->pagesInUse(), before->first, after->first));
}

TEST(GpuModel, BadInputIsAClearError) {
  NEED_GPU();
  auto r = e.gpu->newRequest();
  ASSERT_TRUE(r.ok());
  auto bad = e.gpu->prefill(*r, {1, int32_t(e.cpu->config().vocabSize)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("outside the vocabulary"), std::string::npos) << bad.error().message;
  auto none = e.gpu->prefill(12345678, {1});
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(e.gpu->releaseRequest(*r).ok());
  EXPECT_FALSE(e.gpu->releaseRequest(*r).ok());
  auto missing = GpuModel::load(e.dir + "/does-not-exist", e.dev, {});
  ASSERT_FALSE(missing.ok());
}

}  // namespace
}  // namespace deepinfer
