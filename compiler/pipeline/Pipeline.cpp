#include "deepinfer/Pipeline.h"
#include "deepinfer/OpSignature.h"

#include <fmt/format.h>

#include "di/IR/DiDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"
#include "ir/DiBridge.h"
#include "passes/Passes.h"

namespace deepinfer {
namespace {

const char* mlirElem(DType t) {
  switch (t) {
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "ui8";
  }
  return "?";
}

std::string tensorType(const std::vector<int64_t>& shape, DType t) {
  std::string s = "tensor<";
  for (int64_t d : shape) s += fmt::format("{}x", d);
  return s + mlirElem(t) + ">";
}

std::string printOp(mlir::Operation* op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

}  // namespace

std::string opToMlir(const OpDesc& d) {
  const OpSignature* sig = findOpSignature(d.op);
  const KernelFamily* fam = findKernelFamily(d.op);
  OutputSpec outs = fam ? fam->outputs(d) : OutputSpec{};
  std::string args, operands, attrs, results, resultTypes;
  for (const auto& in : sig->inputs) {
    auto it = d.shapes.find(in.name);
    if (it == d.shapes.end()) continue;
    const std::string ty = tensorType(it->second, in.dtype);
    args += fmt::format("{}%{}: {}", args.empty() ? "" : ", ", in.name, ty);
    operands += fmt::format(" {}(%{} : {})", in.name, in.name, ty);
  }
  for (const auto& as : sig->attrs) {
    if (!d.attrs.has(as.name)) continue;
    attrs += attrs.empty() ? "" : ", ";
    if (!as.isNumber()) continue;
    if (as.kind == AttrKind::Int) attrs += fmt::format("{} = {} : i64", as.name, d.attrs.getInt(as.name, 0));
    else attrs += fmt::format("{} = {:e} : f32", as.name, d.attrs.getFloat(as.name, 0));
  }
  for (size_t i = 0; i < sig->outputs.size(); ++i) {
    const auto& o = sig->outputs[i];
    auto it = outs.find(o.name);
    std::vector<int64_t> shape = it != outs.end() ? it->second.second : d.shapes.count(o.name) ? d.shapes.at(o.name) : std::vector<int64_t>{};
    results += fmt::format("{}{}", i ? ", " : "", tensorType(shape, o.dtype));
  }
  resultTypes = sig->outputs.size() > 1 ? "(" + results + ")" : results;
  std::string uses;
  for (size_t i = 0; i < sig->outputs.size(); ++i) uses += fmt::format("{}%r#{}", i ? ", " : "", i);
  return fmt::format(
      "func.func @{}({}) -> {} {{\n  %r:{} = di.{}{} {{{}}} -> {}\n  return {} : {}\n}}\n", d.op, args,
      resultTypes, sig->outputs.size(), d.op, operands, attrs, results, uses, results);
}

Result<PipelineResult> runKernelPipeline(const OpDesc& d, const TargetProfile& t,
                                         const std::optional<KernelConfig>& fixedConfig) {
  if (!findKernelFamily(d.op)) return Error{fmt::format("no kernel family for op '{}'", d.op)};
  PipelineResult r;
  registerTarget(t);  // the pass looks the target up by name (presets, "local")
  mlir::DialectRegistry registry;
  registry.insert<mlir::di::DiDialect, mlir::func::FuncDialect>();
  registerKernelRules(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  std::string diag;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& dg) {
    diag += (diag.empty() ? "" : "\n") + dg.str();
    return mlir::success();
  });
  const std::string text = opToMlir(d);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  if (!module) return Error{fmt::format("{}: the op does not verify: {}", d.op, diag)};
  r.irInput = printOp(*module);
  if (fixedConfig) {
    mlir::Builder b(&ctx);
    llvm::SmallVector<mlir::NamedAttribute> knobs;
    for (const auto& [k, v] : *fixedConfig) knobs.emplace_back(b.getStringAttr(k), b.getI64IntegerAttr(v));
    module->walk([&](mlir::di::KernelOpInterface op) {
      op->setAttr("di.config", mlir::di::ConfigAttr::get(&ctx, b.getDictionaryAttr(knobs), 0, 0, 0));
    });
  }
  mlir::PassManager pm(&ctx);
  mlir::di::DiSpecializeTargetOptions opts;
  opts.target = t.name;
  pm.addPass(mlir::di::createDiSpecializeTarget(opts));
  if (mlir::failed(pm.run(*module))) return Error{diag.empty() ? "di-specialize-target failed" : diag};
  r.irSpecialized = printOp(*module);
  mlir::PassManager pm2(&ctx);
  pm2.addPass(mlir::di::createDiEmitCuda());
  if (mlir::failed(pm2.run(*module))) return Error{diag.empty() ? "di-emit-cuda failed" : diag};
  r.irEmitted = printOp(*module);

  // The choice the passes recorded, and the emitted kernel (the same deterministic emission).
  auto spec = specialize(d, t);
  if (!spec.ok()) return spec.error();
  r.spec = std::move(spec.value());
  KernelConfig cfg = r.spec.chosen.config;
  module->walk([&](mlir::di::KernelOpInterface op) {
    if (auto c = op->getAttrOfType<mlir::di::ConfigAttr>("di.config")) cfg = configFromAttr(c);
  });
  auto choice = checkConfig(d, t, cfg);
  if (!choice.ok()) return choice.error();
  r.config = std::move(choice.value());
  auto k = emitKernel(d, cfg);
  if (!k.ok()) return k.error();
  r.kernel = std::move(k.value());
  return r;
}

}  // namespace deepinfer
