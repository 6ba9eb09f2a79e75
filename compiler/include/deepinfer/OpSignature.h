// The interface of every kernel op by canonical name (spec/ops.md §11): tensors with dtypes,
// which are optional or in/out, and the scalar attributes. The dialect verifiers, `run-op`,
// the references and the GPU tests all read this one table.
#pragma once
#include <string>
#include <vector>

#include "deepinfer/Tensor.h"

namespace deepinfer {

struct TensorSig {
  std::string name;
  DType dtype;
  bool optional = false;
  bool inOut = false;   // read, then updated (also listed among the outputs)
};

struct AttrSig {
  std::string name;
  bool isInt = true;
  bool required = true;
  double dflt = 0;      // used when not required and absent
};

struct OpSignature {
  std::string op;
  std::vector<TensorSig> inputs;   // in dialect operand order
  std::vector<TensorSig> outputs;  // in dialect result order
  std::vector<AttrSig> attrs;
};

const std::vector<OpSignature>& opSignatures();
const OpSignature* findOpSignature(const std::string& op);

// Attributes with their defaults filled in; an error names a missing required attribute.
Result<OpAttrs> completeAttrs(const OpSignature& sig, const OpAttrs& given);

}  // namespace deepinfer
