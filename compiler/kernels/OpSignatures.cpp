// The op signature table, generated from the dialect's ODS (see OpSignature.h).
#include "deepinfer/OpSignature.h"

#include <fmt/format.h>

namespace deepinfer {

const std::vector<OpSignature>& opSignatures() {
  static const std::vector<OpSignature> sigs = {
#include "di/IR/DiOpSignatures.inc"
  };
  return sigs;
}

const OpSignature* findOpSignature(const std::string& op) {
  for (const auto& s : opSignatures())
    if (s.op == op) return &s;
  return nullptr;
}

const TensorSig* OpSignature::findInput(const std::string& name) const {
  for (const auto& t : inputs)
    if (t.name == name) return &t;
  return nullptr;
}

const AttrSig* OpSignature::findAttr(const std::string& name) const {
  for (const auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

Result<OpAttrs> completeAttrs(const OpSignature& sig, const OpAttrs& given) {
  OpAttrs a = given;
  for (const auto& [name, v] : given.all()) {
    const AttrSig* as = sig.findAttr(name);
    if (!as || !as->isNumber()) return Error{fmt::format("{}: unknown attribute '{}'", sig.op, name)};
  }
  for (const auto& as : sig.attrs) {
    if (!as.isNumber() || a.has(as.name)) continue;
    if (as.required) return Error{fmt::format("{}: missing required attribute '{}'", sig.op, as.name)};
    if (as.kind == AttrKind::Int) a.setInt(as.name, int64_t(as.dflt));
    else a.setFloat(as.name, as.dflt);
  }
  return a;
}

}  // namespace deepinfer
