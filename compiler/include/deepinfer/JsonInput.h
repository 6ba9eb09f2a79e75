// The one way this project parses JSON it did not write itself in this process (config.json,
// safetensors headers, checkpoint indexes, engram files, tuning files, cache archives). LLVM's
// parser recurses once per nesting level and keeps the last of duplicate object keys; a scan
// first bounds the nesting depth (no stack overflow on `[[[[...`) and rejects duplicate keys
// (two tensors of one name, two values of one config field), both with the byte offset.
#pragma once
#include <string>

#include "deepinfer/Error.h"
#include "llvm/Support/JSON.h"

namespace deepinfer {

// Deeper than any file of this project (a tuning file nests 6 levels).
inline constexpr int kMaxJsonDepth = 64;

// Parses `text`; the error message says what is wrong and where (callers prefix the file name).
Result<llvm::json::Value> parseJsonInput(llvm::StringRef text);

}  // namespace deepinfer
