// The model's config.json (docs/model.md §1) and the per-layer roles derived from it (§2).
// Parsing lives in ModelConfig.cpp (LLVM's JSON parser stays out of this header).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/Error.h"

namespace deepinfer {

// `rope_scaling` (YaRN). Applies to layers with compress ratio > 0 only (docs/model.md §6).
struct RopeScaling {
  bool present = false;              // false: no scaling block in the config
  std::string type;                  // "yarn"
  double factor = 1;
  double betaFast = 32;
  double betaSlow = 1;
  int64_t originalMaxPositionEmbeddings = 0;
};

// What one layer owns and reads (docs/model.md §2, docs/ops.md §9). Layer numbers are absolute.
struct LayerRole {
  int layer = 0;
  bool isDraft = false;              // one of the trailing num_nextn_predict_layers (DSpark stages)
  int ratio = 0;                     // compress ratio: 0 (window only), 1 or 2
  bool isKvSource = false;           // owns a compressor + compressed cache + index-key cache
  bool isIndexSource = false;        // owns an indexer query side (indexer.wq_b, weights_proj)
  int kvSourceLayer = -1;            // nearest kv source at or below (-1 for ratio 0)
  int indexSourceLayer = -1;         // nearest index source at or below (-1 for ratio 0)
  // For index sources: the kv source whose index keys the indexer scores against. It is the
  // layer's own kvSourceLayer (layers 2/8/14/20 score against their own keys, 24..36 against 20).
  int indexKeyLayer = -1;
  bool isCandidateSource = false;    // publishes the candidate-block mask (layer 20 in V4.1)
  bool candidateRestricted = false;  // index source above the candidate source: scores masked
  bool isEngram = false;             // runs the engram module before the block
  int engramIndex = -1;              // position in engram_layer_ids (-1 when not an engram layer)
};

// The DSpark speculative heads beyond the stage count (numNextnPredictLayers), block size
// (dsparkBlockSize) and tapped layers (dsparkTargetLayerIds) of ModelConfig (docs/dspark.md §1).
struct DsparkConfig {
  int64_t noiseTokenId = -1;         // dspark_noise_token_id: the token id in rows 1 .. B-1 of a draft block's input
  int markovRank = 0;                // dspark_markov_rank (r)
  int nRoutedExperts = 0;            // dspark_n_routed_experts; 0 = the backbone's
  int numExpertsPerTok = 0;          // dspark_num_experts_per_tok (dspark_n_activated_experts); 0 = the backbone's
};

struct ModelConfig {
  std::string modelType;             // "deepseek_v41"

  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;            // C
  int numHiddenLayers = 0;           // executed layers (40); draft layers come after them
  int numNextnPredictLayers = 0;     // speculative draft layers (3)
  int numAttentionHeads = 0;         // H
  int numKeyValueHeads = 1;
  int headDim = 0;                   // 512
  int qkRopeHeadDim = 0;             // 64 (the NoPE part is headDim - qkRopeHeadDim)
  int64_t qLoraRank = 0;
  int64_t oLoraRank = 0;
  int oGroups = 0;
  int slidingWindow = 0;
  double rmsNormEps = 1e-20;
  double swigluLimit = 10.0;
  double ropeTheta = 10000;
  double compressRopeTheta = 160000;
  RopeScaling ropeScaling;
  int64_t maxPositionEmbeddings = 0;

  int nRoutedExperts = 0;
  int nSharedExperts = 0;
  int numExpertsPerTok = 0;
  int64_t moeIntermediateSize = 0;
  std::string scoringFunc;           // "sqrtsoftplus"
  bool normTopkProb = true;
  double routedScalingFactor = 1.0;

  // One entry per layer, draft layers included (numHiddenLayers + numNextnPredictLayers).
  std::vector<int> compressRatios;
  std::vector<int> kvSourceLayerIds;      // strictly increasing, < numHiddenLayers
  std::vector<int> indexSourceLayerIds;   // strictly increasing, < numHiddenLayers
  int indexNHeads = 0;
  int indexHeadDim = 0;
  int indexTopk = 0;
  int candidateSourceLayerId = -1;        // -1: no candidate restriction
  int candidateTopkBlocks = 0;
  int candidateBlockSize = 0;

  int hcMult = 4;
  int hcSinkhornIters = 20;               // total Sinkhorn rounds
  double hcEps = 1e-6;

  std::vector<int> engramLayerIds;        // strictly increasing, < numHiddenLayers
  std::vector<int64_t> engramNumEmbeddings;  // table rows per engram layer (sum of its primes)
  int engramMaxNgramSize = 0;             // n-grams of sizes 2..max
  int engramNHeads = 0;                   // heads per n-gram size
  int engramHeadDim = 0;                  // 256
  int64_t engramPadTokenId = 0;
  int64_t engramCompressedVocabSize = 0;  // number of token classes (token_map range)
  // Prime search bound per n-gram size (2..max): the primes are the next unused primes above
  // engramVocabSize[n-2] - 1 (docs/model.md §8). Optional in config.json (`engram_vocab_size`, an
  // integer or a list); empty when absent, then the primes must come from engram_hash.json.
  std::vector<int64_t> engramVocabSize;

  int dsparkBlockSize = 0;
  std::vector<int> dsparkTargetLayerIds;  // any order, no repeats; tapped in ascending order
  DsparkConfig dspark;

  // `quantization_config` (top level in the release layout). Checked against the checkpoint's
  // tensors at load (QuantizationCheck.h): a config that misdescribes them is an error.
  std::string quantMethod;                // "fp8"; empty when absent
  std::string expertQuantFormat;          // `expert_dtype`: "fp4" or "fp8"; empty when absent
  std::vector<int> weightBlockSize;       // e.g. {32, 32}; empty when absent
  std::string activationScheme;           // "dynamic"; empty when absent
  std::string scaleFmt;                   // "ue8m0"; empty when absent

  // Derived: one entry per layer (draft layers included), filled by finalizeModelConfig.
  std::vector<LayerRole> layers;

  int numLayersTotal() const { return numHiddenLayers + numNextnPredictLayers; }
  int nopeDim() const { return headDim - qkRopeHeadDim; }
  int numEngramLayers() const { return int(engramLayerIds.size()); }
  const LayerRole& role(int layer) const { return layers.at(size_t(layer)); }

  // DSpark (docs/dspark.md): configured when there are draft stages and a block size; it runs
  // only when the checkpoint also has the mtp.* tensors.
  bool dsparkConfigured() const { return numNextnPredictLayers >= 1 && dsparkBlockSize >= 1; }
  int draftRoutedExperts() const { return dspark.nRoutedExperts > 0 ? dspark.nRoutedExperts : nRoutedExperts; }
  int draftExpertsPerTok() const { return dspark.numExpertsPerTok > 0 ? dspark.numExpertsPerTok : numExpertsPerTok; }
  std::vector<int> dsparkTapLayers() const;  // dsparkTargetLayerIds sorted ascending
};

// Reads `<modelDir>/config.json`, validates it and derives the layer roles.
Result<ModelConfig> loadModelConfig(const std::string& modelDir);

// Parses config.json text; `sourceName` names the text in error messages (a path, "<test>").
// Layouts: the release one (top-level model_type "deepseek_v41", architectures
// ["DeepseekV41ForCausalLM"], quantization_config, and the text model's fields under
// "text_config" with model_type "deepseek_v41_text"), the one earlier make-model versions wrote
// (text_config.model_type "deepseek_v41", quantization_config inside it) and a flat file.
Result<ModelConfig> parseModelConfig(const std::string& text, const std::string& sourceName);

// Validates a config filled in code (presets, tests) and (re)derives `layers`. Errors name
// the offending field. parseModelConfig calls this; call it after editing a config by hand.
Status finalizeModelConfig(ModelConfig& cfg, const std::string& sourceName);

// The real DeepSeek-V4.1-Flash config of docs/model.md §1, roles derived (used by `tune`).
ModelConfig v41FlashDefaults();

// config.json text for `cfg` in the release layout (see parseModelConfig); round-trips through
// parseModelConfig.
std::string modelConfigToJson(const ModelConfig& cfg);

}  // namespace deepinfer
