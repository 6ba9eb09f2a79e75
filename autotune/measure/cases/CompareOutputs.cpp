// compareOutputs: the accuracy contract of docs/ops.md per op output, as each op's kernel family
// states it (KernelFamily::accuracy): bit-exact, an error measure within a tolerance, or within
// the per-element bound the op's reference derives from the inputs (referenceErrorBound).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>

#include <stdexcept>

#include "cases/CompareOutputs.h"
#include "deepinfer/Formats.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Reference.h"

namespace deepinfer::testing {
namespace {

using Rule = AccuracyRule::Kind;

struct RuleSpec {
  Rule rule;
  double tol;
  const char* metric;
};

RuleSpec ruleFor(const std::string& op, const std::string& out) {
  const KernelFamily* fam = findKernelFamily(op);
  const AccuracyRule r = fam ? fam->accuracy(out) : AccuracyRule{};
  return {r.kind, r.tol, r.metric};
}

double valueAt(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::BF16:
      return bf16ToFloat(t.ptr<uint16_t>()[i]);
    case DType::F32:
      return t.ptr<float>()[i];
    case DType::I32:
      return t.ptr<int32_t>()[i];
    case DType::I64:
      return double(t.ptr<int64_t>()[i]);
    case DType::U8:
      return t.ptr<uint8_t>()[i];
  }
  return 0;
}

std::string indexString(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += fmt::format("{}{}", d ? ", " : "", idx[d]);
  return s + "]";
}

std::string valueString(const HostTensor& t, int64_t i) {
  if (t.dtype == DType::BF16) return fmt::format("{} (0x{:04X})", valueAt(t, i), t.ptr<uint16_t>()[i]);
  return fmt::format("{}", valueAt(t, i));
}

// Position of bf16 bits on a line where adjacent values differ by one (-0 and +0 both 0).
int64_t bf16Ordinal(uint16_t b) { return (b & 0x8000) ? -int64_t(b & 0x7FFF) : int64_t(b); }

// For gather_kcache: whether out[r, m, :] is one the op writes (else it must keep its poison).
std::string gatherRowNote(const HostTensor& out, int64_t flat, const OpAttrs& attrs,
                          const TensorMap& inputs) {
  auto seq = inputs.find("seq_lens");
  if (out.shape.size() != 3 || seq == inputs.end()) return "";
  const int64_t M = out.shape[1], r = flat / (M * out.shape[2]), m = (flat / out.shape[2]) % M;
  auto gl = inputs.find("gather_lens");
  const int64_t g = gl != inputs.end() ? gl->second.ptr<int32_t>()[r] : seq->second.ptr<int32_t>()[r];
  const int64_t offset = attrs.getInt("offset", 0);
  return (m >= offset && m < offset + g) ? " (a written row)" : " (a row the op must not touch)";
}

// 64-bit hash of an op's attributes and inputs (8 bytes at a time: multi-GB expert weights hash in
// a fraction of a second).
uint64_t contentHash(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  auto mix = [&](uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
  };
  auto mixBytes = [&](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t v;
      std::memcpy(&v, b + i, 8);
      mix(v);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, b + i, n - i);
    mix(tail ^ (uint64_t(n) << 56));
  };
  mixBytes(op.data(), op.size());
  for (const auto& [k, v] : attrs.all()) {
    mixBytes(k.data(), k.size());
    mix(v.isInt ? uint64_t(v.i) : uint64_t(std::llround(v.f * 1e6)));
  }
  for (const auto& [name, t] : inputs) {
    mixBytes(name.data(), name.size());
    for (int64_t d : t.shape) mix(uint64_t(d));
    mixBytes(t.bytes.data(), t.bytes.size());
  }
  return h;
}

// Derived error bounds (weight_gemm, moe_experts) rerun the reference; benchmarks and tune compare
// many variants with one reference, so the last few bounds are kept by content.
Result<HostTensor> cachedBound(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs) {
  static std::mutex mu;
  static std::deque<std::pair<uint64_t, HostTensor>> recent;
  const uint64_t key = contentHash(op, attrs, inputs);
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [k, t] : recent)
      if (k == key) return t;
  }
  auto b = referenceErrorBound(op, attrs, inputs);
  if (!b.ok()) return b;
  std::lock_guard<std::mutex> lock(mu);
  recent.emplace_front(key, *b);
  if (recent.size() > 4) recent.pop_back();
  return b;
}

}  // namespace

CompareReport compareOutputs(const std::string& op, const std::string& outputName, const HostTensor& expected,
                             const HostTensor& actual, const OpAttrs& attrs, const TensorMap& inputs) {
  const RuleSpec spec = ruleFor(op, outputName);
  CompareReport rep;
  rep.metric = spec.metric;
  if (expected.dtype != actual.dtype || expected.shape != actual.shape) {
    rep.maxErr = std::numeric_limits<double>::infinity();
    rep.detail = fmt::format("{} '{}': got {} {}, expected {} {}", op, outputName, dtypeName(actual.dtype),
                             actual.shapeString(), dtypeName(expected.dtype), expected.shapeString());
    return rep;
  }
  const int64_t n = expected.numel();
  const int64_t rowLen = expected.shape.empty() ? 1 : std::max<int64_t>(expected.shape.back(), 1);
  const size_t esize = dtypeSize(expected.dtype);
  const double inf = std::numeric_limits<double>::infinity();

  if (spec.rule == Rule::Exact) {
    if (expected.bytes == actual.bytes) {  // the common case, fast even for a 2 GB cache
      rep.ok = true;
      return rep;
    }
    int64_t mismatches = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(expected.bytes.data() + i * esize, actual.bytes.data() + i * esize, esize) == 0)
        continue;
      if (first < 0) first = i;
      ++mismatches;
    }
    rep.ok = mismatches == 0;
    rep.maxErr = double(mismatches);
    if (!rep.ok) {
      const std::string note = op == "gather_kcache" ? gatherRowNote(expected, first, attrs, inputs) : "";
      rep.detail = fmt::format("{} '{}': {} of {} elements differ; first at {}{}: expected {}, got {}", op,
                               outputName, mismatches, n, indexString(expected.shape, first), note,
                               valueString(expected, first), valueString(actual, first));
    }
    return rep;
  }

  // The per-element bounds of the quantized-weight GEMMs, from the inputs of the compared rows.
  HostTensor bound;
  if (spec.rule == Rule::Bound) {
    auto b = cachedBound(op, attrs, inputs);
    if (!b.ok() || b->shape != expected.shape) {
      rep.maxErr = std::numeric_limits<double>::infinity();
      rep.detail = fmt::format("{} '{}': no error bound: {}", op, outputName,
                               b.ok() ? "its shape differs from the output's" : b.error().message);
      return rep;
    }
    bound = std::move(b).value();
  }
  double worst = 0;
  int64_t worstAt = -1;
  double rowMax = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % rowLen == 0) {  // the row's largest finite magnitude, for the row-relative rules
      rowMax = 0;
      for (int64_t j = i; j < i + rowLen; ++j) {
        const double v = std::fabs(valueAt(expected, j));
        if (std::isfinite(v)) rowMax = std::max(rowMax, v);
      }
    }
    const double e = valueAt(expected, i), a = valueAt(actual, i);
    double err = 0;
    if (std::isnan(e) || std::isnan(a)) {
      err = (std::isnan(e) && std::isnan(a)) ? 0 : inf;
    } else if (std::isinf(e) || std::isinf(a)) {
      err = (e == a) ? 0 : inf;  // +inf lse and -inf scores must match exactly
    } else {
      switch (spec.rule) {
        case Rule::Abs:
        case Rule::Lse:
          err = std::fabs(a - e);
          break;
        case Rule::AttnOut: {
          int exp = 0;
          std::frexp(e, &exp);  // |e| in [2^(exp-1), 2^exp): one bf16 step is 2^(exp-8)
          const double step = e == 0 ? 0 : std::ldexp(1.0, exp - 8);
          err = std::max(0.0, std::fabs(a - e) - step);
          break;
        }
        case Rule::RowRelative:
          err = rowMax > 0 ? std::fabs(a - e) / rowMax : (a == e ? 0 : inf);
          break;
        case Rule::Relative:
          err = e != 0 ? std::fabs(a - e) / std::fabs(e) : (a == 0 ? 0 : inf);
          break;
        case Rule::Bf16Ulps:
          if (std::fabs(a - e) > std::ldexp(rowMax, -14))
            err = double(std::llabs(bf16Ordinal(expected.ptr<uint16_t>()[i]) -
                                    bf16Ordinal(actual.ptr<uint16_t>()[i])));
          break;
        case Rule::Bound: {
          const double b = bound.ptr<float>()[i];
          err = b > 0 ? std::fabs(a - e) / b : (a == e ? 0 : inf);
          break;
        }
        case Rule::Exact:
          break;
      }
    }
    if (worstAt < 0 || err > worst) {
      worst = err;
      worstAt = i;
    }
  }
  rep.maxErr = worst;
  rep.ok = worst <= spec.tol;
  if (worstAt >= 0)
    rep.detail = fmt::format("{} '{}': {} = {:.3g} (limit {:.3g}) at {}: expected {}, got {}", op, outputName,
                             spec.metric, worst, spec.tol, indexString(expected.shape, worstAt),
                             valueString(expected, worstAt), valueString(actual, worstAt));
  return rep;
}

std::vector<std::string> outputNames(const std::string& op) {
  const OpSignature* sig = findOpSignature(op);
  if (!sig) throw std::invalid_argument("outputNames: unknown op '" + op + "'");
  std::vector<std::string> names;
  for (const TensorSig& t : sig->outputs) names.push_back(t.name);
  return names;
}

}  // namespace deepinfer::testing
