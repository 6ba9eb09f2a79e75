#include <fmt/format.h>

#include "deepinfer/OpSignature.h"
#include "ir/DiBridge.h"

namespace deepinfer {

using namespace mlir;

FailureOr<OpDesc> opDescFromIR(di::KernelOpInterface op, bool requireStatic) {
  Operation* o = op.getOperation();
  const OpSignature* sig = findOpSignature(op.getKernelOpName().str());
  if (!sig) return o->emitOpError("has no kernel signature"), failure();
  OpDesc d;
  d.op = sig->op;
  // The signature lists the operands in ODS order (both come from DiOps.td).
  for (unsigned i = 0; i < sig->inputs.size(); ++i) {
    const std::string& name = sig->inputs[i].name;
    Value v = op.getOperandAt(i);
    if (!v) continue;
    auto t = cast<RankedTensorType>(v.getType());
    std::vector<int64_t> shape;
    for (int64_t s : t.getShape()) {
      if (ShapedType::isDynamic(s)) {
        if (requireStatic)
          return o->emitOpError() << "operand '" << name << "' has a dynamic dimension (" << t
                                  << "); kernels are specialized for static shapes", failure();
        s = -1;
      }
      shape.push_back(s);
    }
    d.shapes[name] = std::move(shape);
  }
  OpAttrs given;
  for (const AttrSig& as : sig->attrs) {
    Attribute a = o->getAttr(as.name);
    if (!a || !as.isNumber()) continue;
    if (auto i = dyn_cast<IntegerAttr>(a)) given.setInt(as.name, i.getInt());
    else if (auto f = dyn_cast<FloatAttr>(a)) given.setFloat(as.name, f.getValueAsDouble());
  }
  auto full = completeAttrs(*sig, given);
  if (!full.ok()) return o->emitOpError(full.error().message), failure();
  d.attrs = *full;
  return d;
}

}  // namespace deepinfer
