// The directories the caches keep (the kernel cache, its tuning/ folder): ours and private, so
// nobody else can plant what the next run loads (docs/caches.md).
//
// A directory given as a symlink is resolved explicitly, once: the link must be ours and its
// target must pass the same checks (a directory owned by this user, not writable by group or
// others); the caller then uses the resolved path, so swapping the link later cannot redirect an
// open cache. (A home directory on a small quota commonly links ~/.cache to scratch storage;
// refusing links would push such users to run without a cache.)
#pragma once
#include <string>

#include "deepinfer/Error.h"

namespace deepinfer {

// The checked, resolved directory. With `create`, missing parents are created and the directory
// itself is created with mode 0700; without it, a missing directory is an error (read-only uses
// create nothing).
Result<std::string> openPrivateDir(const std::string& dir, bool create);

}  // namespace deepinfer
