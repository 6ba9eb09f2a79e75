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
