// The sharding arithmetic of docs/parallelism.md: tensor rules by name, even splits on whole
// heads/groups/experts/quantization blocks, stage ranges, mirrored kv sources, bytes per rank.
#include "model/parallel/ShardPlan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model/KvFootprint.h"

namespace deepinfer {
namespace {

constexpr int64_t kQuantBlock = 32;  // fp8 32x32 blocks and fp4/fp8-row 1x32 groups

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t elemBytes(const std::string& dtype) { return dtype == "BF16" ? 2 : dtype == "F32" ? 4 : 1; }

// The stored bytes of `rows` x `cols` of a tensor in its format (scales included).
int64_t storedBytes(const ModelTensorSpec& t, int64_t rows, int64_t cols) {
  switch (t.format) {
    case WeightFormat::Plain: return rows * cols * elemBytes(t.dtype);
    case WeightFormat::Fp8Block:
      return rows * cols + ((rows + kQuantBlock - 1) / kQuantBlock) * ((cols + kQuantBlock - 1) / kQuantBlock);
    case WeightFormat::Fp8Row: return rows * cols + rows * ((cols + kQuantBlock - 1) / kQuantBlock);
    case WeightFormat::Fp4: return rows * (cols / 2) + rows * ((cols + kQuantBlock - 1) / kQuantBlock);
  }
  return 0;
}

int64_t rowsOf(const ModelTensorSpec& t) { return t.shape.empty() ? 1 : t.shape[0]; }
int64_t colsOf(const ModelTensorSpec& t) { return t.shape.size() < 2 ? 1 : t.shape[1]; }

// The rule for a tensor by its name within a block (docs/parallelism.md §2).
ShardRule ruleFor(const std::string& name) {
  if (name.find(".ffn.experts.") != std::string::npos) return ShardRule::Expert;
  if (endsWith(name, "engram.embed.weight")) return ShardRule::Host;
  static const char* rows[] = {"attn.wq_b.weight", "attn.wo_a.weight", "attn.attn_sink",
                               "ffn.shared_experts.w1.weight", "ffn.shared_experts.w3.weight"};
  static const char* cols[] = {"attn.wo_b.weight", "ffn.shared_experts.w2.weight"};
  for (const char* r : rows)
    if (endsWith(name, r)) return ShardRule::Rows;
  for (const char* c : cols)
    if (endsWith(name, c)) return ShardRule::Cols;
  if (name == "embed.weight" || name == "head.weight") return ShardRule::Rows;  // vocabulary rows
  return ShardRule::Replicated;
}

// Expert index of "...ffn.experts.<e>.w1.weight".
int expertIndex(const std::string& name) {
  const size_t p = name.find(".ffn.experts.") + std::string(".ffn.experts.").size();
  return std::stoi(name.substr(p));
}

// Even split of n over tp: [begin, end) of part i (n divisible by tp, checked by the caller).
std::pair<int64_t, int64_t> part(int64_t n, int tp, int i) { return {n / tp * i, n / tp * (i + 1)}; }

}  // namespace

const char* shardRuleName(ShardRule r) {
  switch (r) {
    case ShardRule::Replicated: return "replicated";
    case ShardRule::Rows: return "rows";
    case ShardRule::Cols: return "cols";
    case ShardRule::Expert: return "expert";
    case ShardRule::Host: return "host";
  }
  return "?";
}

Result<ShardPlan> planShards(const ModelConfig& cfg, const ParallelShape& shape, bool withDraft,
                             int64_t maxChunkTokens) {
  const int tp = shape.tp, pp = shape.pp, L = cfg.numHiddenLayers;
  if (tp < 1 || pp < 1) return Error{fmt::format("tp {} and pp {} must be at least 1", tp, pp)};
  if (maxChunkTokens < 1) return Error{fmt::format("max chunk tokens {} < 1", maxChunkTokens)};
  if (pp > L) return Error{fmt::format("pp {}: more stages than the model's {} layers", pp, L)};
  if (int(cfg.layers.size()) != cfg.numLayersTotal())
    return Error{"the config's layer roles are not derived (finalizeModelConfig)"};
  // Tensor splits must land on whole heads, groups, experts and quantization blocks.
  struct Split {
    const char* what;
    int64_t n, quantum;
  };
  const bool draft = withDraft && cfg.dsparkConfigured();
  std::vector<Split> splits = {
      {"num_attention_heads", cfg.numAttentionHeads, 1},
      {"o_groups", cfg.oGroups, 1},
      {"n_routed_experts", cfg.nRoutedExperts, 1},
      {"vocab_size", cfg.vocabSize, 1},
      {"num_attention_heads x head_dim (wq_b rows)", int64_t(cfg.numAttentionHeads) * cfg.headDim, kQuantBlock},
      {"o_groups x o_lora_rank (wo_a rows, wo_b columns)", int64_t(cfg.oGroups) * cfg.oLoraRank, kQuantBlock},
  };
  if (cfg.nSharedExperts > 0)
    splits.push_back({"moe_intermediate_size x n_shared_experts (shared expert rows/columns)",
                      cfg.moeIntermediateSize * cfg.nSharedExperts, kQuantBlock});
  if (draft) splits.push_back({"dspark_n_routed_experts", cfg.draftRoutedExperts(), 1});
  for (const Split& s : splits)
    if (s.n % tp != 0 || (s.n / tp) % s.quantum != 0)
      return Error{fmt::format("tp {} does not split {} = {} into equal parts{}", tp, s.what, s.n,
                               s.quantum > 1 ? fmt::format(" of whole {}-wide quantization blocks", s.quantum) : "")};

  ShardPlan plan;
  plan.shape = shape;
  std::vector<int> per = shape.stageLayers;
  if (per.empty()) {
    for (int s = 0; s < pp; ++s) per.push_back(L / pp + (s < L % pp ? 1 : 0));
  } else {
    if (int(per.size()) != pp)
      return Error{fmt::format("{} stage layer counts given for pp {}", per.size(), pp)};
    int sum = 0;
    for (size_t s = 0; s < per.size(); ++s) {
      if (per[s] < 1) return Error{fmt::format("stage {} has {} layers; every stage needs at least one", s, per[s])};
      sum += per[s];
    }
    if (sum != L) return Error{fmt::format("stage layer counts add up to {}, the model has {} layers", sum, L)};
  }
  plan.shape.stageLayers = per;
  plan.stageFirstLayer = {0};
  for (int s = 0; s < pp; ++s) plan.stageFirstLayer.push_back(plan.stageFirstLayer.back() + per[size_t(s)]);
  auto stageOf = [&](int layer) {
    int s = 0;
    while (layer >= plan.stageFirstLayer[size_t(s) + 1]) ++s;
    return s;
  };
  // The draft reads the residual streams entering its tapped layers, on the last stage.
  if (draft)
    for (int t : cfg.dsparkTargetLayerIds)
      if (stageOf(t) != pp - 1)
        return Error{fmt::format("the DSpark draft runs on the last stage ({}), but its tapped layer {} is on stage "
                                 "{}: give the last stage layers {}..{}",
                                 pp - 1, t, stageOf(t), t, L - 1)};

  // Kv sources a stage reads but another stage computes: their caches are mirrored (the owning
  // stage sends each new compressed entry and index key along with the residual streams).
  std::vector<std::set<int>> mirrored(static_cast<size_t>(pp)), owned(static_cast<size_t>(pp));
  for (int l = 0; l < L; ++l) {
    const LayerRole& r = cfg.role(l);
    const int s = stageOf(l);
    if (r.isKvSource) owned[size_t(s)].insert(l);
    for (int src : {r.kvSourceLayer, r.indexKeyLayer})
      if (src >= 0 && stageOf(src) != s) mirrored[size_t(s)].insert(src);
    if (r.candidateRestricted && cfg.candidateSourceLayerId >= 0 && stageOf(cfg.candidateSourceLayerId) != s)
      mirrored[size_t(s)].insert(cfg.candidateSourceLayerId);
  }

  // Tensors, their stages and rules.
  std::vector<ModelTensorSpec> specs;
  for (ModelTensorSpec& t : modelTensorSpecs(cfg))
    if (draft || t.name.rfind("mtp.", 0) != 0) specs.push_back(std::move(t));
  for (const ModelTensorSpec& t : specs) {
    TensorShard ts;
    ts.name = t.name;
    ts.rule = ruleFor(t.name);
    ts.fullBytes = storedBytes(t, rowsOf(t), colsOf(t));
    if (t.name.rfind("layers.", 0) == 0) ts.stage = stageOf(std::stoi(t.name.substr(7)));
    else if (t.name == "embed.weight") ts.stage = 0;
    else ts.stage = pp - 1;  // norm, head, the draft stages
    (ts.rule == ShardRule::Host ? plan.hostBytes : plan.modelBytes) += ts.fullBytes;
    plan.tensors.push_back(ts);
  }

  // Cache bytes: per context token of a kv source, and window pages per request.
  const int64_t pageBytes = kvPageBytes();
  const int64_t ringPages = windowRingRows(cfg, maxChunkTokens) / kKvPageTokens;
  const int64_t draftRingPages = draftRingRows(cfg) / kKvPageTokens;
  auto sourceBytesPerToken = [&](int src) { return kvSourceBytesPerToken(cfg, src); };

  for (int s = 0; s < pp; ++s) {
    double perToken = 0;
    for (int src : owned[size_t(s)]) perToken += sourceBytesPerToken(src);
    for (int src : mirrored[size_t(s)]) perToken += sourceBytesPerToken(src);
    for (int r = 0; r < tp; ++r) {
      RankPlan rp;
      rp.rank = s * tp + r;
      rp.stage = s;
      rp.tpRank = r;
      rp.layerBegin = plan.stageFirstLayer[size_t(s)];
      rp.layerEnd = plan.stageFirstLayer[size_t(s) + 1];
      rp.embedding = s == 0;
      rp.head = s == pp - 1;
      rp.draft = draft && s == pp - 1;
      std::tie(rp.headBegin, rp.headEnd) = part(cfg.numAttentionHeads, tp, r);
      std::tie(rp.groupBegin, rp.groupEnd) = part(cfg.oGroups, tp, r);
      std::tie(rp.expertBegin, rp.expertEnd) = part(cfg.nRoutedExperts, tp, r);
      if (draft) std::tie(rp.draftExpertBegin, rp.draftExpertEnd) = part(cfg.draftRoutedExperts(), tp, r);
      std::tie(rp.vocabBegin, rp.vocabEnd) = part(cfg.vocabSize, tp, r);
      if (cfg.nSharedExperts > 0)
        std::tie(rp.sharedBegin, rp.sharedEnd) = part(cfg.moeIntermediateSize * cfg.nSharedExperts, tp, r);
      rp.mirroredKvSources.assign(mirrored[size_t(s)].begin(), mirrored[size_t(s)].end());
      rp.kvBytesPerToken = int64_t(std::ceil(perToken));
      rp.windowBytesPerRequest =
          (int64_t(rp.layerEnd - rp.layerBegin) * ringPages + (rp.draft ? cfg.numNextnPredictLayers * draftRingPages : 0)) *
          pageBytes;
      plan.ranks.push_back(rp);
    }
  }
  // Each rank's share of each tensor of its stage.
  for (size_t i = 0; i < specs.size(); ++i) {
    const ModelTensorSpec& t = specs[i];
    const TensorShard* it = &plan.tensors[i];
    for (RankPlan& rp : plan.ranks) {
      if (rp.stage != it->stage) continue;
      int64_t bytes = 0;
      switch (it->rule) {
        case ShardRule::Replicated: bytes = it->fullBytes; break;
        case ShardRule::Host: rp.hostBytes += it->fullBytes; break;
        case ShardRule::Rows: bytes = storedBytes(t, rowsOf(t) / tp, colsOf(t)); break;
        case ShardRule::Cols: bytes = storedBytes(t, rowsOf(t), colsOf(t) / tp); break;
        case ShardRule::Expert: {
          const int e = expertIndex(t.name);
          const bool isDraft = t.name.rfind("mtp.", 0) == 0;
          const int b = isDraft ? rp.draftExpertBegin : rp.expertBegin, end = isDraft ? rp.draftExpertEnd : rp.expertEnd;
          bytes = e >= b && e < end ? it->fullBytes : 0;
          break;
        }
      }
      rp.weightBytes += bytes;
    }
  }
  // Traffic per token: all-reduces of fp32 [C] after attention and after the MoE of each layer
  // (with tp > 1), and the residual streams (bf16 [4, C]) plus mirrored cache entries across
  // each stage boundary.
  const int64_t C = cfg.hiddenSize;
  for (int s = 0; s < pp; ++s) {
    const int64_t layers = per[size_t(s)] + (draft && s == pp - 1 ? cfg.numNextnPredictLayers : 0);
    plan.allReduceBytesPerToken.push_back(tp > 1 ? layers * 2 * C * 4 : 0);
  }
  for (int s = 0; s + 1 < pp; ++s) {
    double bytes = double(cfg.hcMult * C * 2);
    std::set<int> forward;  // sources computed at or before stage s that a later stage mirrors
    for (int later = s + 1; later < pp; ++later)
      for (int src : mirrored[size_t(later)])
        if (stageOf(src) <= s) forward.insert(src);
    for (int src : forward) bytes += sourceBytesPerToken(src);
    plan.sendBytesPerToken.push_back(int64_t(std::ceil(bytes)));
  }
  return plan;
}

Result<KvCapacityReport> kvCapacity(const ShardPlan& plan, int64_t gpuBytes, int maxRequests, double kvFraction) {
  if (gpuBytes <= 0) return Error{fmt::format("GPU memory {} bytes must be positive", gpuBytes)};
  if (maxRequests < 1) return Error{fmt::format("max requests {} < 1", maxRequests)};
  if (!(kvFraction > 0 && kvFraction <= 1)) return Error{fmt::format("kv fraction {} outside (0, 1]", kvFraction)};
  KvCapacityReport rep;
  rep.tokens = INT64_MAX;
  for (const RankPlan& rp : plan.ranks) {
    KvCapacityRow row;
    row.rank = rp.rank;
    row.freeBytes = gpuBytes - rp.weightBytes - rp.windowBytesPerRequest * maxRequests;
    if (row.freeBytes <= 0)
      return Error{fmt::format("rank {} (stage {}, tensor rank {}) needs {:.1f} GB of weights and {:.1f} GB of window "
                               "rings for {} requests: more than its {:.1f} GB",
                               rp.rank, rp.stage, rp.tpRank, double(rp.weightBytes) / 1e9,
                               double(rp.windowBytesPerRequest * maxRequests) / 1e9, maxRequests, double(gpuBytes) / 1e9)};
    row.tokens = rp.kvBytesPerToken > 0 ? int64_t(double(row.freeBytes) * kvFraction / double(rp.kvBytesPerToken)) : INT64_MAX;
    rep.tokens = std::min(rep.tokens, row.tokens);
    rep.perRank.push_back(row);
  }
  for (const RankPlan& rp : plan.ranks) rep.totalKvBytes += rp.kvBytesPerToken * rep.tokens;
  return rep;
}

std::string describeShardPlan(const ShardPlan& plan, const KvCapacityReport* kv) {
  auto gb = [](int64_t b) { return double(b) / 1e9; };
  std::string out = fmt::format("tp {} x pp {} = {} GPUs; stages (layers): ", plan.shape.tp, plan.shape.pp,
                                plan.ranks.size());
  for (int s = 0; s < plan.shape.pp; ++s)
    out += fmt::format("{}{}..{}", s ? ", " : "", plan.stageFirstLayer[size_t(s)], plan.stageFirstLayer[size_t(s) + 1] - 1);
  out += fmt::format("\nmodel {:.2f} GB on devices as stored, {:.2f} GB of engram tables in host memory\n",
                     gb(plan.modelBytes), gb(plan.hostBytes));
  out += fmt::format("{:>4} {:>5} {:>3} {:>8} {:>7} {:>7} {:>9} {:>15} {:>10} {:>11} {:>9}{}\n", "rank", "stage", "tp",
                     "layers", "heads", "groups", "experts", "vocab rows", "weights", "KV B/token", "mirrors",
                     kv ? "  KV tokens" : "");
  for (const RankPlan& rp : plan.ranks) {
    std::string mirrors;
    for (int m : rp.mirroredKvSources) mirrors += (mirrors.empty() ? "" : ",") + std::to_string(m);
    out += fmt::format("{:>4} {:>5} {:>3} {:>8} {:>7} {:>7} {:>9} {:>15} {:>7.2f} GB {:>11} {:>9}", rp.rank, rp.stage,
                       rp.tpRank, fmt::format("{}..{}", rp.layerBegin, rp.layerEnd - 1),
                       fmt::format("{}..{}", rp.headBegin, rp.headEnd - 1),
                       fmt::format("{}..{}", rp.groupBegin, rp.groupEnd - 1),
                       fmt::format("{}..{}", rp.expertBegin, rp.expertEnd - 1),
                       fmt::format("{}..{}", rp.vocabBegin, rp.vocabEnd - 1), gb(rp.weightBytes), rp.kvBytesPerToken,
                       mirrors.empty() ? "-" : mirrors);
    if (kv) out += fmt::format(" {:>10}", kv->perRank[size_t(rp.rank)].tokens);
    out += "\n";
  }
  for (int s = 0; s < plan.shape.pp; ++s)
    out += fmt::format("stage {}: all-reduce {} bytes per token per tensor rank{}\n", s,
                       plan.allReduceBytesPerToken[size_t(s)],
                       s + 1 < plan.shape.pp ? fmt::format("; sends {} bytes per token to stage {}",
                                                           plan.sendBytesPerToken[size_t(s)], s + 1)
                                             : "");
  if (kv)
    out += fmt::format("KV capacity: {} tokens of context (the smallest GPU's), {:.2f} GB of caches over all GPUs\n",
                       kv->tokens, gb(kv->totalKvBytes));
  return out;
}

}  // namespace deepinfer
