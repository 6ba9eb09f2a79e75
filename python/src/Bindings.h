// Shared pieces of the Python extension `deepinfer._deepinfer`: library errors become one Python
// exception type (deepinfer.Error, a RuntimeError) carrying the library's message, and each file
// binds one area of the library.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::py {

namespace nb = nanobind;

struct DiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(const Status& s) {
  if (!s.ok()) throw DiError(s.error().message);
}

template <class T>
T take(Result<T> r) {
  if (!r.ok()) throw DiError(r.error().message);
  return std::move(r).value();
}

// Throws "unknown op 'x' (ops: ...)" unless `op` is a kernel op.
void requireOp(const std::string& op);
// Attributes from a Python dict, typed by the op's signature: an integer attribute takes an int,
// a float attribute an int or a float; unknown names are left to completeAttrs to report.
OpAttrs attrsFromDict(const std::string& op, const nb::dict& attrs);
// A config ({"knob": value}) from a Python dict of ints.
std::map<std::string, int64_t> intMapFromDict(const char* what, const nb::dict& d);
// The host tensor a name in `op`'s signature holds, as the caller's CPU array (BF16 arrives as
// uint16 bit patterns): for the testing helpers.
HostTensor hostTensorFromArray(const std::string& op, const std::string& name, nb::handle array);
// As above with the dtype the tensor must have (an output whose dtype an attribute picks).
HostTensor hostTensorFromArray(const std::string& op, const std::string& name, nb::handle array, DType expected);
// A CPU DLPack array that owns a copy of `t` (BF16 as uint16 bit patterns, which NumPy can hold).
nb::object hostTensorToArray(HostTensor t);

void bindCompiler(nb::module_& m);
void bindCache(nb::module_& m);
void bindOps(nb::module_& m);
void bindEngine(nb::module_& m);
void bindTesting(nb::module_& m);

}  // namespace deepinfer::py
