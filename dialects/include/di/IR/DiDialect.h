// The `di` dialect: ops, attributes and the kernel-op interface. Compiler-side only; the
// runtime's public headers never include this.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpSignature.h"

#include "di/IR/DiDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "di/IR/DiAttrs.h.inc"

#include "di/IR/DiInterfaces.h.inc"

#define GET_OP_CLASSES
#include "di/IR/DiOps.h.inc"

namespace mlir::di {

// The op's static description (attributes + static tensor shapes) for the kernel family;
// an error names a dynamic dimension, since kernels are specialized for concrete shapes.
FailureOr<deepinfer::OpDesc> buildOpDesc(KernelOpInterface op, bool requireStatic);

// Conversions between target profiles / configs and their attributes.
TargetAttr targetToAttr(MLIRContext* ctx, const deepinfer::TargetProfile& t);
deepinfer::KernelConfig configFromAttr(ConfigAttr a);

}  // namespace mlir::di
