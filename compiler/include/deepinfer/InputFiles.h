// Reading files that come from outside the program (configs, checkpoint indexes, tuning files,
// cache archives, prompts): every read has a ceiling, so `/dev/zero` or a runaway file is an
// error naming the file and the limit, never an unbounded allocation.
#pragma once
#include <cstdint>
#include <string>

#include "deepinfer/Error.h"

namespace deepinfer {

// Ceilings of the inputs with a known maximum size.
inline constexpr uint64_t kMaxConfigBytes = uint64_t(16) << 20;        // config.json, index.json
inline constexpr uint64_t kMaxTuningFileBytes = uint64_t(256) << 20;   // one tuning file
inline constexpr uint64_t kMaxKernelEntryBytes = uint64_t(512) << 20;  // one kernel cache entry
inline constexpr uint64_t kMaxPromptFileBytes = uint64_t(64) << 20;    // --prompt-file
// Thread / job counts a caller may ask for: beyond this, thread creation would fail with an
// exception (or swamp the machine) long before it helps.
inline constexpr int kMaxThreads = 1024;

// The whole file at `path`, or an error naming `what` and the path: it cannot be opened, is a
// directory, fails to read, or holds more than `maxBytes` bytes (only maxBytes + 1 are read).
Result<std::string> readFileBounded(const std::string& path, uint64_t maxBytes, const std::string& what);

}  // namespace deepinfer
