#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>

#include "Families.h"

namespace deepinfer {

std::vector<const KernelFamily*> allKernelFamilies() {
  static const std::vector<const KernelFamily*> all = {
      &kvQuantInsertFamily(),    &gatherKcacheFamily(),    &combineTopkSwaFamily(),
      &sparseMlaPrefillFamily(), &sparseMlaDecodeFamily(), &indexerLogitsFamily(),
      &topkFamily(),             &mhcPreFamily(),          &mhcPostFamily(),
      &mhcFusedPostPreFamily(),  &mhcCollapseFamily(),     &weightGemmFamily(),
      &moeExpertsFamily(),       &gatherKcacheCombineFamily(),
  };
  return all;
}

const KernelFamily* findKernelFamily(const std::string& op) {
  for (const KernelFamily* f : allKernelFamilies())
    if (f->opName() == op) return f;
  return nullptr;
}

std::string configToString(const KernelConfig& c) {
  std::string s;
  for (const auto& [k, v] : c) s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v);
  return s;
}

static std::string shapeStr(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += fmt::format("{}{}", i ? ", " : "", s[i]);
  return r + "]";
}

Status expectRank(const OpDesc& d, const std::string& name, size_t rank) {
  auto it = d.shapes.find(name);
  if (it == d.shapes.end()) return Error{fmt::format("{}: missing tensor '{}'", d.op, name)};
  if (it->second.size() != rank)
    return Error{fmt::format("{}: tensor '{}' has shape {} (rank {}), expected rank {}", d.op, name,
                             shapeStr(it->second), it->second.size(), rank)};
  return {};
}

std::optional<int64_t> dimOf(const OpDesc& d, const std::string& name, size_t i) {
  auto it = d.shapes.find(name);
  if (it == d.shapes.end() || it->second.size() <= i) return std::nullopt;
  return it->second[i];
}

std::optional<int64_t> intAttrOf(const OpDesc& d, const std::string& name) {
  if (!d.attrs.has(name)) return std::nullopt;
  return d.attrs.getInt(name, 0);
}

Status expectShape(const OpDesc& d, const std::string& name, const std::vector<int64_t>& shape) {
  DI_TRY(expectRank(d, name, shape.size()));
  const auto& got = d.shapes.at(name);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] >= 0 && got[i] != shape[i])
      return Error{fmt::format("{}: tensor '{}' has shape {}, expected {} (dim {} differs)", d.op,
                               name, shapeStr(got), shapeStr(shape), i)};
  return {};
}

Status KernelFamily::checkStrides(const OpDesc& d, const std::string& name,
                                  const std::vector<int64_t>& strides) const {
  return Error{fmt::format("{}: the kernel reads and writes '{}' densely; a view with strides {} needs a "
                           "contiguous copy first",
                           d.op, name, shapeStr(strides))};
}
}  // namespace deepinfer
