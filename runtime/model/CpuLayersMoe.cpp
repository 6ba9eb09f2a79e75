// The MoE sublayer (docs/model.md §7): sqrt-softplus router whose bias only chooses, weights
// from the unbiased scores, clamped SwiGLU experts with the routing weight applied before w2,
// plus the shared expert. Tokens are grouped per expert so each expert's weights are read once.
#include <algorithm>
#include <cmath>

#include "CpuForwardLayers.h"

namespace deepinfer {
namespace {

// h = bf16(weight * silu(min(g, limit)) * clamp(v, -limit, limit)), in place over g.
void swigluInPlace(float* g, const float* v, int64_t n, float limit, float weight) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = std::min(g[i], limit);
    const float vi = std::clamp(v[i], -limit, limit);
    g[i] = roundBf16(weight * (silu(gi) * vi));
  }
}

// y[n, C] = w2(bf16(weight * swiglu(w1 x, w3 x))) for the n rows of x.
void runExpert(const CpuExec& ex, const CpuExpertWeights& e, const float* x, int64_t n,
               const float* weights, float limit, float* y) {
  const int64_t I = e.w1.rows;
  std::vector<float> g(size_t(n * I)), v(size_t(n * I));
  gemm(ex, x, n, e.w1, g.data());
  gemm(ex, x, n, e.w3, v.data());
  for (int64_t r = 0; r < n; ++r)
    swigluInPlace(&g[size_t(r * I)], &v[size_t(r * I)], I, limit, weights ? weights[r] : 1.f);
  gemm(ex, g.data(), n, e.w2, y);
}

}  // namespace

void CpuForwardPass::moe(int layer, const std::vector<float>& u, std::vector<float>& y) {
  moeForward(ex, cfg, w.layers[size_t(layer)].ffn, cfg.nRoutedExperts, cfg.numExpertsPerTok, u, T, y,
             [&](int64_t t, const std::vector<int32_t>& ids) { record(CpuDecisionKind::Router, layer, pos0 + t, ids); });
}

void moeForward(const CpuExec& ex, const ModelConfig& cfg, const CpuMoeWeights& mw, int64_t E, int64_t k,
                const std::vector<float>& u, int64_t T, std::vector<float>& y,
                const std::function<void(int64_t, const std::vector<int32_t>&)>& onRoute) {
  const int64_t C = cfg.hiddenSize;
  const float limit = float(cfg.swigluLimit);

  // Router: s = sqrt(softplus(u gate^T)); ids = top-k of s + bias; weights from s.
  std::vector<float> s(size_t(T * E));
  gemm(ex, u.data(), T, mw.gate, s.data());
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(T));
  std::vector<std::vector<float>> wts(static_cast<size_t>(T));
  std::vector<float> biased(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    float* st_ = &s[size_t(t * E)];
    for (int64_t e = 0; e < E; ++e) {
      st_[e] = std::sqrt(softplus(st_[e]));
      biased[size_t(e)] = st_[e] + mw.gateBias[size_t(e)];
    }
    ids[size_t(t)] = topkAscending(biased.data(), E, k);
    double sumD = 0;
    float sumF = 0;
    for (int32_t e : ids[size_t(t)]) {
      sumD += st_[e];
      sumF += st_[e];
    }
    const float denom = cfg.normTopkProb ? (ex.fp64 ? float(sumD + 1e-20) : sumF + 1e-20f) : 1.f;
    for (int32_t e : ids[size_t(t)])
      wts[size_t(t)].push_back(st_[e] / denom * float(cfg.routedScalingFactor));
    if (onRoute) onRoute(t, ids[size_t(t)]);
  }

  // Expert outputs per (token, rank); summed afterwards in rank order so the result does not
  // depend on how tokens were grouped.
  std::vector<float> routed(size_t(T * k * C), 0.f);
  std::vector<float> xs, ws, ys;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<std::pair<int64_t, int64_t>> members;  // (token, rank)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < int64_t(ids[size_t(t)].size()); ++r)
        if (ids[size_t(t)][size_t(r)] == e) members.emplace_back(t, r);
    if (members.empty()) continue;
    const int64_t n = int64_t(members.size());
    xs.resize(size_t(n * C));
    ws.resize(size_t(n));
    ys.resize(size_t(n * C));
    for (int64_t i = 0; i < n; ++i) {
      const auto [t, r] = members[size_t(i)];
      std::copy_n(&u[size_t(t * C)], C, &xs[size_t(i * C)]);
      ws[size_t(i)] = wts[size_t(t)][size_t(r)];
    }
    runExpert(ex, mw.experts[size_t(e)], xs.data(), n, ws.data(), limit, ys.data());
    for (int64_t i = 0; i < n; ++i) {
      const auto [t, r] = members[size_t(i)];
      std::copy_n(&ys[size_t(i * C)], C, &routed[size_t((t * k + r) * C)]);
    }
  }

  y.assign(size_t(T * C), 0.f);
  if (cfg.nSharedExperts > 0) runExpert(ex, mw.shared, u.data(), T, nullptr, limit, y.data());
  for (int64_t t = 0; t < T; ++t) {
    float* yt = &y[size_t(t * C)];
    const int64_t used = int64_t(ids[size_t(t)].size());
    for (int64_t d = 0; d < C; ++d) {
      if (ex.fp64) {
        double acc = yt[d];
        for (int64_t r = 0; r < used; ++r) acc += routed[size_t((t * k + r) * C + d)];
        yt[d] = roundBf16(float(acc));
      } else {
        float acc = yt[d];
        for (int64_t r = 0; r < used; ++r) acc += routed[size_t((t * k + r) * C + d)];
        yt[d] = roundBf16(acc);
      }
    }
  }
}

}  // namespace deepinfer
