#include "deepinfer/ShapeBuckets.h"

#include <fmt/format.h>

#include <limits>

#include "deepinfer/OpSignature.h"

namespace deepinfer {

std::string ShapeBucket::label() const {
  const std::string prefix = cls.empty() ? "" : cls + " ";
  if (hi == std::numeric_limits<int64_t>::max()) return fmt::format("{}{}>={}", prefix, var, lo);
  if (lo == hi) return fmt::format("{}{}={}", prefix, var, lo);
  return fmt::format("{}{}={}..{}", prefix, var, lo, hi);
}

std::optional<BucketAxis> bucketAxis(const std::string& op) {
  const KernelFamily* fam = findKernelFamily(op);
  return fam ? fam->bucketAxis() : std::nullopt;
}

std::vector<ShapeBucket> shapeBuckets(const std::string& op) {
  std::vector<ShapeBucket> out;
  auto axis = bucketAxis(op);
  if (!axis) return out;
  const auto& e = axis->edges;
  for (size_t i = 0; i < e.size(); ++i) {
    ShapeBucket b;
    b.var = axis->var;
    b.lo = i == 0 ? 1 : e[i - 1] + 1;
    b.hi = i + 1 == e.size() && e.size() > 1 ? std::numeric_limits<int64_t>::max() : e[i];
    b.representative = e[i];
    out.push_back(b);
  }
  return out;
}

std::optional<ShapeBucket> bucketOf(const std::string& op, int64_t value) {
  for (const ShapeBucket& b : shapeBuckets(op))
    if (value <= b.hi) return b;
  return std::nullopt;
}

std::optional<int64_t> bucketValue(const OpDesc& d) {
  const KernelFamily* fam = findKernelFamily(d.op);
  return fam ? fam->bucketValue(d) : std::nullopt;
}

std::optional<ShapeBucket> bucketFor(const OpDesc& d) {
  auto v = bucketValue(d);
  if (!v) return std::nullopt;
  auto b = bucketOf(d.op, *v);
  if (b) b->cls = bucketClass(d);
  return b;
}

std::string bucketClass(const OpDesc& d) {
  const KernelFamily* fam = findKernelFamily(d.op);
  return fam ? fam->bucketClass(d) : "";
}

std::string opDtypes(const std::string& op) {
  const OpSignature* sig = findOpSignature(op);
  if (!sig) return "";
  std::string s;
  for (const TensorSig& t : sig->inputs) s += (s.empty() ? "" : ",") + std::string(dtypeName(t.dtype));
  return s;
}

}  // namespace deepinfer
