#include "di/IR/DiDialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::di;

MLIR_DEFINE_EXPLICIT_TYPE_ID(mlir::di::KernelRulesInterface)

#include "di/IR/DiDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "di/IR/DiAttrs.cpp.inc"

#include "di/IR/DiInterfaces.cpp.inc"

LogicalResult ConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError, DictionaryAttr knobs, int64_t smem,
                                 int64_t threads, int64_t ctasPerSm, int64_t regs) {
  for (NamedAttribute na : knobs)
    if (!llvm::isa<IntegerAttr>(na.getValue()))
      return emitError() << "#di.config knob '" << na.getName().getValue() << "' must be an integer, got "
                         << na.getValue();
  if (smem < 0 || threads < 0 || threads > 1024 || ctasPerSm < 0 || regs < 0 || regs > 255)
    return emitError() << "#di.config smem = " << smem << ", threads = " << threads << ", ctas_per_sm = " << ctasPerSm
                       << ", regs = " << regs << ": smem and ctas_per_sm must be >= 0, threads in 0..1024, regs in "
                          "0..255";
  return success();
}

// The discardable attributes the passes attach: each name with the kind of value it holds.
LogicalResult DiDialect::verifyOperationAttribute(Operation* op, NamedAttribute attr) {
  const StringRef name = attr.getName().getValue();
  const Attribute v = attr.getValue();
  static const char* const kKnown = "di.target, di.config, di.candidates, di.dropped_over_cap, di.kernel, di.cuda, "
                                    "di.entries, di.launch, di.workspace_bytes, di.zeroed_bytes";
  auto expect = [&](bool ok, const char* what) -> LogicalResult {
    if (ok) return success();
    return op->emitError() << "attribute '" << name << "' must be " << what << ", got " << v;
  };
  auto nonNegativeInt = [&](Attribute a) {
    auto i = llvm::dyn_cast<IntegerAttr>(a);
    return i && i.getType().isInteger(64) && i.getInt() >= 0;
  };
  if (name == "di.target") {
    auto t = llvm::dyn_cast<TargetAttr>(v);
    if (!t) return expect(false, "a #di.target");
    // Its facts must be its architecture's: the compiler knows them (KernelRulesInterface).
    auto* rules = op->getContext()->getLoadedDialect<DiDialect>()->getRegisteredInterface<KernelRulesInterface>();
    if (!rules)
      return op->emitError("cannot verify di.target: the kernel rules of the di dialect are not registered in this "
                           "context (deepinfer::registerKernelRules)");
    return rules->verifyTarget(op, t);
  }
  if (name == "di.config") return expect(llvm::isa<ConfigAttr>(v), "a #di.config");
  if (name == "di.candidates") {
    auto a = llvm::dyn_cast<ArrayAttr>(v);
    return expect(a && llvm::all_of(a, [](Attribute e) { return llvm::isa<ConfigAttr>(e); }), "an array of #di.config");
  }
  if (name == "di.dropped_over_cap" || name == "di.workspace_bytes" || name == "di.zeroed_bytes") return expect(nonNegativeInt(v), "an i64 >= 0");
  if (name == "di.cuda") return expect(llvm::isa<StringAttr>(v), "a string (the emitted CUDA unit)");
  if (name == "di.kernel") return expect(llvm::isa<StringAttr>(v), "a string (the unit's base name)");
  if (name == "di.entries") {
    auto a = llvm::dyn_cast<ArrayAttr>(v);
    return expect(a && llvm::all_of(a, [](Attribute e) { return llvm::isa<StringAttr>(e); }),
                  "an array of strings (the unit's entries)");
  }
  if (name == "di.launch") {
    auto a = llvm::dyn_cast<ArrayAttr>(v);
    return expect(a && llvm::all_of(a,
                                    [](Attribute e) {
                                      auto d = llvm::dyn_cast<DictionaryAttr>(e);
                                      return d && llvm::isa_and_nonnull<StringAttr>(d.get("entry")) &&
                                             llvm::isa_and_nonnull<DenseI64ArrayAttr>(d.get("grid")) &&
                                             llvm::isa_and_nonnull<DenseI64ArrayAttr>(d.get("block"));
                                    }),
                  "an array of launch steps {entry, grid, block, dynamic_smem}");
  }
  return op->emitError() << "unknown attribute '" << name << "' (the di dialect defines " << kKnown << ")";
}

void DiDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "di/IR/DiAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "di/IR/DiOps.cpp.inc"
      >();
  declarePromisedInterface<KernelRulesInterface, DiDialect>();
}

namespace mlir::di {

// One verifier for every op, after the ODS checks (operand types and ranks, attributes): the
// cache format (a dialect attribute whose only value is the one the kernels read), then the
// kernel rules the compiler registered.
LogicalResult verifyKernelOp(Operation* o) {
  if (auto fmt = o->getAttrOfType<StringAttr>("cache_format"))
    if (fmt.getValue() != "fp8_ds_mla")
      return o->emitOpError() << "cache_format '" << fmt.getValue()
                              << "' is not supported (supported: 'fp8_ds_mla', 584 bytes per token)";
  auto* rules = o->getDialect()->getRegisteredInterface<KernelRulesInterface>();
  if (!rules)
    return o->emitOpError("cannot be verified: the kernel rules of the di dialect are not registered in "
                          "this context (deepinfer::registerKernelRules)");
  return rules->verifyKernelOp(cast<KernelOpInterface>(o));
}

}  // namespace mlir::di

#define GET_OP_CLASSES
#include "di/IR/DiOps.cpp.inc"
