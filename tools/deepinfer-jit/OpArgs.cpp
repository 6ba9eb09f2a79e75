#include "OpArgs.h"

#include <fmt/format.h>

#include <cstdlib>

#include "deepinfer/LocalGpu.h"

namespace deepinfer::cli {

bool parseIntPairs(const Args& a, const std::string& flag, std::map<std::string, int64_t>* out) {
  for (const auto& kv : a.getAll(flag)) {
    std::string k, v;
    char* end = nullptr;
    if (!parseKeyValue(kv, &k, &v)) return a.usageError(fmt::format("--{} '{}' is not k=v", flag, kv)), false;
    long long n = std::strtoll(v.c_str(), &end, 0);
    if (*end) return a.usageError(fmt::format("--{} {}: '{}' is not an integer", flag, k, v)), false;
    (*out)[k] = n;
  }
  return true;
}

bool parseAttrPairs(const Args& a, const std::string& flag, OpAttrs* out) {
  for (const auto& kv : a.getAll(flag)) {
    std::string k, v;
    if (!parseKeyValue(kv, &k, &v)) return a.usageError(fmt::format("--{} '{}' is not k=v", flag, kv)), false;
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 0);
    if (!*end) {
      out->setInt(k, n);
      continue;
    }
    double f = std::strtod(v.c_str(), &end);
    if (*end) return a.usageError(fmt::format("--{} {}: '{}' is not a number", flag, k, v)), false;
    out->setFloat(k, f);
  }
  return true;
}

Result<TargetProfile> resolveTarget(const std::string& name) {
  if (name == "auto" || name == "local") {
    auto g = localGpu(0);
    if (!g.ok()) return Error{fmt::format("--target {}: {}", name, g.error().message)};
    return g->profile;
  }
  auto t = findTarget(name);
  if (!t) {
    std::string names;
    for (const auto& p : targetPresets()) names += (names.empty() ? "" : ", ") + p.name;
    return Error{fmt::format("unknown target '{}' (known: {}, auto)", name, names)};
  }
  return *t;
}

}  // namespace deepinfer::cli
