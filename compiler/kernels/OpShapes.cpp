#include "deepinfer/OpShapes.h"

#include <fmt/format.h>

#include "deepinfer/OpSignature.h"

namespace deepinfer {

std::vector<ShapeParam> opShapeParams(const std::string& op) {
  const KernelFamily* fam = findKernelFamily(op);
  return fam ? fam->shapeParams() : std::vector<ShapeParam>{};
}

Result<OpDesc> makeOpDesc(const std::string& op, const std::map<std::string, int64_t>& given,
                          const OpAttrs& attrOverrides) {
  const OpSignature* sig = findOpSignature(op);
  const KernelFamily* fam = findKernelFamily(op);
  if (!sig || !fam) {
    std::string names;
    for (const auto& s : opSignatures()) names += (names.empty() ? "" : ", ") + s.op;
    return Error{fmt::format("unknown op '{}' (ops: {})", op, names)};
  }
  ShapeParams p;
  for (const auto& sp : fam->shapeParams()) p[sp.name] = sp.dflt;
  for (const auto& [k, v] : given) {
    if (!p.count(k)) {
      std::string known;
      for (const auto& sp : fam->shapeParams()) known += (known.empty() ? "" : ", ") + sp.name;
      return Error{fmt::format("{}: unknown shape parameter '{}' (known: {})", op, k, known)};
    }
    if (v < 0) return Error{fmt::format("{}: shape parameter {} = {} is negative", op, k, v)};
    p[k] = v;
  }
  OpDesc d = fam->describe(p);
  OpAttrs a = d.attrs;
  for (const auto& [k, v] : attrOverrides.all()) {
    if (v.isInt) a.setInt(k, v.i);
    else a.setFloat(k, v.f);
  }
  auto full = completeAttrs(*sig, a);
  if (!full.ok()) return full.error();
  d.attrs = *full;
  return d;
}

}  // namespace deepinfer
