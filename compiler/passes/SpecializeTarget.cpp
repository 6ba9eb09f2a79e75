#include <fmt/format.h>

#include "deepinfer/Specialize.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DISPECIALIZETARGET
#include "passes/Passes.h.inc"

namespace {

ConfigAttr toAttr(MLIRContext* ctx, const deepinfer::ConfigChoice& c) {
  SmallVector<NamedAttribute> knobs;
  Builder b(ctx);
  for (const auto& [k, v] : c.config) knobs.emplace_back(b.getStringAttr(k), b.getI64IntegerAttr(v));
  return ConfigAttr::get(ctx, DictionaryAttr::get(ctx, knobs), c.estimate.smemBytes,
                         c.estimate.threadsPerCta, c.ctasPerSm);
}

struct SpecializeTarget : impl::DiSpecializeTargetBase<SpecializeTarget> {
  using DiSpecializeTargetBase::DiSpecializeTargetBase;

  void runOnOperation() override {
    auto target = deepinfer::findTarget(this->target);
    if (!target) {
      getOperation()->emitError() << "unknown target '" << this->target
                                  << "' (use sm_80, sm_86, sm_89, sm_90 or a preset name)";
      return signalPassFailure();
    }
    MLIRContext* ctx = &getContext();
    TargetAttr targetAttr = targetToAttr(ctx, *target);
    WalkResult r = getOperation()->walk([&](KernelOpInterface op) -> WalkResult {
      Operation* o = op.getOperation();
      auto desc = buildOpDesc(op, /*requireStatic=*/true);
      if (failed(desc)) return WalkResult::interrupt();
      if (!op.getKernelFamily()) return o->emitOpError("has no kernel family"), WalkResult::interrupt();
      // Candidates, estimates and the default come from the op's kernel family.
      auto spec = deepinfer::specialize(*desc, *target);
      if (!spec.ok()) return o->emitOpError() << spec.error().message, WalkResult::interrupt();
      o->setAttr("di.target", targetAttr);
      SmallVector<Attribute> cands;
      for (const auto& c : spec->fitting) cands.push_back(toAttr(ctx, c));
      o->setAttr("di.candidates", ArrayAttr::get(ctx, cands));
      o->setAttr("di.dropped_over_cap", IntegerAttr::get(IntegerType::get(ctx, 64), spec->droppedOverCap));
      if (auto fixed = o->getAttrOfType<ConfigAttr>("di.config")) {
        auto check = deepinfer::checkConfig(*desc, *target, configFromAttr(fixed));
        if (!check.ok()) return o->emitOpError() << check.error().message, WalkResult::interrupt();
        o->setAttr("di.config", toAttr(ctx, *check));
      } else {
        o->setAttr("di.config", toAttr(ctx, spec->chosen));
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted()) signalPassFailure();
  }
};

}  // namespace
}  // namespace mlir::di
