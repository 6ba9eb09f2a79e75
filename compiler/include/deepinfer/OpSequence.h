// A sequence of ops over shared buffers, through the fusion passes: the ops are built as one
// `di` function (a buffer an op updates in place, or writes, is the SSA value later ops read),
// the fusion passes rewrite it (di-fuse-gather-combine), and the ops the function holds after
// them come back in order, each with its tensors' buffers. The runtime runs what comes back:
// which ops fuse is decided by the passes over the IR, never by the caller. MLIR stays behind
// this header.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/KernelFamily.h"

namespace deepinfer {

struct SequenceOp {
  std::string op;
  OpAttrs attrs;
  // Every tensor of the op (inputs, in/out and outputs) by canonical name -> buffer id.
  std::map<std::string, int> tensors;
};

struct OpSequence {
  std::vector<std::vector<int64_t>> buffers;  // shape of each buffer id
  std::vector<SequenceOp> ops;                // in program order
};

// The sequence after the fusion passes. Errors name the op and tensor (a missing tensor, a
// buffer id out of range, an op that does not verify).
Result<OpSequence> fuseOpSequence(const OpSequence& seq);

}  // namespace deepinfer
