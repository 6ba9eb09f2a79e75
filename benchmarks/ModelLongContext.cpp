#include "ModelLongContext.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/KvFootprint.h"

namespace deepinfer::bench {
namespace {

constexpr int64_t kKvDim = 512;

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
// The runtime's bucketUp (GpuForward.h): the smallest power of two >= n, at least `floor`.
int64_t bucketUp(int64_t n, int64_t floor) {
  int64_t b = std::max<int64_t>(floor, 1);
  while (b < n) b *= 2;
  return b;
}
// Scratch::get allocates a quarter more than asked (fewer regrowths as shapes vary).
int64_t withHeadroom(int64_t bytes) { return bytes + bytes / 4; }
double gb(int64_t b) { return double(b) / 1e9; }

}  // namespace

Result<LongContextMemory> longContextMemory(const ModelConfig& cfg, int64_t context, int64_t chunk, int maxRequests) {
  if (context < 1 || chunk < 1 || maxRequests < 1)
    return Error{fmt::format("long context: context {}, chunk {} and requests {} must be >= 1", context, chunk,
                             maxRequests)};
  if (cfg.maxPositionEmbeddings > 0 && context > cfg.maxPositionEmbeddings)
    return Error{fmt::format("--long-context {} exceeds the model's max_position_embeddings {}", context,
                             cfg.maxPositionEmbeddings)};
  LongContextMemory m;
  m.context = context;
  m.chunk = chunk;
  m.maxRequests = maxRequests;
  const int64_t pageBytes = kvPageBytes();
  const int64_t ringRows = windowRingRows(cfg, chunk);
  const int L = cfg.numHiddenLayers;
  m.windowBytes = int64_t(L) * (ringRows / kKvPageTokens) * pageBytes * maxRequests;
  bool windowOnly = false;
  int64_t maxScored = 0;
  for (int l = 0; l < L; ++l) {
    const LayerRole& r = cfg.role(l);
    windowOnly = windowOnly || r.ratio == 0;
    if (r.isKvSource && r.ratio > 0) {
      m.kvBytesPerToken += kvSourceBytesPerToken(cfg, l);
      // attendPrefill: the source's compressed rows [0, N) then the ring, bf16.
      const int64_t M = bucketUp(context / r.ratio, kKvPageTokens) + ringRows;
      m.workspaceBytes += withHeadroom(M * kKvDim * 2);
    }
    if (r.isIndexSource && r.indexKeyLayer >= 0) {
      // index(): every visible key of the key layer, the width bucketed in pages.
      const int64_t visible = context / cfg.role(r.indexKeyLayer).ratio;
      const int64_t width = bucketUp(std::max(cdiv(visible, kKvPageTokens), cdiv(cfg.indexTopk, kKvPageTokens)), 1);
      maxScored = std::max(maxScored, width * kKvPageTokens);
    }
  }
  if (windowOnly) m.workspaceBytes += withHeadroom(ringRows * kKvDim * 2);
  m.scoresBytes = maxScored > 0 ? withHeadroom(chunk * maxScored * 4) : 0;
  if (cfg.candidateSourceLayerId >= 0 && maxScored > 0 && cfg.candidateBlockSize > 0) {
    const int64_t blocks =
        bucketUp(std::max<int64_t>(cdiv(maxScored, cfg.candidateBlockSize), cfg.candidateTopkBlocks), 1);
    m.blockScoresBytes = withHeadroom(chunk * blocks * 4);
  }
  // GpuModel sizes its caches from the budget: (budget - window rings) / bytes per token tokens,
  // each source's pool rounded up to pages; one chunk of tokens more covers the page rounding.
  m.kvBytes = m.windowBytes + int64_t(m.kvBytesPerToken * double(context + chunk) + 0.999);
  m.reserveBytes = kLongContextReserveBytes;
  return m;
}

std::string describeLongContextMemory(const LongContextMemory& m, int64_t weightBytes, int64_t freeBytes) {
  return fmt::format(
      "weights {:.2f} GB + KV cache {:.2f} GB ({:.0f} bytes per token x {} tokens + {:.2f} GB of window rings) + "
      "prefill scratch at {} tokens {:.2f} GB (indexer scores {:.2f}, attention workspaces {:.2f}, block scores "
      "{:.2f}) + reserve {:.2f} GB = {:.2f} GB of {:.2f} GB free",
      gb(weightBytes), gb(m.kvBytes), m.kvBytesPerToken, m.context + m.chunk, gb(m.windowBytes), m.context,
      gb(m.scratchBytes()), gb(m.scoresBytes), gb(m.workspaceBytes), gb(m.blockScoresBytes), gb(m.reserveBytes),
      gb(weightBytes + m.total()), gb(freeBytes));
}

Status checkLongContextFits(const LongContextMemory& m, int64_t weightBytes, int64_t freeBytes) {
  const int64_t need = weightBytes + m.total();
  if (need <= freeBytes) return {};
  return Error{fmt::format("a {}-token context does not fit on this GPU: {}: short by {:.2f} GB", m.context,
                           describeLongContextMemory(m, weightBytes, freeBytes), gb(need - freeBytes))};
}

}  // namespace deepinfer::bench
