// Values of make-model's random weights, shaped so the model behaves like a trained one where
// tests need it (docs/model.md §9, "Designing the tiny test model"); DSpark draft stages
// (mtp.*) are shaped like window-only backbone layers. Random weights put the discrete
// decisions (router top-k, index top-k, candidate blocks) on knife edges: a one-ulp bf16
// difference upstream flips an e4m3 code of an index key and reorders candidates. The
// shaping makes every decision depend on a few exactly carried quantities instead:
//
//  * Scale: every projection is N(0, 1/fan-in), norms are near 1, mHC bases favour the
//    identity mix, output projections are smaller than input ones; activations stay O(1).
//  * Protected residual dimensions 0 .. E+1 (E = routed experts) carry token facts exactly
//    through all layers: the embedding sets them, every projection back into the residual
//    (wo_b, expert and shared w2, the engram value) has zero rows there, and attn_norm /
//    ffn_norm are exactly 1 there. (mHC mixes the 4 streams, which are equal in these dims, with
//    doubly stochastic weights, so the values survive bf16 rounding unchanged.)
//      - dim 0, the anchor: kAnchor for every token, like the massive activations of trained
//        models. Index query and key projections read it, so their consistent parts are large.
//      - dims 1..E, routing: a token marks its own top-k experts with levels 1.0 .. 0.6
//        (x routeAmp), the others stay near 0; layer L's gate row e reads dim 1 + perm_L(e) with
//        weight routeGain. The k-th and (k+1)-th router scores are far apart, tokens differ,
//        layers differ through perm_L.
//      - dim E+1, importance: a level in {1, 2, 3} (probabilities 4/8, 3/8, 1/8). There is no
//        level 0: a zero level block would leave rounding leaks (~1e-4) as the only difference
//        between keys, and those flip e4m3 subnormal codes.
//  * Index keys depend on the key token's importance level only. The compressor maps anchor and
//    level onto two latent directions (channel blocks S_A = 0..63 and S_L = 64..127, unit-norm
//    weights there, random part projected orthogonal to both); for ratio 2 the gate of those
//    channels reads only the level, so the pooled pair takes the higher level exactly (softmax
//    saturates in fp32) or the common level. indexer.wk maps the two directions onto NoPE dims
//    0..31 and 32..63 with ratio indexLevelRatio; the RoPE dims of index keys are zero and
//    k_norm is exactly 1. After the norm, the three possible keys sit at least 1.3% away from
//    any e4m3 rounding midpoint (and their amax 2.3% away from a power-of-two scale step), so
//    each level quantizes to one fixed code pattern: keys of a level tie exactly (ties go to the
//    lower index everywhere) and levels are far apart.
//  * Index queries read the anchor direction of the q latent onto the same NoPE dims (weight
//    1 on 0..31, indexQueryLevelWeight on 32..63, plus a small random part), so every head
//    ranks the levels 3 > 2 > 1 with gaps of at least ~8% of the score.
#pragma once
#include <cstdint>
#include <vector>

#include "ModelConfig.h"
#include "ModelTensors.h"
#include "deepinfer/Error.h"

namespace deepinfer {

struct WeightShaping {
  float anchor = 6.0f;                // embedding value of residual dim 0
  float routeAmp = 4.0f;              // embedding value of a token's first-choice routing dim
  float routeGain = 2.5f;             // gate weight on a layer's routing dim for each expert
  float levelAmp = 1.0f;              // embedding value per importance level (dim E+1)
  float indexLevelRatio = 0.5f;       // key: level-block / anchor-block amplitude per level
  float indexQueryLevelWeight = 3.0f; // query: level-block / anchor-block weight
  float indexQueryNoise = 0.3f;       // random part of index queries (relative)
  float pairGateGain = 24.0f;         // ratio-2 gate weight on the level (saturates the softmax)
};

class SyntheticWeights {
 public:
  // Fails when the config leaves no room for the shaping: hidden_size must exceed
  // n_routed_experts + 2; head_dim must hold the two 64-channel latent blocks and the index
  // head dim 64 NoPE dims.
  static Result<SyntheticWeights> create(const ModelConfig& cfg, uint64_t seed, WeightShaping shaping = {});

  // Rows [r0, r1) of a tensor's logical [rows, cols] view (a 1-D tensor is one row), fp32,
  // before quantization. Deterministic per (seed, name, row).
  void fillRows(const ModelTensorSpec& spec, int64_t r0, int64_t r1, float* out) const;

  // token_map.i32: the first `engram_compressed_vocab_size` tokens take a random permutation of
  // the classes, the rest share classes (as case/space variants do in the real map).
  std::vector<int32_t> tokenMap() const;

  // Test hooks: a token's routing dims (best first), the expert a layer maps a routing dim to,
  // a token's importance level, and the residual dim holding it.
  std::vector<int> tokenRoutingDims(int64_t token) const;
  int expertOfRoutingDim(int layer, int routingDim) const;
  int tokenLevel(int64_t token) const;
  int64_t levelDim() const { return int64_t(cfg_.nRoutedExperts) + 1; }
  const WeightShaping& shaping() const { return sh_; }

 private:
  static constexpr int kBlock = 64;      // latent channels per direction (S_A, S_L)
  static constexpr int kKeyHalf = 32;    // index-key NoPE dims per direction
  struct LayerShape {
    std::vector<float> qrA;       // [q_lora]: wq_a's anchor column (times the anchor's norm gain)
    std::vector<float> qNorm;     // [q_lora]: q_norm weight
    std::vector<float> qDir;      // unit direction of the anchor part of the normed q latent
    std::vector<float> latSign;   // [2 * kBlock]: +-1 signs of the S_A and S_L latent directions
    std::vector<float> projA;     // [hidden]: S_A direction . (random compressor rows), per column
    std::vector<float> projL;     // [hidden]: the same for S_L
    std::vector<float> keySign;   // [2 * kKeyHalf]: +-1 signs of the index-key NoPE pattern
    std::vector<float> headGain;  // [index heads]: per-head scale of the query's consistent part
    std::vector<int> perm;        // [experts]: expert e reads routing dim 1 + perm[e]
    std::vector<int> inversePerm;
  };
  SyntheticWeights(const ModelConfig& cfg, uint64_t seed, WeightShaping sh);
  void buildLayerShapes();
  float anchorInNormedInput() const;  // the anchor's expected value after an RMSNorm of the residual
  void compressorRandomRow(int layer, int64_t row, float* out) const;
  void fillLayerRow(int layer, const std::string& rest, const ModelTensorSpec& spec, int64_t row, float* out) const;
  void fillEmbedRow(int64_t token, float* out) const;
  bool isProtectedDim(int64_t d) const { return d <= levelDim(); }

  ModelConfig cfg_;
  uint64_t seed_;
  WeightShaping sh_;
  std::vector<LayerShape> layers_;
};

}  // namespace deepinfer
