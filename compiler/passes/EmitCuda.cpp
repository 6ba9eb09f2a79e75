#include "deepinfer/Specialize.h"
#include "ir/DiBridge.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DIEMITCUDA
#include "passes/Passes.h.inc"

namespace {

struct EmitCuda : impl::DiEmitCudaBase<EmitCuda> {
  void runOnOperation() override {
    MLIRContext* ctx = &getContext();
    Builder b(ctx);
    WalkResult r = getOperation()->walk([&](KernelOpInterface op) -> WalkResult {
      Operation* o = op.getOperation();
      auto config = o->getAttrOfType<ConfigAttr>("di.config");
      if (!config || !o->getAttr("di.target"))
        return o->emitOpError("has no di.config/di.target; run di-specialize-target first"),
               WalkResult::interrupt();
      auto desc = deepinfer::opDescFromIR(op, /*requireStatic=*/true);
      if (failed(desc)) return WalkResult::interrupt();
      auto k = deepinfer::emitKernel(*desc, deepinfer::configFromAttr(config));
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
