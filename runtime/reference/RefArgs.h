// Input checking shared by the reference ops. Every message starts with the op's name and
// names the tensor, attribute or element that is wrong and what was expected, because
// `run-op --backend reference` shows these messages to users.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::ref {

// One expected dimension: a fixed size (and where it comes from, e.g. "R" or
// "page_bytes(block_size=64)"), or any size under a name ("max_pages").
struct Dim {
  int64_t size = -1;  // -1: any size
  std::string name;   // shown in messages; may be empty for a literal size
};
inline Dim anyDim(std::string name) { return {-1, std::move(name)}; }
inline Dim dimOf(std::string name, int64_t size) { return {size, std::move(name)}; }
inline Dim exactDim(int64_t size) { return {size, ""}; }

// The tensors and attributes of one op invocation, checked against the op's signature.
class RefArgs {
 public:
  RefArgs(const OpSignature& sig, OpAttrs attrs, TensorMap& tensors)
      : sig_(sig), attrs_(std::move(attrs)), tensors_(tensors) {}

  // Presence of every required input, dtypes and byte sizes of every given one.
  Status checkSignature() const;

  // An input with the given shape (dtype was checked by checkSignature).
  Result<const HostTensor*> in(const std::string& name, const std::vector<Dim>& dims) const;
  // The same for an optional input; nullptr when it is absent.
  Result<const HostTensor*> optionalIn(const std::string& name, const std::vector<Dim>& dims) const;
  // An in/out tensor (present, shape checked); the op updates it in place.
  Result<HostTensor*> inOut(const std::string& name, const std::vector<Dim>& dims);
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor of that name as given, unchecked; nullptr when absent.
  const HostTensor* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }

  // A fresh output tensor (dtype from the signature) replacing any of that name. Its bytes
  // start as a poison pattern so an element the op forgot to write shows up in tests
  // instead of passing as a plausible zero. Call only after all inputs are read or copied:
  // it may replace an input of the same name (mhc_fused_post_pre's `post`, `comb`).
  HostTensor& out(const std::string& name, std::vector<int64_t> shape);
  // The same with the dtype given (outputs whose dtype an attribute chooses: weight_gemm's `y`).
  HostTensor& out(const std::string& name, std::vector<int64_t> shape, DType dtype);

  // Attributes (defaults already filled in); errors name the attribute and the bound.
  Result<int64_t> intAttr(const std::string& name, int64_t min, int64_t max = INT64_MAX) const;
  Result<double> floatAttr(const std::string& name, double min = -1e308) const;

  // An Error whose message is prefixed with the op's name.
  template <class... A>
  Error fail(fmt::format_string<A...> f, A&&... a) const {
    return Error{sig_.op + ": " + fmt::format(f, std::forward<A>(a)...)};
  }

 private:
  const TensorSig* findSig(const std::string& name) const;
  Status checkShape(const std::string& name, const HostTensor& t, const std::vector<Dim>& dims) const;

  const OpSignature& sig_;
  OpAttrs attrs_;
  TensorMap& tensors_;
};

// Poison byte of fresh outputs (bf16 0xA5A5 ~ -2.9e-16, i32 0xA5A5A5A5 < -1).
constexpr uint8_t kOutputPoisonByte = 0xA5;

// Upper bounds of size attributes: far above any real model, low enough that derived sizes
// (pages of BS*584 bytes, rows of K + window entries) cannot overflow or exhaust memory.
constexpr int64_t kMaxBlockSize = int64_t(1) << 20;
constexpr int64_t kMaxRowEntries = int64_t(1) << 24;

}  // namespace deepinfer::ref

// Evaluate a Result-returning expression; on error return it, else bind its value to `var`.
#define REF_ASSIGN(var, expr)                            \
  auto var##_result_ = (expr);                           \
  if (!var##_result_.ok()) return var##_result_.error(); \
  auto var = std::move(var##_result_).value()
