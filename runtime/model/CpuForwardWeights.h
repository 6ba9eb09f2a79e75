// The weights of the CPU reference forward pass, dequantized to fp32 at load (docs/model.md
// §3). Engram tables stay in the checkpoint's mapping and are read row by row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "Checkpoint.h"
#include "CpuForwardMath.h"
#include "ModelConfig.h"
#include "deepinfer/Error.h"

namespace deepinfer {

// One hyper-connection sublayer's mixing parameters (docs/ops.md §8).
struct CpuMhcWeights {
  CpuMatrix fn;                 // [24, 4C]
  std::vector<float> scale;     // [3]
  std::vector<float> base;      // [24]
};

struct CpuAttentionWeights {
  CpuMatrix wqA, wqB, wkv, woA, woB;   // [qLora, C], [H*512, qLora], [512, C], [G*oLora, (H/G)*512], [C, G*oLora]
  std::vector<float> qNorm, kvNorm;    // [qLora], [512]
  std::vector<float> attnSink;         // [H]
  // kv sources: the compressor (wgate only for ratio 2) and the index-key projection.
  CpuMatrix compWkv, compWgate;        // [512, C]
  std::vector<float> compNorm;         // [512]
  CpuMatrix idxWk;                     // [Di, 512]
  std::vector<float> idxKNorm;         // [Di]
  // index sources: the query side.
  CpuMatrix idxWqB;                    // [Hi*Di, qLora]
  CpuMatrix idxWeightsProj;            // [Hi, C]
};

// SwiGLU expert: w1 (gate) and w3 (up) [I, C], w2 (down) [C, I].
struct CpuExpertWeights {
  CpuMatrix w1, w3, w2;
};

struct CpuMoeWeights {
  CpuMatrix gate;                      // [E, C]
  std::vector<float> gateBias;         // [E]
  std::vector<CpuExpertWeights> experts;
  CpuExpertWeights shared;             // n_shared_experts fused into one wider expert
};

struct CpuEngramWeights {
  std::string tableName;               // "layers.L.engram.embed.weight", read row by row
  CpuMatrix wkv;                       // [5C, lookups*headDim]
  std::vector<float> qWeight, kWeight; // [4, C] each
};

struct CpuLayerWeights {
  std::vector<float> attnNorm, ffnNorm;
  CpuMhcWeights hcAttn, hcFfn;
  CpuAttentionWeights attn;
  CpuMoeWeights ffn;
  bool hasEngram = false;
  CpuEngramWeights engram;
};

// The DSpark draft heads (docs/dspark.md §1): embed.weight and head.weight are the backbone's.
struct CpuDsparkWeights {
  std::vector<CpuLayerWeights> stages; // mtp.s.*: a window-only layer each (no engram, draft MoE)
  CpuMatrix mainProj;                  // [C, taps * C] (stage 0)
  std::vector<float> mainNorm;         // [C] (stage 0)
  std::vector<float> norm;             // [C] (last stage)
  CpuMatrix markovEmbed, markovHead;   // [V, r] each (last stage)
  std::vector<float> confidence;       // [C + r] (last stage's confidence_head.proj)
};

struct CpuWeights {
  CpuMatrix embed, head;               // [V, C]
  std::vector<float> norm;             // [C]
  std::vector<CpuLayerWeights> layers; // executed layers only
  bool hasDraft = false;               // DSpark configured and its tensors in the checkpoint
  CpuDsparkWeights draft;
};

// Loads every tensor the forward pass of `cfg` reads, checking shapes; errors name the tensor.
// The DSpark tensors are loaded when the config has DSpark and the checkpoint any mtp.* tensor
// (then all of them are required).
Result<CpuWeights> loadCpuWeights(const ModelConfig& cfg, const Checkpoint& ckpt);

}  // namespace deepinfer
