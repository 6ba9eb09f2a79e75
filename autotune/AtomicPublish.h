// The one way the caches publish a file: write `body` to a staging path the caller chose (its
// name tells a cleaner whose it is), fsync, then rename over `finalPath`; any failure removes
// the staged file and publishes nothing. Readers see the old file or the whole new one.
#pragma once
#include <string>

#include "deepinfer/Error.h"

namespace deepinfer {

Status publishAtomically(const std::string& stagedPath, const std::string& finalPath, const std::string& body);

}  // namespace deepinfer
