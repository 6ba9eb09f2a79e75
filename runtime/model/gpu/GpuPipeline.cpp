// Pipeline stages on the GPU runtime (docs/parallelism.md §3): the split of the layers into
// stages, what crosses each boundary, and the forward call through every stage in order. A
// model of one stage takes the same path with nothing to hand off.
#include <algorithm>
#include <set>
#include <fmt/format.h>

#include "GpuForward.h"
#include "deepinfer/DeviceCopy.h"
#include "model/parallel/ShardPlan.h"

namespace deepinfer {

std::vector<GpuHandoffItem> gpuHandoffItems(const ModelConfig& cfg, const std::vector<int>& inputs,
                                            const std::vector<int>& selections, bool kept, int64_t T) {
  const int64_t C = cfg.hiddenSize;
  std::vector<GpuHandoffItem> items = {{"X", size_t(T * kGpuStreams * C * 2)},
                                       {"f", size_t(T * C * 2)},
                                       {"post", size_t(T * 4 * 4)},
                                       {"comb", size_t(T * 16 * 4)},
                                       {"preF", size_t(T * 4 * 4)}};
  for (int S : inputs) items.push_back({fmt::format("u.{}", S), size_t(T * C * 2)});
  for (int I : selections) items.push_back({fmt::format("sel.{}", I), size_t(T * cfg.indexTopk * 4)});
  if (kept) items.push_back({"kept", size_t(T * cfg.candidateTopkBlocks * 4)});
  return items;
}

Result<std::vector<GpuStagePlan>> planGpuStages(const ModelConfig& cfg, const GpuModelOptions& opts) {
  if (opts.tp < 1) return Error{fmt::format("tp {} must be at least 1", opts.tp)};
  if (opts.pp < 1) return Error{fmt::format("pp {} must be at least 1", opts.pp)};
  const size_t ranks = size_t(opts.pp) * size_t(opts.tp);
  if (!opts.gpus.empty() && opts.gpus.size() != ranks)
    return Error{opts.tp == 1 ? fmt::format("{} GPUs given for {} pipeline stages (one ordinal per stage)",
                                            opts.gpus.size(), opts.pp)
                              : fmt::format("{} GPUs given for {} pipeline stages x {} tensor ranks (one ordinal per "
                                            "rank, rank r of stage s at s * tp + r)",
                                            opts.gpus.size(), opts.pp, opts.tp)};
  for (size_t s = 0; s < opts.gpus.size(); ++s)
    if (opts.gpus[s] < 0)
      return Error{opts.tp == 1 ? fmt::format("GPU ordinal {} of stage {} is negative", opts.gpus[s], s)
                                : fmt::format("GPU ordinal {} of rank {} is negative", opts.gpus[s], s)};
  if (opts.pp == 1 && opts.tp == 1 && opts.stageLayers.empty()) {  // the whole model, as before pipelines existed
    GpuStagePlan one;
    one.layerEnd = cfg.numHiddenLayers;
    RankPlan rp;
    rp.layerEnd = cfg.numHiddenLayers;
    rp.embedding = rp.head = true;
    rp.headEnd = cfg.numAttentionHeads;
    rp.groupEnd = cfg.oGroups;
    rp.expertEnd = cfg.nRoutedExperts;
    rp.vocabEnd = cfg.vocabSize;
    rp.sharedEnd = cfg.moeIntermediateSize * cfg.nSharedExperts;
    one.ranks = {rp};
    return std::vector<GpuStagePlan>{one};
  }
  ParallelShape shape;
  shape.pp = opts.pp;
  shape.tp = opts.tp;
  shape.stageLayers = opts.stageLayers;
  if (opts.pp == 1 && opts.stageLayers.size() == 1 && opts.stageLayers[0] != cfg.numHiddenLayers)
    return Error{fmt::format("stage layer counts add up to {}, the model has {} layers", opts.stageLayers[0],
                             cfg.numHiddenLayers)};
  auto plan = planShards(cfg, shape, /*withDraft=*/false, opts.maxChunkTokens);
  if (!plan.ok())
    return Error{(opts.tp > 1 ? fmt::format("tp {} x pp {}: ", opts.tp, opts.pp) : std::string("pipeline stages: ")) +
                 plan.error().message};
  const int pp = opts.pp, L = cfg.numHiddenLayers;
  std::vector<GpuStagePlan> stages(static_cast<size_t>(pp));
  for (int s = 0; s < pp; ++s) {
    GpuStagePlan& sp = stages[size_t(s)];
    sp.index = s;
    sp.count = pp;
    sp.layerBegin = plan->stageFirstLayer[size_t(s)];
    sp.layerEnd = plan->stageFirstLayer[size_t(s) + 1];
    sp.mirroredSources = plan->ranks[size_t(s) * size_t(opts.tp)].mirroredKvSources;
    for (int r = 0; r < opts.tp; ++r) sp.ranks.push_back(plan->ranks[size_t(s) * size_t(opts.tp) + size_t(r)]);
  }
  for (int s = 0; s + 1 < pp; ++s) {
    GpuStagePlan& sp = stages[size_t(s)];
    std::set<int> inputs, selections;
    bool kept = false;
    for (int t = s + 1; t < pp; ++t)
      for (int S : stages[size_t(t)].mirroredSources)
        if (S < sp.layerEnd) inputs.insert(S);
    for (int l = sp.layerEnd; l < L; ++l) {
      const LayerRole& r = cfg.role(l);
      if (r.ratio > 0 && r.indexSourceLayer >= 0 && r.indexSourceLayer < sp.layerEnd) selections.insert(r.indexSourceLayer);
      if (r.candidateRestricted && cfg.candidateSourceLayerId >= 0 && cfg.candidateSourceLayerId < sp.layerEnd)
        kept = true;
    }
    sp.sendInputs.assign(inputs.begin(), inputs.end());
    sp.sendSelections.assign(selections.begin(), selections.end());
    sp.sendKept = kept;
    GpuStagePlan& next = stages[size_t(s) + 1];
    next.recvInputs = sp.sendInputs;
    next.recvSelections = sp.sendSelections;
    next.recvKept = sp.sendKept;
  }
  return stages;
}

std::vector<GpuModelImpl*> GpuModelImpl::pipeline() {
  std::vector<GpuModelImpl*> p = {this};
  for (auto& s : laterStages) p.push_back(s.get());
  return p;
}

bool GpuModelImpl::cachesSource(int layer) const {
  if (!cfg.role(layer).isKvSource) return false;
  return stage.owns(layer) ||
         std::find(stage.mirroredSources.begin(), stage.mirroredSources.end(), layer) != stage.mirroredSources.end();
}

Status GpuModelImpl::runStage(const std::vector<GpuSeq>& seqs, const std::vector<int32_t>& ids, bool lastOnly,
                              bool rowWise, bool features, std::vector<uint64_t>* outputs, int64_t* rows,
                              GpuCallLaunches* launches) {
  auto configure = [&](GpuForwardPass& p) {
    p.lastRowsOnly = lastOnly;
    p.rowWise = rowWise;
    p.features = features;
    p.hostLogits = false;
  };
  Status st = Error{"not run"};
  bool viaGraph = false;
  if (opts.cudaGraphs && stream && rowWise) {
    // The host-side state a pass changes (compressed counts, tails), restored before a capture.
    struct Snapshot {
      std::vector<int64_t> compCount, tailRow;
      std::vector<char> hasTail;
    };
    std::vector<Snapshot> snaps;
    for (const GpuSeq& q : seqs) snaps.push_back({q.rq->compCount, q.rq->tailRow, q.rq->hasTail});
    const GpuForwardCounters before = counters;
    auto restore = [&] {
      for (size_t i = 0; i < seqs.size(); ++i) {
        seqs[i].rq->compCount = snaps[i].compCount;
        seqs[i].rq->tailRow = snaps[i].tailRow;
        seqs[i].rq->hasTail = snaps[i].hasTail;
      }
      counters = before;
    };
    auto g = runGraph(
        fmt::format("forward|last{}", lastOnly), seqs,
        [&](GpuForwardPass& p) -> Status {
          configure(p);
          auto r = p.run(ids);
          return r.ok() ? Status{} : Status{r.error()};
        },
        restore, &viaGraph);
    if (!g.ok()) {
      st = g.error();
    } else if (viaGraph) {
      *outputs = (*g)->outputs;
      *rows = (*g)->rows;
      *launches = (*g)->launches;
      st = Status{};
    }
  }
  if (!viaGraph && (st.ok() || st.error().message == "not run")) {
    GpuForwardPass pass(*this, seqs);
    configure(pass);
    auto r = pass.run(ids);
    if (r.ok()) {
      *outputs = pass.outputs;
      *rows = pass.logitsRows;
      *launches = pass.launches;
      st = Status{};
    } else {
      st = r.error();
    }
  }
  return st;
}

// One forward call through every stage in order: stage s runs on its device and stream, then
// stage s + 1's stream waits for it, copies what it sent (peer copies between GPUs) into its
// own buffers and runs. The next call's first stage waits for this call's last stage. With
// tensor ranks, rank r of a stage takes the hand-off of rank r of the previous stage (after the
// all-reduces every rank holds the whole residual state), and the ranks of a stage run their
// passes on the model's persistent rank threads (RankPool), meeting in the collectives; a
// failing rank fails the stage's collective, so the others return an error instead of waiting.
Status GpuModelImpl::forwardOnDevice(const Work& work, bool lastOnly, bool rowWise, uint64_t* logitsDev,
                                     int64_t* rows) {
  const std::vector<GpuModelImpl*> stages = pipeline();  // every rank, stage-major
  const size_t tpN = size_t(std::max(tp, 1)), ppN = stages.size() / tpN;
  std::vector<int32_t> ids;
  bool anySpeculative = false;
  for (const auto& [rq, tokens] : work) {
    ids.insert(ids.end(), tokens.begin(), tokens.end());
    anySpeculative = anySpeculative || rq->speculative;
  }
  // Every stage's view of the requests (the same ids), with the engram classes of the tokens.
  std::vector<std::vector<GpuSeq>> seqsOf(stages.size());
  std::vector<std::vector<size_t>> classesBefore(stages.size());
  for (size_t s = 0; s < stages.size(); ++s)
    for (const auto& [rq, tokens] : work) {
      GpuRequest* r = s == 0 ? rq : &stages[s]->requests.at(rq->id);
      GpuSeq sq;
      sq.rq = r;
      sq.pos0 = r->position;
      sq.T = int64_t(tokens.size());
      seqsOf[s].push_back(sq);
      classesBefore[s].push_back(r->classes.size());
      if (!stages[s]->tokenMap.empty())
        for (int32_t id : tokens) r->classes.push_back(stages[s]->tokenMap[size_t(id)]);
    }
  lastLogits = {};
  lastLaunches = {};
  Status st;
  std::vector<std::vector<uint64_t>> outsOf(stages.size());
  std::vector<int64_t> rowsOf(stages.size(), 0);
  std::vector<GpuCallLaunches> launchesOf(stages.size());
  const int64_t T = int64_t(ids.size());
  // Rank i's part of the call: the hand-off from the previous stage's rank, its pass, the record.
  auto runRank = [&](size_t i) -> Status {
    GpuModelImpl& g = *stages[i];
    DI_TRY(g.dev->use());
    if (ppN > 1) {
      // Ordered after the previous stage of this call (or the last stage of the previous call).
      const size_t prevIdx = i >= tpN ? i - tpN : i + (ppN - 1) * tpN;
      const GpuModelImpl& prev = *stages[prevIdx];
      DI_TRY(prev.handoff.waitIn(g.stream));
      if (i >= tpN) {
        const GpuStagePlan& sp = g.stage;
        const auto items = gpuHandoffItems(cfg, sp.recvInputs, sp.recvSelections, sp.recvKept, T);
        for (size_t k = 0; k < items.size(); ++k) {
          auto dst = g.scratch.get("in." + items[k].name, items[k].bytes);
          if (!dst.ok()) return dst.error();
          DI_TRY(copyBetweenDevices(*dst, *g.dev, outsOf[prevIdx].at(k), *prev.dev, items[k].bytes, g.stream));
        }
      }
    }
    DI_TRY(g.runStage(seqsOf[i], ids, lastOnly, rowWise, anySpeculative, &outsOf[i], &rowsOf[i], &launchesOf[i]));
    if (ppN > 1) DI_TRY(g.handoff.record(g.stream));
    return {};
  };
  for (size_t s = 0; s < ppN && st.ok(); ++s) {
    const size_t first = s * tpN;
    if (tpN == 1) {
      st = runRank(first);
    } else {
      const std::vector<Status> rankSt = rankPool->run([&](int r) -> Status {
        Status rs = runRank(first + size_t(r));
        if (!rs.ok() && stages[first + size_t(r)]->collective)
          stages[first + size_t(r)]->collective->fail(r, rs.error().message);
        return rs;
      });
      // The first failure is the cause; the others' errors name it.
      for (size_t r = 0; r < tpN && st.ok(); ++r)
        if (!rankSt[r].ok()) st = Error{fmt::format("tensor rank {} of stage {}: {}", r, s, rankSt[r].error().message)};
    }
    if (!st.ok()) break;
    const GpuCallLaunches& launches = launchesOf[first];  // tensor rank 0's
    if (s == 0) {
      lastLaunches = launches;
    } else {
      lastLaunches.total += launches.total;
      lastLaunches.perLayer.insert(lastLaunches.perLayer.end(), launches.perLayer.begin(), launches.perLayer.end());
      lastLaunches.graph = lastLaunches.graph && launches.graph;
      if (lastLaunches.graph) {
        lastLaunches.graphKernels += launches.graphKernels;
        lastLaunches.graphMemoryNodes += launches.graphMemoryNodes;
        lastLaunches.graphProgrammaticEdges += launches.graphProgrammaticEdges;
      } else {
        lastLaunches.graphKernels = lastLaunches.graphMemoryNodes = lastLaunches.graphProgrammaticEdges = -1;
      }
    }
  }
  // The collectives' transport errors (NCCL's asynchronous ones, a stuck rank) within the timeout.
  for (size_t s = 0; s < ppN && st.ok(); ++s) {
    const size_t first = s * tpN;
    if (!stages[first]->collective) continue;
    std::vector<void*> streams;
    for (size_t r = 0; r < tpN; ++r) streams.push_back(stages[first + r]->stream);
    if (Status f = stages[first]->collective->finish(streams); !f.ok())
      st = Error{fmt::format("stage {} collectives: {}", s, f.error().message)};
  }
  std::vector<uint64_t> outs = st.ok() ? outsOf.back() : std::vector<uint64_t>{};
  const int64_t outRows = rowsOf.back();
  if (stages.size() > 1) {
    if (Status u = dev->use(); st.ok()) st = u;
  }
  if (!st.ok()) {
    for (size_t s = 0; s < stages.size(); ++s)
      for (size_t i = 0; i < work.size(); ++i) {
        seqsOf[s][i].rq->classes.resize(classesBefore[s][i]);
        seqsOf[s][i].rq->unusable = true;
      }
    return Error{fmt::format("{} (the requests of this call are no longer usable)", st.error().message)};
  }
  *logitsDev = outs.at(0);
  *rows = outRows;
  lastLogits = {*logitsDev, *rows};
  for (size_t s = 0; s < stages.size(); ++s)
    for (size_t i = 0; i < work.size(); ++i) {
      GpuRequest* rq = seqsOf[s][i].rq;
      const int64_t n = int64_t(work[i].second.size());
      rq->lastCallStart = rq->position;
      rq->lastCallRows = n <= stages[s]->tailRegionRows ? n : 0;
      rq->position += n;
    }
  return {};
}

}  // namespace deepinfer
