// deepinfer._deepinfer: the nanobind extension behind the `deepinfer` package.
#include <fmt/format.h>

#include "Bindings.h"
#include "deepinfer/OpSignature.h"

namespace deepinfer::py {

void requireOp(const std::string& op) {
  if (findOpSignature(op)) return;
  std::string names;
  for (const auto& s : opSignatures()) names += (names.empty() ? "" : ", ") + s.op;
  throw DiError(fmt::format("unknown op '{}' (ops: {})", op, names));
}

OpAttrs attrsFromDict(const std::string& op, const nb::dict& attrs) {
  const OpSignature* sig = findOpSignature(op);
  OpAttrs a;
  for (auto [key, value] : attrs) {
    const std::string name = nb::cast<std::string>(key);
    const AttrSig* as = nullptr;
    if (sig)
      for (const auto& s : sig->attrs)
        if (s.name == name) as = &s;
    const bool isBool = nb::isinstance<nb::bool_>(value);
    if (as && as->kind == AttrKind::String) {
      // A string attribute has one supported value (its default, e.g. cache_format), which the
      // kernels assume; OpAttrs carries numbers only.
      if (!nb::isinstance<nb::str>(value) || nb::cast<std::string>(value) != as->dfltText)
        throw DiError(fmt::format("{}: attribute '{}' must be '{}', got {}", op, name, as->dfltText,
                                  nb::cast<std::string>(nb::repr(value))));
    } else if (nb::isinstance<nb::int_>(value) && !isBool) {
      a.setInt(name, nb::cast<int64_t>(value));
    } else if (nb::isinstance<nb::float_>(value) && !(as && as->kind == AttrKind::Int)) {
      a.setFloat(name, nb::cast<double>(value));
    } else {
      throw DiError(fmt::format("{}: attribute '{}' must be {}, got {}", op, name,
                                as && as->kind == AttrKind::Int ? "an int" : "an int or a float",
                                nb::cast<std::string>(nb::repr(value))));
    }
  }
  return a;
}

std::map<std::string, int64_t> intMapFromDict(const char* what, const nb::dict& d) {
  std::map<std::string, int64_t> out;
  for (auto [key, value] : d) {
    const std::string name = nb::cast<std::string>(key);
    if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value))
      throw DiError(fmt::format("{} '{}' must be an int, got {}", what, name, nb::cast<std::string>(nb::repr(value))));
    out[name] = nb::cast<int64_t>(value);
  }
  return out;
}

}  // namespace deepinfer::py

NB_MODULE(_deepinfer, m) {
  namespace nb = nanobind;
  using namespace deepinfer::py;
  m.doc() = "deepinfer-jit's library from Python (use the `deepinfer` package, not this module).";
  m.attr("__version__") = DI_VERSION_STRING;
  nb::exception<DiError>(m, "Error", PyExc_RuntimeError);
  bindCompiler(m);
  bindCache(m);
  bindOps(m);
  bindEngine(m);
  bindTesting(m);
}
