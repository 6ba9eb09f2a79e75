#include "deepinfer/Specialize.h"
#include "ir/DiBridge.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DISPECIALIZETARGET
#include "passes/Passes.h.inc"

namespace {

namespace attr = deepinfer::attr;

struct SpecializeTarget : impl::DiSpecializeTargetBase<SpecializeTarget> {
  using DiSpecializeTargetBase::DiSpecializeTargetBase;

  // The module's di.target, else the preset the option names (attached to the module).
  FailureOr<deepinfer::TargetProfile> resolveTarget(ModuleOp module) {
    if (module->hasAttr(attr::kTarget)) {
      auto t = deepinfer::moduleTarget(module);
      if (succeeded(t) && this->target.getNumOccurrences() > 0 && t->name != this->target)
        return module.emitError() << "the module is for target '" << t->name << "'; the pass option asks for '"
                                  << this->target << "'", failure();
      return t;
    }
    auto t = deepinfer::findTarget(this->target);
    if (!t)
      return module.emitError() << "unknown target '" << this->target
                                << "' (use sm_80, sm_86, sm_89, sm_90 or a preset name)", failure();
    module->setAttr(attr::kTarget, deepinfer::targetToAttr(module.getContext(), *t));
    return *t;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto target = resolveTarget(module);
    if (failed(target)) return signalPassFailure();
    MLIRContext* ctx = &getContext();
    WalkResult r = module->walk([&](KernelOpInterface op) -> WalkResult {
      Operation* o = op.getOperation();
      auto desc = deepinfer::opDescFromIR(op, /*requireStatic=*/true);
      if (failed(desc)) return WalkResult::interrupt();
      // Candidates, estimates and the default come from the op's kernel family.
      auto spec = deepinfer::specialize(*desc, *target);
      if (!spec.ok()) return o->emitOpError() << spec.error().message, WalkResult::interrupt();
      SmallVector<Attribute> cands;
      for (const auto& c : spec->fitting) cands.push_back(deepinfer::configToAttr(ctx, c));
      o->setAttr(attr::kCandidates, ArrayAttr::get(ctx, cands));
      o->setAttr(attr::kDroppedOverCap, IntegerAttr::get(IntegerType::get(ctx, 64), spec->droppedOverCap));
      if (auto fixed = o->getAttrOfType<ConfigAttr>(attr::kConfig)) {
        auto check = deepinfer::checkConfig(*desc, *target, deepinfer::configFromAttr(fixed));
        if (!check.ok()) return o->emitOpError() << check.error().message, WalkResult::interrupt();
        o->setAttr(attr::kConfig, deepinfer::configToAttr(ctx, *check));
      } else {
        o->setAttr(attr::kConfig, deepinfer::configToAttr(ctx, spec->chosen));
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted()) signalPassFailure();
  }
};

}  // namespace
}  // namespace mlir::di
