// How V4.1 splits over several GPUs (docs/parallelism.md): tensor parallelism inside a pipeline
// stage (attention heads, output-projection groups, shared-expert columns, vocabulary rows),
// expert parallelism for the routed experts (contiguous expert ranges per tensor rank), and
// pipeline stages over layer ranges. This is the arithmetic only (no device, no NCCL): which
// bytes of which tensor each rank holds, what it must mirror from other stages, what crosses
// the links per token, and how much context the KV cache then holds per GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "model/ModelConfig.h"
#include "model/ModelTensors.h"

namespace deepinfer {

struct ParallelShape {
  int tp = 1;                    // tensor (and expert) ranks per stage
  int pp = 1;                    // pipeline stages
  std::vector<int> stageLayers;  // executed layers per stage (sums to num_hidden_layers); empty = even split
};

// How one tensor is divided among the tensor ranks of its stage.
enum class ShardRule {
  Replicated,  // every tensor rank holds all of it
  Rows,        // output rows split evenly (heads, groups, shared-expert rows, vocabulary rows)
  Cols,        // input columns split evenly (row-parallel: partial sums are all-reduced)
  Expert,      // a routed expert: held whole by the rank whose expert range contains it
  Host,        // an engram table: stays in host memory (mmap), rows read per lookup
};

const char* shardRuleName(ShardRule r);

struct TensorShard {
  std::string name;
  ShardRule rule = ShardRule::Replicated;
  int stage = 0;
  int64_t fullBytes = 0;  // the tensor and its scales as stored
};

struct RankPlan {
  int rank = 0, stage = 0, tpRank = 0;
  int layerBegin = 0, layerEnd = 0;       // executed layers [begin, end)
  bool embedding = false, head = false, draft = false;
  int headBegin = 0, headEnd = 0;         // attention heads
  int groupBegin = 0, groupEnd = 0;       // output-projection groups
  int expertBegin = 0, expertEnd = 0;     // routed experts (backbone)
  int draftExpertBegin = 0, draftExpertEnd = 0;
  int64_t vocabBegin = 0, vocabEnd = 0;   // rows of embed/head
  int64_t sharedBegin = 0, sharedEnd = 0; // shared-expert intermediate rows (w1/w3 rows, w2 columns)
  std::vector<int> mirroredKvSources;     // kv sources of earlier stages this stage's layers read
  int64_t weightBytes = 0;                // this rank's shard of every tensor, as stored (device)
  int64_t hostBytes = 0;                  // engram tables its layers look up (host memory, mmap)
  int64_t kvBytesPerToken = 0;            // compressed + index-key cache bytes per context token
  int64_t windowBytesPerRequest = 0;      // sliding-window rings (and draft rings) per request
};

struct ShardPlan {
  ParallelShape shape;
  std::vector<int> stageFirstLayer;       // pp + 1 entries: stage s runs [first[s], first[s+1])
  std::vector<RankPlan> ranks;            // rank = stage * tp + tpRank
  std::vector<TensorShard> tensors;
  int64_t modelBytes = 0;                 // every device tensor once (what one GPU would hold)
  int64_t hostBytes = 0;                  // the engram tables (host memory)
  // Per forward token: bytes each tensor rank contributes to all-reduces (attention and MoE
  // outputs, fp32 [C] each, per layer of its stage) and bytes sent from stage s to s + 1
  // (the residual streams, bf16 [4, C], plus compressed entries of mirrored kv sources).
  std::vector<int64_t> allReduceBytesPerToken;  // per stage
  std::vector<int64_t> sendBytesPerToken;       // per stage boundary (pp - 1)
};

// Checks the shape against the config (every split lands on whole heads, groups, experts and
// 32-wide quantization blocks; the stages cover the layers; the draft's tapped layers are on
// the last stage) and builds the plan; window rings are sized for prefill chunks of
// `maxChunkTokens` (the engine's default). Errors name the dimension or layer at fault.
Result<ShardPlan> planShards(const ModelConfig& cfg, const ParallelShape& shape, bool withDraft = true,
                             int64_t maxChunkTokens = 256);

// The KV capacity on each GPU given its memory: what the weights and `maxRequests` requests'
// window rings leave, times `kvFraction`, divided by the stage's bytes per context token.
struct KvCapacityRow {
  int rank = 0;
  int64_t freeBytes = 0;     // after weights and window rings (before kvFraction)
  int64_t tokens = 0;        // context tokens this GPU's caches hold
};
struct KvCapacityReport {
  std::vector<KvCapacityRow> perRank;
  int64_t tokens = 0;        // what the deployment holds: every stage must hold the context
  int64_t totalKvBytes = 0;  // cache bytes over all GPUs at that context
};
Result<KvCapacityReport> kvCapacity(const ShardPlan& plan, int64_t gpuBytes, int maxRequests,
                                    double kvFraction = 0.9);

// A table of the plan (ranks, layers, heads, experts, bytes, mirrors, traffic) for people.
std::string describeShardPlan(const ShardPlan& plan, const KvCapacityReport* kv = nullptr);

}  // namespace deepinfer
