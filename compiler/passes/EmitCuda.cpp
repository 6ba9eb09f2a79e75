#include "deepinfer/Specialize.h"
#include "ir/DiBridge.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DIEMITCUDA
#include "passes/Passes.h.inc"

namespace {

namespace attr = deepinfer::attr;

struct EmitCuda : impl::DiEmitCudaBase<EmitCuda> {
  void runOnOperation() override {
    MLIRContext* ctx = &getContext();
    Builder b(ctx);
    if (failed(deepinfer::moduleTarget(getOperation()))) return signalPassFailure();
    WalkResult r = getOperation()->walk([&](KernelOpInterface op) -> WalkResult {
      Operation* o = op.getOperation();
      auto config = o->getAttrOfType<ConfigAttr>(attr::kConfig);
      if (!config)
        return o->emitOpError("has no di.config; run di-specialize-target first"), WalkResult::interrupt();
      auto desc = deepinfer::opDescFromIR(op, /*requireStatic=*/true);
      if (failed(desc)) return WalkResult::interrupt();
      auto target = deepinfer::moduleTarget(o);
      if (failed(target)) return WalkResult::interrupt();
      // The config may have been written by hand: the same check as specialization and launch.
      if (auto ok = deepinfer::checkConfig(*desc, *target, deepinfer::configFromAttr(config)); !ok.ok())
        return o->emitOpError() << ok.error().message, WalkResult::interrupt();
      auto k = deepinfer::emitKernel(*desc, deepinfer::configFromAttr(config));
      if (!k.ok()) return o->emitOpError() << k.error().message, WalkResult::interrupt();
      o->setAttr(attr::kKernel, b.getStringAttr(k->baseName));
      o->setAttr(attr::kCuda, b.getStringAttr(k->unit.source));
      SmallVector<Attribute> entries;
      for (const auto& e : k->unit.entries) entries.push_back(b.getStringAttr(e));
      o->setAttr(attr::kEntries, b.getArrayAttr(entries));
      SmallVector<Attribute> steps;
      for (const auto& s : k->plan) {
        steps.push_back(b.getDictionaryAttr({
            b.getNamedAttr("entry", b.getStringAttr(s.entry)),
            b.getNamedAttr("grid", b.getDenseI64ArrayAttr({s.grid[0], s.grid[1], s.grid[2]})),
            b.getNamedAttr("block", b.getDenseI64ArrayAttr({s.block[0], s.block[1], s.block[2]})),
            b.getNamedAttr("dynamic_smem", b.getI64IntegerAttr(s.dynamicSmem)),
        }));
      }
      o->setAttr(attr::kLaunch, b.getArrayAttr(steps));
      if (k->workspaceBytes > 0) o->setAttr(attr::kWorkspaceBytes, b.getI64IntegerAttr(k->workspaceBytes));
      if (k->zeroedBytes > 0) o->setAttr(attr::kZeroedBytes, b.getI64IntegerAttr(k->zeroedBytes));
      return WalkResult::advance();
    });
    if (r.wasInterrupted()) signalPassFailure();
  }
};

}  // namespace
}  // namespace mlir::di
