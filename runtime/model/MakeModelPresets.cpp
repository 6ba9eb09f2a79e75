// make-model presets.
//
// tiny (8 layers + 3 DSpark draft stages, hidden 256, vocab 1024):
//   layer  ratio  roles
//   0      0      window only
//   1      0      window only, engram
//   2      2      kv source + index source (scores its own keys)
//   3      2      consumer of layer 2's compressed cache and top-k
//   4      1      kv source + index source + candidate source
//   5      1      consumer of layer 4
//   6      1      index source restricted by layer 4's candidate blocks (scores layer 4's keys), engram
//   7      1      consumer: layer 4's cache, layer 6's top-k
//   8..10  0      DSpark draft stages mtp.0..2: block 5, taps 5/6/7 (6 is an engram layer, so
//                 the tap after the injection is exercised), Markov rank 16, noise token 1000,
//                 the backbone's 8 experts but top-3 (the draft MoE's own k is exercised)
//   Thresholds are scaled so each mechanism engages early: window 16, index top-k 16,
//   candidate blocks 4 x 8 entries; 8 experts top-2 + a shared expert.
//
// proxy (7 layers + 3 DSpark draft stages, real V4.1-Flash widths and thresholds):
//   0: ratio 0; 1: ratio 0 + engram; 2: ratio 2 kv+index source; 3: ratio 2 consumer;
//   4: ratio 1 kv+index source + candidate source; 5: ratio 1 restricted index source + engram;
//   6: ratio 1 consumer. Draft stages as V4.1's: block 5, rank 256, 128 experts top-3, taps 4/5/6.
//   128 routed experts (top-6) instead of 384. Sizing, bf16-dequantized: embed + head 2.6 GB,
//   per layer ~0.34 GB attention/norms/mHC + 128 x 70.8 MB experts + 70.8 MB shared expert =
//   9.5 GB, engram projections 0.3 GB per engram layer: ~70 GB for the backbone, ~28 GB more for
//   the three draft stages (each a window-only layer with 128 experts), leaving ~40 GB of a
//   141 GB GPU for caches and workspaces. On disk (fp8/fp4 as in the real checkpoint) ~28 GB. The engram
//   tables are small (~100k rows per layer) instead of 384M rows.
#include "MakeModelPresets.h"

#include <fmt/format.h>

#include "EngramHash.h"

namespace deepinfer {
namespace {

// Fields every preset shares with the real model (docs/model.md §1).
ModelConfig v41Common() {
  ModelConfig c = v41FlashDefaults();
  c.layers.clear();
  return c;
}

Result<ModelConfig> finalizePreset(ModelConfig c, const std::string& name) {
  auto rows = engramTableRowsFor(c);
  if (!rows.ok()) return rows.error();
  c.engramNumEmbeddings = *rows;
  DI_TRY(finalizeModelConfig(c, fmt::format("make-model preset '{}'", name)));
  return c;
}

}  // namespace

ModelConfig tinyPresetConfig() {
  ModelConfig c = v41Common();
  c.vocabSize = 1024;
  c.hiddenSize = 256;
  c.numHiddenLayers = 8;
  c.numNextnPredictLayers = 3;
  c.numAttentionHeads = 8;
  c.qLoraRank = 128;
  c.oLoraRank = 128;
  c.oGroups = 2;  // 2 groups of 4 heads
  c.slidingWindow = 16;
  c.nRoutedExperts = 8;
  c.nSharedExperts = 1;
  c.numExpertsPerTok = 2;
  c.moeIntermediateSize = 128;
  c.compressRatios = {0, 0, 2, 2, 1, 1, 1, 1, 0, 0, 0};
  c.kvSourceLayerIds = {2, 4};
  c.indexSourceLayerIds = {2, 4, 6};
  c.indexNHeads = 4;
  c.indexHeadDim = 128;
  c.indexTopk = 16;
  c.candidateSourceLayerId = 4;
  c.candidateTopkBlocks = 4;
  c.candidateBlockSize = 8;
  c.engramLayerIds = {1, 6};
  c.engramMaxNgramSize = 4;
  c.engramNHeads = 4;
  c.engramHeadDim = 256;
  c.engramPadTokenId = 2;
  c.engramCompressedVocabSize = 800;
  // Different bounds per n-gram size exercise the "next unused prime" rule across sizes.
  c.engramVocabSize = {512, 640, 768};
  c.dsparkBlockSize = 5;
  c.dsparkTargetLayerIds = {5, 6, 7};
  c.dspark.noiseTokenId = 1000;
  c.dspark.markovRank = 16;
  c.dspark.nRoutedExperts = 0;  // the backbone's 8
  c.dspark.numExpertsPerTok = 3;
  return c;
}

ModelConfig proxyPresetConfig() {
  ModelConfig c = v41Common();
  c.numHiddenLayers = 7;
  c.numNextnPredictLayers = 3;
  c.nRoutedExperts = 128;
  c.compressRatios = {0, 0, 2, 2, 1, 1, 1, 0, 0, 0};
  c.kvSourceLayerIds = {2, 4};
  c.indexSourceLayerIds = {2, 4, 5};
  c.candidateSourceLayerId = 4;
  c.engramLayerIds = {1, 5};
  c.engramVocabSize = {4096, 4096, 4096};
  c.dsparkTargetLayerIds = {4, 5, 6};  // block size, noise id, rank, 128/top-3 experts: V4.1's
  return c;
}

std::vector<std::string> makeModelPresetNames() { return {"tiny", "proxy"}; }

std::string makeModelPresetSummary() {
  return "  tiny   V4.1 structure at hidden 256, 8 layers + 3 draft stages, 8 experts, vocab 1024 (CPU tests)\n"
         "  proxy  V4.1-Flash widths, 7 layers + 3 draft stages, 128 experts (~28 GB on disk, ~98 GB as bf16)\n";
}

Result<ModelConfig> makeModelPresetConfig(const std::string& preset) {
  if (preset == "tiny") return finalizePreset(tinyPresetConfig(), preset);
  if (preset == "proxy") return finalizePreset(proxyPresetConfig(), preset);
  return Error{fmt::format("make-model: unknown preset '{}' (known: tiny, proxy)", preset)};
}

}  // namespace deepinfer
