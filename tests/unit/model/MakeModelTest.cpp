// make-model: the tiny checkpoint holds every tensor the forward pass needs with the right
// dtype, format and shape; loading round-trips; output is deterministic and independent of the
// thread count and of sharding; the weight shaping gives the router wide margins.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <filesystem>
#include <set>

#include "ModelTestFiles.h"
#include "deepinfer/Formats.h"
#include "model/Checkpoint.h"
#include "model/EngramHash.h"
#include "model/MakeModel.h"
#include "model/ModelTensors.h"
#include "model/SyntheticWeights.h"

using namespace deepinfer;
using deepinfer::testing_util::failsWith;
using deepinfer::testing_util::ScratchDir;

namespace {

class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("make_tiny");
    MakeModelOptions o;
    o.preset = "tiny";
    o.outDir = dir_->path();
    o.seed = 7;
    o.threads = 2;
    status_ = new Status(makeModel(o));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete status_;
  }
  void SetUp() override { ASSERT_TRUE(status_->ok()) << status_->error().message; }
  static const std::string& dir() { return dir_->path(); }

  static inline ScratchDir* dir_ = nullptr;
  static inline Status* status_ = nullptr;
};

// Stored shape as the checkpoint table of docs/model.md §3 gives it for the tiny sizes
// (hidden 256, 8 heads x 512, q_lora 128, 2 groups x o_lora 128, 4 index heads x 128,
// 8 experts x 128, engram 3 sizes x 4 heads x 256).
struct Expect {
  const char* name;
  const char* dtype;
  std::vector<int64_t> stored;
  std::vector<int64_t> scale;  // empty: no scale tensor
};

const std::vector<Expect> kTinySpotChecks = {
    {"embed.weight", "BF16", {1024, 256}, {}},
    {"head.weight", "BF16", {1024, 256}, {}},
    {"norm.weight", "BF16", {256}, {}},
    {"layers.0.attn_norm.weight", "BF16", {256}, {}},
    {"layers.0.hc_attn_fn", "F32", {24, 1024}, {}},
    {"layers.7.hc_ffn_base", "F32", {24}, {}},
    {"layers.7.hc_ffn_scale", "F32", {3}, {}},
    {"layers.0.attn.wq_a.weight", "F8_E4M3", {128, 256}, {4, 8}},
    {"layers.0.attn.q_norm.weight", "BF16", {128}, {}},
    {"layers.0.attn.wq_b.weight", "F8_E4M3", {4096, 128}, {128, 4}},
    {"layers.3.attn.wkv.weight", "F8_E4M3", {512, 256}, {16, 8}},
    {"layers.3.attn.kv_norm.weight", "BF16", {512}, {}},
    {"layers.5.attn.wo_a.weight", "F8_E4M3", {256, 2048}, {8, 64}},
    {"layers.5.attn.wo_b.weight", "F8_E4M3", {256, 256}, {8, 8}},
    {"layers.5.attn.attn_sink", "F32", {8}, {}},
    {"layers.2.attn.compressor.wkv.weight", "BF16", {512, 256}, {}},
    {"layers.2.attn.compressor.wgate.weight", "BF16", {512, 256}, {}},
    {"layers.2.attn.compressor.norm.weight", "BF16", {512}, {}},
    {"layers.4.attn.compressor.wkv.weight", "BF16", {512, 256}, {}},
    {"layers.4.attn.indexer.wk.weight", "BF16", {128, 512}, {}},
    {"layers.4.attn.indexer.k_norm.weight", "BF16", {128}, {}},
    {"layers.6.attn.indexer.wq_b.weight", "F8_E4M3", {512, 128}, {16, 4}},
    {"layers.6.attn.indexer.weights_proj.weight", "BF16", {4, 256}, {}},
    {"layers.1.ffn.gate.weight", "BF16", {8, 256}, {}},
    {"layers.1.ffn.gate.bias", "F32", {8}, {}},
    {"layers.1.ffn.experts.7.w1.weight", "I8", {128, 128}, {128, 8}},
    {"layers.1.ffn.experts.7.w3.weight", "I8", {128, 128}, {128, 8}},
    {"layers.1.ffn.experts.0.w2.weight", "I8", {256, 64}, {256, 4}},
    {"layers.1.ffn.shared_experts.w1.weight", "F8_E4M3", {128, 256}, {4, 8}},
    {"layers.1.ffn.shared_experts.w2.weight", "F8_E4M3", {256, 128}, {8, 4}},
    {"layers.1.engram.embed.weight", "F8_E4M3", {7842, 256}, {7842, 8}},
    {"layers.6.engram.embed.weight", "F8_E4M3", {8194, 256}, {8194, 8}},
    {"layers.6.engram.wkv.weight", "F8_E4M3", {1280, 3072}, {40, 96}},
    {"layers.6.engram.q_weight", "BF16", {4, 256}, {}},
    {"layers.6.engram.k_weight", "BF16", {4, 256}, {}},
    // DSpark (docs/dspark.md §1): 3 stages, taps 5/6/7, rank 16, the backbone's 8 experts.
    {"mtp.0.main_proj.weight", "F8_E4M3", {256, 768}, {8, 24}},
    {"mtp.0.main_norm.weight", "BF16", {256}, {}},
    {"mtp.0.attn_norm.weight", "BF16", {256}, {}},
    {"mtp.1.hc_attn_fn", "F32", {24, 1024}, {}},
    {"mtp.1.attn.wq_a.weight", "F8_E4M3", {128, 256}, {4, 8}},
    {"mtp.1.attn.wkv.weight", "F8_E4M3", {512, 256}, {16, 8}},
    {"mtp.1.attn.attn_sink", "F32", {8}, {}},
    {"mtp.2.ffn.gate.weight", "BF16", {8, 256}, {}},
    {"mtp.2.ffn.experts.7.w2.weight", "I8", {256, 64}, {256, 4}},
    {"mtp.2.ffn.shared_experts.w1.weight", "F8_E4M3", {128, 256}, {4, 8}},
    {"mtp.2.norm.weight", "BF16", {256}, {}},
    {"mtp.2.markov_head.embed.weight", "BF16", {1024, 16}, {}},
    {"mtp.2.markov_head.head.weight", "BF16", {1024, 16}, {}},
    {"mtp.2.confidence_head.proj.weight", "BF16", {1, 272}, {}},
};

// Tensors the roles rule out: ratio-1 sources have no wgate, only kv sources own keys, only
// index sources own queries, only engram layers own engram weights, draft layers nothing.
const std::vector<const char*> kTinyAbsent = {
    "layers.4.attn.compressor.wgate.weight", "layers.3.attn.compressor.wkv.weight",
    "layers.6.attn.indexer.wk.weight",       "layers.3.attn.indexer.wq_b.weight",
    "layers.7.attn.indexer.weights_proj.weight", "layers.0.engram.embed.weight",
    "layers.8.attn_norm.weight",             "layers.1.ffn.experts.8.w1.weight",
    // Draft stages are window-only, the extras sit on the first / last stage only, and the
    // embedding and head are shared with the backbone.
    "mtp.0.attn.compressor.wkv.weight",      "mtp.1.engram.embed.weight",
    "mtp.1.main_proj.weight",                "mtp.0.markov_head.embed.weight",
    "mtp.1.norm.weight",                     "mtp.0.embed.weight",
    "mtp.2.head.weight",                     "mtp.3.attn_norm.weight",
};

}  // namespace

TEST_F(TinyModel, EveryForwardTensorPresentWithRightFormat) {
  auto cfg = loadModelConfig(dir());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  auto ck = Checkpoint::open(dir());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  for (const Expect& e : kTinySpotChecks) {
    SCOPED_TRACE(e.name);
    auto info = ck->info(e.name);
    ASSERT_TRUE(info.ok()) << info.error().message;
    EXPECT_EQ(info->dtype, e.dtype);
    EXPECT_EQ(info->storedShape, e.stored);
    if (e.scale.empty()) {
      EXPECT_TRUE(info->scaleName.empty());
    } else {
      SafetensorsEntry se;
      ASSERT_TRUE(ck->rawData(info->scaleName, &se).ok());
      EXPECT_EQ(se.dtype, "F8_E8M0");
      EXPECT_EQ(se.shape, e.scale);
    }
  }
  for (const char* n : kTinyAbsent) EXPECT_FALSE(ck->has(n)) << n;

  // The full list: each spec loads at its logical shape, finite, with varied values; nothing
  // else is in the file.
  size_t expectedNames = 0;
  for (const ModelTensorSpec& s : modelTensorSpecs(*cfg)) {
    SCOPED_TRACE(s.name);
    expectedNames += s.hasScale() ? 2 : 1;
    auto info = ck->info(s.name);
    ASSERT_TRUE(info.ok()) << info.error().message;
    EXPECT_EQ(info->format, s.format);
    EXPECT_EQ(info->dtype, s.dtype);
    auto t = ck->loadF32(s.name, s.shape);
    ASSERT_TRUE(t.ok()) << t.error().message;
    const float* v = t->ptr<float>();
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < t->numel(); ++i) {
      ASSERT_TRUE(std::isfinite(v[i])) << i;
      lo = std::min(lo, v[i]);
      hi = std::max(hi, v[i]);
    }
    // k_norm is exactly 1 by design (SyntheticWeights.h); everything else varies.
    if (t->numel() > 1 && s.name.find("indexer.k_norm") == std::string::npos) {
      EXPECT_LT(lo, hi);
    }
    EXPECT_LT(std::max(std::fabs(lo), std::fabs(hi)), 64.f);
  }
  EXPECT_EQ(ck->names().size(), expectedNames);
}

TEST_F(TinyModel, SideFilesLoad) {
  auto cfg = loadModelConfig(dir());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  auto preset = makeModelPresetConfig("tiny");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(cfg->compressRatios, preset->compressRatios);
  EXPECT_EQ(cfg->engramNumEmbeddings, preset->engramNumEmbeddings);
  EXPECT_EQ(cfg->engramVocabSize, preset->engramVocabSize);
  auto hash = loadEngramHash(dir(), *cfg);
  ASSERT_TRUE(hash.ok()) << hash.error().message;
  auto derived = deriveEngramHash(*cfg);
  ASSERT_TRUE(derived.ok());
  EXPECT_EQ(hash->primes, derived->primes);
  EXPECT_EQ(hash->multipliers, derived->multipliers);
  auto map = loadTokenMap(dir(), *cfg);
  ASSERT_TRUE(map.ok()) << map.error().message;
  std::set<int32_t> classes(map->begin(), map->end());
  EXPECT_EQ(classes.size(), size_t(cfg->engramCompressedVocabSize));  // every class used
  // Engram rows gather from the mapped table.
  const int64_t rows[3] = {0, 7841, 4000};
  std::vector<float> out(3 * 256, NAN);
  auto c = Checkpoint::open(dir());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->readEngramRows("layers.1.engram.embed.weight", rows, 3, out.data()).ok());
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
}

TEST(MakeModel, DeterministicAcrossThreadsAndShards) {
  ScratchDir a("make_a"), b("make_b"), c("make_c"), d("make_d");
  MakeModelOptions o;
  o.preset = "tiny";
  o.seed = 3;
  o.outDir = a.path();
  o.threads = 1;
  ASSERT_TRUE(makeModel(o).ok());
  o.outDir = b.path();
  o.threads = 3;
  ASSERT_TRUE(makeModel(o).ok());
  const auto bytesA = testing_util::readBytes(a.file("model.safetensors"));
  EXPECT_GT(bytesA.size(), 1000000u);
  EXPECT_EQ(bytesA, testing_util::readBytes(b.file("model.safetensors")));
  EXPECT_EQ(testing_util::readBytes(a.file("config.json")), testing_util::readBytes(b.file("config.json")));
  EXPECT_EQ(testing_util::readBytes(a.file("token_map.i32")), testing_util::readBytes(b.file("token_map.i32")));

  o.outDir = c.path();
  o.seed = 4;
  ASSERT_TRUE(makeModel(o).ok());
  EXPECT_NE(bytesA, testing_util::readBytes(c.file("model.safetensors")));

  // Shards of at most 4 MB hold the same tensors as the single file.
  o.outDir = d.path();
  o.seed = 3;
  o.maxShardBytes = 4u << 20;
  ASSERT_TRUE(makeModel(o).ok());
  EXPECT_FALSE(std::filesystem::exists(d.file("model.safetensors")));
  EXPECT_TRUE(std::filesystem::exists(d.file("model.safetensors.index.json")));
  auto single = Checkpoint::open(a.path());
  auto sharded = Checkpoint::open(d.path());
  ASSERT_TRUE(single.ok() && sharded.ok()) << (sharded.ok() ? "" : sharded.error().message);
  EXPECT_EQ(single->names(), sharded->names());
  std::set<std::string> files;
  for (const std::string& n : sharded->names()) {
    auto info = sharded->info(n);
    ASSERT_TRUE(info.ok()) << info.error().message;
    files.insert(info->file);
    SafetensorsEntry e1, e2;
    auto p1 = single->rawData(n, &e1);
    auto p2 = sharded->rawData(n, &e2);
    ASSERT_TRUE(p1.ok() && p2.ok());
    ASSERT_EQ(e1.byteSize(), e2.byteSize()) << n;
    ASSERT_EQ(0, std::memcmp(*p1, *p2, e1.byteSize())) << n;
  }
  EXPECT_GE(files.size(), 7u);
}

TEST(MakeModel, RouterShapingGivesWideMargins) {
  // At the embedding (before any layer has written to the residual), every layer's router
  // scores separate the k-th and (k+1)-th expert widely, and tokens use many expert sets.
  auto cfg = makeModelPresetConfig("tiny");
  ASSERT_TRUE(cfg.ok());
  auto synth = SyntheticWeights::create(*cfg, 5);
  ASSERT_TRUE(synth.ok()) << synth.error().message;
  const int64_t C = cfg->hiddenSize, E = cfg->nRoutedExperts;
  std::vector<ModelTensorSpec> specs = modelTensorSpecs(*cfg);
  auto specOf = [&](const std::string& n) {
    for (const auto& s : specs)
      if (s.name == n) return s;
    ADD_FAILURE() << n;
    return specs.front();
  };
  std::vector<float> embed(size_t(cfg->vocabSize * C));
  synth->fillRows(specOf("embed.weight"), 0, cfg->vocabSize, embed.data());
  for (int64_t v = 0; v < cfg->vocabSize; ++v) EXPECT_EQ(embed[size_t(v * C)], synth->shaping().anchor);
  for (int layer = 0; layer < cfg->numHiddenLayers; ++layer) {
    std::vector<float> gate(static_cast<size_t>(E * C)), bias(static_cast<size_t>(E));
    synth->fillRows(specOf(layerTensorName(layer, "ffn.gate.weight")), 0, E, gate.data());
    synth->fillRows(specOf(layerTensorName(layer, "ffn.gate.bias")), 0, 1, bias.data());
    std::set<std::vector<int>> sets;
    double minMargin = 1e9;
    for (int64_t v = 0; v < cfg->vocabSize; ++v) {
      const float* x = &embed[size_t(v * C)];
      double ms = 0;
      for (int64_t d = 0; d < C; ++d) ms += double(x[d]) * x[d];
      const double inv = 1 / std::sqrt(ms / double(C));
      std::vector<std::pair<double, int>> s;
      for (int64_t e = 0; e < E; ++e) {
        double logit = 0;
        for (int64_t d = 0; d < C; ++d) logit += double(gate[size_t(e * C + d)]) * x[d] * inv;
        s.push_back({std::sqrt(std::log1p(std::exp(logit))) + bias[size_t(e)], int(e)});
      }
      std::sort(s.begin(), s.end(), std::greater<>());
      const int k = cfg->numExpertsPerTok;
      minMargin = std::min(minMargin, s[size_t(k - 1)].first - s[size_t(k)].first);
      std::vector<int> chosen;
      for (int i = 0; i < k; ++i) chosen.push_back(s[size_t(i)].second);
      std::sort(chosen.begin(), chosen.end());
      sets.insert(chosen);
      // The chosen experts are the ones the token's routing dims point at in this layer.
      std::vector<int> want;
      for (int dim : synth->tokenRoutingDims(v)) want.push_back(synth->expertOfRoutingDim(layer, dim));
      std::sort(want.begin(), want.end());
      ASSERT_EQ(chosen, want) << "token " << v << " layer " << layer;
    }
    EXPECT_GT(minMargin, 0.3) << "layer " << layer;
    EXPECT_EQ(sets.size(), 28u) << "layer " << layer;  // all C(8, 2) pairs occur
  }
}

TEST_F(TinyModel, IndexKeysQuantizeToOneCodePatternPerLevel) {
  // From the stored weights: u = rmsnorm(embedding) (the residual before any layer), the ratio-1
  // latent and its index key, e4m3-quantized as the index-key cache does. Tokens of one
  // importance level must give identical codes and scale; levels must differ.
  auto cfg = loadModelConfig(dir());
  auto ck = Checkpoint::open(dir());
  ASSERT_TRUE(cfg.ok() && ck.ok());
  auto synth = SyntheticWeights::create(*cfg, 7);
  ASSERT_TRUE(synth.ok());
  const int64_t C = cfg->hiddenSize, D = cfg->headDim, Di = cfg->indexHeadDim;
  auto embed = ck->loadF32("embed.weight", {cfg->vocabSize, C});
  ASSERT_TRUE(embed.ok());
  auto rmsnormBf16 = [](std::vector<float> x, const float* w) {
    double ms = 0;
    for (float v : x) ms += double(v) * v;
    const float inv = float(1 / std::sqrt(ms / double(x.size()) + 1e-20));
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16ToFloat(floatToBf16(x[i] * inv * w[i]));
    return x;
  };
  for (int layer : {2, 4}) {
    SCOPED_TRACE(layer);
    auto attnNorm = ck->loadF32(layerTensorName(layer, "attn_norm.weight"), {C});
    auto wkv = ck->loadF32(layerTensorName(layer, "attn.compressor.wkv.weight"), {D, C});
    auto compNorm = ck->loadF32(layerTensorName(layer, "attn.compressor.norm.weight"), {D});
    auto wk = ck->loadF32(layerTensorName(layer, "attn.indexer.wk.weight"), {Di, D});
    auto kNorm = ck->loadF32(layerTensorName(layer, "attn.indexer.k_norm.weight"), {Di});
    ASSERT_TRUE(attnNorm.ok() && wkv.ok() && compNorm.ok() && wk.ok() && kNorm.ok());
    std::map<int, std::vector<uint8_t>> codesOfLevel;
    std::set<int> levels;
    for (int64_t tok = 0; tok < 120; ++tok) {
      const float* e = embed->ptr<float>() + tok * C;
      const auto u = rmsnormBf16(std::vector<float>(e, e + C), attnNorm->ptr<float>());
      std::vector<float> kv(static_cast<size_t>(D), 0.f), kpre(static_cast<size_t>(Di), 0.f);
      for (int64_t r = 0; r < D; ++r)
        for (int64_t c = 0; c < C; ++c) kv[size_t(r)] += wkv->ptr<float>()[r * C + c] * u[size_t(c)];
      const auto latent = rmsnormBf16(kv, compNorm->ptr<float>());
      for (int64_t r = 0; r < Di; ++r)
        for (int64_t c = 0; c < D; ++c) kpre[size_t(r)] += wk->ptr<float>()[r * D + c] * latent[size_t(c)];
      const auto key = rmsnormBf16(kpre, kNorm->ptr<float>());
      float amax = 1e-4f;
      for (float v : key) amax = std::max(amax, std::fabs(v));
      const uint8_t scale = ue8m0CeilEncode(amax / 448.f);
      std::vector<uint8_t> codes = {scale};
      for (float v : key) codes.push_back(floatToE4m3(v / ue8m0ToFloat(scale)));
      const int level = synth->tokenLevel(tok);
      ASSERT_GE(level, 1);
      ASSERT_LE(level, 3);
      EXPECT_EQ(embed->ptr<float>()[tok * C + synth->levelDim()], float(level));
      levels.insert(level);
      auto [it, fresh] = codesOfLevel.emplace(level, codes);
      if (!fresh) {
        ASSERT_EQ(it->second, codes) << "token " << tok << " level " << level;
      }
    }
    EXPECT_EQ(levels.size(), 3u);
    EXPECT_NE(codesOfLevel[1], codesOfLevel[2]);
    EXPECT_NE(codesOfLevel[2], codesOfLevel[3]);
  }
}

TEST(MakeModel, RejectsBadRequests) {
  ScratchDir dir("make_bad");
  MakeModelOptions o;
  o.outDir = dir.path();
  o.preset = "huge";
  EXPECT_TRUE(failsWith(makeModel(o), {"unknown preset 'huge'", "tiny", "proxy"}));
  o.preset = "tiny";
  o.outDir = "";
  EXPECT_TRUE(failsWith(makeModel(o), {"--out"}));
  o.outDir = dir.path();
  auto cfg = makeModelPresetConfig("tiny");
  ASSERT_TRUE(cfg.ok());
  ModelConfig bad = *cfg;
  bad.kvSourceLayerIds = {4, 2};
  EXPECT_TRUE(failsWith(makeModelFromConfig(bad, o), {"kv_source_layer_ids"}));
  ModelConfig narrow = *cfg;
  narrow.nRoutedExperts = 254;
  EXPECT_TRUE(failsWith(makeModelFromConfig(narrow, o), {"hidden_size 256", "routing"}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("config.json")));
  // An output path below a regular file cannot be created.
  testing_util::writeText(dir.file("plain"), "x");
  o.outDir = dir.file("plain") + "/sub";
  EXPECT_TRUE(failsWith(makeModel(o), {"cannot create"}));
}

TEST(MakeModel, ProxyPresetSizing) {
  auto cfg = makeModelPresetConfig("proxy");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->hiddenSize, 5120);
  EXPECT_EQ(cfg->numAttentionHeads, 64);
  EXPECT_EQ(cfg->qLoraRank, 1280);
  EXPECT_EQ(cfg->oLoraRank, 1024);
  EXPECT_EQ(cfg->oGroups, 8);
  EXPECT_EQ(cfg->indexNHeads, 32);
  EXPECT_EQ(cfg->moeIntermediateSize, 2304);
  double bf16 = 0;
  for (const ModelTensorSpec& s : modelTensorSpecs(*cfg)) {
    double n = 1;
    for (int64_t d : s.shape) n *= double(d);
    bf16 += (s.dtype == "F32" ? 4 : 2) * n;
  }
  // Fits one 141 GB GPU dequantized, the three draft stages included, with at least 40 GB left
  // for caches and workspaces.
  EXPECT_LT(bf16 / 1e9, 141.0 - 40.0);
  EXPECT_EQ(cfg->numNextnPredictLayers, 3);
  EXPECT_EQ(cfg->draftRoutedExperts(), 128);
  EXPECT_EQ(cfg->draftExpertsPerTok(), 3);
  EXPECT_EQ(cfg->dspark.markovRank, 256);
  EXPECT_GT(bf16 / 1e9, 30.0);
  // Every role of the real model appears.
  bool r2Consumer = false, r1Consumer = false, restricted = false, candidate = false, engram = false;
  for (const LayerRole& r : cfg->layers) {
    r2Consumer |= r.ratio == 2 && !r.isKvSource;
    r1Consumer |= r.ratio == 1 && !r.isIndexSource;
    restricted |= r.candidateRestricted;
    candidate |= r.isCandidateSource;
    engram |= r.isEngram;
  }
  EXPECT_TRUE(r2Consumer && r1Consumer && restricted && candidate && engram);
}
