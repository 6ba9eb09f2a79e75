// The on-disk cache of compiled kernels, keyed by content (kernelContentKey: emitted source,
// every template header, NVRTC version, canonical options, arch; never paths or timestamps).
//
// Safety (docs/caches.md): an entry is staged in a private temp file and published with
// one atomic rename; it embeds its size and a SHA-256 of its payload, so a torn, corrupt or
// unloadable entry is a miss that is evicted (with a warning) and rebuilt; a per-key flock
// (lock files never deleted) serializes compiles of one key across processes, and the cache is
// re-checked after the lock is taken. The directory is created 0700; a directory or entry owned
// by another user, or writable by group/others, is refused with a warning and never loaded.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Nvrtc.h"

namespace deepinfer {

class BinaryCache {
 public:
  // $DEEPINFER_JIT_CACHE_DIR, else $XDG_CACHE_HOME/deepinfer-jit, else ~/.cache/deepinfer-jit.
  static std::string defaultDir();
  // Opens (creating it 0700 with `create`) or refuses the directory with a message saying why. A
  // directory given as a symlink is resolved once and its target checked (PrivateDir.h); dir()
  // is the resolved path. Without `create` (read-only uses: list, verify, export) nothing is
  // created and a missing directory is an error.
  static Result<BinaryCache> open(const std::string& dir = defaultDir(), bool create = true);
  // $DEEPINFER_JIT_REQUIRE_CACHE_HIT set to anything but "" or "0".
  static bool requireHitFromEnv();

  const std::string& dir() const { return dir_; }
  std::string entryPath(const std::string& key) const;

  // The entry, or nullopt on a miss. A torn/corrupt/foreign entry is a miss: it is evicted
  // (when it is ours) and `warning` says what was wrong.
  std::optional<CompiledUnit> load(const std::string& key, std::string* warning = nullptr) const;
  // Stage, fsync and publish atomically.
  Status store(const std::string& key, const CompiledUnit& unit) const;
  struct EntryInfo {
    std::string key;
    int64_t bytes = 0;
    int64_t mtime = 0;   // seconds since the epoch
  };
  std::vector<EntryInfo> list() const;
  // Check every entry's header, size and hash, and with `recompile` that its key is the key of
  // the source it records and that the source compiles to exactly its PTX and cubin; bad and
  // planted entries are evicted. Returns the problems.
  std::vector<std::string> verify(bool recompile = true) const;
  // A valid entry's unit without loading it for use (no eviction): `cache list` shows its label,
  // arch and sizes.
  Result<CompiledUnit> inspect(const std::string& key) const;
  // The file bytes of a valid entry (for `cache export`), or why it is not valid.
  Result<std::string> readEntry(const std::string& key) const;
  // Installs entry file bytes under `key` (for `cache import`) only if the key is the key of the
  // source the entry records (this build's NVRTC and templates) and that source, recompiled here,
  // gives exactly the entry's PTX and cubin: an archive cannot plant a kernel. What is stored is
  // this compile. An existing valid entry is kept unless `replace`. Returns whether it wrote.
  Result<bool> importEntry(const std::string& key, const std::string& bytes, bool replace) const;
  // `u`'s key and outputs checked against its recorded origin (see importEntry); the recompiled
  // unit, or what is wrong.
  static Result<CompiledUnit> recompileAndCompare(const std::string& key, const CompiledUnit& u);
  // Remove every entry (lock files stay: a process may hold one).
  Result<int> clear() const;

  // Load, else take the key's lock, re-check, compile, store. With `requireHit`, a miss is an
  // error naming the kernel instead of a compile. `compiled` says whether this call compiled.
  Result<CompiledUnit> getOrCompile(const std::string& key, const std::string& what,
                                    const std::function<Result<CompiledUnit>()>& compile, bool requireHit,
                                    bool* compiled = nullptr) const;

 private:
  std::string dir_;
};

// The compile policy of the JIT and the model kernels: through `cache` when there is one (a miss
// compiles and stores), else a compile with a log line; with `requireHit`, a miss (or having no
// cache at all) is an error naming the kernel. `compiled` says whether this call compiled.
Result<CompiledUnit> compileThroughCache(const BinaryCache* cache, const std::string& key, const std::string& what,
                                         const std::function<Result<CompiledUnit>()>& compile, bool requireHit,
                                         bool* compiled);

}  // namespace deepinfer
