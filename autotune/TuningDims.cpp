#include "deepinfer/TuningDims.h"

#include <fmt/format.h>

namespace deepinfer {

std::optional<std::string> tuningDims(const OpDesc& d) {
  const KernelFamily* fam = findKernelFamily(d.op);
  if (!fam) return std::nullopt;
  std::string s;
  for (const auto& [name, v] : fam->tuningDims(d)) {
    if (!v) return std::nullopt;
    s += fmt::format("{}{}={}", s.empty() ? "" : ",", name, *v);
  }
  return s;
}

}  // namespace deepinfer
