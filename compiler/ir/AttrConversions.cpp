#include "ir/DiBridge.h"
#include "mlir/IR/Builders.h"

namespace deepinfer {

using namespace mlir;

di::TargetAttr targetToAttr(MLIRContext* ctx, const TargetProfile& t) {
  return di::TargetAttr::get(ctx, t.name, t.arch(), t.smCount, t.smemPerCtaCap, t.facts.smemPerSm,
                             t.facts.regsPerSm, t.facts.maxWarpsPerSm, t.facts.maxCtasPerSm);
}

KernelConfig configFromAttr(di::ConfigAttr a) {
  KernelConfig c;
  for (NamedAttribute na : a.getKnobs())
    if (auto i = dyn_cast<IntegerAttr>(na.getValue())) c[na.getName().str()] = i.getInt();
  return c;
}

di::ConfigAttr configToAttr(MLIRContext* ctx, const ConfigChoice& c) {
  SmallVector<NamedAttribute> knobs;
  Builder b(ctx);
  for (const auto& [k, v] : c.config) knobs.emplace_back(b.getStringAttr(k), b.getI64IntegerAttr(v));
  return di::ConfigAttr::get(ctx, DictionaryAttr::get(ctx, knobs), c.estimate.smemBytes, c.estimate.threadsPerCta,
                             c.ctasPerSm);
}

}  // namespace deepinfer
