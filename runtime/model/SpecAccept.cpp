#include "SpecAccept.h"

#include <algorithm>

#include "CpuForward.h"

namespace deepinfer {

SpecAcceptance acceptGreedy(const int32_t* argmaxRows, const std::vector<int32_t>& drafts) {
  SpecAcceptance out;
  while (out.accepted < int(drafts.size()) && drafts[size_t(out.accepted)] == argmaxRows[out.accepted]) ++out.accepted;
  out.bonus = argmaxRows[out.accepted];
  return out;
}

SpecAcceptance acceptDrafts(const float* logits, int64_t V, const std::vector<int32_t>& drafts,
                            const std::vector<std::vector<double>>& q, const SamplingOptions& sampling, int64_t n) {
  const int m = int(drafts.size());
  SpecAcceptance out;
  if (sampling.temperature == 0) {
    std::vector<int32_t> best(size_t(m) + 1);
    for (int j = 0; j <= m; ++j) best[size_t(j)] = argmaxToken(logits + int64_t(j) * V, V);
    return acceptGreedy(best.data(), drafts);
  }
  const uint64_t seed = sampling.seed;
  for (int j = 1; j <= m; ++j) {
    const int32_t d = drafts[size_t(j - 1)];
    const std::vector<double> p = samplingDistribution(logits + int64_t(j - 1) * V, V, sampling);
    const bool oneHot = q.size() < size_t(j) || q[size_t(j - 1)].empty();
    const double qd = oneHot ? 1.0 : q[size_t(j - 1)][size_t(d)];
    const double u = keyedUniform(seed, uint64_t(n + j), SpecDraw::Accept);
    if (u * qd < p[size_t(d)]) continue;
    out.accepted = j - 1;
    std::vector<double> residual(p.size());
    double mass = 0;
    for (size_t x = 0; x < p.size(); ++x) {
      const double qx = oneHot ? (int32_t(x) == d ? 1.0 : 0.0) : q[size_t(j - 1)][x];
      residual[x] = std::max(p[x] - qx, 0.0);
      mass += residual[x];
    }
    const double ub = keyedUniform(seed, uint64_t(n + j), SpecDraw::Residual);
    out.bonus = drawFrom(mass > 0 ? residual : p, ub);
    return out;
  }
  out.accepted = m;
  const std::vector<double> p = samplingDistribution(logits + int64_t(m) * V, V, sampling);
  out.bonus = drawFrom(p, keyedUniform(seed, uint64_t(n + m + 1), SpecDraw::Residual));
  return out;
}

}  // namespace deepinfer
