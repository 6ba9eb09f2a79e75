// The interface of every kernel op by canonical name (docs/ops.md §11): tensors with dtypes and
// ranks, which are optional or updated in place, and the attributes with their defaults. The
// table is generated from the dialect's ODS (dialects/include/di/IR/DiOps.td, by di-tblgen), so
// the ODS is the one description of an op; `run-op`, the references, the JIT and the GPU tests
// read it here without MLIR.
#pragma once
#include <string>
#include <vector>

#include "deepinfer/Tensor.h"

namespace deepinfer {

struct TensorSig {
  std::string name;
  DType dtype;
  bool optional = false;
  bool inOut = false;      // read, then updated in place (also listed among the outputs)
  std::vector<int> ranks;  // the ranks the tensor may have
};

enum class AttrKind { Int, Float, String };

struct AttrSig {
  std::string name;
  AttrKind kind = AttrKind::Int;
  bool required = true;
  double dflt = 0;          // Int/Float: used when not required and absent
  std::string dfltText;     // String: the default (OpAttrs carries numbers only)
  bool isNumber() const { return kind != AttrKind::String; }
};

struct OpSignature {
  std::string op;
  std::vector<TensorSig> inputs;   // in dialect operand order
  std::vector<TensorSig> outputs;  // in dialect result order (in-place ones by operand name)
  std::vector<AttrSig> attrs;      // in dialect order
  const TensorSig* findInput(const std::string& name) const;
  const AttrSig* findAttr(const std::string& name) const;
};

const std::vector<OpSignature>& opSignatures();
const OpSignature* findOpSignature(const std::string& op);

// Numeric attributes with their defaults filled in; an error names a missing required attribute
// or one the op does not have.
Result<OpAttrs> completeAttrs(const OpSignature& sig, const OpAttrs& given);

}  // namespace deepinfer
