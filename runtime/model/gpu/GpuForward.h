// Internals of the GPU runtime: the model's state (weights, kernels, KV page pools), one
// request's caches, grow-only scratch buffers and one forward call over a chunk of tokens.
// Not part of the public API (GpuModel.h is).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/Cublas.h"
#include "deepinfer/DeviceGraph.h"
#include "lib/DiOps.h"
#include "GpuModel.h"
#include "model/KvFootprint.h"
#include "GpuWeights.h"
#include "ModelKernels.h"
#include "PagePool.h"
#include "model/Checkpoint.h"
#include "model/EngramHash.h"
#include "model/parallel/RankPool.h"
#include "model/parallel/ShardPlan.h"
#include "model/parallel/TpCollective.h"

// Enqueues device work unless the pass only refreshes a graph's host-side inputs.
#define DI_LAUNCH(expr)              \
  do {                               \
    if (launching()) DI_TRY(expr);   \
  } while (0)

// Declares `uint64_t var` from a Result<uint64_t>, returning its error.
#define DI_ASSIGN(var, expr)              \
  uint64_t var = 0;                       \
  {                                       \
    auto _r = (expr);                     \
    if (!_r.ok()) return _r.error();      \
    var = *_r;                            \
  }

namespace deepinfer {

constexpr int64_t kGpuStreams = 4;      // mHC streams
constexpr int64_t kGpuKvDim = 512;      // fp8_ds_mla row width
constexpr int64_t kGpuPageTokens = 64;  // tokens per page of every cache (window, compressed, index)
static_assert(kGpuPageTokens == kKvPageTokens, "the host-side planners (model/KvFootprint.h) size pages like this");

// Named device buffers (and pinned host staging buffers) that only grow; reused by every
// forward call. `generation` changes whenever one moves, which invalidates captured graphs.
class Scratch {
 public:
  Result<uint64_t> get(const std::string& name, size_t bytes);
  Result<void*> pinned(const std::string& name, size_t bytes);
  uint64_t generation() const { return generation_; }

 private:
  std::map<std::string, DeviceBuffer> bufs_;
  std::map<std::string, PinnedBuffer> pinned_;
  uint64_t generation_ = 0;
};

// One request's caches. Window rings: `ringPages` pages per layer, row of position p is
// p % ringRows. Compressed and index-key caches of kv source layers grow a page at a time.
// Ratio-2 compressor tails live in the model's tail pools (GpuModelImpl::tailKvPool), in the
// request's region `slot`: device-side indices, so captured graphs bake no request address.
struct GpuRequest {
  int64_t id = 0;                                      // the same on every stage of a pipeline
  int64_t position = 0;
  bool unusable = false;
  int slot = -1;                                       // region of the tail pools (0 .. maxRequests-1)
  std::vector<int64_t> classes;                        // engram class of every token so far
  std::vector<std::vector<int32_t>> windowPages;       // [layer]
  std::vector<std::vector<int32_t>> compPages;         // [layer] (kv sources)
  std::vector<std::vector<int32_t>> indexPages;        // [layer] (kv sources)
  std::vector<int64_t> compCount;                      // [layer] compressed entries written
  std::vector<char> hasTail;                           // [layer] ratio 2: first token of an open pair
  std::vector<int64_t> tailRow;                        // [layer] ratio 2: the open pair's row in the region
  // DSpark (docs/dspark.md): speculative requests keep a draft ring per stage (pages of the
  // window pool, row of position p is p % draftRingRows) and, for a rollback inside the last
  // call, where it started and how many of its rows the tail regions hold (rows 0 .. n-1).
  bool speculative = false;
  std::vector<std::vector<int32_t>> draftPages;        // [stage]
  int64_t lastCallStart = 0, lastCallRows = 0;
};

struct GpuSeq;
struct GpuForwardPass;

// A stage of a pipeline over layer ranges (docs/parallelism.md §3); a model of one stage runs
// every layer. The stage holds the caches of its own layers and mirrors of the earlier stages'
// kv sources that its layers read: it computes their compressed entries and index keys itself,
// with the same kernels, from the source layer's attention input that the owning stage sends.
struct GpuStagePlan {
  int index = 0, count = 1;
  int layerBegin = 0, layerEnd = 0;
  std::vector<int> mirroredSources;   // kv source layers < layerBegin whose caches this stage keeps
  // What crosses into the next stage besides the residual state (the streams before the last
  // layer's post step, its MoE output, post/comb mixes and pre-mix): the attention inputs of kv
  // sources that later stages mirror, the selections of index sources that later layers read,
  // and the candidate source's kept blocks. recv* are the previous stage's send*.
  std::vector<int> sendInputs, sendSelections, recvInputs, recvSelections;
  bool sendKept = false, recvKept = false;
  std::vector<RankPlan> ranks;        // the stage's tensor ranks (planShards), tp entries
  bool first() const { return index == 0; }
  bool last() const { return index + 1 == count; }
  bool owns(int layer) const { return layer >= layerBegin && layer < layerEnd; }
};

// One buffer of a stage boundary's hand-off, in the order the sending pass lists its outputs.
struct GpuHandoffItem {
  std::string name;
  size_t bytes = 0;
};
std::vector<GpuHandoffItem> gpuHandoffItems(const ModelConfig& cfg, const std::vector<int>& inputs,
                                            const std::vector<int>& selections, bool kept, int64_t T);
// The stages of `opts` (pp, stageLayers; tp must be 1) over `cfg`'s layers: ranges, mirrors and
// hand-off lists. Errors name the bad option.
Result<std::vector<GpuStagePlan>> planGpuStages(const ModelConfig& cfg, const GpuModelOptions& opts);

// One collective of a tensor rank's pass: what a graph replay issues again between segments.
struct GpuCollectiveCall {
  TpOp op = TpOp::AllReduceSum;
  uint64_t send = 0, recv = 0;
  size_t count = 0;
  DType dtype = DType::F32;
};

class GpuModelImpl {
 public:
  ModelConfig cfg;
  std::shared_ptr<Device> dev;
  TargetProfile target;
  std::unique_ptr<Checkpoint> ckpt;                    // null for synthetic weights
  GpuWeights w;
  GpuWeightInfo weightInfo;
  // Rows of an engram table (the checkpoint's mapping, or synthetic ones): out[n * cols] f32.
  std::function<Status(const std::string& table, const int64_t* rows, size_t n, int64_t cols, float* out)> engramRows;
  std::unique_ptr<Jit> jit;
  std::unique_ptr<DiOps> ops;
  std::unique_ptr<ModelKernels> mk;
  std::unique_ptr<Cublas> blas;
  std::vector<DeviceBuffer> invFreq;                   // [layer] f32 [rope/2]
  // Ratio-2 compressor tails: per kv source layer f32 [maxRequests * tailRegionRows, 512] for kv
  // and gate; a request's region holds its open pair's first token and, for speculative
  // requests, every row of its last short call (so a rollback can pick any of them).
  std::vector<DeviceBuffer> tailKvPool, tailGatePool;  // [layer]
  int64_t tailRegionRows = 1;
  std::vector<int> freeSlots;

  // DSpark (GpuSpeculative.cpp, GpuDraft.cpp): on when the weights have a draft and the options
  // allow it. Draft rings hold draftRingRows >= sliding_window + B rows: a verify forward writes
  // every row it computed (rejected ones too; they are never read, docs/dspark.md §3 / §5).
  bool speculation = false;
  GpuStagePlan stage;                                  // this stage's layers (one stage: all of them)
  // Tensor parallelism (docs/parallelism.md §2): this model is tensor rank rank.tpRank of `tp`
  // of its stage, with the rank's weights (cfg's heads and groups are the rank's: its attention
  // runs on them unchanged); its pass sums partial outputs through `collective` (shared by the
  // stage's ranks; also set for tp = 1 over NCCL). fullCfg is the model's.
  int tp = 1;
  RankPlan rank;
  ModelConfig fullCfg;
  std::shared_ptr<TpCollective> collective;
  int kvShare = 1;                                     // stages that split this GPU's free memory for KV
  // Pipelines: stage 0 owns the later stages and drives every call through all of them. With
  // tp > 1, pipeline() lists every rank, stage-major (rank = stage * tp + tensor rank).
  std::vector<std::unique_ptr<GpuModelImpl>> laterStages;
  // tp > 1 (stage 0 only): the ranks' persistent host threads; rank r of every stage runs on
  // thread r (declared after laterStages: joined before the ranks go).
  std::unique_ptr<RankPool> rankPool;
  Event handoff;                                       // recorded after this stage's work of a call
  GpuKvCapacity totalCapacity;                         // over all stages (tokens: the smallest stage's)
  GpuWeightInfo totalWeights;
  mutable GpuForwardCounters totalCounters;
  std::vector<GpuStageReport> stageReports;
  std::vector<GpuModelImpl*> pipeline();               // this stage and the later ones
  bool cachesSource(int layer) const;                  // a kv source this stage owns or mirrors
  DeviceBuffer draftInvFreq;                           // f32 [rope/2]: the ratio-0 table
  int64_t draftRingRows = 0, draftRingPages = 0;
  std::unique_ptr<EngramHashParams> engramHash;
  std::vector<int32_t> tokenMap;
  int64_t padClass = 0;
  GpuModelOptions opts;

  // KV page pools shared by all layers and requests.
  std::unique_ptr<DevicePagePool> windowPool, compPool, indexPool;
  int64_t ringRows = 0, ringPages = 0;
  GpuKvCapacity capacity;

  // Decode steps, verify steps and draft passes as CUDA graphs, one per kind and shape
  // signature (GpuForwardPass::sig). `outputs` are the device addresses the pass left its results
  // at (the logits for forwards).
  // With tensor ranks the pass is cut at its collectives (docs/parallelism.md §2.1): segment i
  // is captured on this rank's stream alone, and a replay launches it, then runs collective i
  // through the stage's rendezvous as an eager pass would; without a collective, one segment.
  struct CachedGraph {
    std::vector<DeviceGraph> segments;
    std::vector<GpuCollectiveCall> collectives;        // segments.size() - 1 of them
    std::vector<uint64_t> outputs;
    int64_t rows = 0;
    GpuCallLaunches launches;                          // what the capture enqueued, and the graph's nodes
  };
  Status replay(const CachedGraph& g);
  // This rank's part of a collective of its stage, ordered on `stream`.
  Status runCollective(const GpuCollectiveCall& c);
  std::map<std::string, CachedGraph> graphs;
  std::map<std::string, int> captureFailures;
  std::unique_ptr<Stream> ownStream;                   // when the caller gives none (graphs need one)
  void* userStream = nullptr;
  using PassBody = std::function<Status(GpuForwardPass&)>;
  // Runs `body` (which configures and runs a pass over `seqs`) as a CUDA graph: a refresh pass
  // stages the host-side inputs and yields the signature; the graph captured for `kind` and that
  // signature replays, else one is captured now. `restore` undoes the host-side request changes
  // a pass makes (before a capture re-runs it, and on failure). *done = false: the caller runs
  // the pass eagerly instead (capture failed; retried at most 3 times per signature).
  Result<const CachedGraph*> runGraph(const std::string& kind, const std::vector<GpuSeq>& seqs, const PassBody& body,
                                      const std::function<void()>& restore, bool* done);
  GpuDeviceLogits lastLogits;                          // where the last forward call left its logits
  GpuCallLaunches lastLaunches;                        // what the last forward call enqueued

  std::map<int64_t, GpuRequest> requests;
  int64_t nextRequest = 1;
  Scratch scratch;
  GpuForwardCounters counters;
  void* stream = nullptr;                              // CUstream of the calls

  Result<GpuRequest*> checkedRequest(int64_t request, const std::vector<int32_t>& ids, const char* who);
  Result<int64_t> newRequest(bool speculative);        // on every stage, one id
  Status addRequest(int64_t id, bool speculative);     // on this stage
  // Pages for positions < newEnd on every stage (all checked before any is taken).
  Status reserve(GpuRequest& rq, int64_t newEnd);
  Status reserveStage(GpuRequest& rq, int64_t newEnd, bool checkOnly);
  void release(GpuRequest& rq);
  Status releaseRequest(int64_t request);              // on every stage
  using Work = std::vector<std::pair<GpuRequest*, std::vector<int32_t>>>;
  // One forward over (request, tokens) pairs; logits per pair ([n, V], or [1, V] with lastOnly).
  Result<std::vector<HostTensor>> forward(const Work& work, bool lastOnly);
  // The same with the logits left on the device (`*logitsDev`, [rows, V] f32, valid until the
  // next forward): every row computed like a one-row decode step when `rowWise` (decode steps,
  // verify chunks: graph-capturable), else the prefill path.
  Status forwardOnDevice(const Work& work, bool lastOnly, bool rowWise, uint64_t* logitsDev, int64_t* rows);
  // This stage's pass over `seqs` (through a graph when it may): `outputs` are the logits (last
  // stage) or the hand-off buffers (gpuHandoffItems of stage.send*).
  Status runStage(const std::vector<GpuSeq>& seqs, const std::vector<int32_t>& ids, bool lastOnly, bool rowWise,
                  bool features, std::vector<uint64_t>* outputs, int64_t* rows, GpuCallLaunches* launches);
  // DSpark: forget positions >= newPosition of the last call (docs/dspark.md §5).
  Status rollback(GpuRequest& rq, int64_t newPosition);
};

// One sequence of a batched forward call: `T` tokens of one request at positions pos0 ..
// pos0 + T - 1, rows [offset, offset + T) of the call's token rows.
struct GpuSeq {
  GpuRequest* rq = nullptr;
  int64_t pos0 = 0, T = 0, offset = 0;
  int64_t end() const { return pos0 + T; }
};

// One forward call over the tokens of several requests (continuous batching: prefill chunks
// and decode tokens side by side). Token-wise work (projections, norms, MoE, mHC) runs over all
// rows at once; cache metadata is per sequence, in the ops' batched forms (R = sequences).
struct GpuForwardPass {
  GpuModelImpl& m;
  const ModelConfig& cfg;
  const GpuWeights& w;
  ModelKernels& mk;
  Cublas& blas;
  DiOps& ops;
  Scratch& s;
  void* stream = nullptr;
  std::vector<GpuSeq> seqs;
  int64_t T = 0;                          // all rows
  int64_t R = 0;                          // sequences
  std::vector<int64_t> positions;         // [T] absolute position of every row
  uint64_t positionsDev = 0;              // i64 [T]
  bool lastRowsOnly = false;              // logits of each sequence's last row only
  // Every row attends through sparse_mla_decode with its own index lists, as in a one-row decode
  // step (decode steps and verify chunks). Else the prefill path (gathered workspace).
  bool rowWise = false;
  // DSpark target features for the speculative requests among `seqs`: taps, main_x and the
  // draft-ring rows of their positions (docs/dspark.md §2, §3).
  bool features = false;
  // Eager: launch as the code runs. Record: the same under stream capture (uploads read pinned
  // staging). Refresh: host work only (metadata into the pinned staging a captured graph reads).
  enum class Mode { Eager, Record, Refresh } mode = Mode::Eager;
  std::string sig;                        // shapes of this step: buffers, uploads, ops (graph key)
  int64_t uploads = 0;                    // uploads so far in this pass (pinned staging slots)
  uint64_t logitsAddr = 0;                // where run() left the logits (Record/Refresh)
  int64_t logitsRows = 0;
  std::vector<uint64_t> outputs;          // where the pass left its results (graphs replay into them)
  bool hostLogits = true;                 // Eager run(): copy the logits to the host
  GpuCallLaunches launches;               // what run() enqueued (nothing in Refresh mode), per layer
  bool launching() const { return mode != Mode::Refresh; }
  Status runOp(const std::string& op, const OpAttrs& attrs, const std::map<std::string, DiTensor>& tensors,
               void* stream);
  // The ops as the fusion passes rewrite their sequence (DiOps::runSequence).
  Status runOps(const std::vector<DiOpCall>& calls, void* stream);

  // Per-forward shared decisions (YOCO, docs/model.md §2): selections of index sources, the
  // candidate source's kept blocks, the gathered compressed workspace of each kv source.
  std::map<int, uint64_t> selection;      // index source layer -> i32 [T, K]
  uint64_t keptBlocks = 0;                // i32 [T, candidate_topk_blocks]
  struct SourceWorkspace {
    uint64_t ws = 0;                      // bf16 [R, M, 512]: per sequence compressed rows [0, N), window [N, M)
    int64_t N = 0, M = 0;
    int rowsFor = -2;                     // index source whose combined rows are in rows/lens
    uint64_t rows = 0, lens = 0;
    // Decode steps: the compressed page table [R, width], token -> sequence map and lens, and
    // the selected entries' cache slots for the index source `slotsFor`.
    uint64_t decTable = 0, decReq = 0, decLens = 0, decSlots = 0;
    int64_t decWidth = 0;
    int slotsFor = -2;
  };
  std::map<int, SourceWorkspace> sources; // kv source layer (or -1 for ratio 0) -> workspace

  GpuForwardPass(GpuModelImpl& model, std::vector<GpuSeq> sequences);
  // Logits [T, V] (or [R, V] with lastRowsOnly), F32.
  Result<HostTensor> run(const std::vector<int32_t>& ids);

  // The residual streams of a pass and the delayed-mHC steps over them (docs/model.md §5, docs/ops.md §8):
  // X holds the streams (ping-pong with Y), u the sublayer input, f its output.
  struct Streams {
    uint64_t X = 0, Y = 0, u = 0, f = 0, preA = 0, preF = 0, post = 0, comb = 0, sqrsum = 0;
  };
  Streams st;
  Status allocStreams(int64_t rows);
  // Pipeline stages: the state the previous stage sent (streams, mixes, mirrored sources' inputs,
  // selections, kept blocks) into this pass, and the post step after `layer` (fused with the next
  // layer's pre step, or alone before an engram layer, or the final collapse and norm).
  Status receive();
  Status postStep(int layer, bool* attnPreDone);
  Result<std::vector<uint64_t>> handoffOutputs();
  Status mhcPre(const GpuMhcWeights& hw, uint64_t preIn, uint64_t norm, uint64_t preOut);
  Status mhcFusedPostPre(const GpuMhcWeights& hw, uint64_t preIn, uint64_t norm, uint64_t preOut);
  Status mhcPostOnly();

  Status engram(int layer, uint64_t X);
  Status attention(int layer, uint64_t u, uint64_t fOut);
  // Q and the RoPE'd KV rows of an attention sublayer (q bf16 [T, H, 512], qr bf16 [T, qLora],
  // kv bf16 [T, 512]) and its output projection from o (in place inverse RoPE, wo_a, wo_b).
  Status attnProject(const GpuAttentionWeights& aw, uint64_t invFreq, uint64_t u, uint64_t* q, uint64_t* qr,
                     uint64_t* kv);
  Status attnOutput(const GpuAttentionWeights& aw, uint64_t invFreq, uint64_t o, uint64_t fOut);
  Status attendDecode(int layer, uint64_t q, uint64_t o, uint64_t lse);
  Status attendPrefill(int layer, uint64_t q, uint64_t o, uint64_t lse);
  Status compress(int layer, uint64_t u);
  Status index(int layer, uint64_t u, uint64_t qr);
  Status moe(int layer, uint64_t u, uint64_t fOut);
  // The MoE sublayer with the routed experts of `mw`, top-k (backbone layers and draft stages):
  // router, one moe_experts launch sequence (grouping on the device), the shared expert through
  // weight_gemm, the ordered sum.
  Status moeBlock(const GpuMoeWeights& mw, int64_t k, uint64_t u, uint64_t fOut);
  // Tensor parallelism: sums `n` elements at `x` over the stage's ranks in place (a no-op
  // without a collective).
  Status tpAllReduce(uint64_t x, int64_t n, DType dtype);
  // Every collective of the pass goes through here (a no-op without a collective). Recording
  // with a collective (`segments` set by runGraph): the capture so far becomes a segment, which
  // runs at once (the collective reads what it computed), then the collective runs and the next
  // segment's capture begins.
  Status tpCollective(const GpuCollectiveCall& c);
  GpuModelImpl::CachedGraph* segments = nullptr;
  bool tensorParallel() const { return m.collective != nullptr; }

  // DSpark (GpuSpeculative.cpp): the taps (streams entering a tapped layer) into G, then
  // main_x and the draft-ring rows of the speculative sequences' positions.
  uint64_t tapFeatures = 0;               // bf16 [T, taps * C]
  Status captureTap(int layer, uint64_t X);
  Status commitFeatures();
  // The draft pass (GpuDraft.cpp) over `seqs` (T = B rows each at pos0 = the anchor), rows in
  // k-major order (row i * R + r): outputs = {tokens i32 [(B+1), R] (row 0 the anchors), z f32
  // [B * R, V], confidence f32 [B * R], h bf16 [B * R, C]}. With `deviceMarkov` the Markov picks
  // (argmax) run on the device too; else the caller runs them (markovStep) with host sampling.
  Status runDraft(const std::vector<int32_t>& anchors, bool deviceMarkov);
  Status draftAttention(int stage, uint64_t u, uint64_t fOut);
  Status markovStep(int64_t k, bool deviceArgmax);

  // Helpers.
  Result<uint64_t> buf(const std::string& name, size_t bytes) {
    sig += name;
    sig += ':';
    sig += std::to_string(bytes);
    sig += ';';
    return s.get(name, bytes);
  }
  Result<uint64_t> upload(const std::string& name, const void* data, size_t bytes);
  // Launch arguments computed on the host from this step's requests that are neither a shape nor
  // an upload (e.g. which sequence's rows a launch reads): they join the signature, so a graph
  // captured with other values is never replayed for this step.
  void hostArgs(const std::string& what) {
    sig += what;
    sig += ';';
  }
  int64_t windowSlot(const GpuRequest& rq, int layer, int64_t pos) const;
  // cuBLAS for bf16 weights: y[M, W.rows] f32 = x[M, W.cols] (row stride ldx) . W^T.
  Status gemm(uint64_t x, int64_t ldx, const GpuMatrix& W, uint64_t y, int64_t M);
  // weight_gemm for quantized weights (dense x rows): y[M, W.rows] = x[M, groups * W.cols] .
  // dequant(W)^T with the epilogue (f32, bf16, or bf16 SwiGLU with `up` as w3); recorded in the
  // step's signature like every op.
  Status project(uint64_t x, const GpuMatrix& W, uint64_t y, int64_t M, GemmEpilogue epilogue = GemmEpilogue::F32,
                 int64_t groups = 1, const GpuMatrix* up = nullptr);
  // moe_experts over the T rows of u: routed f32 [T, k, C] (row t * k + r: rank r's expert output
  // with its routing weight applied), ids/weights [T, k] from the router.
  Status routedExperts(const GpuRoutedExperts& experts, uint64_t u, uint64_t ids, uint64_t weights, int64_t k,
                       uint64_t routed);
  // [R, width] page table: row b maps logical page p < pagesOf(b) to pageOf(b, p); the rest
  // repeat the row's first page (never read).
  template <class PagesOf, class PageOf>
  Result<uint64_t> pageTable(const std::string& name, int64_t width, PagesOf pagesOf, PageOf pageOf);
  // The page table of a kv source's compressed or index-key cache (`lists`) for every sequence.
  using PageLists = std::vector<std::vector<int32_t>> GpuRequest::*;
  Result<uint64_t> cachePageTable(const std::string& name, int64_t width, PageLists lists, int layer);
};

// Smallest power of two >= n, at least `floor`: keeps kernel shapes (and so compiled kernels)
// to a bounded set as contexts grow.
int64_t bucketUp(int64_t n, int64_t floor);

}  // namespace deepinfer
