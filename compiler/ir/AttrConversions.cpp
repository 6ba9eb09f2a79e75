#include "ir/DiBridge.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace deepinfer {

using namespace mlir;

di::TargetAttr targetToAttr(MLIRContext* ctx, const TargetProfile& t) {
  Builder b(ctx);
  const ArchFacts& f = t.facts;
  return di::TargetAttr::get(ctx, t.name, t.arch(), t.smCount, t.smemPerCtaCap, f.smemPerSm, f.smemPerCtaOptIn,
                             f.regsPerSm, f.maxRegsPerThread, f.maxWarpsPerSm, f.maxCtasPerSm, t.l2Bytes,
                             b.getF64FloatAttr(t.memBandwidthGBs));
}

FailureOr<TargetProfile> targetFromAttr(di::TargetAttr a, Operation* where) {
  auto facts = archFacts(int(a.getArch()));
  if (!facts)
    return where->emitError() << "target '" << a.getName() << "' has arch " << a.getArch()
                              << "; known: 80, 86, 89, 90", failure();
  TargetProfile t;
  t.name = a.getName().str();
  t.facts = *facts;  // what the attribute does not carry is the architecture's (fp8 converts, wgmma)
  t.facts.smemPerSm = a.getSmemPerSm();
  t.facts.smemPerCtaOptIn = a.getSmemPerCtaOptIn();
  t.facts.regsPerSm = int(a.getRegsPerSm());
  t.facts.maxRegsPerThread = int(a.getMaxRegsPerThread());
  t.facts.maxWarpsPerSm = int(a.getMaxWarpsPerSm());
  t.facts.maxCtasPerSm = int(a.getMaxCtasPerSm());
  t.smCount = int(a.getSmCount());
  t.smemPerCtaCap = a.getSmemCap();
  t.l2Bytes = a.getL2Bytes();
  t.memBandwidthGBs = a.getMemBandwidthGbs().getValueAsDouble();
  return t;
}

FailureOr<TargetProfile> moduleTarget(Operation* op) {
  Operation* module = isa<ModuleOp>(op) ? op : op->getParentOfType<ModuleOp>().getOperation();
  if (!module) return op->emitError("is not inside a module, which would carry the di.target"), failure();
  auto a = module->getAttrOfType<di::TargetAttr>(attr::kTarget);
  if (!a)
    return module->emitError("has no di.target attribute; run di-specialize-target{target=...} first"), failure();
  return targetFromAttr(a, module);
}

KernelConfig configFromAttr(di::ConfigAttr a) {
  KernelConfig c;
  for (NamedAttribute na : a.getKnobs())
    if (auto i = dyn_cast<IntegerAttr>(na.getValue())) c[na.getName().str()] = i.getInt();
  return c;
}

ConfigChoice choiceFromAttr(di::ConfigAttr a) {
  ConfigChoice c;
  c.config = configFromAttr(a);
  c.estimate.smemBytes = a.getSmem();
  c.estimate.threadsPerCta = int(a.getThreads());
  c.estimate.regsPerThread = int(a.getRegs());
  c.ctasPerSm = int(a.getCtasPerSm());
  return c;
}

di::ConfigAttr configToAttr(MLIRContext* ctx, const ConfigChoice& c) {
  SmallVector<NamedAttribute> knobs;
  Builder b(ctx);
  for (const auto& [k, v] : c.config) knobs.emplace_back(b.getStringAttr(k), b.getI64IntegerAttr(v));
  return di::ConfigAttr::get(ctx, DictionaryAttr::get(ctx, knobs), c.estimate.smemBytes, c.estimate.threadsPerCta,
                             c.ctasPerSm, c.estimate.regsPerThread);
}

}  // namespace deepinfer
