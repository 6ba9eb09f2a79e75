// GpuModel: loading (config, weights, kernels, KV page pools sized from free memory), requests
// with their cache pages, and chunked prefill / decode calls into GpuForwardPass.
#include "GpuModel.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <fmt/format.h>

#include "GpuCollective.h"
#include "GpuForward.h"
#include "GpuSyntheticWeights.h"
#include "deepinfer/DeviceCopy.h"
#include "deepinfer/OpShapes.h"
#include "model/CpuForward.h"
#include "model/QuantizationCheck.h"
#include "model/Rope.h"

namespace deepinfer {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What the generated kernels accept beyond what both forward passes need.
Status checkGpuSupported(const ModelConfig& cfg) {
  DI_TRY(checkForwardSupported(cfg, "gpu forward"));
  auto bad = [&](const std::string& what) { return Error{fmt::format("gpu forward: unsupported config: {}", what)}; };
  const int64_t H = cfg.numAttentionHeads;
  if (H < 8 || H > 128 || H % 8 != 0)
    return bad(fmt::format("num_attention_heads {} (the attention kernels take a multiple of 8 in 8..128; with "
                           "tensor parallelism that is 64/TP heads per GPU)", H));
  if (cfg.hiddenSize % 32 != 0) return bad(fmt::format("hidden_size {} (must be a multiple of 32)", cfg.hiddenSize));
  bool anyIndex = false;
  for (int L = 0; L < cfg.numHiddenLayers; ++L) anyIndex = anyIndex || cfg.role(L).isIndexSource;
  if (anyIndex && (cfg.indexHeadDim != 128 || cfg.indexNHeads < 4 || cfg.indexNHeads > 64))
    return bad(fmt::format("index_head_dim {} / index_n_heads {} (the indexer takes 128-dim heads, 4..64 of them)",
                           cfg.indexHeadDim, cfg.indexNHeads));
  return {};
}

}  // namespace

GpuModel::~GpuModel() = default;
const ModelConfig& GpuModel::config() const { return impl_->cfg; }
const GpuKvCapacity& GpuModel::capacity() const { return impl_->totalCapacity; }
const GpuWeightInfo& GpuModel::weightInfo() const { return impl_->totalWeights; }
const std::vector<GpuStageReport>& GpuModel::stages() const { return impl_->stageReports; }

TpCollective* GpuModel::stageCollective(int stage) const {
  for (GpuModelImpl* m : impl_->pipeline())
    if (m->stage.index == stage) return m->collective.get();
  return nullptr;
}
const GpuForwardCounters& GpuModel::counters() const {
  if (impl_->laterStages.empty()) return impl_->counters;
  GpuForwardCounters& t = impl_->totalCounters;
  t = {};
  for (const GpuModelImpl* s : impl_->pipeline()) {
    if (s->rank.tpRank != 0) continue;  // the tensor ranks of a stage run the same pass
    const GpuForwardCounters& c = s->counters;
    t.forwards += c.forwards;  // counted by the last stage (it runs the head)
    t.tokens += c.tokens;
    t.kvMetadataBuilds += c.kvMetadataBuilds;
    t.indexRowBuilds += c.indexRowBuilds;
    t.attentionLayers += c.attentionLayers;
    t.engramLookups += c.engramLookups;
    t.graphCaptures += c.graphCaptures;
    t.graphLaunches += c.graphLaunches;
    t.draftPasses += c.draftPasses;
    t.verifySteps += c.verifySteps;
    t.draftsVerified += c.draftsVerified;
    t.draftsAccepted += c.draftsAccepted;
    t.candidateBlocksDropped += c.candidateBlocksDropped;
    t.candidateEntriesMasked += c.candidateEntriesMasked;
  }
  return t;
}
const GpuCallLaunches& GpuModel::lastCallLaunches() const { return impl_->lastLaunches; }
int GpuModel::jitCompiles() const {
  int n = 0;
  for (const GpuModelImpl* s : impl_->pipeline()) n += s->jit->compiles();
  return n;
}
std::string GpuModel::targetName() const { return impl_->target.archName(); }
std::string GpuModel::programmaticLaunch() const {
  return describeProgrammaticLaunch(impl_->opts.jit.programmaticLaunch, impl_->target.arch(),
                                    impl_->dev->info().profile.arch());
}
GpuDeviceLogits GpuModel::lastDeviceLogits() const { return impl_->lastLogits; }
void GpuModel::setStream(void* stream) {
  impl_->userStream = stream;
  impl_->stream = stream ? stream : (impl_->ownStream ? impl_->ownStream->handle() : nullptr);
}

int64_t GpuModel::pagesInUse() const {
  int64_t n = 0;
  for (const GpuModelImpl* s : impl_->pipeline())
    n += s->windowPool->pages().usedCount() + s->compPool->pages().usedCount() + s->indexPool->pages().usedCount();
  return n;
}

// The options and the target, shared by both loaders.
Status GpuModel::beginLoad(GpuModelImpl& m, const std::shared_ptr<Device>& dev, const GpuModelOptions& opts) {
  m.dev = dev;
  m.opts = opts;
  if (opts.maxChunkTokens < 1) return Error{fmt::format("max chunk tokens {} must be >= 1", opts.maxChunkTokens)};
  if (opts.maxRequests < 1) return Error{fmt::format("max requests {} must be >= 1", opts.maxRequests)};
  DI_TRY(checkGpuSupported(m.cfg));
  if (opts.target.empty()) {
    m.target = dev->info().profile;
  } else {
    auto t = findTarget(opts.target);
    if (!t) return Error{fmt::format("unknown target '{}' (sm_80, sm_86, sm_89, sm_90 or a preset)", opts.target)};
    if (t->arch() > dev->info().profile.arch())
      return Error{fmt::format("target {} is newer than the local GPU ({}); its code cannot run here",
                               t->archName(), dev->info().profile.archName())};
    m.target = *t;
  }
  return dev->use();
}

Result<std::unique_ptr<GpuModel>> GpuModel::load(const std::string& modelDir, std::shared_ptr<Device> dev,
                                                 const GpuModelOptions& opts) {
  auto cfg = loadModelConfig(modelDir);
  if (!cfg.ok()) return cfg.error();
  return loadStages(*cfg, dev, opts, [&](GpuModelImpl& m, const GpuStageTensors& tensors) -> Status {
    const auto t0 = std::chrono::steady_clock::now();
    auto ckpt = Checkpoint::open(modelDir);
    if (!ckpt.ok()) return ckpt.error();
    m.ckpt = std::make_unique<Checkpoint>(std::move(*ckpt));
    DI_TRY(checkQuantizationMatchesCheckpoint(m.fullCfg, *m.ckpt, modelDir + "/config.json"));
    auto weights = loadGpuWeights(m.fullCfg, *m.ckpt, *m.dev, tensors);
    if (!weights.ok()) return weights.error();
    m.w = std::move(*weights);
    m.weightInfo.deviceBytes = m.w.deviceBytes;
    m.weightInfo.loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.engramRows = [ck = m.ckpt.get()](const std::string& table, const int64_t* rows, size_t n, int64_t, float* out) {
      return ck->readEngramRows(table, rows, n, out);
    };
    if (m.cfg.numEngramLayers() > 0) {
      auto hash = loadEngramHash(modelDir, m.cfg);
      if (!hash.ok()) return hash.error();
      m.engramHash = std::make_unique<EngramHashParams>(std::move(*hash));
      auto map = loadTokenMap(modelDir, m.cfg);
      if (!map.ok()) return map.error();
      m.tokenMap = std::move(*map);
    }
    return {};
  });
}

Result<std::unique_ptr<GpuModel>> GpuModel::loadSynthetic(const ModelConfig& cfg, uint64_t seed,
                                                          std::shared_ptr<Device> dev, const GpuModelOptions& opts) {
  return loadStages(cfg, dev, opts, [&](GpuModelImpl& m, const GpuStageTensors& tensors) -> Status {
    const auto t0 = std::chrono::steady_clock::now();
    auto weights = makeSyntheticGpuWeights(m.fullCfg, opts.speculative && tensors.draft, seed, *m.dev, tensors);
    if (!weights.ok()) return weights.error();
    m.w = std::move(*weights);
    m.weightInfo.deviceBytes = m.w.deviceBytes;
    m.weightInfo.loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.weightInfo.synthetic = true;
    m.engramRows = [seed](const std::string& table, const int64_t* rows, size_t n, int64_t cols, float* out) {
      syntheticEngramRows(seed, table, rows, n, cols, out);
      return Status{};
    };
    if (m.cfg.numEngramLayers() > 0) {
      auto hash = deriveEngramHash(m.cfg);
      if (!hash.ok()) return hash.error();
      m.engramHash = std::make_unique<EngramHashParams>(std::move(*hash));
      // Token classes: a fixed permutation-free map (token mod the class count); only the row ids
      // the hash picks depend on it.
      m.tokenMap.resize(size_t(m.cfg.vocabSize));
      for (int64_t t = 0; t < m.cfg.vocabSize; ++t)
        m.tokenMap[size_t(t)] = int32_t(t % std::max<int64_t>(m.cfg.engramCompressedVocabSize, 1));
    }
    return {};
  });
}

// A tensor rank's embedding rows get one zero row after them: the row the ids of other ranks'
// rows read (GpuForwardPass::run).
Status GpuModel::appendZeroEmbeddingRow(GpuModelImpl& m) {
  GpuMatrix& e = m.w.embed;
  const size_t rowBytes = size_t(e.cols) * 2, bytes = size_t(e.rows) * rowBytes;
  auto grown = DeviceBuffer::alloc(bytes + rowBytes);
  if (!grown.ok()) return grown.error();
  DI_TRY(copyDeviceToDevice(grown->addr(), e.data.addr(), bytes, nullptr));
  DI_TRY(fillDevice8(grown->addr() + bytes, 0, rowBytes, nullptr));
  DI_TRY(m.dev->synchronize());
  e.data = std::move(*grown);
  m.w.deviceBytes += int64_t(rowBytes);
  m.weightInfo.deviceBytes = m.w.deviceBytes;
  return {};
}

// The collective of a stage's ranks: NCCL when they are on distinct GPUs (or one rank), the
// logical-rank test double when they share one GPU.
Result<std::shared_ptr<TpCollective>> GpuModel::makeStageCollective(const std::vector<GpuModelImpl*>& ranks,
                                                                   double timeoutSeconds) {
  std::vector<std::shared_ptr<Device>> devs;
  std::set<int> ordinals;
  for (GpuModelImpl* m : ranks) {
    devs.push_back(m->dev);
    ordinals.insert(m->dev->ordinal());
  }
  if (ordinals.size() == ranks.size()) {
    auto c = NcclTpCollective::create(devs, timeoutSeconds);
    if (!c.ok()) return Error{"tensor ranks over NCCL: " + c.error().message};
    return std::shared_ptr<TpCollective>(std::move(*c));
  }
  if (ordinals.size() == 1) {
    auto c = LogicalTpCollective::create(int(ranks.size()), devs[0], *ranks[0]->mk, timeoutSeconds);
    if (!c.ok()) return c.error();
    return std::shared_ptr<TpCollective>(std::move(*c));
  }
  return Error{fmt::format("{} tensor ranks on {} GPUs: a stage's ranks are either on distinct GPUs (NCCL) or all on "
                           "one GPU (logical ranks, for tests)",
                           ranks.size(), ordinals.size())};
}

// Every stage of opts (one: the whole model): its device, options and target, its weights
// (`loadWeights`: only the stage's tensors), kernels and KV pools; then the totals.
Result<std::unique_ptr<GpuModel>> GpuModel::loadStages(
    const ModelConfig& cfg, const std::shared_ptr<Device>& dev, const GpuModelOptions& opts,
    const std::function<Status(GpuModelImpl&, const GpuStageTensors&)>& loadWeights) {
  if (!dev) return Error{"gpu model: no device"};
  auto plans = planGpuStages(cfg, opts);
  if (!plans.ok()) return plans.error();
  const int pp = int(plans->size()), tp = opts.tp;
  std::vector<std::shared_ptr<Device>> devs;  // one per rank, stage-major
  for (int s = 0; s < pp * tp; ++s) {
    const int ordinal = opts.gpus.empty() ? dev->ordinal() : opts.gpus[size_t(s)];
    std::shared_ptr<Device> d;
    for (const auto& o : devs)
      if (o->ordinal() == ordinal) d = o;
    if (!d && ordinal == dev->ordinal()) d = dev;
    if (!d) {
      auto od = Device::open(ordinal);
      if (!od.ok())
        return Error{fmt::format("stage {}{}: GPU {}: {}", s / tp, tp > 1 ? fmt::format(" tensor rank {}", s % tp) : "",
                                 ordinal, od.error().message)};
      d = *od;
    }
    devs.push_back(d);
  }
  std::unique_ptr<GpuModel> model(new GpuModel());
  // Tensor ranks (docs/parallelism.md §2): run with a collective (also NCCL with one rank); their
  // CUDA graphs are cut at the collectives (GpuModelImpl::runGraph).
  const bool collective = tp > 1 || opts.nccl;
  for (int s = 0; s < pp; ++s) {
    std::vector<GpuModelImpl*> stageRanks;
    for (int r = 0; r < tp; ++r) {
      const size_t idx = size_t(s) * size_t(tp) + size_t(r);
      auto impl = std::make_unique<GpuModelImpl>();
      GpuModelImpl& m = *impl;
      m.fullCfg = cfg;
      m.cfg = cfg;
      m.stage = (*plans)[size_t(s)];
      m.tp = tp;
      m.rank = m.stage.ranks.at(size_t(r));
      // The rank's attention runs on its heads and output groups as a model of that many would.
      m.cfg.numAttentionHeads = m.rank.headEnd - m.rank.headBegin;
      m.cfg.oGroups = m.rank.groupEnd - m.rank.groupBegin;
      // Ranks on one GPU split its free memory for KV: this one takes its share of what the
      // earlier ones left.
      for (size_t t = idx + 1; t < devs.size(); ++t) m.kvShare += devs[t]->ordinal() == devs[idx]->ordinal();
      GpuStageTensors tensors;
      tensors.layerBegin = m.stage.layerBegin;
      tensors.layerEnd = m.stage.layerEnd;
      tensors.embedding = m.stage.first();
      tensors.head = m.stage.last();
      tensors.draft = pp == 1 && !collective;  // speculation across stages or ranks is not built
      tensors.mirroredSources = m.stage.mirroredSources;
      tensors.tp = tp;
      tensors.rank = m.rank;
      auto where = [&](const Error& e) {
        if (pp == 1 && tp == 1) return e;
        return Error{fmt::format("{}stage {} (layers {}..{}, GPU {}): {}", tp > 1 ? fmt::format("tensor rank {} of ", r) : "",
                                 s, m.stage.layerBegin, m.stage.layerEnd - 1, devs[idx]->ordinal(), e.message)};
      };
      if (Status st = beginLoad(m, devs[idx], opts); !st.ok()) return where(st.error());
      if (Status st = loadWeights(m, tensors); !st.ok()) return where(st.error());
      if (tp > 1 && tensors.embedding)
        if (Status st = appendZeroEmbeddingRow(m); !st.ok()) return where(st.error());
      if (Status st = finishLoad(m); !st.ok()) return where(st.error());
      stageRanks.push_back(&m);
      if (idx == 0) {
        model->impl_ = std::move(impl);
      } else {
        model->impl_->laterStages.push_back(std::move(impl));
      }
    }
    if (collective) {
      auto c = makeStageCollective(stageRanks, opts.collectiveTimeoutSeconds);
      if (!c.ok()) return Error{fmt::format("stage {}: {}", s, c.error().message)};
      for (GpuModelImpl* m : stageRanks) m->collective = *c;
    }
  }
  GpuModelImpl& m0 = *model->impl_;
  if (tp > 1) m0.rankPool = std::make_unique<RankPool>(tp);
  m0.totalCapacity = {};
  m0.totalWeights = {};
  m0.totalWeights.synthetic = m0.weightInfo.synthetic;
  for (GpuModelImpl* st : m0.pipeline()) {
    const GpuKvCapacity& c = st->capacity;
    m0.totalCapacity.tokens = st == &m0 ? c.tokens : std::min(m0.totalCapacity.tokens, c.tokens);
    m0.totalCapacity.bytesPerToken += c.bytesPerToken;
    m0.totalCapacity.windowBytesPerRequest += c.windowBytesPerRequest;
    m0.totalCapacity.totalBytes += c.totalBytes;
    m0.totalWeights.deviceBytes += st->weightInfo.deviceBytes;
    m0.totalWeights.loadSeconds += st->weightInfo.loadSeconds;
    GpuStageReport r;
    r.stage = st->stage.index;
    r.gpu = st->dev->ordinal();
    r.tpRank = st->rank.tpRank;
    if (st->collective) r.collective = st->collective->backend();
    r.layerBegin = st->stage.layerBegin;
    r.layerEnd = st->stage.layerEnd;
    r.embedding = st->stage.first();
    r.head = st->stage.last();
    r.mirroredSources = st->stage.mirroredSources;
    r.weightBytes = st->weightInfo.deviceBytes;
    r.capacity = c;
    m0.stageReports.push_back(r);
  }
  DI_TRY(m0.dev->use());
  return model;
}

// Kernels, RoPE tables, DSpark state and the KV pools, after the weights.
Status GpuModel::finishLoad(GpuModelImpl& m) {
  const std::shared_ptr<Device>& dev = m.dev;
  const GpuModelOptions& opts = m.opts;
  m.jit = std::make_unique<Jit>(dev, opts.jit);
  m.ops = std::make_unique<DiOps>(*m.jit, m.target);
  auto mk = ModelKernels::load(dev, m.target, opts.jit);
  if (!mk.ok()) return mk.error();
  m.mk = std::move(*mk);
  auto blas = Cublas::create(dev);
  if (!blas.ok()) return blas.error();
  m.blas = std::move(*blas);

  for (int L = 0; L < m.cfg.numHiddenLayers; ++L) {
    auto table = RopeTable::forLayer(m.cfg, L);
    if (!table.ok()) return table.error();
    const auto& f = table->invFreq();
    auto b = DeviceBuffer::alloc(f.size() * 4);
    if (!b.ok()) return b.error();
    DI_TRY(b->upload(f.data(), f.size() * 4));
    m.invFreq.push_back(std::move(*b));
  }
  // DSpark: on when the checkpoint has the draft and the options allow it.
  m.speculation = m.w.hasDraft && opts.speculative;
  if (m.speculation) {
    const int64_t B = m.cfg.dsparkBlockSize;
    if (opts.maxChunkTokens < B + 1)
      return Error{fmt::format("max chunk tokens {} is below the verify chunk of dspark_block_size + 1 = {} (turn "
                               "speculation off or raise the chunk)",
                               opts.maxChunkTokens, B + 1)};
    auto table = RopeTable::forLayer(m.cfg, m.cfg.numHiddenLayers);  // the draft stages: ratio 0
    if (!table.ok()) return table.error();
    auto b = DeviceBuffer::alloc(table->invFreq().size() * 4);
    if (!b.ok()) return b.error();
    DI_TRY(b->upload(table->invFreq().data(), table->invFreq().size() * 4));
    m.draftInvFreq = std::move(*b);
    m.draftRingRows = draftRingRows(m.cfg);
    m.draftRingPages = m.draftRingRows / kGpuPageTokens;
    m.tailRegionRows = B + 1;
  }
  if (m.cfg.numEngramLayers() > 0) m.padClass = engramPadClass(m.tokenMap, m.cfg);

  // KV pools. Window rings hold sliding_window - 1 + one chunk rows, so a chunk never
  // overwrites a row one of its own tokens still reads.
  // The geometry is model/KvFootprint.h's, which the host-side planners use too.
  const int64_t pageBytes = kvPageBytes();
  m.ringRows = windowRingRows(m.cfg, opts.maxChunkTokens);
  m.ringPages = m.ringRows / kGpuPageTokens;
  GpuKvCapacity& cap = m.capacity;
  const int64_t ownLayers = m.stage.layerEnd - m.stage.layerBegin;  // layers with window rings
  const int64_t draftPagesPerRequest = m.speculation ? int64_t(m.cfg.numNextnPredictLayers) * m.draftRingPages : 0;
  cap.windowBytesPerRequest = (ownLayers * m.ringPages + draftPagesPerRequest) * pageBytes;
  double perToken = 0;  // compressed + index-key bytes per context token (own and mirrored sources)
  for (int L = 0; L < m.cfg.numHiddenLayers; ++L)
    if (m.cachesSource(L))
      perToken += kvSourceBytesPerToken(m.cfg, L);
  cap.bytesPerToken = int64_t(perToken + 0.999);
  int64_t budget = opts.kvCacheBytes;
  if (budget <= 0) {
    auto mem = dev->memInfo();
    if (!mem.ok()) return mem.error();
    budget = int64_t(double(mem->first) * opts.kvMemoryFraction / double(m.kvShare));
  }
  const int64_t windowBytes = cap.windowBytesPerRequest * opts.maxRequests;
  if (budget < windowBytes + 64 * pageBytes)
    return Error{fmt::format("KV cache budget {} bytes is too small: {} requests need {} bytes of window rings "
                             "alone ({} layers x {} pages of {} bytes)", budget, opts.maxRequests, windowBytes,
                             ownLayers, m.ringPages, pageBytes)};
  // A pipeline stage without compressed or index-key caches (only ratio-0 layers) does not limit
  // the context: it holds what the positions allow.
  const int64_t positions = m.cfg.maxPositionEmbeddings > 0 ? m.cfg.maxPositionEmbeddings * opts.maxRequests
                                                            : std::numeric_limits<int64_t>::max() / 4;
  cap.tokens = perToken > 0 ? std::min<int64_t>(int64_t(double(budget - windowBytes) / perToken), positions) : positions;
  int64_t compPages = 1, indexPages = 1;
  for (int L = 0; L < m.cfg.numHiddenLayers; ++L)
    if (m.cachesSource(L)) {
      const int64_t p = cdiv(cap.tokens / m.cfg.role(L).ratio, kGpuPageTokens) + opts.maxRequests;
      compPages += p;
      indexPages += p;
    }
  // Graphs capture a real stream, never the legacy default one; pipeline stages each have theirs.
  if (opts.cudaGraphs || m.stage.count > 1) {
    auto st = Stream::create();
    if (!st.ok()) return st.error();
    m.ownStream = std::make_unique<Stream>(std::move(*st));
    m.stream = m.ownStream->handle();
  }
  if (m.stage.count > 1) {
    auto ev = Event::create();
    if (!ev.ok()) return ev.error();
    m.handoff = std::move(*ev);
  }
  auto wp = DevicePagePool::create((ownLayers * m.ringPages + draftPagesPerRequest) *
                                       opts.maxRequests,
                                   pageBytes);
  if (!wp.ok()) return wp.error();
  auto cp = DevicePagePool::create(compPages, pageBytes);
  if (!cp.ok()) return cp.error();
  auto ip = DevicePagePool::create(indexPages, indexKeyPageBytes(m.cfg));
  if (!ip.ok()) return ip.error();
  m.windowPool = std::make_unique<DevicePagePool>(std::move(*wp));
  m.compPool = std::make_unique<DevicePagePool>(std::move(*cp));
  m.indexPool = std::make_unique<DevicePagePool>(std::move(*ip));
  // Ratio-2 tail regions: tailRegionRows rows of kv and of gate per request and source.
  m.tailKvPool.resize(size_t(m.cfg.numHiddenLayers));
  m.tailGatePool.resize(size_t(m.cfg.numHiddenLayers));
  for (int L = 0; L < m.cfg.numHiddenLayers; ++L) {
    if (!(m.cachesSource(L) && m.cfg.role(L).ratio == 2)) continue;
    const size_t bytes = size_t(opts.maxRequests * m.tailRegionRows * kGpuKvDim * 4);
    auto a = DeviceBuffer::alloc(bytes);
    auto b = DeviceBuffer::alloc(bytes);
    if (!a.ok() || !b.ok()) return !a.ok() ? a.error() : b.error();
    m.tailKvPool[size_t(L)] = std::move(*a);
    m.tailGatePool[size_t(L)] = std::move(*b);
  }
  for (int slot = opts.maxRequests - 1; slot >= 0; --slot) m.freeSlots.push_back(slot);
  cap.totalBytes = m.windowPool->numPages() * pageBytes + m.compPool->numPages() * pageBytes +
                   m.indexPool->numPages() * indexKeyPageBytes(m.cfg);
  return {};
}

Result<int64_t> GpuModel::newRequest() { return impl_->newRequest(false); }

Result<int64_t> GpuModel::newSpeculativeRequest() {
  if (!impl_->laterStages.empty())
    return Error{fmt::format("speculative request: DSpark speculation across pipeline stages (pp {}) is not built "
                             "yet (the draft is not loaded); use pp 1",
                             impl_->stage.count)};
  if (!impl_->speculation)
    return Error{impl_->w.hasDraft ? std::string("speculative request: speculation is off (GpuModelOptions::speculative)")
                 : impl_->cfg.dsparkConfigured()
                     ? std::string("speculative request: the checkpoint has no mtp.* (DSpark) tensors")
                     : fmt::format("speculative request: the model has no DSpark draft (num_nextn_predict_layers {}, "
                                   "dspark_block_size {})",
                                   impl_->cfg.numNextnPredictLayers, impl_->cfg.dsparkBlockSize)};
  return impl_->newRequest(true);
}

Result<int64_t> GpuModelImpl::newRequest(bool speculative) {
  const int64_t id = nextRequest;
  const std::vector<GpuModelImpl*> stages = pipeline();
  for (size_t s = 0; s < stages.size(); ++s) {
    Status st = stages[s]->addRequest(id, speculative);
    if (!st.ok()) {
      for (size_t t = 0; t < s; ++t) {
        stages[t]->release(stages[t]->requests.at(id));
        stages[t]->requests.erase(id);
      }
      return stages.size() == 1 ? st.error() : Error{fmt::format("stage {}: {}", s, st.error().message)};
    }
  }
  ++nextRequest;
  return id;
}

Status GpuModelImpl::addRequest(int64_t id, bool speculative) {
  const int L = cfg.numHiddenLayers;
  GpuRequest rq;
  rq.id = id;
  rq.windowPages.resize(size_t(L));
  rq.compPages.resize(size_t(L));
  rq.indexPages.resize(size_t(L));
  rq.compCount.assign(size_t(L), 0);
  rq.hasTail.assign(size_t(L), 0);
  rq.tailRow.assign(size_t(L), 0);
  rq.speculative = speculative;
  const int64_t draftPages = speculative ? int64_t(cfg.numNextnPredictLayers) * draftRingPages : 0;
  const int64_t need = int64_t(stage.layerEnd - stage.layerBegin) * ringPages + draftPages;
  if (freeSlots.empty() || windowPool->pages().freeCount() < need)
    return Error{fmt::format("no room for another request: {} window pages free, {} needed (at most {} requests)",
                             windowPool->pages().freeCount(), need, opts.maxRequests)};
  for (int layer = stage.layerBegin; layer < stage.layerEnd; ++layer) {
    auto p = windowPool->allocate(ringPages);
    if (!p.ok()) {
      release(rq);
      return p.error();
    }
    rq.windowPages[size_t(layer)] = std::move(*p);
  }
  if (speculative) {
    for (int s = 0; s < cfg.numNextnPredictLayers; ++s) {
      auto p = windowPool->allocate(draftRingPages);
      if (!p.ok()) {
        release(rq);
        return p.error();
      }
      rq.draftPages.push_back(std::move(*p));
    }
  }
  rq.slot = freeSlots.back();
  freeSlots.pop_back();
  requests.emplace(id, std::move(rq));
  return {};
}

void GpuModelImpl::release(GpuRequest& rq) {
  for (auto* lists : {&rq.windowPages, &rq.draftPages})
    for (auto& p : *lists) {
      (void)windowPool->release(p);
      p.clear();
    }
  for (auto& p : rq.compPages) {
    (void)compPool->release(p);
    p.clear();
  }
  for (auto& p : rq.indexPages) {
    (void)indexPool->release(p);
    p.clear();
  }
  if (rq.slot >= 0) freeSlots.push_back(rq.slot);
  rq.slot = -1;
}

Status GpuModelImpl::releaseRequest(int64_t request) {
  if (requests.find(request) == requests.end()) return Error{fmt::format("release: no request {}", request)};
  for (GpuModelImpl* s : pipeline()) {
    auto it = s->requests.find(request);
    if (it == s->requests.end()) continue;
    s->release(it->second);
    s->requests.erase(it);
  }
  return {};
}

Status GpuModel::releaseRequest(int64_t request) { return impl_->releaseRequest(request); }

Result<int64_t> GpuModel::position(int64_t request) const {
  auto it = impl_->requests.find(request);
  if (it == impl_->requests.end()) return Error{fmt::format("no request {}", request)};
  return it->second.position;
}

Status GpuModelImpl::reserve(GpuRequest& rq, int64_t newEnd) {
  if (laterStages.empty()) return reserveStage(rq, newEnd, false);
  // Checked on every stage first, so a full cache anywhere changes nothing.
  const std::vector<GpuModelImpl*> stages = pipeline();
  for (size_t s = 0; s < stages.size(); ++s)
    if (Status st = stages[s]->reserveStage(stages[s]->requests.at(rq.id), newEnd, true); !st.ok())
      return Error{fmt::format("stage {}: {}", s, st.error().message)};
  for (GpuModelImpl* s : stages) DI_TRY(s->reserveStage(s->requests.at(rq.id), newEnd, false));
  return {};
}

Status GpuModelImpl::reserveStage(GpuRequest& rq, int64_t newEnd, bool checkOnly) {
  // Pages each kv source (own or mirrored) needs for the entries of positions < newEnd; checked
  // for all sources first so a full cache changes nothing.
  int64_t needComp = 0, needIndex = 0;
  std::vector<int64_t> want(size_t(cfg.numHiddenLayers), 0);
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    const LayerRole& role = cfg.role(L);
    if (!cachesSource(L)) continue;
    want[size_t(L)] = cdiv(newEnd / role.ratio, kGpuPageTokens);
    needComp += std::max<int64_t>(0, want[size_t(L)] - int64_t(rq.compPages[size_t(L)].size()));
    needIndex += std::max<int64_t>(0, want[size_t(L)] - int64_t(rq.indexPages[size_t(L)].size()));
  }
  if (needComp > compPool->pages().freeCount() || needIndex > indexPool->pages().freeCount())
    return Error{fmt::format("KV cache full: {} more compressed pages and {} index-key pages needed for {} tokens, "
                             "{} and {} free (capacity about {} tokens in all)", needComp, needIndex, newEnd,
                             compPool->pages().freeCount(), indexPool->pages().freeCount(), capacity.tokens)};
  if (checkOnly) return {};
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    const int64_t moreC = want[size_t(L)] - int64_t(rq.compPages[size_t(L)].size());
    if (moreC > 0) {
      auto p = compPool->allocate(moreC);
      if (!p.ok()) return p.error();
      rq.compPages[size_t(L)].insert(rq.compPages[size_t(L)].end(), p->begin(), p->end());
    }
    const int64_t moreI = want[size_t(L)] - int64_t(rq.indexPages[size_t(L)].size());
    if (moreI > 0) {
      auto p = indexPool->allocate(moreI);
      if (!p.ok()) return p.error();
      rq.indexPages[size_t(L)].insert(rq.indexPages[size_t(L)].end(), p->begin(), p->end());
    }
  }
  return {};
}

Result<std::vector<HostTensor>> GpuModelImpl::forward(const Work& work, bool lastOnly) {
  const bool decodeStep = std::all_of(work.begin(), work.end(), [](const auto& w) { return w.second.size() == 1; });
  uint64_t logitsDev = 0;
  int64_t rows = 0;
  DI_TRY(forwardOnDevice(work, lastOnly, decodeStep, &logitsDev, &rows));
  const int64_t V = cfg.vocabSize;
  HostTensor all(DType::F32, {rows, V});
  GpuModelImpl& last = laterStages.empty() ? *this : *laterStages.back();  // the stage with the head
  if (&last != this) DI_TRY(last.dev->use());
  Status copied = copyDeviceToHost(all.bytes.data(), logitsDev, all.bytes.size(), last.stream);
  if (&last != this) DI_TRY(dev->use());
  DI_TRY(copied);
  std::vector<HostTensor> out;
  int64_t row = 0;
  for (const auto& [rq, tokens] : work) {
    const int64_t n = lastOnly ? 1 : int64_t(tokens.size());
    HostTensor t(DType::F32, {n, V});
    std::copy_n(all.bytes.data() + size_t(row * V * 4), size_t(n * V * 4), t.bytes.data());
    row += n;
    out.push_back(std::move(t));
  }
  return out;
}

// A pass through a CUDA graph: a refresh pass computes the step's host-side inputs into pinned
// staging and its shape signature; a graph captured for that signature replays it, else one is
// captured now (the request state is rolled back to before the refresh first). *done is false
// when the pass must run eagerly instead (capture failed; retried later, at most 3 times per
// signature). With a collective the capture is cut at the collectives (CachedGraph), and the
// segments run as they are captured: a failure after a collective is the call's error (an eager
// re-run would meet the other ranks at the wrong collective); before one, it falls back as above.
Result<const GpuModelImpl::CachedGraph*> GpuModelImpl::runGraph(const std::string& kind,
                                                                const std::vector<GpuSeq>& seqs, const PassBody& body,
                                                                const std::function<void()>& restore, bool* done) {
  *done = false;
  auto keyOf = [&](const GpuForwardPass& p) {
    return fmt::format("{}|{}|scratch{}|ws{}", kind, p.sig, scratch.generation(), ops->workspaceGeneration());
  };

  GpuForwardPass refresh(*this, seqs);
  refresh.mode = GpuForwardPass::Mode::Refresh;
  if (Status r = body(refresh); !r.ok()) {
    restore();
    return r.error();
  }
  const std::string key = keyOf(refresh);
  if (auto it = graphs.find(key); it != graphs.end()) {
    DI_TRY(replay(it->second));
    ++counters.graphLaunches;
    *done = true;
    return &it->second;
  }

  restore();
  if (captureFailures[key] >= 3) return nullptr;
  GpuForwardPass record(*this, seqs);
  record.mode = GpuForwardPass::Mode::Record;
  CachedGraph fresh;
  if (collective) record.segments = &fresh;
  DI_TRY(DeviceGraph::beginCapture(stream));
  Status rr = body(record);
  auto graph = DeviceGraph::endCapture(stream);  // the last (or only) segment
  if (!rr.ok() || !graph.ok()) {
    ++captureFailures[key];
    restore();
    const std::string why = !rr.ok() ? rr.error().message : graph.error().message;
    if (!fresh.collectives.empty())
      return Error{fmt::format("{} pass of tensor rank {}: capture as graph segments (after {} collectives): {}", kind,
                               rank.tpRank, fresh.collectives.size(), why)};
    fmt::print(stderr, "deepinfer-jit: {} pass not captured as a graph ({}); running it eagerly\n", kind, why);
    return nullptr;
  }
  fresh.segments.push_back(std::move(*graph));
  fresh.outputs = record.outputs;
  fresh.rows = record.logitsRows;
  fresh.launches = record.launches;
  fresh.launches.graph = true;
  fresh.launches.graphKernels = fresh.launches.graphMemoryNodes = fresh.launches.graphProgrammaticEdges = 0;
  for (const DeviceGraph& seg : fresh.segments) {
    const DeviceGraph::Nodes& n = seg.nodes();
    fresh.launches.graphKernels += n.kernels;
    fresh.launches.graphMemoryNodes += n.memcpys + n.memsets;
    if (fresh.launches.graphProgrammaticEdges >= 0)
      fresh.launches.graphProgrammaticEdges = n.programmaticEdges < 0 ? -1 : fresh.launches.graphProgrammaticEdges +
                                                                                 n.programmaticEdges;
  }
  if (graphs.size() >= 64) graphs.erase(graphs.begin());  // bounded: shapes change as contexts grow
  CachedGraph& g = graphs[keyOf(record)];
  g = std::move(fresh);
  ++counters.graphCaptures;
  // The earlier segments ran as they were captured; the last one runs now (all of it without a
  // collective: a capture enqueues nothing).
  DI_TRY(g.segments.back().launch(stream));
  ++counters.graphLaunches;
  *done = true;
  return &g;
}

Status GpuModelImpl::replay(const CachedGraph& g) {
  for (size_t i = 0; i < g.segments.size(); ++i) {
    DI_TRY(g.segments[i].launch(stream));
    if (i < g.collectives.size()) DI_TRY(runCollective(g.collectives[i]));
  }
  return {};
}

Status GpuModelImpl::runCollective(const GpuCollectiveCall& c) {
  if (!collective) return Error{"a collective without the stage's collective (tp 1 without NCCL)"};
  return c.op == TpOp::AllReduceSum ? collective->allReduceSum(rank.tpRank, c.send, c.recv, c.count, c.dtype, stream)
                                    : collective->allGather(rank.tpRank, c.send, c.recv, c.count, c.dtype, stream);
}

// The checks every call does before anything changes: the request exists and is usable, the
// ids are in the vocabulary, the positions stay within max_position_embeddings.
Result<GpuRequest*> GpuModelImpl::checkedRequest(int64_t request, const std::vector<int32_t>& ids, const char* who) {
  auto it = requests.find(request);
  if (it == requests.end()) return Error{fmt::format("{}: no request {}", who, request)};
  GpuRequest& rq = it->second;
  if (ids.empty()) return Error{fmt::format("{}: request {} has no tokens", who, request)};
  if (rq.unusable) return Error{fmt::format("{}: request {} is unusable after an earlier failed call", who, request)};
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= cfg.vocabSize)
      return Error{fmt::format("{}: token {} (at index {}) of request {} is outside the vocabulary [0, {})", who,
                               ids[i], i, request, cfg.vocabSize)};
  const int64_t end = rq.position + int64_t(ids.size());
  if (cfg.maxPositionEmbeddings > 0 && end > cfg.maxPositionEmbeddings)
    return Error{fmt::format("{}: positions up to {} exceed max_position_embeddings {}", who, end,
                             cfg.maxPositionEmbeddings)};
  return &rq;
}

Result<std::vector<HostTensor>> GpuModel::forward(const std::vector<std::pair<int64_t, std::vector<int32_t>>>& work,
                                                  bool lastOnly) {
  GpuModelImpl& m = *impl_;
  if (work.empty()) return std::vector<HostTensor>{};
  std::vector<std::pair<GpuRequest*, std::vector<int32_t>>> items;
  for (const auto& [request, ids] : work) {
    auto rq = m.checkedRequest(request, ids, "forward");
    if (!rq.ok()) return rq.error();
    for (const auto& other : items)
      if (other.first == *rq) return Error{fmt::format("forward: request {} appears twice in one call", request)};
    if (int64_t(ids.size()) > m.opts.maxChunkTokens)
      return Error{fmt::format("forward: request {} brings {} tokens; one call takes at most {} per request (the "
                               "prefill chunk)", request, ids.size(), m.opts.maxChunkTokens)};
    items.emplace_back(*rq, ids);
  }
  for (auto& [rq, ids] : items) DI_TRY(m.reserve(*rq, rq->position + int64_t(ids.size())));
  return m.forward(items, lastOnly);
}

Result<HostTensor> GpuModel::prefill(int64_t request, const std::vector<int32_t>& ids, bool lastOnly) {
  GpuModelImpl& m = *impl_;
  auto checked = m.checkedRequest(request, ids, "prefill");
  if (!checked.ok()) return checked.error();
  GpuRequest& rq = **checked;
  const int64_t end = rq.position + int64_t(ids.size());
  DI_TRY(m.reserve(rq, end));
  const int64_t V = m.cfg.vocabSize, n = int64_t(ids.size());
  HostTensor all(DType::F32, {lastOnly ? 1 : n, V});
  for (int64_t at = 0; at < n; at += m.opts.maxChunkTokens) {
    const int64_t len = std::min(m.opts.maxChunkTokens, n - at);
    std::vector<int32_t> chunk(ids.begin() + at, ids.begin() + at + len);
    const bool lastChunk = at + len == n;
    auto logits = m.forward({{&rq, chunk}}, lastOnly);
    if (!logits.ok()) return logits.error();
    if (lastOnly) {
      if (lastChunk) all = std::move((*logits)[0]);
    } else {
      std::copy_n((*logits)[0].bytes.data(), (*logits)[0].bytes.size(), all.bytes.data() + size_t(at * V * 4));
    }
  }
  return all;
}

Result<std::vector<float>> GpuModel::decode(int64_t request, int32_t token) {
  auto logits = forward({{request, {token}}}, false);
  if (!logits.ok()) return logits.error();
  std::vector<float> row(size_t(impl_->cfg.vocabSize));
  std::copy_n((*logits)[0].ptr<float>(), row.size(), row.data());
  return row;
}

}  // namespace deepinfer
