// The model's weights on the device for the GPU forward pass (docs/model.md §3), in the
// checkpoint's own formats: fp8 tensors (e4m3 + UE8M0 per 32x32 block) and fp4 tensors (e2m1 +
// UE8M0 per row and 32 columns) keep their bytes and scale bytes, read by the `weight_gemm` and
// `moe_experts` ops (QuantGemmOps.h); bf16 tensors stay bf16 (cuBLAS GEMMs, norms); fp32
// vectors (hyper-connection mixes, attention sinks, router bias) stay fp32. The same tensors,
// shapes and checks as loadCpuWeights (runtime/model/CpuForwardWeights.cpp). Engram tables stay
// in the checkpoint's mapping (read row by row on the host); only their name is kept.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "QuantGemmOps.h"
#include "deepinfer/Device.h"
#include "deepinfer/Error.h"
#include "model/Checkpoint.h"
#include "model/ModelConfig.h"
#include "model/parallel/ShardPlan.h"

namespace deepinfer {

enum class GpuWeightFormat {
  Bf16,  // bf16 [rows, cols]
  Fp8,   // e4m3 [rows, cols] + UE8M0 [ceil(rows/32), ceil(cols/32)]
  Fp4,   // e2m1 [rows, cols/2] (low nibble = even column) + UE8M0 [rows, cols/32]
};

// One weight matrix of logical shape [rows, cols].
struct GpuMatrix {
  int64_t rows = 0, cols = 0;
  GpuWeightFormat format = GpuWeightFormat::Bf16;
  DeviceBuffer data;    // the bf16 values or the checkpoint's codes
  DeviceBuffer scales;  // UE8M0 bytes (quantized formats only)
  uint64_t addr() const { return data.addr(); }
  bool empty() const { return rows == 0; }
  bool quantized() const { return format != GpuWeightFormat::Bf16; }
  DeviceQuantWeight quant() const;  // the weight_gemm operand of a quantized matrix
};

// One hyper-connection sublayer's mixing parameters (docs/ops.md §8).
struct GpuMhcWeights {
  DeviceBuffer fn;     // f32 [24, 4C]
  DeviceBuffer scale;  // f32 [3]
  DeviceBuffer base;   // f32 [24]
};

// Weights multiplied by `weight_gemm` are quantized GpuMatrix (wq_a, wq_b, wkv, wo_a, wo_b,
// indexer wq_b, engram wkv, shared experts, DSpark main_proj); the others are bf16 (cuBLAS).
struct GpuAttentionWeights {
  GpuMatrix wqA, wqB, wkv, woA, woB;  // [qLora, C], [H*512, qLora], [512, C], [G*oLora, (H/G)*512], [C, G*oLora]
  DeviceBuffer qNorm, kvNorm;         // bf16 [qLora], [512]
  DeviceBuffer attnSink;              // f32 [H]
  // kv sources: the compressor (wgate only for ratio 2) and the index-key projection (bf16).
  GpuMatrix compWkv, compWgate;       // [512, C]
  DeviceBuffer compNorm;              // bf16 [512]
  GpuMatrix idxWk;                    // [Di, 512]
  DeviceBuffer idxKNorm;              // bf16 [Di]
  // index sources: the query side.
  GpuMatrix idxWqB;                   // [Hi*Di, qLora] (quantized)
  GpuMatrix idxWeightsProj;           // [Hi, C] (bf16)
};

// SwiGLU expert: w1 (gate) and w3 (up) [I, C], w2 (down) [C, I] (the shared expert, fp8).
struct GpuExpertWeights {
  GpuMatrix w1, w3, w2;
};

// The routed experts of one MoE, fp4 as in the checkpoint, each kind in one buffer with the
// experts one after another (expert e's bytes at e times its size: a copy per expert, not a
// repack): w1/w3 e2m1 [E, I, C/2] + UE8M0 [E, I, C/32], w2 [E, C, I/2] + [E, C, I/32].
struct GpuRoutedExperts {
  int64_t experts = 0, hidden = 0, intermediate = 0;  // E, C, I
  DeviceBuffer w1, w1Scale, w3, w3Scale, w2, w2Scale;
  DeviceExpertWeights view() const;                   // the moe_experts operands
};

struct GpuMoeWeights {
  GpuMatrix gate;              // [E, C] bf16
  DeviceBuffer gateBias;       // f32 [E]
  GpuRoutedExperts routed;     // E experts
  GpuExpertWeights shared;     // n_shared_experts fused into one wider expert (empty if none)
};

struct GpuEngramWeights {
  std::string tableName;           // "layers.L.engram.embed.weight", read row by row on the host
  GpuMatrix wkv;                   // [5C, lookups*headDim] (quantized)
  DeviceBuffer qWeight, kWeight;   // bf16 [4, C]
};

struct GpuLayerWeights {
  DeviceBuffer attnNorm, ffnNorm;  // bf16 [C]
  GpuMhcWeights hcAttn, hcFfn;
  GpuAttentionWeights attn;
  GpuMoeWeights ffn;
  bool hasEngram = false;
  GpuEngramWeights engram;
};

// The DSpark draft heads (docs/dspark.md §1); embed and head are the backbone's.
struct GpuDsparkWeights {
  std::vector<GpuLayerWeights> stages;  // mtp.s.*: window-only blocks with the draft MoE (no engram)
  GpuMatrix mainProj;                   // [C, taps * C] (quantized, stage 0)
  DeviceBuffer mainNorm;                // bf16 [C] (stage 0)
  DeviceBuffer norm;                    // bf16 [C] (last stage)
  GpuMatrix markovEmbed, markovHead;    // [V, r] bf16 (last stage)
  DeviceBuffer confidence;              // bf16 [C + r] (last stage's confidence_head.proj)
};

struct GpuWeights {
  GpuMatrix embed, head;                // [V, C] bf16
  DeviceBuffer norm;                    // bf16 [C]
  std::vector<GpuLayerWeights> layers;  // executed layers only
  bool hasDraft = false;                // DSpark configured and its mtp.* tensors present
  GpuDsparkWeights draft;
  int64_t deviceBytes = 0;              // sum of the buffers' sizes
};

// The tensors one pipeline stage holds (docs/parallelism.md §3): its layers [layerBegin,
// layerEnd), the embedding on the first stage, the final norm and head (and the DSpark draft) on
// the last, and the compressor and index-key tensors of the kv sources of earlier stages that its
// layers read (it mirrors their caches). The default is the whole model on one stage.
//
// With tp > 1 the stage's tensors are those of one tensor rank (docs/parallelism.md §2), by the
// ranges of its RankPlan (planShards: the one source of the split): its heads' rows of wq_b and
// entries of attn_sink, its output groups' rows of wo_a and columns of wo_b, its rows of the
// shared experts' w1/w3 and columns of w2, its routed experts, its vocabulary rows of embed
// (plus one zero row at the end, which the ids of other ranks' rows read) and head. Everything
// else is replicated. The draft is not sharded (tp > 1 has none).
struct GpuStageTensors {
  int layerBegin = 0, layerEnd = -1;    // -1: num_hidden_layers
  bool embedding = true, head = true, draft = true;
  std::vector<int> mirroredSources;     // kv source layers < layerBegin
  int tp = 1;
  RankPlan rank;                        // the ranges of this tensor rank (tp > 1)
};

// The part of a [rows, cols] tensor a tensor rank holds: rows [rowBegin, rowEnd), columns
// [colBegin, colEnd); -1 ends mean the whole extent. Quantized tensors split on 32-wide blocks.
struct GpuSlice {
  int64_t rowBegin = 0, rowEnd = -1, colBegin = 0, colEnd = -1;
  int64_t rowsOf(int64_t rows) const { return (rowEnd < 0 ? rows : rowEnd) - rowBegin; }
  int64_t colsOf(int64_t cols) const { return (colEnd < 0 ? cols : colEnd) - colBegin; }
  bool whole(int64_t rows, int64_t cols) const { return rowsOf(rows) == rows && colsOf(cols) == cols; }
};

// Where the weights' tensors are described: a checkpoint's table, or the tensor list the config
// implies (modelTensorSpecs, for models built on the device without a checkpoint).
class GpuWeightTable {
 public:
  virtual ~GpuWeightTable() = default;
  // Dtype, format and shapes of a tensor, with Checkpoint::info's checks and messages.
  virtual Result<TensorInfo> info(const std::string& name) const = 0;
  virtual bool hasDraft() const = 0;  // the mtp.* tensors are present
};

// The checkpoint's table.
class CheckpointWeightTable : public GpuWeightTable {
 public:
  explicit CheckpointWeightTable(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  Result<TensorInfo> info(const std::string& name) const override { return ckpt_.info(name); }
  bool hasDraft() const override;

 private:
  const Checkpoint& ckpt_;
};

// The tensors of modelTensorSpecs(cfg), in the formats docs/model.md §3 gives them (the draft's
// only with `draft`).
class ConfigWeightTable : public GpuWeightTable {
 public:
  ConfigWeightTable(const ModelConfig& cfg, bool draft);
  Result<TensorInfo> info(const std::string& name) const override;
  bool hasDraft() const override { return draft_; }

 private:
  std::map<std::string, TensorInfo> infos_;
  bool draft_;
};

// The device bytes loading `cfg` from `table` allocates (sum of the buffers' sizes, cuMemAlloc
// rounding not included): nothing is read. Checks every tensor the way loading does (present,
// logical shape, a format the GPU runtime can multiply: fp8/fp4 for the weight_gemm
// projections, fp4 for routed experts, a floating-point or quantized dtype for the bf16 ones)
// and fails with the same message.
Result<int64_t> gpuWeightBytes(const ModelConfig& cfg, const GpuWeightTable& table, const GpuStageTensors& stage = {});
Result<int64_t> gpuWeightBytes(const ModelConfig& cfg, const Checkpoint& ckpt, const GpuStageTensors& stage = {});

// Loads every tensor the forward pass of `cfg` reads onto `dev` (made current here), one tensor
// at a time: quantized tensors are byte-checked (Checkpoint::checkQuantizedBytes) and uploaded
// as stored, bf16 ones as stored (a quantized tensor in a bf16 slot is dequantized exactly, a
// float one rounded once), fp32 vectors as fp32. All tensor tables are checked first (as
// gpuWeightBytes), and the total is compared with the device's free memory, so a bad table or a
// model that does not fit fails before anything is allocated. Errors name the tensor. With a
// `stage`, only that stage's tensors are checked, read (mapped) and uploaded.
Result<GpuWeights> loadGpuWeights(const ModelConfig& cfg, const Checkpoint& ckpt, const Device& dev,
                                  const GpuStageTensors& stage = {});

// The walk over the weights of `cfg` in loadCpuWeights' order, for loaders of other sources
// (GpuSyntheticWeights.cpp). Each call fills one tensor (or one MoE's routed experts).
class GpuWeightSink {
 public:
  virtual ~GpuWeightSink() = default;
  // [rows, cols] is the tensor's full logical shape; `out` gets the slice (GpuSlice).
  virtual Status bf16Matrix(const std::string& name, int64_t rows, int64_t cols, GpuMatrix& out,
                            const GpuSlice& slice) = 0;
  virtual Status projection(const std::string& name, int64_t rows, int64_t cols, GpuMatrix& out,
                            const GpuSlice& slice) = 0;
  // `prefix` + "experts.e.w1.weight" etc. for e in [eBegin, eEnd) of the E experts (`out` holds
  // eEnd - eBegin of them, the first at offset 0).
  virtual Status experts(const std::string& prefix, int64_t E, int64_t C, int64_t I, int64_t eBegin, int64_t eEnd,
                         GpuRoutedExperts& out) = 0;
  virtual Status bf16(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out) = 0;
  // A 1-D tensor is one row; `slice` picks its columns (attn_sink's heads).
  virtual Status f32(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out,
                     const GpuSlice& slice) = 0;
};
// Hands every tensor of `stage` to `sink` (run gpuWeightBytes on the same table first: the walk
// itself only asks the table for the shared experts' width and whether the draft is present).
// w.layers has num_hidden_layers entries; those of other stages stay empty (a mirrored source's
// entry holds only its compressor and index-key tensors).
Status walkGpuWeights(const ModelConfig& cfg, const GpuWeightTable& table, GpuWeightSink& sink, GpuWeights& w,
                      const GpuStageTensors& stage = {});

}  // namespace deepinfer
