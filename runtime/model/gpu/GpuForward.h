// Internals of the GPU runtime: the model's state (weights, kernels, KV page pools), one
// request's caches, grow-only scratch buffers and one forward call over a chunk of tokens.
// Not part of the public API (GpuModel.h is).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/Cublas.h"
#include "deepinfer/DeviceGraph.h"
#include "lib/DiOps.h"
#include "GpuModel.h"
#include "GpuWeights.h"
#include "ModelKernels.h"
#include "PagePool.h"
#include "model/Checkpoint.h"
#include "model/EngramHash.h"

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
struct GpuRequest {
  int64_t position = 0;
  bool unusable = false;
  std::vector<int64_t> classes;                        // engram class of every token so far
  std::vector<std::vector<int32_t>> windowPages;       // [layer]
  std::vector<std::vector<int32_t>> compPages;         // [layer] (kv sources)
  std::vector<std::vector<int32_t>> indexPages;        // [layer] (kv sources)
  std::vector<int64_t> compCount;                      // [layer] compressed entries written
  std::vector<char> hasTail;                           // [layer] ratio 2: first token of an open pair
  std::vector<DeviceBuffer> tailKv, tailGate;          // [layer] f32 [512] each (ratio-2 sources)
};

struct GpuSeq;

class GpuModelImpl {
 public:
  ModelConfig cfg;
  std::shared_ptr<Device> dev;
  TargetProfile target;
  std::unique_ptr<Checkpoint> ckpt;
  GpuWeights w;
  std::unique_ptr<Jit> jit;
  std::unique_ptr<DiOps> ops;
  std::unique_ptr<ModelKernels> mk;
  std::unique_ptr<Cublas> blas;
  std::vector<DeviceBuffer> invFreq;                   // [layer] f32 [rope/2]
  struct ExpertTables {
    DeviceBuffer w1, w3, w2;                           // u64 [E]: the routed experts' weight addresses
  };
  std::vector<ExpertTables> expertTables;              // [layer]
  std::unique_ptr<EngramHashParams> engramHash;
  std::vector<int32_t> tokenMap;
  int64_t padClass = 0;
  GpuModelOptions opts;

  // KV page pools shared by all layers and requests.
  std::unique_ptr<DevicePagePool> windowPool, compPool, indexPool;
  int64_t ringRows = 0, ringPages = 0;
  GpuKvCapacity capacity;

  // Decode steps as CUDA graphs, one per shape signature of the step (GpuForwardPass::sig).
  struct CachedGraph {
    DeviceGraph graph;
    uint64_t logits = 0;
    int64_t rows = 0;
  };
  std::map<std::string, CachedGraph> graphs;
  std::map<std::string, int> captureFailures;
  std::unique_ptr<Stream> ownStream;                   // when the caller gives none (graphs need one)
  void* userStream = nullptr;
  Result<std::vector<HostTensor>> replayOrCapture(const std::vector<GpuSeq>& seqs, const std::vector<int32_t>& ids,
                                                  bool lastOnly, bool* done);

  std::map<int64_t, GpuRequest> requests;
  int64_t nextRequest = 1;
  Scratch scratch;
  GpuForwardCounters counters;
  void* stream = nullptr;                              // CUstream of the calls

  Result<GpuRequest*> checkedRequest(int64_t request, const std::vector<int32_t>& ids, const char* who);
  Status reserve(GpuRequest& rq, int64_t newEnd);      // pages for positions < newEnd
  void release(GpuRequest& rq);
  // One forward over (request, tokens) pairs; logits per pair ([n, V], or [1, V] with lastOnly).
  Result<std::vector<HostTensor>> forward(const std::vector<std::pair<GpuRequest*, std::vector<int32_t>>>& work,
                                          bool lastOnly);
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
  // Eager: launch as the code runs. Record: the same under stream capture (uploads read pinned
  // staging). Refresh: host work only (metadata into the pinned staging a captured graph reads).
  enum class Mode { Eager, Record, Refresh } mode = Mode::Eager;
  std::string sig;                        // shapes of this step: buffers, uploads, ops (graph key)
  int64_t uploads = 0;                    // uploads so far in this pass (pinned staging slots)
  uint64_t logitsAddr = 0;                // where run() left the logits (Record/Refresh)
  int64_t logitsRows = 0;
  bool launching() const { return mode != Mode::Refresh; }
  Status runOp(const std::string& op, const OpAttrs& attrs, const std::map<std::string, DiTensor>& tensors,
               void* stream);

  // Per-forward shared decisions (YOCO, model.md §2): selections of index sources, the
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

  Status engram(int layer, uint64_t X);
  Status attention(int layer, uint64_t u, uint64_t fOut);
  Status attendDecode(int layer, uint64_t q, uint64_t o, uint64_t lse);
  Status attendPrefill(int layer, uint64_t q, uint64_t o, uint64_t lse);
  Status compress(int layer, uint64_t u);
  Status index(int layer, uint64_t u, uint64_t qr);
  Status moe(int layer, uint64_t u, uint64_t fOut);
  // Decode steps: routed rows through pointer-array GEMMs built on the device (no host trip).
  Status moeRoutedOnDevice(int layer, uint64_t u, uint64_t ids, uint64_t wts, uint64_t routed);
  Result<uint64_t> moeRoutedOnHost(int layer, uint64_t u, uint64_t ids, uint64_t wts);
  bool decodeOnly() const;

  // Helpers.
  Result<uint64_t> buf(const std::string& name, size_t bytes) {
    sig += name;
    sig += ':';
    sig += std::to_string(bytes);
    sig += ';';
    return s.get(name, bytes);
  }
  Result<uint64_t> upload(const std::string& name, const void* data, size_t bytes);
  int64_t windowSlot(const GpuRequest& rq, int layer, int64_t pos) const;
  Status gemm(uint64_t x, int64_t ldx, const GpuMatrix& W, uint64_t y, int64_t M);
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
