// Between the `di` IR and the compiler's MLIR-free types: an op's description for its kernel
// family, target and config attributes, and the kernel rules the compiler registers on the
// dialect. Private to the compiler (passes, pipeline, deepinfer-opt); MLIR stays behind it.
#pragma once
#include "deepinfer/Specialize.h"
#include "di/IR/DiDialect.h"
#include "mlir/IR/DialectRegistry.h"

namespace deepinfer {

// The op's description (static tensor shapes by canonical name, attributes with defaults) for
// its kernel family. With `requireStatic`, a dynamic dimension is an error naming the operand;
// without, it is -1. Errors are emitted on the op.
mlir::FailureOr<OpDesc> opDescFromIR(mlir::di::KernelOpInterface op, bool requireStatic);

mlir::di::TargetAttr targetToAttr(mlir::MLIRContext* ctx, const TargetProfile& t);
KernelConfig configFromAttr(mlir::di::ConfigAttr a);
mlir::di::ConfigAttr configToAttr(mlir::MLIRContext* ctx, const ConfigChoice& c);

// Registers the kernel families' rules (KernelRulesInterface) on the di dialect.
void registerKernelRules(mlir::DialectRegistry& registry);

}  // namespace deepinfer
