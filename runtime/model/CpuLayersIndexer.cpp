// The lightning indexer of index source layers (docs/model.md §6, docs/ops.md §7): quantized index
// queries score the visible index keys, the top-k entries become the layer's selection
// (shared with its consumer layers), the candidate source publishes the blocks it keeps, and
// restricted layers score only entries inside those blocks.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "CpuForwardLayers.h"

namespace deepinfer {
namespace {

// What one token's indexer step decided.
struct TokenSelection {
  std::vector<int32_t> entries;  // selected compressed entries, ascending
  std::vector<int32_t> blocks;   // candidate source only: kept blocks, ascending
  bool scored = false, dropped = false, boundaryTie = false, masked = false, blocksDropped = false;
};

// Blocks of `blockSize` entries ranked by their best entry; the newest visible entry's block is
// always kept; blocks with no finite score are never kept.
std::vector<int32_t> candidateBlocksOf(const std::vector<float>& scores, int64_t visible,
                                       int64_t blockSize, int64_t keep) {
  const int64_t blocks = (visible + blockSize - 1) / blockSize;
  std::vector<float> blockScore(static_cast<size_t>(blocks), -INFINITY);
  for (int64_t j = 0; j < visible; ++j)
    blockScore[size_t(j / blockSize)] = std::max(blockScore[size_t(j / blockSize)], scores[size_t(j)]);
  blockScore[size_t((visible - 1) / blockSize)] = INFINITY;  // pinned
  return topkAscending(blockScore.data(), blocks, std::min(keep, blocks));
}

// Whether the weakest kept entry ties exactly with the strongest dropped one. Both lists are
// ascending and `kept` is a subset of `candidates`.
bool boundaryTie(const std::vector<float>& scores, const std::vector<int32_t>& candidates,
                 const std::vector<int32_t>& kept) {
  float weakestKept = INFINITY, strongestDropped = -INFINITY;
  size_t k = 0;
  for (int32_t j : candidates) {
    if (k < kept.size() && kept[k] == j) {
      weakestKept = std::min(weakestKept, scores[size_t(j)]);
      ++k;
    } else {
      strongestDropped = std::max(strongestDropped, scores[size_t(j)]);
    }
  }
  return weakestKept == strongestDropped;
}

}  // namespace

void CpuForwardPass::index(int layer, const std::vector<float>& u, const std::vector<float>& qr) {
  const LayerRole& role = cfg.role(layer);
  const CpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const RopeTable& rope = m.rope_[size_t(layer)];
  const IndexKeyCache& keys = st.sources_[size_t(role.indexKeyLayer)].indexKeys;
  const int ratio = cfg.role(role.indexKeyLayer).ratio;
  const int64_t Hi = cfg.indexNHeads, Di = cfg.indexHeadDim, R = cfg.qkRopeHeadDim;
  const int64_t K = cfg.indexTopk, blockSize = cfg.candidateBlockSize;
  const bool isCandSource = role.isCandidateSource;
  const bool restricted = role.candidateRestricted;

  // Queries: rope(wq_b qr) per head, bf16, then e4m3 with a power-of-two scale per (token,
  // head) that is folded into the head weight (docs/model.md §9).
  std::vector<float> qi(size_t(T * Hi * Di)), wts(size_t(T * Hi));
  gemm(ex, qr.data(), T, aw.idxWqB, qi.data());
  gemm(ex, u.data(), T, aw.idxWeightsProj, wts.data());
  const float headScale = float(1.0 / std::sqrt(double(Di)) / std::sqrt(double(Hi)));
  parallelFor(T * Hi, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* v = &qi[size_t(i * Di)];
      rope.rotate(v + Di - R, pos0 + i / Hi, false);
      roundBf16InPlace(v, Di);
      const float qScale = quantizeIndexQuery(v, Di, v);
      wts[size_t(i)] = wts[size_t(i)] * headScale * qScale;
    }
  });

  std::vector<TokenSelection> out(static_cast<size_t>(T));
  parallelFor(T, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    for (int64_t t = b; t < e; ++t) {
      TokenSelection& s = out[size_t(t)];
      const int64_t visible = std::min<int64_t>((pos0 + t + 1) / ratio, keys.size());
      if (visible <= 0) continue;
      std::vector<int32_t> candidates;
      if (restricted) {
        for (int32_t blk : candidateBlocks[size_t(t)])
          for (int64_t j = int64_t(blk) * blockSize; j < std::min(visible, (blk + 1) * blockSize); ++j)
            candidates.push_back(int32_t(j));
        s.masked = int64_t(candidates.size()) < visible;
      } else {
        candidates.resize(size_t(visible));
        std::iota(candidates.begin(), candidates.end(), 0);
      }
      const int64_t blocks = isCandSource ? (visible + blockSize - 1) / blockSize : 0;
      const bool blocksNeedScores = isCandSource && blocks > cfg.candidateTopkBlocks;
      s.scored = int64_t(candidates.size()) > K || blocksNeedScores;
      if (s.scored) {
        // score[j] = sum_h w[h] * relu(q[h] . k_j) * k_scale[j]; the candidate source scores
        // every visible entry (its blocks rank on them), others only their candidates.
        scores.assign(size_t(visible), -INFINITY);
        auto scoreOf = [&](int64_t j) {
          const float* kv = keys.values(j);
          const float* q = &qi[size_t(t * Hi * Di)];
          const float* wt = &wts[size_t(t * Hi)];
          if (ex.fp64) {
            double acc = 0;
            for (int64_t h = 0; h < Hi; ++h)
              acc += double(wt[h]) * std::max(dotF64(q + h * Di, kv, Di), 0.0);
            return float(acc * double(keys.scale(j)));
          }
          float acc = 0;
          for (int64_t h = 0; h < Hi; ++h) acc += wt[h] * std::max(dotF32(q + h * Di, kv, Di), 0.f);
          return acc * keys.scale(j);
        };
        if (isCandSource)
          for (int64_t j = 0; j < visible; ++j) scores[size_t(j)] = scoreOf(j);
        else
          for (int32_t j : candidates) scores[size_t(j)] = scoreOf(j);
      }
      if (int64_t(candidates.size()) > K) {
        s.entries = topkAscending(scores.data(), candidates, K);
        s.dropped = true;
        s.boundaryTie = boundaryTie(scores, candidates, s.entries);
      } else {
        s.entries = candidates;
      }
      if (isCandSource) {
        if (blocksNeedScores) {
          s.blocks = candidateBlocksOf(scores, visible, blockSize, cfg.candidateTopkBlocks);
          s.blocksDropped = true;
        } else {
          s.blocks.resize(size_t(blocks));
          std::iota(s.blocks.begin(), s.blocks.end(), 0);
        }
      }
    }
  });

  auto& layerSel = selections[size_t(layer)];
  layerSel.assign(size_t(T), {});
  if (isCandSource) candidateBlocks.assign(size_t(T), {});
  for (int64_t t = 0; t < T; ++t) {
    TokenSelection& s = out[size_t(t)];
    st.counters_.indexerScored += s.scored;
    st.counters_.indexerDrops += s.dropped;
    st.counters_.indexerBoundaryTies += s.boundaryTie;
    st.counters_.candidateEntriesMasked += s.masked;
    st.counters_.candidateBlocksDropped += s.blocksDropped;
    record(CpuDecisionKind::IndexTopk, layer, pos0 + t, s.entries);
    if (isCandSource) {
      record(CpuDecisionKind::CandidateBlocks, layer, pos0 + t, s.blocks);
      candidateBlocks[size_t(t)] = std::move(s.blocks);
    }
    layerSel[size_t(t)] = std::move(s.entries);
  }
}

}  // namespace deepinfer
