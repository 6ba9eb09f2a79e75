#include <fmt/format.h>

#include "Families.h"

namespace deepinfer {

// TEMPORARY while the families land: weak references so a partial tree links.
#define DI_WEAK(fn) const KernelFamily& fn() __attribute__((weak));
DI_WEAK(kvQuantInsertFamily) DI_WEAK(gatherKcacheFamily) DI_WEAK(combineTopkSwaFamily)
DI_WEAK(sparseMlaPrefillFamily) DI_WEAK(sparseMlaDecodeFamily) DI_WEAK(indexerLogitsFamily)
DI_WEAK(topkFamily) DI_WEAK(mhcPreFamily) DI_WEAK(mhcPostFamily) DI_WEAK(mhcFusedPostPreFamily)
DI_WEAK(mhcCollapseFamily)
#define DI_FAM(fn) (&fn ? &fn() : nullptr)

std::vector<const KernelFamily*> allKernelFamilies() {
  static const std::vector<const KernelFamily*> all = [] {
    std::vector<const KernelFamily*> v = {
        DI_FAM(kvQuantInsertFamily),  DI_FAM(gatherKcacheFamily),    DI_FAM(combineTopkSwaFamily),
        DI_FAM(sparseMlaPrefillFamily), DI_FAM(sparseMlaDecodeFamily), DI_FAM(indexerLogitsFamily),
        DI_FAM(topkFamily),           DI_FAM(mhcPreFamily),          DI_FAM(mhcPostFamily),
        DI_FAM(mhcFusedPostPreFamily), DI_FAM(mhcCollapseFamily)};
    std::erase(v, nullptr);
    return v;
  }();
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

Status expectShape(const OpDesc& d, const std::string& name, const std::vector<int64_t>& shape) {
  DI_TRY(expectRank(d, name, shape.size()));
  const auto& got = d.shapes.at(name);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] >= 0 && got[i] != shape[i])
      return Error{fmt::format("{}: tensor '{}' has shape {}, expected {} (dim {} differs)", d.op,
                               name, shapeStr(got), shapeStr(shape), i)};
  return {};
}

}  // namespace deepinfer
