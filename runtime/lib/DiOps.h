// Launching `di` ops from the forward pass on device addresses: the op description is built
// from the tensors' shapes and the attributes, the kernel comes from the Jit (compiled once,
// memoized per op + shapes + target), and a plan that needs a workspace gets one from a
// grow-only buffer (and one that needs a zeroed region, from a second, zero-filled one). Callers keep shapes stable across calls (bucketed capacities) so a long
// run compiles a bounded set of kernels.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/Jit.h"
#include "deepinfer/OpSequence.h"

namespace deepinfer {

struct DiTensor {
  uint64_t addr = 0;
  std::vector<int64_t> shape;
};

// One op of a sequence: its tensors by canonical name (inputs, in/out and outputs).
struct DiOpCall {
  std::string op;
  OpAttrs attrs;
  std::map<std::string, DiTensor> tensors;
};

class DiOps {
 public:
  DiOps(Jit& jit, TargetProfile target) : jit_(jit), target_(std::move(target)) {}
  // Runs `op` with tensors by canonical name (inputs, in/out and outputs) on `stream`.
  Status run(const std::string& op, const OpAttrs& attrs, const std::map<std::string, DiTensor>& tensors,
             void* stream);
  // Runs `calls` as the fusion passes rewrite them (deepinfer/OpSequence.h): a tensor is one
  // buffer wherever its address and shape recur, and the ops the passes leave run in order.
  // The rewrite is memoized per sequence of ops, attributes, shapes and buffer sharing.
  Status runSequence(const std::vector<DiOpCall>& calls, void* stream);
  uint64_t workspaceGeneration() const { return workspaceGen_; }  // changes when a workspace moves

 private:
  Jit& jit_;
  TargetProfile target_;
  DeviceBuffer workspace_;
  // The "__zeroed" region of every op: zero-filled when allocated and left zero by each kernel,
  // so launches in stream order (and graph replays) share it.
  DeviceBuffer zeroed_;
  uint64_t workspaceGen_ = 0;
  // Orders sequences by what their rewrite depends on (buffer shapes, ops, attributes, buffer
  // ids), so the sequence a call builds is its own memo key: no key string per call.
  struct SequenceOrder {
    bool operator()(const OpSequence& a, const OpSequence& b) const;
  };
  std::map<OpSequence, OpSequence, SequenceOrder> fused_;  // runSequence's rewrites
};

}  // namespace deepinfer
