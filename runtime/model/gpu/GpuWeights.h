// The model's weights on the device for the GPU forward pass (spec/model.md §3): every matrix
// and norm as bf16 (quantized tensors dequantized exactly by Checkpoint::loadBf16), the fp32
// vectors (hyper-connection mixes, attention sinks, router bias) as fp32. The same tensors,
// shapes and checks as loadCpuWeights (runtime/model/CpuForwardWeights.cpp). Engram tables stay
// in the checkpoint's mapping (read row by row on the host); only their name is kept.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/Error.h"
#include "model/Checkpoint.h"
#include "model/ModelConfig.h"

namespace deepinfer {

struct GpuMatrix {
  int64_t rows = 0, cols = 0;
  DeviceBuffer data;  // bf16 row-major [rows, cols]
  uint64_t addr() const { return data.addr(); }
  bool empty() const { return rows == 0; }
};

// One hyper-connection sublayer's mixing parameters (ops.md §8).
struct GpuMhcWeights {
  DeviceBuffer fn;     // f32 [24, 4C]
  DeviceBuffer scale;  // f32 [3]
  DeviceBuffer base;   // f32 [24]
};

struct GpuAttentionWeights {
  GpuMatrix wqA, wqB, wkv, woA, woB;  // [qLora, C], [H*512, qLora], [512, C], [G*oLora, (H/G)*512], [C, G*oLora]
  DeviceBuffer qNorm, kvNorm;         // bf16 [qLora], [512]
  DeviceBuffer attnSink;              // f32 [H]
  // kv sources: the compressor (wgate only for ratio 2) and the index-key projection.
  GpuMatrix compWkv, compWgate;       // [512, C]
  DeviceBuffer compNorm;              // bf16 [512]
  GpuMatrix idxWk;                    // [Di, 512]
  DeviceBuffer idxKNorm;              // bf16 [Di]
  // index sources: the query side.
  GpuMatrix idxWqB;                   // [Hi*Di, qLora]
  GpuMatrix idxWeightsProj;           // [Hi, C]
};

// SwiGLU expert: w1 (gate) and w3 (up) [I, C], w2 (down) [C, I].
struct GpuExpertWeights {
  GpuMatrix w1, w3, w2;
};

struct GpuMoeWeights {
  GpuMatrix gate;                         // [E, C]
  DeviceBuffer gateBias;                  // f32 [E]
  std::vector<GpuExpertWeights> experts;  // E
  GpuExpertWeights shared;                // n_shared_experts fused into one wider expert (empty if none)
};

struct GpuEngramWeights {
  std::string tableName;           // "layers.L.engram.embed.weight", read row by row on the host
  GpuMatrix wkv;                   // [5C, lookups*headDim]
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

// The DSpark draft heads (spec/dspark.md §1); embed and head are the backbone's.
struct GpuDsparkWeights {
  std::vector<GpuLayerWeights> stages;  // mtp.s.*: window-only blocks with the draft MoE (no engram)
  GpuMatrix mainProj;                   // [C, taps * C] (stage 0)
  DeviceBuffer mainNorm;                // bf16 [C] (stage 0)
  DeviceBuffer norm;                    // bf16 [C] (last stage)
  GpuMatrix markovEmbed, markovHead;    // [V, r] (last stage)
  DeviceBuffer confidence;              // bf16 [C + r] (last stage's confidence_head.proj)
};

struct GpuWeights {
  GpuMatrix embed, head;                // [V, C]
  DeviceBuffer norm;                    // bf16 [C]
  std::vector<GpuLayerWeights> layers;  // executed layers only
  bool hasDraft = false;                // DSpark configured and its mtp.* tensors in the checkpoint
  GpuDsparkWeights draft;
  int64_t deviceBytes = 0;              // sum of the buffers' sizes
};

// The device bytes loadGpuWeights will allocate for `cfg` (sum of the buffers' sizes, cuMemAlloc
// rounding not included), from the checkpoint's tensor table alone: nothing is read or
// dequantized. Checks every tensor the way loading does (present, logical shape, a floating-
// point or quantized dtype) and fails with the same message.
Result<int64_t> gpuWeightBytes(const ModelConfig& cfg, const Checkpoint& ckpt);

// Loads every tensor the forward pass of `cfg` reads onto `dev` (made current here), one tensor
// at a time (dequantized to a host bf16 copy, uploaded, freed). All tensors are checked first
// (as gpuWeightBytes), and the total is compared with the device's free memory, so a bad
// checkpoint or a model that does not fit fails before anything is allocated. Errors name the
// tensor.
Result<GpuWeights> loadGpuWeights(const ModelConfig& cfg, const Checkpoint& ckpt, const Device& dev);

}  // namespace deepinfer
