// DeepSeek-V4.1 on the GPU (docs/model.md) through generated kernels: the `di` ops for the
// KV-cache writer, gather, index combine, sparse attention, lightning indexer, top-k and mHC;
// the weights in the checkpoint's formats (GpuWeights.h): `weight_gemm` for the fp8/fp4
// projections, one `moe_experts` launch sequence per MoE for the routed experts, cuBLAS only for
// the bf16 matrices (head, router, compressor and indexer keys); the model kernels of
// templates/model/ for the small ops. Numerics follow the CPU reference
// (runtime/model/CpuForward.h) rounding point for rounding point.
//
//   auto model = GpuModel::load(dir, device, {});       // target: the local GPU (cubin)
//   auto req = model->newRequest();                      // KV pages reserved as it grows
//   auto logits = model->prefill(*req, ids);             // [n, V] F32, chunked
//   auto next = model->decode(*req, token);              // [V]
//   model->releaseRequest(*req);
//
// One call at a time per model; calls are ordered on one stream (setStream; default: legacy).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/Error.h"
#include "deepinfer/Jit.h"
#include "deepinfer/LaunchTally.h"
#include "deepinfer/Tensor.h"
#include "model/ModelConfig.h"
#include "model/Sampling.h"

namespace deepinfer {

struct GpuModelOptions {
  std::string target;               // "" = the local GPU's arch (cubin); "sm_80", "sm_86": their PTX
  int64_t maxChunkTokens = 256;     // prefill runs in chunks of at most this many tokens
  int64_t kvCacheBytes = 0;         // device bytes for the KV caches; 0 = kvMemoryFraction of free
  double kvMemoryFraction = 0.5;
  int maxRequests = 16;             // requests that may hold caches at once
  bool cudaGraphs = true;           // decode/verify steps and draft passes replay CUDA graphs per shape
  bool speculative = true;          // DSpark speculative requests allowed when the model has a draft
  JitOptions jit;
  // Several GPUs (docs/parallelism.md). pp pipeline stages over contiguous layer ranges:
  // stageLayers gives each stage's layer count (empty: as even as possible); stage s runs on GPU
  // gpus[s] (empty: every stage on the GPU given to load; the same ordinal twice makes two
  // logical devices of one GPU). Each stage holds only its tensors, its own KV pools (kvCacheBytes
  // each, or kvMemoryFraction / k of the free memory it sees, k = the stages of its GPU from it
  // on) and stream; the last stage's GPU holds the logits. DSpark speculation needs pp = 1.
  // tp tensor ranks per stage (docs/parallelism.md §2): each holds its heads, output groups,
  // shared-expert slice, routed experts and vocabulary rows (planShards' split); with tp > 1,
  // gpus has pp * tp entries, rank r of stage s on gpus[s * tp + r]. A stage's ranks on distinct
  // GPUs sum their partial outputs over NCCL (tp = 1 with nccl = true runs NCCL with one rank);
  // ranks sharing one GPU use the logical-rank test double (a device sum in rank order). With a
  // collective, CUDA graphs are captured in segments cut at the collectives; tp > 1 runs without
  // the DSpark draft.
  int pp = 1;
  int tp = 1;
  std::vector<int> stageLayers;
  std::vector<int> gpus;
  bool nccl = false;                // tp = 1: still sum (one rank) through NCCL
  double collectiveTimeoutSeconds = 120;  // a rank that does not reach a collective: an error
};

// What the runtime did, for tests and reports.
struct GpuForwardCounters {
  int64_t forwards = 0;             // forward calls (prefill chunks + decode steps)
  int64_t tokens = 0;
  int64_t kvMetadataBuilds = 0;     // compressed-cache gathers + page tables (once per kv source per forward)
  int64_t indexRowBuilds = 0;       // combined index rows (once per index source per forward)
  int64_t attentionLayers = 0;      // layers that attended (they reuse the metadata above)
  int64_t engramLookups = 0;
  int64_t graphCaptures = 0;        // graphs captured (decode and verify steps, draft passes)
  int64_t graphLaunches = 0;        // passes run by replaying a graph
  int64_t draftPasses = 0;          // DSpark draft passes (each over all drafting requests)
  int64_t verifySteps = 0;          // speculative steps (each one target forward)
  int64_t draftsVerified = 0, draftsAccepted = 0;
  // Candidate filtering, counted as the CPU reference counts it (CpuMechanismCounters): tokens at
  // the candidate source whose visible blocks exceed candidate_topk_blocks (blocks dropped), and
  // tokens of restricted layers whose candidate mask therefore removed entries.
  int64_t candidateBlocksDropped = 0;
  int64_t candidateEntriesMasked = 0;
};

// The work one forward call (a prefill chunk, a decode step, a batched forward) enqueued, counted
// where the runtime enqueues it (deepinfer/LaunchTally.h). A call run as a CUDA graph reports what
// its capture enqueued and the graph's nodes: one host-side launch replays them all.
struct GpuCallLaunches {
  bool graph = false;
  int64_t graphKernels = -1;        // kernel nodes of the graph, cuBLAS's own included (-1: eager)
  int64_t graphMemoryNodes = -1;    // its copy and memset nodes (-1: eager)
  int64_t graphProgrammaticEdges = -1;  // its kernel -> kernel edges captured as programmatic (-1: eager)
  LaunchTally total;                // the whole pass, embedding to head (the logits download not included)
  std::vector<LaunchTally> perLayer;  // [num_hidden_layers]: each layer's engram module, mHC steps, attention, MoE
};

// One request's part in a speculative step (docs/dspark.md §4-§6; the CPU reference's
// CpuSpecStep with a request id).
struct GpuSpecStep {
  int64_t request = 0;              // a speculative request (newSpeculativeRequest) after its prompt
  int32_t next = 0;                 // the newest emitted token, at the request's position
  SamplingOptions sampling;         // temperature 0 = greedy
  int64_t maxDrafts = -1;           // verify at most this many drafts (< 0: the block size)
  bool keepLogits = false;          // return the target's logits at the committed positions
  // Hooks for tests and the oracle benchmark: verify these drafts instead of the draft model's,
  // drawn from `qOverride` (full-vocabulary distributions; empty = one-hot).
  std::vector<int32_t> draftOverride;
  std::vector<std::vector<double>> qOverride;
};

struct GpuSpecOutcome {
  std::vector<int32_t> drafts;      // d_1 .. d_m verified (m = 0: a plain decode step)
  std::vector<float> confidence;    // c_1 .. c_B logits of the draft pass (empty with an override / m = 0)
  int accepted = 0;                 // a
  std::vector<int32_t> emitted;     // d_1 .. d_a, b
  HostTensor logits;                // [a + 1, V] when keepLogits, else empty
};

// One request's draft (tests compare it with the CPU reference's CpuDraftBlock).
struct GpuDraftBlock {
  std::vector<int32_t> tokens;      // d_1 .. d_B
  std::vector<float> z;             // [B, V] fp32 logits z_k (Markov bias included)
  std::vector<float> confidence;    // [B]
};

// The weights on the device and what loading them took.
struct GpuWeightInfo {
  int64_t deviceBytes = 0;          // every weight buffer (the checkpoint's formats), cuMemAlloc rounding not included
  double loadSeconds = 0;           // planning, byte checks, reads (or generation) and uploads
  bool synthetic = false;           // loadSynthetic: generated, not read from a checkpoint
};

struct GpuKvCapacity {
  int64_t tokens = 0;               // context tokens the compressed/index caches can hold
  int64_t bytesPerToken = 0;        // compressed KV + index keys of every kv source, per token
  int64_t windowBytesPerRequest = 0;
  int64_t totalBytes = 0;
};

// One pipeline stage: where it runs, what it holds, and its KV capacity.
struct GpuStageReport {
  int stage = 0, gpu = 0;           // stage index, device ordinal
  int tpRank = 0;                   // tensor rank within the stage
  std::string collective;           // the backend of the stage's collectives (tp > 1 or nccl), else empty
  int layerBegin = 0, layerEnd = 0; // executed layers [begin, end)
  bool embedding = false, head = false;
  std::vector<int> mirroredSources; // kv sources of earlier stages it keeps caches of
  int64_t weightBytes = 0;          // the stage's weights on its device
  GpuKvCapacity capacity;
};

// Where a forward call left its fp32 logits on the device: [rows, vocab] row-major, rows in the
// order of the call's work (one per request with lastOnly). Valid until the next call.
struct GpuDeviceLogits {
  uint64_t addr = 0;
  int64_t rows = 0;
};

class GpuModelImpl;
class TpCollective;
struct GpuStageTensors;

class GpuModel {
 public:
  static Result<std::unique_ptr<GpuModel>> load(const std::string& modelDir, std::shared_ptr<Device> dev,
                                                const GpuModelOptions& opts = {});
  // The model of `cfg` with synthetic weights in the checkpoint's formats, generated on the host
  // (GpuSyntheticWeights.h): no checkpoint on disk. Engram rows come from a hash of the row id.
  // The DSpark draft is built when the config has one and opts.speculative is set. For
  // benchmarks of models larger than the machine's disk; the outputs are those of random weights.
  static Result<std::unique_ptr<GpuModel>> loadSynthetic(const ModelConfig& cfg, uint64_t seed,
                                                         std::shared_ptr<Device> dev, const GpuModelOptions& opts = {});
  ~GpuModel();

  const ModelConfig& config() const;
  // Over all pipeline stages: capacity tokens are the smallest stage's (every stage holds the
  // whole context), bytes add up; weights add up; counters add up (forwards and tokens count calls).
  const GpuKvCapacity& capacity() const;
  const GpuWeightInfo& weightInfo() const;
  const GpuForwardCounters& counters() const;
  const std::vector<GpuStageReport>& stages() const;  // one entry per pipeline stage
  // The collective of pipeline stage `stage`'s tensor ranks (nullptr without one); tests inject
  // a rank's failure through it (TpCollective::injectFailure).
  TpCollective* stageCollective(int stage) const;
  // What the last forward call (prefill chunk, decode step or forward) enqueued.
  const GpuCallLaunches& lastCallLaunches() const;
  // NVRTC compiles the model's JIT has run so far (kernels loaded from the disk cache are not).
  int jitCompiles() const;
  int64_t pagesInUse() const;       // KV pages held by live requests (0 after all are released)
  std::string targetName() const;
  // Programmatic dependent launch of the model's kernels: "on", or "off (why)" (ProgrammaticLaunch.h).
  std::string programmaticLaunch() const;

  Result<int64_t> newRequest();
  Status releaseRequest(int64_t request);
  Result<int64_t> position(int64_t request) const;

  // --- DSpark speculative decoding (docs/dspark.md) ---
  // Whether requests can speculate: the checkpoint has the draft and the options allow it.
  bool speculation() const;
  int draftBlockSize() const;
  // A request that keeps draft rings (filled by every forward it takes part in) and what a
  // rollback needs. Fails when speculation() is false.
  Result<int64_t> newSpeculativeRequest();
  // One speculative step for several requests: one draft pass over all that draft, one target
  // forward over every request's [next, d_1 .. d_m] (rows computed like one-row decode steps),
  // acceptance on the host, rollback of the rejected positions. A failure makes the requests of
  // the call unusable.
  Result<std::vector<GpuSpecOutcome>> speculativeStep(const std::vector<GpuSpecStep>& steps);
  // The draft pass alone (greedy: argmax drafts) for requests at their positions with these
  // anchors; changes nothing (tests, benchmarks). Without `wantZ` the z rows stay on the device.
  Result<std::vector<GpuDraftBlock>> draft(const std::vector<std::pair<int64_t, int32_t>>& anchors, bool wantZ = true);

  // Runs `ids` at the request's next positions in chunks of maxChunkTokens; fp32 logits
  // [ids.size(), V] (or [1, V], the last position's, with lastOnly). Bad ids or a full cache are
  // rejected before anything changes; a failure half-way makes the request unusable.
  Result<HostTensor> prefill(int64_t request, const std::vector<int32_t>& ids, bool lastOnly = false);
  Result<std::vector<float>> decode(int64_t request, int32_t token);
  // One forward call over several requests at once (continuous batching): each brings up to
  // maxChunkTokens tokens (a prefill chunk or one decode token). Logits per request, in order:
  // [n, V], or [1, V] with lastOnly.
  Result<std::vector<HostTensor>> forward(const std::vector<std::pair<int64_t, std::vector<int32_t>>>& work,
                                          bool lastOnly = false);

  // The logits of the last successful forward/prefill/decode call, still on the device (complete:
  // calls return after their logits reached the host). {0, 0} before the first call.
  GpuDeviceLogits lastDeviceLogits() const;

  // The stream later calls enqueue their work on (a CUstream; nullptr = the legacy default
  // stream). Calls still return only once their logits are on the host.
  void setStream(void* stream);

 private:
  GpuModel() = default;
  static Status beginLoad(GpuModelImpl& m, const std::shared_ptr<Device>& dev, const GpuModelOptions& opts);
  static Status finishLoad(GpuModelImpl& m);
  static Status appendZeroEmbeddingRow(GpuModelImpl& m);
  static Result<std::shared_ptr<TpCollective>> makeStageCollective(const std::vector<GpuModelImpl*>& ranks,
                                                                   double timeoutSeconds);
  static Result<std::unique_ptr<GpuModel>> loadStages(
      const ModelConfig& cfg, const std::shared_ptr<Device>& dev, const GpuModelOptions& opts,
      const std::function<Status(GpuModelImpl&, const GpuStageTensors&)>& loadWeights);
  std::unique_ptr<GpuModelImpl> impl_;
};

}  // namespace deepinfer
