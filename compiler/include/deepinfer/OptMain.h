// deepinfer-opt's entry point (MlirOptMain with the di dialect and passes registered), and the
// nesting check it runs on its input before MLIR parses it.
#pragma once
#include <string>

#include "deepinfer/Error.h"

namespace deepinfer {

// Far deeper than any real IR; far shallower than what overflows the parser's stack.
inline constexpr int kMaxMlirNesting = 256;
inline constexpr uint64_t kMaxMlirBytes = uint64_t(256) << 20;

int runOptMain(int argc, char** argv);

// Whether `text` nests brackets, braces, parentheses and <...> at most kMaxMlirNesting deep
// (strings and comments skipped); the error names `name`, the line and the column.
Status checkMlirNesting(const std::string& text, const std::string& name);

}  // namespace deepinfer
