// The per-rank, per-GPU and total report of a model's stages (GpuStagesReport.h).
#include "model/gpu/GpuStagesReport.h"

#include <algorithm>
#include <fmt/format.h>

namespace deepinfer {
namespace {

double mib(int64_t bytes) { return double(bytes) / (1 << 20); }

}  // namespace

std::vector<GpuDeviceShare> gpuShares(const std::vector<GpuStageReport>& ranks) {
  std::vector<GpuDeviceShare> out;
  for (const GpuStageReport& r : ranks) {
    auto it = std::find_if(out.begin(), out.end(), [&](const GpuDeviceShare& s) { return s.gpu == r.gpu; });
    if (it == out.end()) {
      out.push_back({r.gpu, 0, 0, 0, r.capacity.tokens});
      it = out.end() - 1;
    }
    ++it->ranks;
    it->weightBytes += r.weightBytes;
    it->kvBytes += r.capacity.totalBytes;
    it->tokens = std::min(it->tokens, r.capacity.tokens);
  }
  return out;
}

std::string describeGpuStages(const std::vector<GpuStageReport>& ranks) {
  if (ranks.empty()) return {};
  int stages = 0, tp = 0;
  for (const GpuStageReport& r : ranks) {
    stages = std::max(stages, r.stage + 1);
    tp = std::max(tp, r.tpRank + 1);
  }
  if (ranks.size() < 2 && ranks[0].collective.empty()) return {};
  std::string out = tp > 1 ? fmt::format("; {} pipeline stage{} x {} tensor ranks", stages, stages > 1 ? "s" : "", tp)
                           : fmt::format("; {} pipeline stage{}", stages, stages > 1 ? "s" : "");
  int64_t tokens = ranks[0].capacity.tokens, weights = 0, kv = 0;
  for (const GpuStageReport& s : ranks) {
    std::string mirrors;
    for (int L : s.mirroredSources) mirrors += (mirrors.empty() ? "" : ",") + std::to_string(L);
    out += fmt::format("; stage {}{}: layers {}..{} on GPU {}, weights {:.1f} MiB, KV capacity {} tokens "
                       "({} bytes/token{})",
                       s.stage, tp > 1 ? fmt::format(" rank {}", s.tpRank) : "", s.layerBegin, s.layerEnd - 1, s.gpu,
                       mib(s.weightBytes), s.capacity.tokens, s.capacity.bytesPerToken,
                       mirrors.empty() ? "" : ", mirrors kv source " + mirrors);
    tokens = std::min(tokens, s.capacity.tokens);
    weights += s.weightBytes;
    kv += s.capacity.totalBytes;
  }
  const std::vector<GpuDeviceShare> gpus = gpuShares(ranks);
  for (const GpuDeviceShare& g : gpus)
    out += fmt::format("; GPU {}: {} rank{}, weights {:.1f} MiB, KV {:.1f} MiB, {} tokens", g.gpu, g.ranks,
                       g.ranks > 1 ? "s" : "", mib(g.weightBytes), mib(g.kvBytes), g.tokens);
  out += fmt::format("; in total ({} GPU{}) weights {:.1f} MiB, KV {:.1f} MiB, KV capacity {} tokens (the smallest "
                     "rank's)",
                     gpus.size(), gpus.size() > 1 ? "s" : "", mib(weights), mib(kv), tokens);
  return out;
}

}  // namespace deepinfer
