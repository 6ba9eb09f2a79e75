// config.json parsing (LLVM's JSON parser), validation and layer-role derivation.
#include "ModelConfig.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "llvm/Support/FormatVariadic.h"
#include "deepinfer/InputFiles.h"
#include "deepinfer/JsonInput.h"
#include "llvm/Support/JSON.h"

namespace deepinfer {
namespace {

namespace json = llvm::json;

// Typed field access with errors that name the file and the field.
class FieldReader {
 public:
  FieldReader(const json::Object& obj, std::string source) : obj_(obj), source_(std::move(source)) {}

  bool has(const char* key) const {
    const json::Value* v = obj_.get(key);
    return v && v->kind() != json::Value::Null;
  }
  Error missing(const char* key) const {
    return Error{fmt::format("{}: required field '{}' is missing", source_, key)};
  }
  Error wrongType(const char* key, const char* want) const {
    return Error{fmt::format("{}: field '{}' must be {}", source_, key, want)};
  }

  Result<int64_t> integer(const char* key) const {
    if (!has(key)) return missing(key);
    if (auto v = obj_.get(key)->getAsInteger()) return *v;
    return wrongType(key, "an integer");
  }
  Result<int> smallInt(const char* key) const {
    auto v = integer(key);
    if (!v.ok()) return v.error();
    if (*v < INT32_MIN || *v > INT32_MAX) return wrongType(key, "an integer in 32-bit range");
    return int(*v);
  }
  Result<double> number(const char* key) const {
    if (!has(key)) return missing(key);
    if (auto v = obj_.get(key)->getAsNumber()) return *v;
    return wrongType(key, "a number");
  }
  Result<bool> boolean(const char* key) const {
    if (!has(key)) return missing(key);
    if (auto v = obj_.get(key)->getAsBoolean()) return *v;
    return wrongType(key, "true or false");
  }
  Result<std::string> string(const char* key) const {
    if (!has(key)) return missing(key);
    if (auto v = obj_.get(key)->getAsString()) return v->str();
    return wrongType(key, "a string");
  }
  Result<std::vector<int64_t>> intList(const char* key) const {
    if (!has(key)) return missing(key);
    const json::Array* a = obj_.get(key)->getAsArray();
    if (!a) return wrongType(key, "a list of integers");
    std::vector<int64_t> out;
    for (const json::Value& e : *a) {
      auto v = e.getAsInteger();
      if (!v) return wrongType(key, "a list of integers");
      out.push_back(*v);
    }
    return out;
  }
  Result<std::vector<int>> smallIntList(const char* key) const {
    auto v = intList(key);
    if (!v.ok()) return v.error();
    std::vector<int> out;
    for (int64_t x : *v) {
      if (x < INT32_MIN || x > INT32_MAX) return wrongType(key, "a list of 32-bit integers");
      out.push_back(int(x));
    }
    return out;
  }
  const json::Object* object(const char* key) const { return obj_.getObject(key); }

 private:
  const json::Object& obj_;
  std::string source_;  // a copy: callers pass temporaries ("<file>: text_config")
};

// Assigns a required field or returns its error from the enclosing function.
#define DI_FIELD(dst, expr)              \
  do {                                   \
    auto di_field_ = (expr);             \
    if (!di_field_.ok()) return di_field_.error(); \
    dst = std::move(*di_field_);         \
  } while (0)
// Assigns an optional field when present.
#define DI_OPT_FIELD(r, key, dst, method)  \
  do {                                     \
    if ((r).has(key)) DI_FIELD(dst, (r).method(key)); \
  } while (0)

Status parseRopeScaling(const json::Object& o, const std::string& source, RopeScaling& rs) {
  const std::string where = source + ": rope_scaling";
  FieldReader r(o, where);
  rs.present = true;
  if (r.has("rope_type")) {
    DI_FIELD(rs.type, r.string("rope_type"));
  } else {
    DI_FIELD(rs.type, r.string("type"));
  }
  if (rs.type != "yarn")
    return Error{fmt::format("{}: rope_type '{}' is not supported (only \"yarn\")", where, rs.type)};
  DI_FIELD(rs.factor, r.number("factor"));
  DI_FIELD(rs.betaFast, r.number("beta_fast"));
  DI_FIELD(rs.betaSlow, r.number("beta_slow"));
  DI_FIELD(rs.originalMaxPositionEmbeddings, r.integer("original_max_position_embeddings"));
  if (rs.factor <= 0) return Error{fmt::format("{}: factor must be > 0", where)};
  if (rs.originalMaxPositionEmbeddings <= 0)
    return Error{fmt::format("{}: original_max_position_embeddings must be > 0", where)};
  return {};
}

Status parseQuantization(const json::Object& q, const std::string& where, ModelConfig& cfg) {
  FieldReader r(q, where);
  DI_OPT_FIELD(r, "quant_method", cfg.quantMethod, string);
  DI_OPT_FIELD(r, "activation_scheme", cfg.activationScheme, string);
  DI_OPT_FIELD(r, "scale_fmt", cfg.scaleFmt, string);
  DI_OPT_FIELD(r, "expert_quant_format", cfg.expertQuantFormat, string);
  DI_OPT_FIELD(r, "expert_dtype", cfg.expertQuantFormat, string);
  DI_OPT_FIELD(r, "weight_block_size", cfg.weightBlockSize, smallIntList);
  return {};
}

// The values the loader supports; whether they describe the checkpoint's tensors is checked at
// load (QuantizationCheck.h).
Status checkQuantization(const ModelConfig& c, const std::string& s) {
  const std::string q = s + ": quantization_config";
  if (!c.quantMethod.empty() && c.quantMethod != "fp8")
    return Error{fmt::format("{}: quant_method '{}' is not supported (\"fp8\": e4m3 weights with ue8m0 block "
                             "scales, docs/model.md §3)",
                             q, c.quantMethod)};
  if (!c.activationScheme.empty() && c.activationScheme != "dynamic")
    return Error{fmt::format("{}: activation_scheme '{}' is not supported (\"dynamic\": activations stay bf16)",
                             q, c.activationScheme)};
  if (!c.scaleFmt.empty() && c.scaleFmt != "ue8m0")
    return Error{fmt::format("{}: scale_fmt '{}' is not supported (\"ue8m0\")", q, c.scaleFmt)};
  if (!c.expertQuantFormat.empty() && c.expertQuantFormat != "fp4" && c.expertQuantFormat != "fp8")
    return Error{fmt::format("{}: expert_dtype '{}' is not supported (\"fp4\" or \"fp8\")", q,
                             c.expertQuantFormat)};
  if (!c.weightBlockSize.empty() &&
      (c.weightBlockSize.size() != 2 || c.weightBlockSize[0] <= 0 || c.weightBlockSize[1] <= 0))
    return Error{fmt::format("{}: weight_block_size must be two positive integers [rows, columns] (got [{}])", q,
                             fmt::join(c.weightBlockSize, ", "))};
  return {};
}

// model_type at the top level and in text_config, and architectures: this loader reads
// DeepSeek-V4.1 only, so another model's config is refused before its fields are read.
Status checkModelType(const json::Object& root, const json::Object* text, const std::string& source) {
  FieldReader top(root, source);
  std::string topType, textType;
  if (top.has("model_type")) DI_FIELD(topType, top.string("model_type"));
  if (text) {
    FieldReader t(*text, source + ": text_config");
    if (t.has("model_type")) DI_FIELD(textType, t.string("model_type"));
  }
  if (topType.empty() && textType.empty()) return top.missing("model_type");
  if (!topType.empty() && topType != "deepseek_v41")
    return Error{fmt::format("{}: model_type '{}' is not supported (expected \"deepseek_v41\")", source, topType)};
  if (!textType.empty() && textType != "deepseek_v41_text" && textType != "deepseek_v41")
    return Error{fmt::format("{}: text_config.model_type '{}' is not supported (expected \"deepseek_v41_text\")",
                             source, textType)};
  if (top.has("architectures")) {
    const json::Array* a = root.getArray("architectures");
    if (!a) return top.wrongType("architectures", "a list of strings");
    std::vector<std::string> names;
    bool found = false;
    for (const json::Value& v : *a) {
      auto n = v.getAsString();
      if (!n) return top.wrongType("architectures", "a list of strings");
      names.push_back(n->str());
      found |= *n == "DeepseekV41ForCausalLM";
    }
    if (!found)
      return Error{fmt::format("{}: architectures [{}] does not name DeepseekV41ForCausalLM", source,
                               fmt::join(names, ", "))};
  }
  return {};
}

// The DSpark fields (docs/dspark.md §1), all optional: without them the model has no draft.
Status parseDsparkFields(const FieldReader& r, ModelConfig& cfg) {
  DI_OPT_FIELD(r, "dspark_block_size", cfg.dsparkBlockSize, smallInt);
  DI_OPT_FIELD(r, "dspark_target_layer_ids", cfg.dsparkTargetLayerIds, smallIntList);
  DI_OPT_FIELD(r, "dspark_noise_token_id", cfg.dspark.noiseTokenId, integer);
  DI_OPT_FIELD(r, "dspark_markov_rank", cfg.dspark.markovRank, smallInt);
  DI_OPT_FIELD(r, "dspark_n_routed_experts", cfg.dspark.nRoutedExperts, smallInt);
  // R's spelling first, the HF one wins when both are present.
  DI_OPT_FIELD(r, "dspark_n_activated_experts", cfg.dspark.numExpertsPerTok, smallInt);
  DI_OPT_FIELD(r, "dspark_num_experts_per_tok", cfg.dspark.numExpertsPerTok, smallInt);
  return {};
}

Status parseFields(const json::Object& root, const std::string& source, ModelConfig& cfg) {
  // The real config nests the text model under "text_config"; accept a flat file too.
  const json::Object* text = root.getObject("text_config");
  const json::Object& o = text ? *text : root;
  FieldReader r(o, text ? source + ": text_config" : source);
  FieldReader top(root, source);

  DI_TRY(checkModelType(root, text, source));
  cfg.modelType = "deepseek_v41";

  DI_FIELD(cfg.vocabSize, r.integer("vocab_size"));
  DI_FIELD(cfg.hiddenSize, r.integer("hidden_size"));
  DI_FIELD(cfg.numHiddenLayers, r.smallInt("num_hidden_layers"));
  DI_OPT_FIELD(r, "num_nextn_predict_layers", cfg.numNextnPredictLayers, smallInt);
  DI_FIELD(cfg.numAttentionHeads, r.smallInt("num_attention_heads"));
  DI_OPT_FIELD(r, "num_key_value_heads", cfg.numKeyValueHeads, smallInt);
  DI_FIELD(cfg.headDim, r.smallInt("head_dim"));
  DI_FIELD(cfg.qkRopeHeadDim, r.smallInt("qk_rope_head_dim"));
  DI_FIELD(cfg.qLoraRank, r.integer("q_lora_rank"));
  DI_FIELD(cfg.oLoraRank, r.integer("o_lora_rank"));
  DI_FIELD(cfg.oGroups, r.smallInt("o_groups"));
  DI_FIELD(cfg.slidingWindow, r.smallInt("sliding_window"));
  DI_FIELD(cfg.rmsNormEps, r.number("rms_norm_eps"));
  DI_FIELD(cfg.swigluLimit, r.number("swiglu_limit"));
  DI_FIELD(cfg.ropeTheta, r.number("rope_theta"));
  DI_FIELD(cfg.compressRopeTheta, r.number("compress_rope_theta"));
  if (r.has("rope_scaling")) {
    const json::Object* rs = r.object("rope_scaling");
    if (!rs) return r.wrongType("rope_scaling", "an object");
    DI_TRY(parseRopeScaling(*rs, text ? source + ": text_config" : source, cfg.ropeScaling));
  }
  DI_OPT_FIELD(r, "max_position_embeddings", cfg.maxPositionEmbeddings, integer);

  DI_FIELD(cfg.nRoutedExperts, r.smallInt("n_routed_experts"));
  DI_FIELD(cfg.nSharedExperts, r.smallInt("n_shared_experts"));
  DI_FIELD(cfg.numExpertsPerTok, r.smallInt("num_experts_per_tok"));
  DI_FIELD(cfg.moeIntermediateSize, r.integer("moe_intermediate_size"));
  DI_FIELD(cfg.scoringFunc, r.string("scoring_func"));
  DI_OPT_FIELD(r, "norm_topk_prob", cfg.normTopkProb, boolean);
  DI_FIELD(cfg.routedScalingFactor, r.number("routed_scaling_factor"));

  DI_FIELD(cfg.compressRatios, r.smallIntList("compress_ratios"));
  DI_FIELD(cfg.kvSourceLayerIds, r.smallIntList("kv_source_layer_ids"));
  DI_FIELD(cfg.indexSourceLayerIds, r.smallIntList("index_source_layer_ids"));
  DI_FIELD(cfg.indexNHeads, r.smallInt("index_n_heads"));
  DI_FIELD(cfg.indexHeadDim, r.smallInt("index_head_dim"));
  DI_FIELD(cfg.indexTopk, r.smallInt("index_topk"));
  if (r.has("candidate_source_layer_id")) {
    DI_FIELD(cfg.candidateSourceLayerId, r.smallInt("candidate_source_layer_id"));
    DI_FIELD(cfg.candidateTopkBlocks, r.smallInt("candidate_topk_blocks"));
    DI_FIELD(cfg.candidateBlockSize, r.smallInt("candidate_block_size"));
  }

  DI_FIELD(cfg.hcMult, r.smallInt("hc_mult"));
  DI_FIELD(cfg.hcSinkhornIters, r.smallInt("hc_sinkhorn_iters"));
  DI_FIELD(cfg.hcEps, r.number("hc_eps"));

  if (r.has("engram_layer_ids")) DI_FIELD(cfg.engramLayerIds, r.smallIntList("engram_layer_ids"));
  if (!cfg.engramLayerIds.empty()) {
    DI_FIELD(cfg.engramNumEmbeddings, r.intList("engram_num_embeddings"));
    DI_FIELD(cfg.engramMaxNgramSize, r.smallInt("engram_max_ngram_size"));
    DI_FIELD(cfg.engramNHeads, r.smallInt("engram_n_heads"));
    DI_FIELD(cfg.engramHeadDim, r.smallInt("engram_head_dim"));
    DI_FIELD(cfg.engramPadTokenId, r.integer("engram_pad_token_id"));
    DI_FIELD(cfg.engramCompressedVocabSize, r.integer("engram_compressed_vocab_size"));
    if (r.has("engram_vocab_size")) {
      const json::Value* v = o.get("engram_vocab_size");
      if (auto one = v->getAsInteger()) {
        cfg.engramVocabSize.assign(size_t(std::max(cfg.engramMaxNgramSize - 1, 0)), *one);
      } else {
        DI_FIELD(cfg.engramVocabSize, r.intList("engram_vocab_size"));
      }
    }
  }

  DI_TRY(parseDsparkFields(r, cfg));

  // Top level in the release layout; inside text_config in the layout make-model wrote before.
  const bool topQ = top.has("quantization_config");
  const FieldReader& qr = topQ ? top : r;
  if (qr.has("quantization_config")) {
    const json::Object* q = qr.object("quantization_config");
    if (!q) return qr.wrongType("quantization_config", "an object");
    const std::string where = (topQ || !text ? source : source + ": text_config") + ": quantization_config";
    DI_TRY(parseQuantization(*q, where, cfg));
  }
  return {};
}

// Checks a list of layer ids: strictly increasing, inside [0, numHiddenLayers).
Status checkLayerList(const std::vector<int>& ids, const char* field, int numLayers,
                      const std::string& source) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= numLayers)
      return Error{fmt::format("{}: {}[{}] = {} is out of range [0, {}) (num_hidden_layers)", source, field,
                               i, ids[i], numLayers)};
    if (i > 0 && ids[i] <= ids[i - 1])
      return Error{fmt::format("{}: {} must be strictly increasing, but entry {} ({}) follows {}", source,
                               field, i, ids[i], ids[i - 1])};
  }
  return {};
}

Status checkPositive(int64_t v, const char* field, const std::string& source) {
  if (v <= 0) return Error{fmt::format("{}: {} must be > 0 (got {})", source, field, v)};
  return {};
}

// Nearest entry of a sorted list at or below `layer`, -1 if none.
int nearestAtOrBelow(const std::vector<int>& ids, int layer) {
  int best = -1;
  for (int id : ids)
    if (id <= layer) best = id;
  return best;
}

bool contains(const std::vector<int>& ids, int layer) {
  for (int id : ids)
    if (id == layer) return true;
  return false;
}

Status checkSizes(const ModelConfig& c, const std::string& s) {
  DI_TRY(checkPositive(c.vocabSize, "vocab_size", s));
  DI_TRY(checkPositive(c.hiddenSize, "hidden_size", s));
  DI_TRY(checkPositive(c.numHiddenLayers, "num_hidden_layers", s));
  if (c.numNextnPredictLayers < 0)
    return Error{fmt::format("{}: num_nextn_predict_layers must be >= 0 (got {})", s, c.numNextnPredictLayers)};
  DI_TRY(checkPositive(c.numAttentionHeads, "num_attention_heads", s));
  if (c.numKeyValueHeads != 1)
    return Error{fmt::format("{}: num_key_value_heads must be 1 (one shared latent KV head; got {})", s,
                             c.numKeyValueHeads)};
  // The 584-byte fp8_ds_mla cache (docs/ops.md §2) fixes 448 NoPE + 64 RoPE dims.
  if (c.headDim != 512 || c.qkRopeHeadDim != 64)
    return Error{fmt::format("{}: head_dim {} / qk_rope_head_dim {} unsupported: the fp8_ds_mla cache format "
                             "needs head_dim 512 and qk_rope_head_dim 64",
                             s, c.headDim, c.qkRopeHeadDim)};
  DI_TRY(checkPositive(c.qLoraRank, "q_lora_rank", s));
  DI_TRY(checkPositive(c.oLoraRank, "o_lora_rank", s));
  DI_TRY(checkPositive(c.oGroups, "o_groups", s));
  if (c.numAttentionHeads % c.oGroups != 0)
    return Error{fmt::format("{}: o_groups ({}) must divide num_attention_heads ({})", s, c.oGroups,
                             c.numAttentionHeads)};
  DI_TRY(checkPositive(c.slidingWindow, "sliding_window", s));
  if (!(c.rmsNormEps > 0)) return Error{fmt::format("{}: rms_norm_eps must be > 0", s)};
  if (!(c.swigluLimit > 0)) return Error{fmt::format("{}: swiglu_limit must be > 0", s)};
  if (!(c.ropeTheta > 1)) return Error{fmt::format("{}: rope_theta must be > 1", s)};
  if (!(c.compressRopeTheta > 1)) return Error{fmt::format("{}: compress_rope_theta must be > 1", s)};
  DI_TRY(checkPositive(c.nRoutedExperts, "n_routed_experts", s));
  if (c.nSharedExperts < 0) return Error{fmt::format("{}: n_shared_experts must be >= 0", s)};
  DI_TRY(checkPositive(c.numExpertsPerTok, "num_experts_per_tok", s));
  if (c.numExpertsPerTok > c.nRoutedExperts)
    return Error{fmt::format("{}: num_experts_per_tok ({}) exceeds n_routed_experts ({})", s,
                             c.numExpertsPerTok, c.nRoutedExperts)};
  DI_TRY(checkPositive(c.moeIntermediateSize, "moe_intermediate_size", s));
  // fp4 expert weights carry one scale per 32 input columns (docs/model.md §3).
  if (c.hiddenSize % 32 != 0 || c.moeIntermediateSize % 32 != 0)
    return Error{fmt::format("{}: hidden_size ({}) and moe_intermediate_size ({}) must be multiples of 32 (fp4 "
                             "experts have one scale per 32 input columns)",
                             s, c.hiddenSize, c.moeIntermediateSize)};
  if (c.scoringFunc != "sqrtsoftplus")
    return Error{fmt::format("{}: scoring_func '{}' is not supported (expected \"sqrtsoftplus\")", s,
                             c.scoringFunc)};
  DI_TRY(checkPositive(c.indexNHeads, "index_n_heads", s));
  // The 132-byte index-key cache entry (docs/ops.md §7) holds 128 dims.
  if (c.indexHeadDim != 128)
    return Error{fmt::format("{}: index_head_dim {} unsupported: the index-key cache format needs 128", s,
                             c.indexHeadDim)};
  DI_TRY(checkPositive(c.indexTopk, "index_topk", s));
  if (c.hcMult != 4)
    return Error{fmt::format("{}: hc_mult must be 4 (the mHC ops use 4 streams; got {})", s, c.hcMult)};
  DI_TRY(checkPositive(c.hcSinkhornIters, "hc_sinkhorn_iters", s));
  if (!(c.hcEps >= 0)) return Error{fmt::format("{}: hc_eps must be >= 0", s)};
  if (c.ropeScaling.present && c.ropeScaling.betaFast <= c.ropeScaling.betaSlow)
    return Error{fmt::format("{}: rope_scaling.beta_fast ({}) must exceed beta_slow ({})", s,
                             c.ropeScaling.betaFast, c.ropeScaling.betaSlow)};
  return {};
}

Status checkEngram(const ModelConfig& c, const std::string& s) {
  DI_TRY(checkLayerList(c.engramLayerIds, "engram_layer_ids", c.numHiddenLayers, s));
  if (c.engramLayerIds.empty()) return {};
  if (c.engramNumEmbeddings.size() != c.engramLayerIds.size())
    return Error{fmt::format("{}: engram_num_embeddings has {} entries but engram_layer_ids has {}", s,
                             c.engramNumEmbeddings.size(), c.engramLayerIds.size())};
  for (size_t i = 0; i < c.engramNumEmbeddings.size(); ++i)
    if (c.engramNumEmbeddings[i] <= 0)
      return Error{fmt::format("{}: engram_num_embeddings[{}] must be > 0 (got {})", s, i,
                               c.engramNumEmbeddings[i])};
  if (c.engramMaxNgramSize < 2)
    return Error{fmt::format("{}: engram_max_ngram_size must be >= 2 (got {})", s, c.engramMaxNgramSize)};
  DI_TRY(checkPositive(c.engramNHeads, "engram_n_heads", s));
  DI_TRY(checkPositive(c.engramHeadDim, "engram_head_dim", s));
  if (c.engramHeadDim % 32 != 0)
    return Error{fmt::format("{}: engram_head_dim ({}) must be a multiple of 32 (one scale per 32 columns)", s,
                             c.engramHeadDim)};
  DI_TRY(checkPositive(c.engramCompressedVocabSize, "engram_compressed_vocab_size", s));
  if (c.engramPadTokenId < 0 || c.engramPadTokenId >= c.vocabSize)
    return Error{fmt::format("{}: engram_pad_token_id {} is outside the vocabulary [0, {})", s,
                             c.engramPadTokenId, c.vocabSize)};
  if (!c.engramVocabSize.empty()) {
    if (c.engramVocabSize.size() != size_t(c.engramMaxNgramSize - 1))
      return Error{fmt::format("{}: engram_vocab_size has {} entries, expected one per n-gram size 2..{} ({})",
                               s, c.engramVocabSize.size(), c.engramMaxNgramSize, c.engramMaxNgramSize - 1)};
    for (size_t i = 0; i < c.engramVocabSize.size(); ++i)
      if (c.engramVocabSize[i] < 2)
        return Error{fmt::format("{}: engram_vocab_size[{}] must be >= 2 (got {})", s, i, c.engramVocabSize[i])};
  }
  return {};
}

Status checkSources(const ModelConfig& c, const std::string& s) {
  const int L = c.numHiddenLayers;
  const size_t expect = size_t(c.numLayersTotal());
  if (c.compressRatios.size() != expect)
    return Error{fmt::format("{}: compress_ratios has {} entries, expected {} (num_hidden_layers {} + "
                             "num_nextn_predict_layers {})",
                             s, c.compressRatios.size(), expect, L, c.numNextnPredictLayers)};
  for (size_t i = 0; i < c.compressRatios.size(); ++i) {
    const int r = c.compressRatios[i];
    if (r != 0 && r != 1 && r != 2)
      return Error{fmt::format("{}: compress_ratios[{}] = {} is not supported (0, 1 or 2)", s, i, r)};
  }
  DI_TRY(checkLayerList(c.kvSourceLayerIds, "kv_source_layer_ids", L, s));
  DI_TRY(checkLayerList(c.indexSourceLayerIds, "index_source_layer_ids", L, s));
  for (int k : c.kvSourceLayerIds)
    if (c.compressRatios[size_t(k)] == 0)
      return Error{fmt::format("{}: kv source layer {} has compress_ratios[{}] = 0 (a kv source compresses)", s,
                               k, k)};
  for (int k : c.indexSourceLayerIds)
    if (c.compressRatios[size_t(k)] == 0)
      return Error{fmt::format("{}: index source layer {} has compress_ratios[{}] = 0 (an index source needs "
                               "compressed positions to score)",
                               s, k, k)};
  // A kv source must also be an index source: otherwise the layers reading its cache would take
  // top-k positions scored against an older cache's keys.
  for (int k : c.kvSourceLayerIds)
    if (!contains(c.indexSourceLayerIds, k))
      return Error{fmt::format("{}: kv source layer {} is not in index_source_layer_ids: layers reading its "
                               "compressed cache would select positions scored against another cache",
                               s, k)};
  for (int l = 0; l < L; ++l) {
    const int r = c.compressRatios[size_t(l)];
    if (r == 0) continue;
    const int kv = nearestAtOrBelow(c.kvSourceLayerIds, l);
    if (kv < 0)
      return Error{fmt::format("{}: layer {} has compress_ratios[{}] = {} but no kv source at or below it "
                               "(kv_source_layer_ids)",
                               s, l, l, r)};
    // An index source at or below follows: the kv source itself is one (checked above).
    if (c.compressRatios[size_t(kv)] != r)
      return Error{fmt::format("{}: layer {} has compress_ratios[{}] = {} but reads kv source layer {} whose "
                               "ratio is {}",
                               s, l, l, r, kv, c.compressRatios[size_t(kv)])};
  }
  if (c.candidateSourceLayerId != -1) {
    const int cs = c.candidateSourceLayerId;
    if (cs < 0 || cs >= L)
      return Error{fmt::format("{}: candidate_source_layer_id {} is out of range [0, {})", s, cs, L)};
    if (!contains(c.indexSourceLayerIds, cs) || !contains(c.kvSourceLayerIds, cs))
      return Error{fmt::format("{}: candidate_source_layer_id {} must be both a kv source and an index source (its "
                               "candidate blocks are blocks of its own index keys)",
                               s, cs)};
    DI_TRY(checkPositive(c.candidateTopkBlocks, "candidate_topk_blocks", s));
    DI_TRY(checkPositive(c.candidateBlockSize, "candidate_block_size", s));
    const int csKeys = nearestAtOrBelow(c.kvSourceLayerIds, cs);
    for (int k : c.indexSourceLayerIds) {
      if (k <= cs) continue;
      const int keys = nearestAtOrBelow(c.kvSourceLayerIds, k);
      if (keys != csKeys)
        return Error{fmt::format("{}: index source layer {} lies above candidate_source_layer_id {} but scores "
                                 "against layer {}'s index keys, not layer {}'s: its candidate mask would not "
                                 "apply",
                                 s, k, cs, keys, csKeys)};
    }
  }
  return {};
}

// DSpark (docs/dspark.md §1): draft stages are window-only; with stages and a block size the
// tapped layers, the noise token, the Markov rank and the draft MoE must make sense.
Status checkDspark(const ModelConfig& c, const std::string& s) {
  const int L = c.numHiddenLayers;
  for (int l = L; l < c.numLayersTotal(); ++l)
    if (c.compressRatios[size_t(l)] != 0)
      return Error{fmt::format("{}: compress_ratios[{}] = {} but layer {} is a DSpark draft stage (drafts attend "
                               "to their window only: the ratio must be 0)",
                               s, l, c.compressRatios[size_t(l)], l)};
  if (c.dsparkBlockSize < 0)
    return Error{fmt::format("{}: dspark_block_size must be >= 0 (got {})", s, c.dsparkBlockSize)};
  for (size_t i = 0; i < c.dsparkTargetLayerIds.size(); ++i) {
    const int id = c.dsparkTargetLayerIds[i];
    if (id < 0 || id >= L)
      return Error{fmt::format("{}: dspark_target_layer_ids[{}] = {} is out of range [0, {})", s, i, id, L)};
    for (size_t j = 0; j < i; ++j)
      if (c.dsparkTargetLayerIds[j] == id)
        return Error{fmt::format("{}: dspark_target_layer_ids lists layer {} twice (entries {} and {})", s, id, j,
                                 i)};
  }
  if (c.dspark.nRoutedExperts < 0 || c.dspark.numExpertsPerTok < 0)
    return Error{fmt::format("{}: dspark_n_routed_experts ({}) and dspark_num_experts_per_tok ({}) must be >= 0 "
                             "(0 = the backbone's)",
                             s, c.dspark.nRoutedExperts, c.dspark.numExpertsPerTok)};
  if (!c.dsparkConfigured()) return {};
  const std::string why = fmt::format("(required with num_nextn_predict_layers {} and dspark_block_size {})",
                                      c.numNextnPredictLayers, c.dsparkBlockSize);
  if (c.dsparkTargetLayerIds.empty())
    return Error{fmt::format("{}: dspark_target_layer_ids is missing or empty {}", s, why)};
  if (c.dspark.noiseTokenId < 0 || c.dspark.noiseTokenId >= c.vocabSize)
    return Error{fmt::format("{}: dspark_noise_token_id {} is missing or outside the vocabulary [0, {}) {}", s,
                             c.dspark.noiseTokenId, c.vocabSize, why)};
  if (c.dspark.markovRank <= 0)
    return Error{fmt::format("{}: dspark_markov_rank must be > 0 (got {}) {}", s, c.dspark.markovRank, why)};
  if (c.draftExpertsPerTok() > c.draftRoutedExperts())
    return Error{fmt::format("{}: the draft MoE picks {} of {} experts (dspark_num_experts_per_tok / "
                             "dspark_n_routed_experts, 0 = the backbone's)",
                             s, c.draftExpertsPerTok(), c.draftRoutedExperts())};
  return {};
}

// The DSpark fields of config.json, written only when set (modelConfigToJson).
void writeDsparkFields(const ModelConfig& c, json::Object& t) {
  auto ints = [](const std::vector<int>& v) {
    json::Array a;
    for (int x : v) a.push_back(int64_t(x));
    return a;
  };
  if (c.dsparkBlockSize > 0) t["dspark_block_size"] = c.dsparkBlockSize;
  if (!c.dsparkTargetLayerIds.empty()) t["dspark_target_layer_ids"] = ints(c.dsparkTargetLayerIds);
  if (c.dspark.noiseTokenId >= 0) t["dspark_noise_token_id"] = c.dspark.noiseTokenId;
  if (c.dspark.markovRank > 0) t["dspark_markov_rank"] = c.dspark.markovRank;
  if (c.dspark.nRoutedExperts > 0) t["dspark_n_routed_experts"] = c.dspark.nRoutedExperts;
  if (c.dspark.numExpertsPerTok > 0) t["dspark_num_experts_per_tok"] = c.dspark.numExpertsPerTok;
}

void deriveRoles(ModelConfig& c) {
  c.layers.assign(size_t(c.numLayersTotal()), LayerRole{});
  for (int l = 0; l < c.numLayersTotal(); ++l) {
    LayerRole& r = c.layers[size_t(l)];
    r.layer = l;
    r.ratio = c.compressRatios[size_t(l)];
    r.isDraft = l >= c.numHiddenLayers;
    if (r.isDraft) continue;  // draft layers are not executed; they own no shared state
    for (size_t e = 0; e < c.engramLayerIds.size(); ++e)
      if (c.engramLayerIds[e] == l) {
        r.isEngram = true;
        r.engramIndex = int(e);
      }
    if (r.ratio == 0) continue;
    r.isKvSource = contains(c.kvSourceLayerIds, l);
    r.isIndexSource = contains(c.indexSourceLayerIds, l);
    r.kvSourceLayer = nearestAtOrBelow(c.kvSourceLayerIds, l);
    r.indexSourceLayer = nearestAtOrBelow(c.indexSourceLayerIds, l);
    if (r.isIndexSource) r.indexKeyLayer = r.kvSourceLayer;
    r.isCandidateSource = l == c.candidateSourceLayerId;
    r.candidateRestricted = r.isIndexSource && c.candidateSourceLayerId >= 0 && l > c.candidateSourceLayerId;
  }
}

}  // namespace

Status finalizeModelConfig(ModelConfig& cfg, const std::string& sourceName) {
  DI_TRY(checkSizes(cfg, sourceName));
  DI_TRY(checkQuantization(cfg, sourceName));
  DI_TRY(checkSources(cfg, sourceName));
  DI_TRY(checkEngram(cfg, sourceName));
  DI_TRY(checkDspark(cfg, sourceName));
  deriveRoles(cfg);
  return {};
}

Result<ModelConfig> parseModelConfig(const std::string& text, const std::string& sourceName) {
  Result<json::Value> parsed = parseJsonInput(text);
  if (!parsed.ok()) return Error{fmt::format("{}: invalid JSON: {}", sourceName, parsed.error().message)};
  const json::Object* root = parsed->getAsObject();
  if (!root) return Error{fmt::format("{}: the top level must be a JSON object", sourceName)};
  ModelConfig cfg;
  DI_TRY(parseFields(*root, sourceName, cfg));
  DI_TRY(finalizeModelConfig(cfg, sourceName));
  return cfg;
}

Result<ModelConfig> loadModelConfig(const std::string& modelDir) {
  const std::string path = modelDir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{fmt::format("{}: cannot open the model config (is '{}' a model directory?)", path, modelDir)};
  auto text = readFileBounded(path, kMaxConfigBytes, "model config");
  if (!text.ok()) return text.error();
  return parseModelConfig(*text, path);
}

std::vector<int> ModelConfig::dsparkTapLayers() const {
  std::vector<int> taps = dsparkTargetLayerIds;
  std::sort(taps.begin(), taps.end());
  return taps;
}

ModelConfig v41FlashDefaults() {
  ModelConfig c;
  c.modelType = "deepseek_v41";
  c.vocabSize = 129280;
  c.hiddenSize = 5120;
  c.numHiddenLayers = 40;
  c.numNextnPredictLayers = 3;
  c.numAttentionHeads = 64;
  c.numKeyValueHeads = 1;
  c.headDim = 512;
  c.qkRopeHeadDim = 64;
  c.qLoraRank = 1280;
  c.oLoraRank = 1024;
  c.oGroups = 8;
  c.slidingWindow = 128;
  c.rmsNormEps = 1e-20;
  c.swigluLimit = 10.0;
  c.ropeTheta = 10000;
  c.compressRopeTheta = 160000;
  c.ropeScaling = RopeScaling{true, "yarn", 16, 32, 1, 65536};
  c.maxPositionEmbeddings = 1048576;
  c.nRoutedExperts = 384;
  c.nSharedExperts = 1;
  c.numExpertsPerTok = 6;
  c.moeIntermediateSize = 2304;
  c.scoringFunc = "sqrtsoftplus";
  c.normTopkProb = true;
  c.routedScalingFactor = 1.5;
  c.compressRatios.assign(43, 0);
  for (int l = 2; l < 20; ++l) c.compressRatios[size_t(l)] = 2;
  for (int l = 20; l < 40; ++l) c.compressRatios[size_t(l)] = 1;
  c.kvSourceLayerIds = {2, 8, 14, 20};
  c.indexSourceLayerIds = {2, 8, 14, 20, 24, 28, 32, 36};
  c.indexNHeads = 32;
  c.indexHeadDim = 128;
  c.indexTopk = 512;
  c.candidateSourceLayerId = 20;
  c.candidateTopkBlocks = 2048;
  c.candidateBlockSize = 8;
  c.hcMult = 4;
  c.hcSinkhornIters = 20;
  c.hcEps = 1e-6;
  c.engramLayerIds = {1, 14};
  c.engramNumEmbeddings = {384006168, 384016682};
  c.engramMaxNgramSize = 4;
  c.engramNHeads = 8;
  c.engramHeadDim = 256;
  c.engramPadTokenId = 2;
  c.engramCompressedVocabSize = 99092;
  c.engramVocabSize = {16000000, 16000000, 16000000};
  c.dsparkBlockSize = 5;
  c.dsparkTargetLayerIds = {37, 38, 39};
  c.dspark.noiseTokenId = 128799;
  c.dspark.markovRank = 256;
  c.dspark.nRoutedExperts = 128;
  c.dspark.numExpertsPerTok = 3;
  c.quantMethod = "fp8";
  c.expertQuantFormat = "fp4";
  c.weightBlockSize = {32, 32};
  c.activationScheme = "dynamic";
  c.scaleFmt = "ue8m0";
  // The constants above are the model card's; a failure here is a programming error caught by
  // the unit tests, so the roles are derived without a status check.
  deriveRoles(c);
  return c;
}

std::string modelConfigToJson(const ModelConfig& c) {
  auto ints = [](const auto& v) {
    json::Array a;
    for (auto x : v) a.push_back(int64_t(x));
    return a;
  };
  json::Object t;
  t["model_type"] = "deepseek_v41_text";
  t["vocab_size"] = c.vocabSize;
  t["hidden_size"] = c.hiddenSize;
  t["num_hidden_layers"] = c.numHiddenLayers;
  t["num_nextn_predict_layers"] = c.numNextnPredictLayers;
  t["num_attention_heads"] = c.numAttentionHeads;
  t["num_key_value_heads"] = c.numKeyValueHeads;
  t["head_dim"] = c.headDim;
  t["qk_rope_head_dim"] = c.qkRopeHeadDim;
  t["q_lora_rank"] = c.qLoraRank;
  t["o_lora_rank"] = c.oLoraRank;
  t["o_groups"] = c.oGroups;
  t["sliding_window"] = c.slidingWindow;
  t["rms_norm_eps"] = c.rmsNormEps;
  t["swiglu_limit"] = c.swigluLimit;
  t["rope_theta"] = c.ropeTheta;
  t["compress_rope_theta"] = c.compressRopeTheta;
  if (c.ropeScaling.present) {
    t["rope_scaling"] = json::Object{{"rope_type", c.ropeScaling.type},
                                     {"factor", c.ropeScaling.factor},
                                     {"beta_fast", c.ropeScaling.betaFast},
                                     {"beta_slow", c.ropeScaling.betaSlow},
                                     {"original_max_position_embeddings",
                                      c.ropeScaling.originalMaxPositionEmbeddings}};
  }
  if (c.maxPositionEmbeddings > 0) t["max_position_embeddings"] = c.maxPositionEmbeddings;
  t["n_routed_experts"] = c.nRoutedExperts;
  t["n_shared_experts"] = c.nSharedExperts;
  t["num_experts_per_tok"] = c.numExpertsPerTok;
  t["moe_intermediate_size"] = c.moeIntermediateSize;
  t["scoring_func"] = c.scoringFunc;
  t["norm_topk_prob"] = c.normTopkProb;
  t["routed_scaling_factor"] = c.routedScalingFactor;
  t["compress_ratios"] = ints(c.compressRatios);
  t["kv_source_layer_ids"] = ints(c.kvSourceLayerIds);
  t["index_source_layer_ids"] = ints(c.indexSourceLayerIds);
  t["index_n_heads"] = c.indexNHeads;
  t["index_head_dim"] = c.indexHeadDim;
  t["index_topk"] = c.indexTopk;
  if (c.candidateSourceLayerId >= 0) {
    t["candidate_source_layer_id"] = c.candidateSourceLayerId;
    t["candidate_topk_blocks"] = c.candidateTopkBlocks;
    t["candidate_block_size"] = c.candidateBlockSize;
  }
  t["hc_mult"] = c.hcMult;
  t["hc_sinkhorn_iters"] = c.hcSinkhornIters;
  t["hc_eps"] = c.hcEps;
  if (!c.engramLayerIds.empty()) {
    t["engram_layer_ids"] = ints(c.engramLayerIds);
    t["engram_num_embeddings"] = ints(c.engramNumEmbeddings);
    t["engram_max_ngram_size"] = c.engramMaxNgramSize;
    t["engram_n_heads"] = c.engramNHeads;
    t["engram_head_dim"] = c.engramHeadDim;
    t["engram_pad_token_id"] = c.engramPadTokenId;
    t["engram_compressed_vocab_size"] = c.engramCompressedVocabSize;
    if (!c.engramVocabSize.empty()) t["engram_vocab_size"] = ints(c.engramVocabSize);
  }
  writeDsparkFields(c, t);
  json::Object root{{"model_type", c.modelType},
                    {"architectures", json::Array{"DeepseekV41ForCausalLM"}},
                    {"text_config", std::move(t)}};
  if (!c.quantMethod.empty() || !c.expertQuantFormat.empty() || !c.weightBlockSize.empty() ||
      !c.activationScheme.empty() || !c.scaleFmt.empty()) {
    json::Object q;
    if (!c.quantMethod.empty()) q["quant_method"] = c.quantMethod;
    if (!c.activationScheme.empty()) q["activation_scheme"] = c.activationScheme;
    if (!c.weightBlockSize.empty()) q["weight_block_size"] = ints(c.weightBlockSize);
    if (!c.scaleFmt.empty()) q["scale_fmt"] = c.scaleFmt;
    if (!c.expertQuantFormat.empty()) q["expert_dtype"] = c.expertQuantFormat;
    root["quantization_config"] = std::move(q);
  }
  return llvm::formatv("{0:2}", json::Value(std::move(root))).str() + "\n";
}

}  // namespace deepinfer
