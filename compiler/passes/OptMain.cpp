// The body of deepinfer-opt, kept inside the library so MLIR stays linked in one place.
#include "di/IR/DiDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "ir/DiBridge.h"
#include "passes/Passes.h"
#include "deepinfer/OptMain.h"

int deepinfer::runOptMain(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::di::DiDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect>();
  deepinfer::registerKernelRules(registry);
  mlir::di::registerDiPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "deepinfer-opt: the di dialect and its passes\n", registry));
}
