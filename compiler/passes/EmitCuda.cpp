#include "deepinfer/Specialize.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DIEMITCUDA
#include "passes/Passes.h.inc"

namespace {

// The profile a verified #di.target describes (its facts are its architecture's).
deepinfer::TargetProfile targetFromAttr(TargetAttr a) {
  deepinfer::TargetProfile t;
  t.name = a.getName().str();
  t.facts = *deepinfer::archFacts(int(a.getArch()));
  t.smCount = int(a.getSmCount());
  t.smemPerCtaCap = a.getSmemCap();
  return t;
}

struct EmitCuda : impl::DiEmitCudaBase<EmitCuda> {
  void runOnOperation() override {
    MLIRContext* ctx = &getContext();
    Builder b(ctx);
    WalkResult r = getOperation()->walk([&](KernelOpInterface op) -> WalkResult {
      Operation* o = op.getOperation();
      auto config = o->getAttrOfType<ConfigAttr>("di.config");
      auto target = o->getAttrOfType<TargetAttr>("di.target");
      if (!config || !target)
        return o->emitOpError("has no di.config/di.target; run di-specialize-target first"),
               WalkResult::interrupt();
      auto desc = buildOpDesc(op, /*requireStatic=*/true);
      if (failed(desc)) return WalkResult::interrupt();
      // The config may have been written by hand: the same check as specialization and launch.
      if (auto ok = deepinfer::checkConfig(*desc, targetFromAttr(target), configFromAttr(config)); !ok.ok())
        return o->emitOpError() << ok.error().message, WalkResult::interrupt();
      auto k = deepinfer::emitKernel(*desc, configFromAttr(config));
      if (!k.ok()) return o->emitOpError() << k.error().message, WalkResult::interrupt();
      o->setAttr("di.cuda", b.getStringAttr(k->unit.source));
      SmallVector<Attribute> steps;
      for (const auto& s : k->plan) {
        steps.push_back(b.getDictionaryAttr({
            b.getNamedAttr("entry", b.getStringAttr(s.entry)),
            b.getNamedAttr("grid", b.getDenseI64ArrayAttr({s.grid[0], s.grid[1], s.grid[2]})),
            b.getNamedAttr("block", b.getDenseI64ArrayAttr({s.block[0], s.block[1], s.block[2]})),
            b.getNamedAttr("dynamic_smem", b.getI64IntegerAttr(s.dynamicSmem)),
        }));
      }
      o->setAttr("di.launch", b.getArrayAttr(steps));
      if (k->workspaceBytes > 0) o->setAttr("di.workspace_bytes", b.getI64IntegerAttr(k->workspaceBytes));
      return WalkResult::advance();
    });
    if (r.wasInterrupted()) signalPassFailure();
  }
};

}  // namespace
}  // namespace mlir::di
