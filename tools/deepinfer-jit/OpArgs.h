// Shared parsing of --op/--shape/--config/--attr/--target for the kernel verbs.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "Args.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/TargetProfile.h"

namespace deepinfer::cli {

// "k=v" integers; false (after printing the error) on a malformed pair.
bool parseIntPairs(const Args& a, const std::string& flag, std::map<std::string, int64_t>* out);
// "k=v" attributes: integers stay integers, anything else parses as a float.
bool parseAttrPairs(const Args& a, const std::string& flag, OpAttrs* out);
// A target by preset/arch name, or "auto"/"local" for the local GPU (registered as "local").
Result<TargetProfile> resolveTarget(const std::string& name);

}  // namespace deepinfer::cli
