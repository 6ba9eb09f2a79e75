#include "Sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "CpuForward.h"

namespace deepinfer {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Status validateSampling(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    return Error{fmt::format("sampling: temperature {} must be a finite value >= 0 (0 = greedy)", o.temperature)};
  if (!(o.topP > 0 && o.topP <= 1))
    return Error{fmt::format("sampling: top-p {} must be in (0, 1]", o.topP)};
  return {};
}

Status checkFiniteLogits(const float* logits, int64_t V, const std::string& where) {
  int64_t first = -1, bad = 0;
  for (int64_t i = 0; i < V; ++i)
    if (!std::isfinite(logits[i])) {
      if (first < 0) first = i;
      ++bad;
    }
  if (bad == 0) return {};
  return Error{fmt::format("{}: {} of {} logits are not finite (first: {} at token id {}); generation stopped", where,
                           bad, V, std::isnan(logits[first]) ? "NaN" : "infinity", first)};
}

double samplingUniform(uint64_t seed, uint64_t step) {
  const uint64_t r = splitmix64(splitmix64(seed) ^ step);
  return double(r >> 11) * 0x1.0p-53;
}

int32_t sampleToken(const float* logits, int64_t V, const SamplingOptions& o, uint64_t step) {
  if (V <= 1 || o.temperature == 0) return V <= 1 ? 0 : argmaxToken(logits, V);

  // Softmax of logits / temperature in fp64, shifted by the maximum (NaN logits excluded).
  double mx = -INFINITY;
  for (int64_t i = 0; i < V; ++i)
    if (!std::isnan(logits[i])) mx = std::max(mx, double(logits[i]));
  if (!(mx > -INFINITY)) return argmaxToken(logits, V);  // nothing finite to sample from
  std::vector<double> p(static_cast<size_t>(V));
  double total = 0;
  for (int64_t i = 0; i < V; ++i) {
    const double l = double(logits[i]);
    p[size_t(i)] = std::isnan(l) ? 0.0 : (mx == INFINITY ? (l == INFINITY ? 1.0 : 0.0) : std::exp((l - mx) / o.temperature));
    total += p[size_t(i)];
  }
  for (double& v : p) v /= total;

  // Most probable first, ties to the lower index; the nucleus is the shortest prefix with mass
  // >= topP (at least one token).
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
  });
  double mass = 0;
  size_t keep = 0;
  while (keep < order.size()) {
    mass += p[size_t(order[keep])];
    ++keep;
    if (mass >= o.topP) break;
  }

  // One draw over the renormalized nucleus.
  const double u = samplingUniform(o.seed, step) * mass;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[size_t(order[i])];
    if (u < acc) return order[i];
  }
  // Rounding left u at or past the last cumulative sum: the last token with mass.
  for (size_t i = keep; i-- > 0;)
    if (p[size_t(order[i])] > 0) return order[i];
  return order[0];
}

}  // namespace deepinfer
