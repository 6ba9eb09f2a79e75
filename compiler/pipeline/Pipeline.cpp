#include "deepinfer/Pipeline.h"

#include <fmt/format.h>

#include "deepinfer/OpSignature.h"
#include "DiTypes.h"
#include "ir/DiBridge.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"

namespace deepinfer {
namespace {

using namespace mlir;

std::string print(Operation* op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

// The op in a function of its tensors, in a module that carries the target. Result types come
// from the family; for a description the family rejects they are left dynamic, so that the
// verifier reports the family's message.
ModuleOp buildModule(OpBuilder& b, const OpDesc& d, const OpSignature& sig, const TargetProfile& t) {
  const Location loc = b.getUnknownLoc();
  ModuleOp module = ModuleOp::create(loc);
  module->setAttr(attr::kTarget, targetToAttr(b.getContext(), t));
  b.setInsertionPointToEnd(module.getBody());

  SmallVector<Type> args, results;
  SmallVector<int32_t> segments;
  for (const TensorSig& in : sig.inputs) {
    auto it = d.shapes.find(in.name);
    segments.push_back(it == d.shapes.end() ? 0 : 1);
    if (it != d.shapes.end()) args.push_back(RankedTensorType::get(it->second, diElementType(b, in.dtype)));
  }
  const KernelFamily* fam = findKernelFamily(d.op);
  const bool valid = fam->validate(d).ok();
  const OutputSpec outs = valid ? fam->outputs(d) : OutputSpec{};
  for (const TensorSig& o : sig.outputs) {
    auto it = outs.find(o.name);
    SmallVector<int64_t> shape(o.ranks.empty() ? 1 : o.ranks.front(), ShapedType::kDynamic);
    if (it != outs.end()) shape.assign(it->second.second.begin(), it->second.second.end());
    // The family gives the dtype where it depends on attributes (weight_gemm's `y`).
    results.push_back(RankedTensorType::get(shape, diElementType(b, it != outs.end() ? it->second.first : o.dtype)));
  }

  auto fn = b.create<func::FuncOp>(loc, d.op, b.getFunctionType(args, results));
  b.setInsertionPointToStart(fn.addEntryBlock());
  OperationState st(loc, "di." + d.op);
  st.addOperands(fn.getArguments());
  st.addTypes(results);
  for (const AttrSig& as : sig.attrs) {
    if (!as.isNumber() || !d.attrs.has(as.name)) continue;
    st.addAttribute(as.name, as.kind == AttrKind::Int
                                 ? Attribute(b.getI64IntegerAttr(d.attrs.getInt(as.name, 0)))
                                 : Attribute(b.getF32FloatAttr(float(d.attrs.getFloat(as.name, 0)))));
  }
  if (st.name.getAttributeNames().size() &&
      llvm::is_contained(st.name.getAttributeNames(), b.getStringAttr("operandSegmentSizes")))
    st.addAttribute("operandSegmentSizes", b.getDenseI32ArrayAttr(segments));
  Operation* op = b.create(st);
  b.create<func::ReturnOp>(loc, op->getResults());
  return module;
}

Specialization specializationFromIR(Operation* op) {
  Specialization s;
  if (auto cands = op->getAttrOfType<ArrayAttr>(attr::kCandidates))
    for (Attribute a : cands) s.fitting.push_back(choiceFromAttr(cast<di::ConfigAttr>(a)));
  if (auto n = op->getAttrOfType<IntegerAttr>(attr::kDroppedOverCap)) s.droppedOverCap = int(n.getInt());
  s.chosen = choiceFromAttr(op->getAttrOfType<di::ConfigAttr>(attr::kConfig));
  return s;
}

EmittedKernel kernelFromIR(Operation* op) {
  EmittedKernel k;
  k.baseName = op->getAttrOfType<StringAttr>(attr::kKernel).str();
  k.unit.source = op->getAttrOfType<StringAttr>(attr::kCuda).str();
  for (Attribute e : op->getAttrOfType<ArrayAttr>(attr::kEntries)) k.unit.entries.push_back(cast<StringAttr>(e).str());
  for (Attribute a : op->getAttrOfType<ArrayAttr>(attr::kLaunch)) {
    auto step = cast<DictionaryAttr>(a);
    LaunchStep s;
    s.entry = step.getAs<StringAttr>("entry").str();
    auto grid = step.getAs<DenseI64ArrayAttr>("grid").asArrayRef();
    auto block = step.getAs<DenseI64ArrayAttr>("block").asArrayRef();
    for (int i = 0; i < 3; ++i) s.grid[i] = uint32_t(grid[i]), s.block[i] = uint32_t(block[i]);
    s.dynamicSmem = uint32_t(step.getAs<IntegerAttr>("dynamic_smem").getInt());
    k.plan.push_back(s);
  }
  if (auto w = op->getAttrOfType<IntegerAttr>(attr::kWorkspaceBytes)) k.workspaceBytes = w.getInt();
  if (auto z = op->getAttrOfType<IntegerAttr>(attr::kZeroedBytes)) k.zeroedBytes = z.getInt();
  return k;
}

}  // namespace

Result<PipelineResult> runKernelPipeline(const OpDesc& d, const TargetProfile& t,
                                         const std::optional<KernelConfig>& fixedConfig, PipelineIr* ir) {
  const OpSignature* sig = findOpSignature(d.op);
  if (!sig || !findKernelFamily(d.op)) return Error{fmt::format("no kernel family for op '{}'", d.op)};
  DialectRegistry registry;
  registry.insert<di::DiDialect, func::FuncDialect>();
  registerKernelRules(registry);
  // One op: parallelism comes from the callers (every call has its own context).
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diag;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic& dg) {
    diag += (diag.empty() ? "" : "\n") + dg.str();
    return success();
  });
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module = buildModule(b, d, *sig, t);
  if (failed(verify(*module))) return Error{fmt::format("{}: the op does not verify: {}", d.op, diag)};
  if (ir) ir->input = print(*module);
  Operation* op = nullptr;
  module->walk([&](di::KernelOpInterface k) { op = k.getOperation(); });
  if (fixedConfig) {
    ConfigChoice fixed;
    fixed.config = *fixedConfig;
    op->setAttr(attr::kConfig, configToAttr(&ctx, fixed));
  }

  PassManager specialize(&ctx);
  specialize.addPass(di::createDiSpecializeTarget());
  if (failed(specialize.run(*module))) return Error{diag.empty() ? "di-specialize-target failed" : diag};
  if (ir) ir->specialized = print(*module);
  PassManager emit(&ctx);
  emit.addPass(di::createDiEmitCuda());
  if (failed(emit.run(*module))) return Error{diag.empty() ? "di-emit-cuda failed" : diag};
  if (ir) ir->emitted = print(*module);

  // What the passes decided, read from the IR.
  PipelineResult r;
  r.spec = specializationFromIR(op);
  r.config = r.spec.chosen;
  r.kernel = kernelFromIR(op);
  return r;
}

}  // namespace deepinfer
