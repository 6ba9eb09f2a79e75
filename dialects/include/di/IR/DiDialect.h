// The `di` dialect: ops, attributes and the kernel-op interface. Compiler-side only; the
// runtime's public headers never include this, and the dialect includes nothing of the
// compiler (the compiler's kernel rules plug in through KernelRulesInterface).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "di/IR/DiDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "di/IR/DiAttrs.h.inc"

namespace mlir::di {
// The verifier of every kernel op (the interface's): dialect-level checks, then the kernel rules.
LogicalResult verifyKernelOp(Operation* op);
}  // namespace mlir::di

#include "di/IR/DiInterfaces.h.inc"

#define GET_OP_CLASSES
#include "di/IR/DiOps.h.inc"

namespace mlir::di {

// The rules of docs/ops.md an op's kernel relies on (tensor shapes that must agree, attribute
// ranges, result shapes derived from the inputs). The dialect verifies what its ODS states;
// these rules live with the kernel families in the compiler, which registers this interface on
// the dialect (deepinfer::registerKernelRules). Every context that loads the dialect must.
class KernelRulesInterface : public DialectInterface::Base<KernelRulesInterface> {
 public:
  explicit KernelRulesInterface(Dialect* dialect) : Base(dialect) {}
  virtual LogicalResult verifyKernelOp(KernelOpInterface op) const = 0;
  // A `di.target` on `op`: its facts must be its architecture's, the cap within them.
  virtual LogicalResult verifyTarget(Operation* op, TargetAttr target) const = 0;
};

}  // namespace mlir::di

MLIR_DECLARE_EXPLICIT_TYPE_ID(mlir::di::KernelRulesInterface)
