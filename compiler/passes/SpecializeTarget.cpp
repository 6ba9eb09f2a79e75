#include <fmt/format.h>

#include "deepinfer/Specialize.h"
#include "ir/DiBridge.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DISPECIALIZETARGET
#include "passes/Passes.h.inc"

namespace {

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
    TargetAttr targetAttr = deepinfer::targetToAttr(ctx, *target);
    WalkResult r = getOperation()->walk([&](KernelOpInterface op) -> WalkResult {
      Operation* o = op.getOperation();
      auto desc = deepinfer::opDescFromIR(op, /*requireStatic=*/true);
      if (failed(desc)) return WalkResult::interrupt();
      // Candidates, estimates and the default come from the op's kernel family.
      auto spec = deepinfer::specialize(*desc, *target);
      if (!spec.ok()) return o->emitOpError() << spec.error().message, WalkResult::interrupt();
      o->setAttr("di.target", targetAttr);
      SmallVector<Attribute> cands;
      for (const auto& c : spec->fitting) cands.push_back(deepinfer::configToAttr(ctx, c));
      o->setAttr("di.candidates", ArrayAttr::get(ctx, cands));
      o->setAttr("di.dropped_over_cap", IntegerAttr::get(IntegerType::get(ctx, 64), spec->droppedOverCap));
      if (auto fixed = o->getAttrOfType<ConfigAttr>("di.config")) {
        auto check = deepinfer::checkConfig(*desc, *target, deepinfer::configFromAttr(fixed));
        if (!check.ok()) return o->emitOpError() << check.error().message, WalkResult::interrupt();
        o->setAttr("di.config", deepinfer::configToAttr(ctx, *check));
      } else {
        o->setAttr("di.config", deepinfer::configToAttr(ctx, spec->chosen));
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted()) signalPassFailure();
  }
};

}  // namespace
}  // namespace mlir::di
