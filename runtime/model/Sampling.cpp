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

namespace {

// Softmax of logits / temperature in fp64 (NaN logits get 0), the tokens by probability
// descending (ties to the lower index) and the nucleus: the shortest prefix with mass >= topP.
struct Nucleus {
  std::vector<double> p;
  std::vector<int32_t> order;
  size_t keep = 0;
  double mass = 0;
  bool ok = false;  // false: nothing finite to sample from
};

Nucleus nucleusOf(const float* logits, int64_t V, const SamplingOptions& o) {
  Nucleus n;
  double mx = -INFINITY;
  for (int64_t i = 0; i < V; ++i)
    if (!std::isnan(logits[i])) mx = std::max(mx, double(logits[i]));
  if (!(mx > -INFINITY)) return n;
  n.p.resize(static_cast<size_t>(V));
  double total = 0;
  for (int64_t i = 0; i < V; ++i) {
    const double l = double(logits[i]);
    n.p[size_t(i)] =
        std::isnan(l) ? 0.0 : (mx == INFINITY ? (l == INFINITY ? 1.0 : 0.0) : std::exp((l - mx) / o.temperature));
    total += n.p[size_t(i)];
  }
  for (double& v : n.p) v /= total;
  n.order.resize(static_cast<size_t>(V));
  std::iota(n.order.begin(), n.order.end(), 0);
  std::sort(n.order.begin(), n.order.end(), [&](int32_t a, int32_t b) {
    return n.p[size_t(a)] > n.p[size_t(b)] || (n.p[size_t(a)] == n.p[size_t(b)] && a < b);
  });
  while (n.keep < n.order.size()) {
    n.mass += n.p[size_t(n.order[n.keep])];
    ++n.keep;
    if (n.mass >= o.topP) break;
  }
  n.ok = true;
  return n;
}

}  // namespace

int32_t sampleToken(const float* logits, int64_t V, const SamplingOptions& o, uint64_t step) {
  if (V <= 1 || o.temperature == 0) return V <= 1 ? 0 : argmaxToken(logits, V);
  const Nucleus n = nucleusOf(logits, V, o);
  if (!n.ok) return argmaxToken(logits, V);  // nothing finite to sample from

  // One draw over the renormalized nucleus.
  const double u = samplingUniform(o.seed, step) * n.mass;
  double acc = 0;
  for (size_t i = 0; i < n.keep; ++i) {
    acc += n.p[size_t(n.order[i])];
    if (u < acc) return n.order[i];
  }
  // Rounding left u at or past the last cumulative sum: the last token with mass.
  for (size_t i = n.keep; i-- > 0;)
    if (n.p[size_t(n.order[i])] > 0) return n.order[i];
  return n.order[0];
}

std::vector<double> samplingDistribution(const float* logits, int64_t V, const SamplingOptions& o) {
  std::vector<double> out(size_t(std::max<int64_t>(V, 1)), 0.0);
  if (V <= 1 || o.temperature == 0) {
    out[size_t(V <= 1 ? 0 : argmaxToken(logits, V))] = 1.0;
    return out;
  }
  const Nucleus n = nucleusOf(logits, V, o);
  if (!n.ok) {
    out[size_t(argmaxToken(logits, V))] = 1.0;
    return out;
  }
  for (size_t i = 0; i < n.keep; ++i) out[size_t(n.order[i])] = n.p[size_t(n.order[i])] / n.mass;
  return out;
}

std::vector<double> softmaxDistribution(const float* logits, int64_t V, double temperature) {
  SamplingOptions o;
  o.temperature = temperature;
  return samplingDistribution(logits, V, o);
}

double keyedUniform(uint64_t seed, uint64_t position, SpecDraw purpose) {
  const uint64_t r = splitmix64(splitmix64(splitmix64(seed) ^ uint64_t(purpose)) ^ position);
  return double(r >> 11) * 0x1.0p-53;
}

int32_t drawFrom(const std::vector<double>& p, double u) {
  double total = 0;
  for (double v : p) total += v;
  const double target = u * total;
  double acc = 0;
  int32_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    acc += p[i];
    last = int32_t(i);
    if (target < acc) return int32_t(i);
  }
  return last < 0 ? 0 : last;  // rounding left the target at the end: the last token with mass
}

}  // namespace deepinfer
