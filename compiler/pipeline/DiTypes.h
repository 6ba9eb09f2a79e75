// The MLIR element type of a deepinfer dtype, shared by the builders of one op's function
// (Pipeline.cpp) and of an op sequence's function (OpSequence.cpp). Compiler-internal: MLIR
// headers stay out of runtime headers.
#pragma once
#include "deepinfer/Tensor.h"  // DType
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace deepinfer {

inline mlir::Type diElementType(mlir::OpBuilder& b, DType t) {
  switch (t) {
    case DType::BF16: return b.getBF16Type();
    case DType::F32: return b.getF32Type();
    case DType::I32: return b.getI32Type();
    case DType::I64: return b.getI64Type();
    case DType::U8: return b.getIntegerType(8, /*isSigned=*/false);
  }
  return {};
}

}  // namespace deepinfer
