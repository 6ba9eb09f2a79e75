// The body of deepinfer-opt, kept inside the library so MLIR stays linked in one place.
//
// The input is read with a size ceiling and its nesting depth is checked before MLIR parses it:
// the MLIR parser recurses once per nested bracket, brace, parenthesis and `<...>`, so
// `tensor<tensor<...` or `[[[...` 100k deep would overflow the stack instead of failing.
#include <fmt/format.h>

#include <cstdio>

#include "deepinfer/InputFiles.h"
#include "deepinfer/OptMain.h"
#include "di/IR/DiDialect.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "ir/DiBridge.h"
#include "passes/Passes.h"

namespace deepinfer {

Status checkMlirNesting(const std::string& text, const std::string& name) {
  int depth = 0, line = 1, col = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;  // comment to the end of the line
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > kMaxMlirNesting)
        return Error{fmt::format("{}:{}:{}: nested deeper than {} levels of brackets, braces, parentheses and "
                                 "<...>; refusing to parse it",
                                 name, line, col, kMaxMlirNesting)};
    } else if (c == ')' || c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
    } else if (c == '>') {
      // `->` and `>=` are not closers.
      const bool arrow = i > 0 && text[i - 1] == '-';
      const bool cmp = i + 1 < text.size() && text[i + 1] == '=';
      if (!arrow && !cmp && depth > 0) --depth;
    }
  }
  return {};
}

int runOptMain(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::di::DiDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect>();
  deepinfer::registerKernelRules(registry);
  mlir::di::registerDiPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  const auto [inputFilename, outputFilename] =
      mlir::registerAndParseCLIOptions(argc, argv, "deepinfer-opt: the di dialect and its passes\n", registry);
  const mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  const bool fromStdin = inputFilename == "-";
  const std::string name = fromStdin ? std::string("<stdin>") : inputFilename;
  auto text = readFileBounded(fromStdin ? "/dev/stdin" : inputFilename, kMaxMlirBytes, "MLIR input");
  if (!text.ok()) {
    fmt::print(stderr, "deepinfer-opt: {}\n", text.error().message);
    return 1;
  }
  if (Status s = checkMlirNesting(*text, name); !s.ok()) {
    fmt::print(stderr, "deepinfer-opt: {}\n", s.error().message);
    return 1;
  }
  std::string err;
  auto output = mlir::openOutputFile(outputFilename, &err);
  if (!output) {
    fmt::print(stderr, "deepinfer-opt: {}\n", err);
    return 1;
  }
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(*text, name);
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(buffer), registry, config))) return 1;
  output->keep();
  return 0;
}

}  // namespace deepinfer
