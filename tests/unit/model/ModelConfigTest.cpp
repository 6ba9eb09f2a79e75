// config.json parsing, layer-role derivation (docs/model.md §1-§2) and every rejection.
#include <gtest/gtest.h>

#include <functional>

#include "ModelTestFiles.h"
#include "model/MakeModelPresets.h"
#include "model/ModelConfig.h"

using namespace deepinfer;
using deepinfer::testing_util::failsWith;

namespace {

// One layer's expected roles: ratio, kv source, index source, kvSourceLayer, indexSourceLayer,
// indexKeyLayer, candidate source, candidate restricted, engram.
struct RoleRow {
  int ratio;
  bool kv, idx;
  int kvFrom, idxFrom, keysOf;
  bool cand, restricted, engram;
};

void expectRoles(const ModelConfig& cfg, const std::vector<RoleRow>& want) {
  ASSERT_GE(cfg.layers.size(), want.size());
  for (size_t l = 0; l < want.size(); ++l) {
    const LayerRole& r = cfg.layers[l];
    const RoleRow& w = want[l];
    SCOPED_TRACE(::testing::Message() << "layer " << l);
    EXPECT_EQ(r.layer, int(l));
    EXPECT_FALSE(r.isDraft);
    EXPECT_EQ(r.ratio, w.ratio);
    EXPECT_EQ(r.isKvSource, w.kv);
    EXPECT_EQ(r.isIndexSource, w.idx);
    EXPECT_EQ(r.kvSourceLayer, w.kvFrom);
    EXPECT_EQ(r.indexSourceLayer, w.idxFrom);
    EXPECT_EQ(r.indexKeyLayer, w.keysOf);
    EXPECT_EQ(r.isCandidateSource, w.cand);
    EXPECT_EQ(r.candidateRestricted, w.restricted);
    EXPECT_EQ(r.isEngram, w.engram);
  }
}

// docs/model.md §2 for V4.1-Flash, layer by layer.
const std::vector<RoleRow> kV41Roles = {
    /* 0*/ {0, false, false, -1, -1, -1, false, false, false},
    /* 1*/ {0, false, false, -1, -1, -1, false, false, true},
    /* 2*/ {2, true, true, 2, 2, 2, false, false, false},
    /* 3*/ {2, false, false, 2, 2, -1, false, false, false},
    /* 4*/ {2, false, false, 2, 2, -1, false, false, false},
    /* 5*/ {2, false, false, 2, 2, -1, false, false, false},
    /* 6*/ {2, false, false, 2, 2, -1, false, false, false},
    /* 7*/ {2, false, false, 2, 2, -1, false, false, false},
    /* 8*/ {2, true, true, 8, 8, 8, false, false, false},
    /* 9*/ {2, false, false, 8, 8, -1, false, false, false},
    /*10*/ {2, false, false, 8, 8, -1, false, false, false},
    /*11*/ {2, false, false, 8, 8, -1, false, false, false},
    /*12*/ {2, false, false, 8, 8, -1, false, false, false},
    /*13*/ {2, false, false, 8, 8, -1, false, false, false},
    /*14*/ {2, true, true, 14, 14, 14, false, false, true},
    /*15*/ {2, false, false, 14, 14, -1, false, false, false},
    /*16*/ {2, false, false, 14, 14, -1, false, false, false},
    /*17*/ {2, false, false, 14, 14, -1, false, false, false},
    /*18*/ {2, false, false, 14, 14, -1, false, false, false},
    /*19*/ {2, false, false, 14, 14, -1, false, false, false},
    /*20*/ {1, true, true, 20, 20, 20, true, false, false},
    /*21*/ {1, false, false, 20, 20, -1, false, false, false},
    /*22*/ {1, false, false, 20, 20, -1, false, false, false},
    /*23*/ {1, false, false, 20, 20, -1, false, false, false},
    /*24*/ {1, false, true, 20, 24, 20, false, true, false},
    /*25*/ {1, false, false, 20, 24, -1, false, false, false},
    /*26*/ {1, false, false, 20, 24, -1, false, false, false},
    /*27*/ {1, false, false, 20, 24, -1, false, false, false},
    /*28*/ {1, false, true, 20, 28, 20, false, true, false},
    /*29*/ {1, false, false, 20, 28, -1, false, false, false},
    /*30*/ {1, false, false, 20, 28, -1, false, false, false},
    /*31*/ {1, false, false, 20, 28, -1, false, false, false},
    /*32*/ {1, false, true, 20, 32, 20, false, true, false},
    /*33*/ {1, false, false, 20, 32, -1, false, false, false},
    /*34*/ {1, false, false, 20, 32, -1, false, false, false},
    /*35*/ {1, false, false, 20, 32, -1, false, false, false},
    /*36*/ {1, false, true, 20, 36, 20, false, true, false},
    /*37*/ {1, false, false, 20, 36, -1, false, false, false},
    /*38*/ {1, false, false, 20, 36, -1, false, false, false},
    /*39*/ {1, false, false, 20, 36, -1, false, false, false},
};

// The release config.json's layout: model_type, architectures and quantization_config at the
// top, the text model's fields under text_config with its own model_type.
const char* kRealConfigJson = R"({
  "architectures": ["DeepseekV41ForCausalLM"],
  "model_type": "deepseek_v41",
  "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
                          "scale_fmt": "ue8m0", "expert_dtype": "fp4"},
  "text_config": {
    "model_type": "deepseek_v41_text",
    "vocab_size": 129280, "hidden_size": 5120, "num_hidden_layers": 40, "num_nextn_predict_layers": 3,
    "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64,
    "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8, "sliding_window": 128,
    "rms_norm_eps": 1e-20, "swiglu_limit": 10.0, "rope_theta": 10000, "compress_rope_theta": 160000,
    "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 65536},
    "max_position_embeddings": 1048576,
    "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 6, "moe_intermediate_size": 2304,
    "scoring_func": "sqrtsoftplus", "norm_topk_prob": true, "routed_scaling_factor": 1.5,
    "compress_ratios": [0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
    "kv_source_layer_ids": [2, 8, 14, 20], "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
    "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512,
    "candidate_source_layer_id": 20, "candidate_topk_blocks": 2048, "candidate_block_size": 8,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
    "engram_layer_ids": [1, 14], "engram_num_embeddings": [384006168, 384016682], "engram_max_ngram_size": 4,
    "engram_n_heads": 8, "engram_head_dim": 256, "engram_pad_token_id": 2, "engram_compressed_vocab_size": 99092,
    "dspark_block_size": 5, "dspark_target_layer_ids": [37, 38, 39], "dspark_noise_token_id": 128799,
    "dspark_markov_rank": 256, "dspark_n_routed_experts": 128, "dspark_num_experts_per_tok": 3
  }
})";

// The tiny preset's config.json after `edit`: written by modelConfigToJson, so the rejection
// comes from parsing, not from a hand-made struct.
std::string tinyJson(const std::function<void(ModelConfig&)>& edit = {}) {
  auto cfg = makeModelPresetConfig("tiny");
  EXPECT_TRUE(cfg.ok());
  if (edit) edit(*cfg);
  return modelConfigToJson(*cfg);
}

// Replaces the one occurrence of `from` in `text` (the test fails if it is not there once).
std::string replaceOnce(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace

TEST(ModelConfig, RealV41FlashRolesAllLayers) {
  auto cfg = parseModelConfig(kRealConfigJson, "config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->numHiddenLayers, 40);
  EXPECT_EQ(cfg->numLayersTotal(), 43);
  EXPECT_EQ(cfg->layers.size(), 43u);
  expectRoles(*cfg, kV41Roles);
  for (int l = 40; l < 43; ++l) {
    EXPECT_TRUE(cfg->role(l).isDraft);
    EXPECT_EQ(cfg->role(l).ratio, 0);
    EXPECT_EQ(cfg->role(l).kvSourceLayer, -1);
  }
  EXPECT_EQ(cfg->role(1).engramIndex, 0);
  EXPECT_EQ(cfg->role(14).engramIndex, 1);
  EXPECT_TRUE(cfg->ropeScaling.present);
  EXPECT_EQ(cfg->ropeScaling.type, "yarn");
  EXPECT_EQ(cfg->ropeScaling.factor, 16);
  EXPECT_EQ(cfg->ropeScaling.originalMaxPositionEmbeddings, 65536);
  EXPECT_EQ(cfg->rmsNormEps, 1e-20);
  EXPECT_EQ(cfg->hcEps, 1e-6);
  EXPECT_EQ(cfg->nopeDim(), 448);
  EXPECT_EQ(cfg->quantMethod, "fp8");
  EXPECT_EQ(cfg->weightBlockSize, (std::vector<int>{32, 32}));
  EXPECT_EQ(cfg->activationScheme, "dynamic");
  EXPECT_EQ(cfg->scaleFmt, "ue8m0");
  EXPECT_EQ(cfg->expertQuantFormat, "fp4");
  EXPECT_TRUE(cfg->engramVocabSize.empty());  // not in the real file
}

TEST(ModelConfig, RealV41FlashDspark) {
  auto cfg = parseModelConfig(kRealConfigJson, "config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_TRUE(cfg->dsparkConfigured());
  EXPECT_EQ(cfg->numNextnPredictLayers, 3);
  EXPECT_EQ(cfg->dsparkBlockSize, 5);
  EXPECT_EQ(cfg->dsparkTapLayers(), (std::vector<int>{37, 38, 39}));
  EXPECT_EQ(cfg->dspark.noiseTokenId, 128799);
  EXPECT_EQ(cfg->dspark.markovRank, 256);
  EXPECT_EQ(cfg->draftRoutedExperts(), 128);
  EXPECT_EQ(cfg->draftExpertsPerTok(), 3);
  // R's spelling of the draft top-k; absent draft MoE fields mean "the backbone's".
  auto rSpelling = parseModelConfig(replaceOnce(kRealConfigJson, "\"dspark_num_experts_per_tok\": 3",
                                                "\"dspark_n_activated_experts\": 2"),
                                    "r");
  ASSERT_TRUE(rSpelling.ok()) << rSpelling.error().message;
  EXPECT_EQ(rSpelling->draftExpertsPerTok(), 2);
  auto backbone = parseModelConfig(
      replaceOnce(replaceOnce(kRealConfigJson, ", \"dspark_num_experts_per_tok\": 3", ""),
                  "\"dspark_n_routed_experts\": 128", "\"dspark_n_routed_experts\": 0"),
      "b");
  ASSERT_TRUE(backbone.ok()) << backbone.error().message;
  EXPECT_EQ(backbone->draftRoutedExperts(), 384);
  EXPECT_EQ(backbone->draftExpertsPerTok(), 6);
  // Unsorted taps are accepted and tapped in ascending order.
  auto unsorted = parseModelConfig(replaceOnce(kRealConfigJson, "[37, 38, 39]", "[39, 37, 38]"), "u");
  ASSERT_TRUE(unsorted.ok()) << unsorted.error().message;
  EXPECT_EQ(unsorted->dsparkTapLayers(), (std::vector<int>{37, 38, 39}));
  // Without a block size there is no draft (and nothing else is required).
  auto noBlock = parseModelConfig(replaceOnce(kRealConfigJson, "\"dspark_block_size\": 5, ", ""), "n");
  ASSERT_TRUE(noBlock.ok()) << noBlock.error().message;
  EXPECT_FALSE(noBlock->dsparkConfigured());
}

TEST(ModelConfig, WriterUsesTheReleaseLayout) {
  // Members print in sorted order, two-space indented: the top level precedes text_config.
  const std::string text = modelConfigToJson(v41FlashDefaults());
  const size_t textConfig = text.find("\n  \"text_config\": {");
  ASSERT_NE(textConfig, std::string::npos) << text;
  const std::string top = text.substr(0, textConfig), inner = text.substr(textConfig);
  for (const char* want : {"\n  \"model_type\": \"deepseek_v41\",", "\n  \"architectures\": [\n    \"DeepseekV41ForCausalLM\"",
                           "\n  \"quantization_config\": {", "\"quant_method\": \"fp8\"",
                           "\"activation_scheme\": \"dynamic\"", "\"scale_fmt\": \"ue8m0\"", "\"expert_dtype\": \"fp4\"",
                           "\"weight_block_size\": [\n      32,\n      32\n    ]"})
    EXPECT_NE(top.find(want), std::string::npos) << want << "\n" << top;
  EXPECT_NE(inner.find("\n    \"model_type\": \"deepseek_v41_text\","), std::string::npos);
  EXPECT_EQ(inner.find("quantization_config"), std::string::npos);
  auto back = parseModelConfig(text, "written");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->scaleFmt, "ue8m0");
  EXPECT_EQ(back->activationScheme, "dynamic");
  EXPECT_EQ(back->expertQuantFormat, "fp4");
}

TEST(ModelConfig, EarlierLayoutStillReads) {
  // What make-model wrote before the release layout: text_config.model_type "deepseek_v41" and
  // quantization_config inside text_config.
  std::string old = kRealConfigJson;
  old = replaceOnce(old, "\"model_type\": \"deepseek_v41_text\",",
                    "\"model_type\": \"deepseek_v41\", \"quantization_config\": {\"quant_method\": \"fp8\", "
                    "\"weight_block_size\": [32, 32]},");
  const size_t q0 = old.find("  \"quantization_config\": {\"quant_method\": \"fp8\", \"activation");
  ASSERT_NE(q0, std::string::npos);
  old.erase(q0, old.find("\"text_config\"") - q0);
  auto cfg = parseModelConfig(old, "old.json");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->quantMethod, "fp8");
  EXPECT_EQ(cfg->weightBlockSize, (std::vector<int>{32, 32}));
  EXPECT_TRUE(cfg->expertQuantFormat.empty());
}

TEST(ModelConfigErrors, AnotherModelIsRefusedByName) {
  const std::string real = kRealConfigJson;
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(real, "\"model_type\": \"deepseek_v41\",",
                                                     "\"model_type\": \"llama\","),
                                         "c.json"),
                        {"c.json", "model_type 'llama'", "deepseek_v41"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(real, "\"deepseek_v41_text\"", "\"qwen2\""), "c.json"),
                        {"c.json", "text_config.model_type 'qwen2'", "deepseek_v41_text"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(real, "[\"DeepseekV41ForCausalLM\"]",
                                                     "[\"LlamaForCausalLM\"]"),
                                         "c.json"),
                        {"c.json", "architectures [LlamaForCausalLM]", "DeepseekV41ForCausalLM"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(real, "[\"DeepseekV41ForCausalLM\"]", "7"), "c.json"),
                        {"c.json", "architectures", "list of strings"}));
}

TEST(ModelConfigErrors, QuantizationValuesTheLoaderCannotRead) {
  const std::string real = kRealConfigJson;
  struct Case {
    const char* from;
    const char* to;
    std::vector<const char*> mention;
  };
  const std::vector<Case> cases = {
      {"\"quant_method\": \"fp8\"", "\"quant_method\": \"int4\"", {"quant_method 'int4'", "fp8"}},
      {"\"activation_scheme\": \"dynamic\"", "\"activation_scheme\": \"static\"", {"activation_scheme 'static'"}},
      {"\"scale_fmt\": \"ue8m0\"", "\"scale_fmt\": \"fp32\"", {"scale_fmt 'fp32'", "ue8m0"}},
      {"\"expert_dtype\": \"fp4\"", "\"expert_dtype\": \"int8\"", {"expert_dtype 'int8'"}},
      {"\"weight_block_size\": [32, 32]", "\"weight_block_size\": [32]", {"weight_block_size", "two positive"}},
      {"\"weight_block_size\": [32, 32]", "\"weight_block_size\": [0, 32]", {"weight_block_size", "two positive"}},
      {"\"weight_block_size\": [32, 32]", "\"weight_block_size\": \"32x32\"", {"weight_block_size", "list"}},
      {"\"quant_method\": \"fp8\"", "\"quant_method\": 8", {"quant_method", "string"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    auto r = parseModelConfig(replaceOnce(real, c.from, c.to), "rel.json");
    ASSERT_FALSE(r.ok()) << "accepted";
    EXPECT_NE(r.error().message.find("rel.json: quantization_config"), std::string::npos) << r.error().message;
    for (const char* m : c.mention) EXPECT_NE(r.error().message.find(m), std::string::npos) << r.error().message;
  }
  // A quantization_config that is not an object.
  const size_t at = real.find("{\"quant_method\"");
  std::string notObject = real;
  notObject.replace(at, real.find('}', at) + 1 - at, "3");
  EXPECT_TRUE(failsWith(parseModelConfig(notObject, "rel.json"), {"quantization_config", "object"}));
}

TEST(ModelConfigErrors, HostileJsonIsAnErrorNotACrash) {
  // 100k nested lists (LLVM's parser would recurse once per level) and a duplicated field.
  const std::string deep = "{\"text_config\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_TRUE(failsWith(parseModelConfig(deep, "deep.json"), {"deep.json", "nested deeper than 64"}));
  const std::string real = kRealConfigJson;
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(real, "\"hidden_size\": 5120,",
                                                     "\"hidden_size\": 5120, \"hidden_size\": 64,"),
                                         "dup.json"),
                        {"dup.json", "duplicate key \"hidden_size\""}));
}

TEST(ModelConfig, DefaultsMatchTheRealConfigAndRoundTrip) {
  ModelConfig d = v41FlashDefaults();
  expectRoles(d, kV41Roles);
  ASSERT_TRUE(finalizeModelConfig(d, "defaults").ok());
  auto back = parseModelConfig(modelConfigToJson(d), "round trip");
  ASSERT_TRUE(back.ok()) << back.error().message;
  expectRoles(*back, kV41Roles);
  EXPECT_EQ(back->engramVocabSize, d.engramVocabSize);
  EXPECT_EQ(back->compressRatios, d.compressRatios);
  EXPECT_EQ(back->ropeScaling.betaFast, 32);
  EXPECT_EQ(back->routedScalingFactor, 1.5);
  EXPECT_EQ(back->dsparkTargetLayerIds, (std::vector<int>{37, 38, 39}));
  EXPECT_EQ(back->dsparkBlockSize, 5);
  EXPECT_EQ(back->dspark.noiseTokenId, 128799);
  EXPECT_EQ(back->dspark.markovRank, 256);
  EXPECT_EQ(back->dspark.nRoutedExperts, 128);
  EXPECT_EQ(back->dspark.numExpertsPerTok, 3);
}

TEST(ModelConfig, FlatLayoutIsAccepted) {
  // Fields at the top level (no text_config) parse the same.
  // text_config is the last member of the release file: its object runs to the second-to-last brace.
  const std::string release = tinyJson();
  const std::string open = "\"text_config\": ";
  const size_t begin = release.find(open) + open.size(), end = release.rfind('}', release.rfind('}') - 1);
  std::string flat = replaceOnce(release.substr(begin, end + 1 - begin), "\"deepseek_v41_text\"", "\"deepseek_v41\"");
  auto cfg = parseModelConfig(flat, "flat");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->hiddenSize, 256);
}

TEST(ModelConfig, TinyPresetRoles) {
  auto cfg = parseModelConfig(tinyJson(), "tiny");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  expectRoles(*cfg, {
                        /*0*/ {0, false, false, -1, -1, -1, false, false, false},
                        /*1*/ {0, false, false, -1, -1, -1, false, false, true},
                        /*2*/ {2, true, true, 2, 2, 2, false, false, false},
                        /*3*/ {2, false, false, 2, 2, -1, false, false, false},
                        /*4*/ {1, true, true, 4, 4, 4, true, false, false},
                        /*5*/ {1, false, false, 4, 4, -1, false, false, false},
                        /*6*/ {1, false, true, 4, 6, 4, false, true, true},
                        /*7*/ {1, false, false, 4, 6, -1, false, false, false},
                    });
  for (int l = 8; l < 11; ++l) EXPECT_TRUE(cfg->role(l).isDraft) << l;
  EXPECT_TRUE(cfg->dsparkConfigured());
  EXPECT_EQ(cfg->draftRoutedExperts(), 8);
  EXPECT_EQ(cfg->draftExpertsPerTok(), 3);
  EXPECT_EQ(cfg->headDim, 512);
  EXPECT_EQ(cfg->engramNumEmbeddings.size(), 2u);
}

TEST(ModelConfig, LoadFromDirectory) {
  testing_util::ScratchDir dir("cfg_load");
  auto missing = loadModelConfig(dir.path());
  EXPECT_TRUE(failsWith(missing, {"config.json", "cannot open"}));
  testing_util::writeText(dir.file("config.json"), tinyJson());
  auto cfg = loadModelConfig(dir.path());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->vocabSize, 1024);
  testing_util::writeText(dir.file("config.json"), "{ \"text_config\": ");
  EXPECT_TRUE(failsWith(loadModelConfig(dir.path()), {"config.json", "invalid JSON"}));
}

TEST(ModelConfigErrors, SyntaxAndTypes) {
  EXPECT_TRUE(failsWith(parseModelConfig("[1, 2]", "c.json"), {"c.json", "object"}));
  EXPECT_TRUE(failsWith(parseModelConfig("{\"model_type\": ", "c.json"), {"c.json", "invalid JSON"}));
  const std::string base = tinyJson();
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"hidden_size\": 256", "\"hidden_size\": \"256\""), "c"),
                        {"hidden_size", "integer"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"hidden_size\": 256", "\"hidden_size\": 256.5"), "c"),
                        {"hidden_size", "integer"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"scoring_func\": \"sqrtsoftplus\"",
                                                     "\"scoring_func\": 3"),
                                         "c"),
                        {"scoring_func", "string"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"norm_topk_prob\": true", "\"norm_topk_prob\": 1"), "c"),
                        {"norm_topk_prob", "true or false"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"routed_scaling_factor\": 1.5",
                                                     "\"routed_scaling_factor\": \"big\""),
                                         "c"),
                        {"routed_scaling_factor", "number"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"kv_source_layer_ids\": [", "\"kv_source_layer_ids\": [\"a\","),
                                         "c"),
                        {"kv_source_layer_ids", "list of integers"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"rope_scaling\": {", "\"rope_scaling\": 5, \"x\": {"), "c"),
                        {"rope_scaling", "object"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"rope_type\": \"yarn\"", "\"rope_type\": \"ntk\""), "c"),
                        {"rope_type", "ntk"}));
  std::string v3 = base;
  for (size_t at; (at = v3.find("deepseek_v41")) != std::string::npos;) v3.replace(at, 12, "deepseek_v3");
  EXPECT_TRUE(failsWith(parseModelConfig(v3, "c"), {"model_type", "deepseek_v3"}));
}

TEST(ModelConfigErrors, MissingRequiredFields) {
  const std::string base = tinyJson();
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "head_dim", "q_lora_rank",
                            "sliding_window", "n_routed_experts", "index_topk", "hc_sinkhorn_iters", "engram_n_heads",
                            "candidate_topk_blocks", "swiglu_limit", "compress_ratios", "kv_source_layer_ids",
                            "engram_num_embeddings", "rms_norm_eps"}) {
    SCOPED_TRACE(field);
    const std::string key = fmt::format("\"{}\":", field);
    auto r = parseModelConfig(replaceOnce(base, key, fmt::format("\"{}_renamed\":", field)), "cfg.json");
    EXPECT_TRUE(failsWith(r, {"cfg.json", fmt::format("'{}'", field).c_str(), "missing"}));
  }
}

TEST(ModelConfigErrors, Structure) {
  struct Case {
    const char* what;
    std::function<void(ModelConfig&)> edit;
    std::vector<const char*> mention;
  };
  const std::vector<Case> cases = {
      {"ratios length", [](ModelConfig& c) { c.compressRatios.pop_back(); },
       {"compress_ratios", "10 entries", "expected 11"}},
      {"ratio value", [](ModelConfig& c) { c.compressRatios[5] = 4; }, {"compress_ratios[5] = 4"}},
      {"kv ratio differs", [](ModelConfig& c) { c.compressRatios[3] = 1; },
       {"layer 3", "kv source layer 2", "ratio is 2"}},
      {"kv out of order", [](ModelConfig& c) { c.kvSourceLayerIds = {4, 2}; }, {"kv_source_layer_ids", "increasing"}},
      {"kv out of range", [](ModelConfig& c) { c.kvSourceLayerIds = {2, 4, 8}; },
       {"kv_source_layer_ids[2] = 8", "out of range"}},
      {"index out of order", [](ModelConfig& c) { c.indexSourceLayerIds = {2, 6, 4}; },
       {"index_source_layer_ids", "increasing"}},
      {"index negative", [](ModelConfig& c) { c.indexSourceLayerIds = {-1, 2, 4, 6}; },
       {"index_source_layer_ids[0] = -1"}},
      {"no kv source below", [](ModelConfig& c) { c.kvSourceLayerIds = {4}; c.indexSourceLayerIds = {4, 6}; },
       {"layer 2", "no kv source at or below"}},
      {"compressing layer below every source",
       [](ModelConfig& c) { c.compressRatios[1] = 2; },
       {"layer 1 has compress_ratios[1] = 2", "no kv source at or below"}},
      {"index source ratio 0", [](ModelConfig& c) { c.indexSourceLayerIds = {0, 2, 4, 6}; },
       {"index source layer 0", "compress_ratios[0] = 0"}},
      {"kv source ratio 0", [](ModelConfig& c) { c.kvSourceLayerIds = {1, 2, 4}; },
       {"kv source layer 1", "= 0"}},
      {"kv source not index source", [](ModelConfig& c) { c.indexSourceLayerIds = {2, 6}; },
       {"kv source layer 4", "index_source_layer_ids"}},
      {"engram lengths", [](ModelConfig& c) { c.engramNumEmbeddings.push_back(5); },
       {"engram_num_embeddings", "3 entries", "engram_layer_ids has 2"}},
      {"engram ids", [](ModelConfig& c) { c.engramLayerIds = {6, 1}; }, {"engram_layer_ids", "increasing"}},
      {"engram vocab size entries", [](ModelConfig& c) { c.engramVocabSize = {512, 640}; },
       {"engram_vocab_size", "2 entries"}},
      {"engram head dim", [](ModelConfig& c) { c.engramHeadDim = 100; }, {"engram_head_dim", "32"}},
      {"engram pad", [](ModelConfig& c) { c.engramPadTokenId = 5000; }, {"engram_pad_token_id 5000"}},
      {"candidate not a source", [](ModelConfig& c) { c.candidateSourceLayerId = 5; },
       {"candidate_source_layer_id 5", "kv source"}},
      {"candidate blocks", [](ModelConfig& c) { c.candidateBlockSize = 0; }, {"candidate_block_size", "> 0"}},
      {"index above candidate with other keys",
       [](ModelConfig& c) {
         c.kvSourceLayerIds = {2, 4, 6};
         c.indexSourceLayerIds = {2, 4, 6};
         c.candidateSourceLayerId = 4;
       },
       {"index source layer 6", "candidate_source_layer_id 4"}},
      {"head dim", [](ModelConfig& c) { c.headDim = 256; }, {"head_dim 256", "fp8_ds_mla"}},
      {"index head dim", [](ModelConfig& c) { c.indexHeadDim = 64; }, {"index_head_dim 64"}},
      {"o groups", [](ModelConfig& c) { c.oGroups = 3; }, {"o_groups (3)", "num_attention_heads (8)"}},
      {"top-k experts", [](ModelConfig& c) { c.numExpertsPerTok = 9; }, {"num_experts_per_tok (9)"}},
      {"hc mult", [](ModelConfig& c) { c.hcMult = 2; }, {"hc_mult"}},
      {"kv heads", [](ModelConfig& c) { c.numKeyValueHeads = 2; }, {"num_key_value_heads"}},
      {"fp4 columns", [](ModelConfig& c) { c.moeIntermediateSize = 100; }, {"moe_intermediate_size (100)", "32"}},
      {"scoring", [](ModelConfig& c) { c.scoringFunc = "softmax"; }, {"scoring_func 'softmax'"}},
      {"dspark", [](ModelConfig& c) { c.dsparkTargetLayerIds = {9}; }, {"dspark_target_layer_ids[0] = 9"}},
      {"dspark repeated tap", [](ModelConfig& c) { c.dsparkTargetLayerIds = {5, 7, 5}; },
       {"dspark_target_layer_ids", "layer 5 twice"}},
      {"dspark no taps", [](ModelConfig& c) { c.dsparkTargetLayerIds.clear(); },
       {"dspark_target_layer_ids", "missing or empty"}},
      {"dspark draft ratio", [](ModelConfig& c) { c.compressRatios[9] = 1; },
       {"compress_ratios[9] = 1", "draft stage"}},
      {"dspark noise id", [](ModelConfig& c) { c.dspark.noiseTokenId = 1024; },
       {"dspark_noise_token_id 1024", "vocabulary"}},
      {"dspark noise id missing", [](ModelConfig& c) { c.dspark.noiseTokenId = -1; },
       {"dspark_noise_token_id -1", "missing"}},
      {"dspark markov rank", [](ModelConfig& c) { c.dspark.markovRank = 0; }, {"dspark_markov_rank", "> 0"}},
      {"dspark experts", [](ModelConfig& c) { c.dspark.numExpertsPerTok = 9; }, {"draft MoE picks 9 of 8"}},
      {"yarn betas", [](ModelConfig& c) { c.ropeScaling.betaFast = 0.5; }, {"beta_fast"}},
      {"window", [](ModelConfig& c) { c.slidingWindow = 0; }, {"sliding_window", "> 0"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = parseModelConfig(tinyJson(c.edit), "tiny.json");
    ASSERT_FALSE(r.ok()) << "accepted";
    EXPECT_NE(r.error().message.find("tiny.json"), std::string::npos) << r.error().message;
    for (const char* m : c.mention) EXPECT_NE(r.error().message.find(m), std::string::npos) << r.error().message;
  }
}

TEST(ModelConfigErrors, DsparkBlockSizeAndTypes) {
  const std::string base = tinyJson();
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"dspark_block_size\": 5", "\"dspark_block_size\": -1"),
                                         "c"),
                        {"dspark_block_size", ">= 0"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"dspark_markov_rank\": 16", "\"dspark_markov_rank\": 1.5"),
                                         "c"),
                        {"dspark_markov_rank", "integer"}));
  EXPECT_TRUE(failsWith(parseModelConfig(replaceOnce(base, "\"dspark_noise_token_id\": 1000",
                                                     "\"dspark_noise_token_id\": \"x\""),
                                         "c"),
                        {"dspark_noise_token_id", "integer"}));
}

TEST(ModelConfigErrors, FinalizeChecksHandBuiltConfigs) {
  ModelConfig c = v41FlashDefaults();
  c.compressRatios.resize(40);  // draft layers' entries missing
  auto st = finalizeModelConfig(c, "hand-built");
  EXPECT_TRUE(failsWith(st, {"hand-built", "compress_ratios has 40 entries", "expected 43"}));
}
