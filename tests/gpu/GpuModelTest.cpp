// The GPU forward pass on the `tiny` model against the CPU reference forward (label gpu; skips
// visibly without a GPU): prefill and 32 greedy decode steps, prefill-then-decode against a
// full prefill, concurrent requests against each alone, a 4K context that engages candidate
// filtering, the YOCO metadata counter, the sm_80 PTX specialization, and no page or device
// memory leak over 1,000 requests. Errors are reported relative to the row's largest logit.
//
// What every whole-model comparison guarantees, on every seed (DI_TEST_SEED; GpuTestDevice.h):
//  1. Every decisive greedy choice is the reference's: where the reference's top-2 margin exceeds
//     twice the row's largest logit difference, no perturbation that small can reorder them.
//     Closer calls are counted ("close_calls") and reported, never asserted.
//  2. Rows agree within kRowTolerance of the row's largest logit. The measured noise: over ten
//     H200 runs on as many seeds the worst row of any comparison was 1.0e-2..2.5e-2
//     (tests/results/h200-model/): fp32 accumulation order and the bf16 roundings it moves.
//  3. A row beyond that is a near-tie row: an index or candidate choice whose scores tie within
//     rounding (such choices flip between fp32 and fp64 accumulation on the CPU too, see
//     CpuForwardModel.FlipRateBetweenFp32AndFp64) went the other way, moving that token and the
//     later ones that read its cache. Near-tie rows are counted and reported; at most
//     kMaxNearTieRowFraction of the rows may be one, and each stays within kNearTieRowTolerance,
//     far below the O(1) error of a wrong kernel. (At 079ff15 one seed gave a 0.0305 row.)
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
#include "TinyModelDir.h"
#include "deepinfer/DeviceCopy.h"
#include "deepinfer/Engine.h"
#include "model/gpu/GpuModel.h"
#include "model/CpuForward.h"

namespace deepinfer {
namespace {

// Agreement of one logits row with the CPU's: the largest absolute difference over the row's
// largest |logit| (logits of the tiny model are O(1..10)). See the guarantees above.
constexpr double kRowTolerance = 3e-2;
constexpr double kNearTieRowTolerance = 0.15;
constexpr double kMaxNearTieRowFraction = 0.05;

struct ModelEnv : testing_util::TinyModelEnv {
  std::unique_ptr<CpuModel> cpu;
  std::unique_ptr<GpuModel> gpu;
  std::unique_ptr<GpuModel> eager;  // see eagerModel()
};

ModelEnv& env() {
  static ModelEnv e = [] {
    ModelEnv e;
    if (!e.open("model") || !(e.cpu = e.loadCpu())) return e;
    GpuModelOptions go;
    go.kvCacheBytes = int64_t(1) << 30;
    go.maxChunkTokens = 128;
    if (!(e.gpu = e.loadGpu(go))) return e;
    fmt::print("GPU model: {} on {} (sm_{}), KV capacity {} tokens, seed {}\n", e.dir, e.dev->info().profile.gpuName,
               e.dev->info().profile.arch(), e.gpu->capacity().tokens, e.seed);
    return e;
  }();
  return e;
}

#define NEED_GPU()                                                  \
  ModelEnv& e = env();                                              \
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why

using testing_util::randomIds;

// A second instance of the tiny model that runs every step eagerly (CUDA graphs off), loaded once
// for the tests that compare the shared, graph-replaying model with it. Tests release their
// requests on it.
GpuModel* eagerModel(ModelEnv& e) {
  if (!e.eager) {
    GpuModelOptions go;
    go.kvCacheBytes = int64_t(256) << 20;
    go.maxRequests = 2;
    go.maxChunkTokens = 128;
    go.cudaGraphs = false;
    e.eager = e.loadGpu(go);
  }
  return e.eager.get();
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

// The rows of one comparison, checked against the guarantees above as they come, and reported.
struct Agreement {
  std::string tag;
  int64_t rows = 0, nearTieRows = 0, closeCalls = 0, greedyDiffers = 0, decisiveMismatches = 0;
  double worst = 0, worstAgreeing = 0;
  void add(const RowCheck& r, const std::string& where) {
    ++rows;
    worst = std::max(worst, r.relErr);
    if (r.relErr > kRowTolerance) {
      ++nearTieRows;
      EXPECT_LE(r.relErr, kNearTieRowTolerance)
          << tag << ": " << where << " differs by " << r.relErr << ", beyond even a near-tie row's bound";
    } else {
      worstAgreeing = std::max(worstAgreeing, r.relErr);
    }
    closeCalls += !r.decisive;
    greedyDiffers += !r.same;
    if (r.decisive && !r.same) {
      ++decisiveMismatches;
      ADD_FAILURE() << tag << ": greedy choice differs at " << where << " although the reference's margin is decisive";
    }
  }
  // Guarantee 3's count, once every row is in.
  void expectFewNearTieRows() const {
    EXPECT_LE(double(nearTieRows), kMaxNearTieRowFraction * double(rows))
        << tag << ": " << nearTieRows << " of " << rows << " rows beyond " << kRowTolerance << " (worst " << worst << ")";
  }
  std::string json() const {
    return fmt::format(R"("rows":{},"max_rel_err":{:.3e},"max_rel_err_agreeing_rows":{:.3e},"near_tie_rows":{},)"
                       R"("close_calls":{},"greedy_differs":{},"decisive_mismatches":{},"seed":{})",
                       rows, worst, worstAgreeing, nearTieRows, closeCalls, greedyDiffers, decisiveMismatches,
                       testing_util::gpuTestDevice().seed);
  }
};

// Prefill `prompt`, then `steps` decodes fed with the CPU's greedy tokens (both backends see
// the same inputs); every row compared (the guarantees above). Returns the CPU request's
// mechanism counters (what the reference did on these tokens).
CpuMechanismCounters compareGreedy(GpuModel& gpu, CpuModel& cpu, const std::vector<int32_t>& prompt, int steps,
                                   const std::string& tag) {
  const int64_t V = cpu.config().vocabSize, n = int64_t(prompt.size());
  CpuRequestState cr = cpu.newRequest();
  auto cl = cpu.prefill(cr, prompt);
  EXPECT_TRUE(cl.ok()) << cl.error().message;
  if (!cl.ok()) return {};
  auto req = gpu.newRequest();
  EXPECT_TRUE(req.ok()) << req.error().message;
  if (!req.ok()) return {};
  auto gl = gpu.prefill(*req, prompt);
  EXPECT_TRUE(gl.ok()) << gl.error().message;
  if (!gl.ok()) return {};
  Agreement prefill{tag + " prefill"}, decode{tag + " decode"};
  for (int64_t t = 0; t < n; ++t)
    prefill.add(checkRow(gl->ptr<float>() + t * V, cl->ptr<float>() + t * V, V), fmt::format("position {}", t));
  int32_t next = argmaxToken(cl->ptr<float>() + (n - 1) * V, V);
  for (int s = 0; s < steps; ++s) {
    auto g = gpu.decode(*req, next);
    auto c = cpu.decode(cr, next);
    EXPECT_TRUE(g.ok() && c.ok()) << (g.ok() ? c.error().message : g.error().message);
    if (!g.ok() || !c.ok()) break;
    decode.add(checkRow(g->data(), c->data(), V), fmt::format("position {}", n + s));
    next = argmaxToken(c->data(), V);
  }
  recordResult(fmt::format(R"({{"test":"{}","prompt":{},"decode_steps":{},"prefill":{{{}}},"decode":{{{}}}}})", tag, n,
                           steps, prefill.json(), decode.json()));
  prefill.expectFewNearTieRows();
  decode.expectFewNearTieRows();
  EXPECT_TRUE(gpu.releaseRequest(*req).ok());
  return cr.counters();
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
  Agreement a{"prefill_then_decode_vs_full"};
  for (int64_t i = int64_t(ids.size()) - k; i < int64_t(ids.size()); ++i) {
    auto row = e.gpu->decode(*part, ids[size_t(i)]);
    ASSERT_TRUE(row.ok()) << row.error().message;
    a.add(checkRow(row->data(), fl->ptr<float>() + i * V, V), fmt::format("position {}", i));
  }
  recordResult(fmt::format(R"({{"test":"prefill_then_decode_vs_full",{}}})", a.json()));
  a.expectFewNearTieRows();
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
  Agreement a{"batched_vs_alone"};
  auto compare = [&](size_t i, size_t step, const HostTensor& got) {
    a.add(checkRow(got.ptr<float>(), aloneRows[i][step].data(), V), fmt::format("request {} step {}", i, step));
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
  recordResult(fmt::format(R"({{"test":"batched_vs_alone",{}}})", a.json()));
  a.expectFewNearTieRows();
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
  // only inside them, and every indexer drops entries. The GPU counts the filtering as the
  // reference does: both must have engaged it, on the same tokens.
  const auto before = e.gpu->counters();
  const CpuMechanismCounters cpu =
      compareGreedy(*e.gpu, *e.cpu, randomIds(4096, e.seed + 2, e.cpu->config().vocabSize), 4, "tiny_context4096");
  const auto after = e.gpu->counters();
  const int64_t dropped = after.candidateBlocksDropped - before.candidateBlocksDropped;
  const int64_t masked = after.candidateEntriesMasked - before.candidateEntriesMasked;
  recordResult(fmt::format(R"({{"test":"candidate_filtering","gpu_blocks_dropped":{},"cpu_blocks_dropped":{},)"
                           R"("gpu_entries_masked":{},"cpu_entries_masked":{}}})",
                           dropped, cpu.candidateBlocksDropped, masked, cpu.candidateEntriesMasked));
  EXPECT_GT(cpu.candidateBlocksDropped, 0) << "the 4K prompt should make the candidate source drop blocks";
  EXPECT_GT(dropped, 0) << "candidate filtering did not engage on the GPU";
  EXPECT_GT(masked, 0) << "no restricted layer had entries masked on the GPU";
  EXPECT_EQ(dropped, cpu.candidateBlocksDropped);
  EXPECT_EQ(masked, cpu.candidateEntriesMasked);
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
  GpuModel* eager = eagerModel(e);
  ASSERT_NE(eager, nullptr);
  const int64_t V = e.cpu->config().vocabSize;
  const auto prompt = randomIds(60, e.seed + 4, V);
  auto rg = e.gpu->newRequest();
  auto re = eager->newRequest();
  ASSERT_TRUE(rg.ok() && re.ok());
  auto pg = e.gpu->prefill(*rg, prompt, true);
  auto pe = eager->prefill(*re, prompt, true);
  ASSERT_TRUE(pg.ok() && pe.ok());
  const auto before = e.gpu->counters();
  int32_t next = argmaxToken(pe->ptr<float>(), V);
  int differing = 0;
  for (int s = 0; s < 24; ++s) {  // crosses a 64-entry page: new page-table widths, a new graph
    auto g = e.gpu->decode(*rg, next);
    auto x = eager->decode(*re, next);
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
  EXPECT_EQ(eager->counters().graphLaunches, 0);
  EXPECT_TRUE(e.gpu->releaseRequest(*rg).ok());
  EXPECT_TRUE(eager->releaseRequest(*re).ok());
}

TEST(GpuModel, BatchedDecodeGraphsMatchEagerBitForBit) {
  NEED_GPU();
  // Two requests decoded together, one token each per step, replayed as CUDA graphs against the
  // eager instance. Their positions have opposite parity, so on every step the ratio-2
  // compressor closes a pair for exactly one of them, alternating: the steps share one shape but
  // not the sequence a launch reads, and a graph captured for one must not replay for the other.
  GpuModel* eager = eagerModel(e);
  ASSERT_NE(eager, nullptr);
  const int64_t V = e.cpu->config().vocabSize;
  std::vector<int64_t> rg, re;
  std::vector<int32_t> next;
  for (int k = 0; k < 2; ++k) {
    const auto prompt = randomIds(40 + 9 * k, e.seed + 30 + uint64_t(k), V);
    auto a = e.gpu->newRequest();
    auto b = eager->newRequest();
    ASSERT_TRUE(a.ok() && b.ok());
    rg.push_back(*a);
    re.push_back(*b);
    auto pg = e.gpu->prefill(*a, prompt, true);
    auto pe = eager->prefill(*b, prompt, true);
    ASSERT_TRUE(pg.ok() && pe.ok());
    next.push_back(argmaxToken(pe->ptr<float>(), V));
  }
  const auto before = e.gpu->counters();
  int differing = 0;
  const int steps = 8;
  for (int s = 0; s < steps; ++s) {
    auto g = e.gpu->forward({{rg[0], {next[0]}}, {rg[1], {next[1]}}});
    auto x = eager->forward({{re[0], {next[0]}}, {re[1], {next[1]}}});
    ASSERT_TRUE(g.ok()) << g.error().message;
    ASSERT_TRUE(x.ok()) << x.error().message;
    EXPECT_TRUE(e.gpu->lastCallLaunches().graph) << "step " << s;
    for (size_t k = 0; k < 2; ++k) {
      const bool same = std::memcmp((*g)[k].ptr<float>(), (*x)[k].ptr<float>(), size_t(V) * 4) == 0;
      EXPECT_TRUE(same) << "step " << s << " request " << k;
      differing += !same;
      next[k] = argmaxToken((*x)[k].ptr<float>(), V);
    }
  }
  const auto after = e.gpu->counters();
  recordResult(fmt::format(R"({{"test":"batched_decode_graphs_vs_eager","steps":{},"graph_launches":{},)"
                           R"("graph_captures":{},"rows_differing":{}}})",
                           steps, after.graphLaunches - before.graphLaunches,
                           after.graphCaptures - before.graphCaptures, differing));
  EXPECT_EQ(after.graphLaunches - before.graphLaunches, steps);
  EXPECT_LT(after.graphCaptures - before.graphCaptures, steps) << "graphs should be reused across steps";
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(e.gpu->releaseRequest(rg[size_t(k)]).ok());
    EXPECT_TRUE(eager->releaseRequest(re[size_t(k)]).ok());
  }
}

TEST(GpuModel, LaunchCountsPerCallAndLayer) {
  NEED_GPU();
  // What a prefill chunk and a decode step enqueue, counted where the runtime enqueues it
  // (GpuModel::lastCallLaunches). A decode step replayed as a graph reports what its capture
  // enqueued: the same as the same step run eagerly, and the graph holds at least those kernels
  // (cuBLAS may launch more than one per call).
  GpuModel* eager = eagerModel(e);
  ASSERT_NE(eager, nullptr);
  const int64_t V = e.cpu->config().vocabSize, L = e.cpu->config().numHiddenLayers;
  const auto prompt = randomIds(200, e.seed + 9, V);  // chunks of 128 and 72 tokens
  auto rg = e.gpu->newRequest();
  auto re = eager->newRequest();
  ASSERT_TRUE(rg.ok() && re.ok());
  ASSERT_TRUE(e.gpu->prefill(*rg, prompt, true).ok());
  auto pe = eager->prefill(*re, prompt, true);
  ASSERT_TRUE(pe.ok()) << pe.error().message;
  auto sumOf = [](const GpuCallLaunches& c) {
    LaunchTally s;
    for (const LaunchTally& t : c.perLayer) s += t;
    return s;
  };
  const GpuCallLaunches chunk = eager->lastCallLaunches();
  EXPECT_FALSE(chunk.graph);
  EXPECT_EQ(chunk.graphKernels, -1);
  ASSERT_EQ(int64_t(chunk.perLayer.size()), L);
  for (int64_t l = 0; l < L; ++l) EXPECT_GT(chunk.perLayer[size_t(l)].kernels, 0) << "layer " << l;
  const LaunchTally inLayers = sumOf(chunk);
  // Outside the layers: the embedding and the last rows' gather (kernels), the head (cuBLAS), the
  // ids/positions/one-hot uploads.
  EXPECT_GE(chunk.total.kernels, inLayers.kernels + 2);
  EXPECT_GE(chunk.total.cublasCalls, inLayers.cublasCalls + 1);
  EXPECT_GE(chunk.total.memoryOps, inLayers.memoryOps + 3);
  EXPECT_EQ(e.gpu->lastCallLaunches().total, chunk.total) << "the same chunk on two instances";

  const int32_t next = argmaxToken(pe->ptr<float>(), V);
  ASSERT_TRUE(e.gpu->decode(*rg, next).ok());
  ASSERT_TRUE(eager->decode(*re, next).ok());
  const GpuCallLaunches g = e.gpu->lastCallLaunches(), x = eager->lastCallLaunches();
  EXPECT_TRUE(g.graph);
  EXPECT_FALSE(x.graph);
  EXPECT_EQ(g.total, x.total);
  ASSERT_EQ(g.perLayer.size(), x.perLayer.size());
  for (size_t l = 0; l < g.perLayer.size(); ++l) EXPECT_EQ(g.perLayer[l], x.perLayer[l]) << "layer " << l;
  EXPECT_GE(g.graphKernels, g.total.launches());
  EXPECT_GE(g.graphMemoryNodes, g.total.memoryOps);
  recordResult(fmt::format(
      R"({{"test":"launch_counts","chunk_tokens":72,"chunk_kernels":{},"chunk_cublas":{},"chunk_memory_ops":{},)"
      R"("decode_kernels":{},"decode_cublas":{},"decode_memory_ops":{},"decode_graph_kernel_nodes":{},)"
      R"("decode_graph_memory_nodes":{},"layers":{}}})",
      chunk.total.kernels, chunk.total.cublasCalls, chunk.total.memoryOps, x.total.kernels, x.total.cublasCalls,
      x.total.memoryOps, g.graphKernels, g.graphMemoryNodes, L));
  EXPECT_TRUE(e.gpu->releaseRequest(*rg).ok());
  EXPECT_TRUE(eager->releaseRequest(*re).ok());
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
  // Warm-up: the very 1,000 requests of the measured loop, once. Every kernel the loop needs
  // (ours, cuBLAS's for each expert GEMM height the routing produces, decode graphs) is then
  // loaded, and every scratch buffer has its size: the measured pass, identical, can only change
  // free memory by leaking (code loaded lazily inside the loop made this test fail at 079ff15).
  for (int i = 0; i < 1000; ++i) {
    cycle(i);
    if (HasFatalFailure()) return;
  }
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

TEST(GpuModel, EngineStepLogitsOnTheDeviceAreTheRowsTokensCameFrom) {
  NEED_GPU();
  // Engine::stepLogits (the Python package's engine.logits()): after every step, row i of the
  // device tensor is event i's row, bit for bit the host copy the engine sampled from, on graph
  // replays and on eager prefill steps alike; two requests of different lengths share the steps.
  EngineOptions eo;
  eo.device = e.dev->ordinal();
  eo.kvCacheBytes = int64_t(256) << 20;
  eo.maxRequests = 2;
  eo.maxChunkTokens = 32;
  eo.speculative = false;  // one logits row per request and step (speculative steps have several)
  auto engine = Engine::create(eo);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  Engine& eng = **engine;
  ASSERT_TRUE(eng.loadModel(e.dir).ok());
  EXPECT_FALSE(eng.stepLogits().ok()) << "no step yet";
  const int64_t V = eng.vocabSize();
  RequestParams a, b;
  a.prompt = randomIds(70, e.seed + 11, V);  // three prefill chunks
  b.prompt = randomIds(5, e.seed + 12, V);
  a.maxNewTokens = 6;
  b.maxNewTokens = 9;
  a.keepLogits = b.keepLogits = true;
  auto ra = eng.addRequest(a), rb = eng.addRequest(b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  int checkedRows = 0;
  while (!eng.finished(*ra) || !eng.finished(*rb)) {
    auto events = eng.step();
    ASSERT_TRUE(events.ok()) << events.error().message;
    auto view = eng.stepLogits();
    ASSERT_TRUE(view.ok()) << view.error().message;
    ASSERT_EQ(view->shape, (std::vector<int64_t>{int64_t(events->size()), V}));
    ASSERT_EQ(view->dtype, DType::F32);
    std::vector<float> rows(events->size() * size_t(V));
    ASSERT_TRUE(copyDeviceToHost(rows.data(), view->addr, rows.size() * 4, nullptr).ok());
    for (size_t i = 0; i < events->size(); ++i) {
      const StepEvent& ev = (*events)[i];
      if (ev.token < 0) continue;  // a prefill chunk before the last: no row was kept
      auto host = eng.lastLogits(ev.request);
      ASSERT_TRUE(host.ok()) << host.error().message;
      EXPECT_EQ(std::memcmp(rows.data() + i * size_t(V), host->data(), size_t(V) * 4), 0)
          << "request " << ev.request << " token " << ev.token;
      ++checkedRows;
    }
  }
  EXPECT_EQ(checkedRows, 6 + 9);
  EXPECT_TRUE(eng.removeRequest(*ra).ok());
  EXPECT_TRUE(eng.removeRequest(*rb).ok());
  auto empty = eng.step();
  ASSERT_TRUE(empty.ok());
  auto none = eng.stepLogits();
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none->shape, (std::vector<int64_t>{0, V}));
}

// Engine's two backends on one prompt (what `run --backend cuda|cpu --dump-logits` writes):
// every position's logits row (keepAllLogits), prompt and generated, agrees with the CPU's within
// the guarantees above, up to the first token where greedy choices part (allowed only at a
// near-tie: Agreement fails a decisive mismatch); plain and speculative decoding alike.
TEST(GpuModel, EngineCudaRowsAgreeWithEngineCpuRowsUpToANearTie) {
  NEED_GPU();
  auto generate = [&](const std::string& backend, bool speculative, const std::vector<int32_t>& prompt) {
    EngineOptions eo;
    eo.backend = backend;
    eo.device = e.dev->ordinal();
    eo.kvCacheBytes = int64_t(256) << 20;
    eo.maxRequests = 1;
    eo.maxChunkTokens = 64;
    eo.speculative = speculative;
    std::pair<std::vector<int32_t>, std::vector<float>> out;
    auto engine = Engine::create(eo);
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    if (!engine.ok()) return out;
    Status st = (*engine)->loadModel(e.dir);
    EXPECT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ((*engine)->speculative(), speculative);
    RequestParams p;
    p.prompt = prompt;
    p.maxNewTokens = 20;
    p.keepAllLogits = true;
    auto id = (*engine)->addRequest(p);
    EXPECT_TRUE(id.ok()) << id.error().message;
    if (!st.ok() || !id.ok()) return out;
    while (!(*engine)->finished(*id)) {
      auto ev = (*engine)->step();
      EXPECT_TRUE(ev.ok()) << ev.error().message;
      if (!ev.ok()) return out;
    }
    out.first = (*engine)->tokens(*id);
    out.second = *(*engine)->allLogits(*id);
    return out;
  };
  const int64_t V = e.cpu->config().vocabSize;
  const auto prompt = randomIds(150, e.seed + 21, V);
  const auto cpu = generate("cpu", false, prompt);
  ASSERT_EQ(cpu.first.size(), 20u);
  ASSERT_EQ(cpu.second.size(), size_t(150 + 20) * size_t(V));
  for (bool speculative : {false, true}) {
    const auto gpu = generate("cuda", speculative, prompt);
    ASSERT_EQ(gpu.first.size(), 20u);
    ASSERT_EQ(gpu.second.size(), cpu.second.size()) << "one row per position, prompt and generated";
    Agreement a{speculative ? "engine_cuda_speculative_vs_cpu" : "engine_cuda_vs_cpu"};
    for (int64_t row = 0; row < 150 + 20; ++row) {
      a.add(checkRow(gpu.second.data() + row * V, cpu.second.data() + row * V, V), fmt::format("position {}", row));
      const int64_t g = row - 149;  // the token sampled from this row
      if (g >= 0 && g < 20 && gpu.first[size_t(g)] != cpu.first[size_t(g)]) break;  // inputs differ from here on
    }
    recordResult(fmt::format(R"({{"test":"{}",{}}})", a.tag, a.json()));
    a.expectFewNearTieRows();
  }
}

}  // namespace
}  // namespace deepinfer
