#include "deepinfer/BinaryCache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "AtomicPublish.h"
#include "PrivateDir.h"
#include "deepinfer/InputFiles.h"
#include "deepinfer/Specialize.h"

namespace deepinfer {
namespace {

// 2: entries record their origin (UnitOrigin: source, entries, label, unit name, arch, cubin,
// fmad), so import and verify can recompute the key and recompile. Entries of format 1 do not
// parse: they are misses, evicted and rebuilt.
constexpr char kMagic[] = "DEEPINFER-JIT-KERNEL-2\n";

// A directory or file we may trust: ours, and not writable by group or others.
Status checkOwnership(const std::string& path, bool isDir) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Error{fmt::format("{}: {}", path, std::strerror(errno))};
  if (isDir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return Error{fmt::format("{} is not a {} (a link or something else); refusing it", path, isDir ? "directory" : "file")};
  if (st.st_uid != ::geteuid())
    return Error{fmt::format("{} is owned by uid {}, not by this user (uid {}); refusing it", path, st.st_uid, ::geteuid())};
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Error{fmt::format("{} is writable by group or others (mode {:o}); refusing it", path, st.st_mode & 0777)};
  return {};
}

Status makeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return Error{fmt::format("cannot create the cache directory {}: {}", path, std::strerror(errno))};
  return checkOwnership(path, true);
}

std::string payloadOf(const CompiledUnit& u) {
  std::string p;
  auto put = [&](const std::string& s) {
    p += fmt::format("{}\n", s.size());
    p += s;
  };
  put(u.ptx);
  put(std::string(u.cubin.begin(), u.cubin.end()));
  put(u.log);
  std::string opts;
  for (const auto& o : u.options) opts += o + "\n";
  put(opts);
  const UnitOrigin& o = u.origin;
  put(o.unit.source);
  std::string entries;
  for (const auto& e : o.unit.entries) entries += e + "\n";
  put(entries);
  put(o.unit.label);
  put(o.unitName);
  put(fmt::format("{} {} {}", o.arch, o.cubin ? 1 : 0, o.fmad ? 1 : 0));
  return p;
}

std::optional<CompiledUnit> parsePayload(const std::string& p) {
  size_t at = 0;
  auto get = [&](std::string* out) {
    const size_t nl = p.find('\n', at);
    if (nl == std::string::npos) return false;
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(p.c_str() + at, &end, 10);
    // Compared as "n > what is left", never "start + n > size", so no size wraps the check.
    if (end != p.c_str() + nl || errno != 0 || n > p.size() - (nl + 1)) return false;
    *out = p.substr(nl + 1, n);
    at = nl + 1 + n;
    return true;
  };
  CompiledUnit u;
  std::string cubin, opts, entries, flags;
  UnitOrigin& o = u.origin;
  if (!get(&u.ptx) || !get(&cubin) || !get(&u.log) || !get(&opts) || !get(&o.unit.source) || !get(&entries) ||
      !get(&o.unit.label) || !get(&o.unitName) || !get(&flags) || at != p.size())
    return std::nullopt;
  u.cubin.assign(cubin.begin(), cubin.end());
  std::istringstream in(opts);
  for (std::string l; std::getline(in, l);) u.options.push_back(l);
  std::istringstream en(entries);
  for (std::string l; std::getline(en, l);) o.unit.entries.push_back(l);
  int cub = -1, fmad = -1;
  std::istringstream fl(flags);
  if (!(fl >> o.arch >> cub >> fmad) || (cub != 0 && cub != 1) || (fmad != 0 && fmad != 1)) return std::nullopt;
  o.cubin = cub == 1;
  o.fmad = fmad == 1;
  u.resources = parsePtxasReport(u.log);
  return u;
}

}  // namespace

std::string BinaryCache::defaultDir() {
  if (const char* d = std::getenv("DEEPINFER_JIT_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fmt::format("{}/deepinfer-jit", x);
  const char* home = std::getenv("HOME");
  return fmt::format("{}/.cache/deepinfer-jit", home && *home ? home : "/tmp");
}

bool BinaryCache::requireHitFromEnv() {
  const char* v = std::getenv("DEEPINFER_JIT_REQUIRE_CACHE_HIT");
  return v && *v && std::string(v) != "0";
}

Result<BinaryCache> BinaryCache::open(const std::string& given, bool create) {
  auto resolved = openPrivateDir(given, create);
  if (!resolved.ok()) return resolved.error();
  const std::string dir = *resolved;
  if (!create) {
    BinaryCache c;
    c.dir_ = dir;
    return c;
  }
  DI_TRY(makeDir(dir + "/kernels"));
  DI_TRY(makeDir(dir + "/locks"));
  DI_TRY(makeDir(dir + "/staging"));
  // Staged files of writers that died (killed mid-write) are never published; remove them.
  if (DIR* d = ::opendir((dir + "/staging").c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      const size_t a = name.find('.'), b = name.rfind('.');
      if (a == std::string::npos || b == a) continue;
      const long pid = std::strtol(name.substr(a + 1, b - a - 1).c_str(), nullptr, 10);
      if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) ::unlink((dir + "/staging/" + name).c_str());
    }
    ::closedir(d);
  }
  BinaryCache c;
  c.dir_ = dir;
  return c;
}

std::string BinaryCache::entryPath(const std::string& key) const {
  return fmt::format("{}/kernels/{}.bin", dir_, key);
}

// The unit in an entry file's bytes, or what is wrong with them.
static Result<CompiledUnit> parseEntry(const std::string& all) {
  const size_t magicLen = sizeof(kMagic) - 1;
  if (all.compare(0, magicLen, kMagic) != 0) return Error{"has no valid header (torn or foreign)"};
  // Header: magic, "<payload bytes> <sha256>\n", payload.
  const size_t nl = all.find('\n', magicLen);
  if (nl == std::string::npos) return Error{"is truncated in its header"};
  std::istringstream hdr(all.substr(magicLen, nl - magicLen));
  size_t size = 0;
  std::string hash;
  if (!(hdr >> size >> hash)) return Error{"has a malformed header"};
  if (all.size() > kMaxKernelEntryBytes) return Error{fmt::format("is larger than {} bytes", kMaxKernelEntryBytes)};
  const std::string payload = all.substr(nl + 1);
  if (payload.size() != size)
    return Error{fmt::format("holds {} payload bytes, expected {} (torn write)", payload.size(), size)};
  if (sha256Hex(payload) != hash) return Error{"fails its content hash (corrupt)"};
  auto u = parsePayload(payload);
  if (!u) return Error{"has a malformed payload"};
  return *u;
}

// The file bytes of an entry, bounded (an entry is never larger than kMaxKernelEntryBytes).
static Result<std::string> readEntryFile(const std::string& path) {
  auto all = readFileBounded(path, kMaxKernelEntryBytes, "cache entry");
  if (!all.ok()) return Error{all.error().message};
  return all;
}

std::optional<CompiledUnit> BinaryCache::load(const std::string& key, std::string* warning) const {
  const std::string path = entryPath(key);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;  // plain miss
  auto reject = [&](const std::string& why, bool evict) -> std::optional<CompiledUnit> {
    if (warning) *warning = fmt::format("cache entry {} {}; {}", path, why, evict ? "evicted, rebuilding" : "ignored");
    if (evict) ::unlink(path.c_str());
    return std::nullopt;
  };
  if (auto own = checkOwnership(path, false); !own.ok()) return reject(own.error().message, false);
  auto all = readEntryFile(path);
  if (!all.ok()) return reject(all.error().message, true);
  auto u = parseEntry(*all);
  if (!u.ok()) return reject(u.error().message, true);
  return *u;
}

Result<CompiledUnit> BinaryCache::inspect(const std::string& key) const {
  const std::string path = entryPath(key);
  DI_TRY(checkOwnership(path, false));
  auto all = readEntryFile(path);
  if (!all.ok()) return all.error();
  auto u = parseEntry(*all);
  if (!u.ok()) return Error{fmt::format("cache entry {} {}", path, u.error().message)};
  return u;
}

Result<std::string> BinaryCache::readEntry(const std::string& key) const {
  const std::string path = entryPath(key);
  DI_TRY(checkOwnership(path, false));
  auto all = readEntryFile(path);
  if (!all.ok()) return all.error();
  if (auto u = parseEntry(*all); !u.ok()) return Error{fmt::format("cache entry {} {}", path, u.error().message)};
  return all;
}

Result<CompiledUnit> BinaryCache::recompileAndCompare(const std::string& key, const CompiledUnit& u) {
  const UnitOrigin& o = u.origin;
  const std::string mine = unitContentKey(o);
  if (mine != key)
    return Error{fmt::format("is stored under a key that is not its recorded source's ({}...: another build's NVRTC "
                             "or templates, or a planted entry)",
                             mine.substr(0, 16))};
  auto again = compileUnit(o.unit, o.unitName, o.arch, o.cubin, o.fmad);
  if (!again.ok()) return Error{fmt::format("does not recompile: {}", again.error().message)};
  if (again->ptx != u.ptx) return Error{"holds PTX that is not what its recorded source compiles to (planted or altered)"};
  if (again->cubin != u.cubin)
    return Error{"holds a cubin that is not what its recorded source compiles to (planted or altered)"};
  return again;
}

Result<bool> BinaryCache::importEntry(const std::string& key, const std::string& bytes, bool replace) const {
  const bool hex = key.size() == 64 && key.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex) return Error{fmt::format("'{}' is not a kernel cache key (64 lowercase hex digits)", key.substr(0, 80))};
  auto u = parseEntry(bytes);
  if (!u.ok()) return Error{fmt::format("kernel entry {} {}", key.substr(0, 16), u.error().message)};
  const std::string what = fmt::format("kernel entry {} ({})", key.substr(0, 16), u->origin.unit.label);
  auto mine = recompileAndCompare(key, *u);
  if (!mine.ok()) return Error{fmt::format("{} {}", what, mine.error().message)};
  if (auto have = load(key); have && !replace) {
    if (have->ptx == mine->ptx && have->cubin == mine->cubin) return false;
    return Error{fmt::format("{}: {} exists with other contents; kept (--replace replaces it)", what, entryPath(key))};
  }
  DI_TRY(store(key, *mine));
  return true;
}

Status BinaryCache::store(const std::string& key, const CompiledUnit& unit) const {
  const std::string payload = payloadOf(unit);
  const std::string body = fmt::format("{}{} {}\n", kMagic, payload.size(), sha256Hex(payload)) + payload;
  std::random_device rd;
  const std::string tmp = fmt::format("{}/staging/{}.{}.{:x}", dir_, key, ::getpid(), rd());
  return publishAtomically(tmp, entryPath(key), body);
}

std::vector<BinaryCache::EntryInfo> BinaryCache::list() const {
  std::vector<EntryInfo> out;
  if (DIR* d = ::opendir((dir_ + "/kernels").c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() < 5 || name.substr(name.size() - 4) != ".bin") continue;
      struct stat st;
      if (::lstat((dir_ + "/kernels/" + name).c_str(), &st) != 0) continue;
      out.push_back({name.substr(0, name.size() - 4), int64_t(st.st_size), int64_t(st.st_mtime)});
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end(), [](const EntryInfo& a, const EntryInfo& b) { return a.key < b.key; });
  return out;
}

std::vector<std::string> BinaryCache::verify(bool recompile) const {
  std::vector<std::string> problems;
  for (const auto& e : list()) {
    std::string warning;
    auto u = load(e.key, &warning);
    if (!u) {
      problems.push_back(warning.empty() ? fmt::format("{}: unreadable", e.key) : warning);
      continue;
    }
    if (!recompile) continue;
    if (auto ok = recompileAndCompare(e.key, *u); !ok.ok()) {
      ::unlink(entryPath(e.key).c_str());
      problems.push_back(fmt::format("cache entry {} ({}) {}; evicted", entryPath(e.key), u->origin.unit.label,
                                     ok.error().message));
    }
  }
  return problems;
}

Result<int> BinaryCache::clear() const {
  int n = 0;
  for (const auto& e : list()) {
    if (::unlink(entryPath(e.key).c_str()) != 0)
      return Error{fmt::format("cannot remove {}: {}", entryPath(e.key), std::strerror(errno))};
    ++n;
  }
  return n;
}

Result<CompiledUnit> BinaryCache::getOrCompile(const std::string& key, const std::string& what,
                                               const std::function<Result<CompiledUnit>()>& compile,
                                               bool requireHit, bool* compiled) const {
  if (compiled) *compiled = false;
  std::string warning;
  if (auto u = load(key, &warning)) return *u;
  if (!warning.empty()) fmt::print(stderr, "deepinfer-jit: warning: {}\n", warning);
  if (requireHit)
    return Error{fmt::format("cache miss for {} (key {}) in {}, and a cache hit is required "
                             "(--require-cache-hit / DEEPINFER_JIT_REQUIRE_CACHE_HIT); run `deepinfer-jit "
                             "tune` or `compile` for this GPU first",
                             what, key.substr(0, 16), dir_)};
  const std::string lockPath = fmt::format("{}/locks/{}.lock", dir_, key);
  const int lfd = ::open(lockPath.c_str(), O_RDWR | O_CREAT, 0600);
  if (lfd < 0) return Error{fmt::format("cannot open the lock {}: {}", lockPath, std::strerror(errno))};
  while (::flock(lfd, LOCK_EX) != 0 && errno == EINTR) {
  }
  // Another process may have published it while we waited.
  warning.clear();
  if (auto u = load(key, &warning)) {
    ::close(lfd);
    return *u;
  }
  fmt::print(stderr, "deepinfer-jit: compiling {} (cache miss)\n", what);
  auto u = compile();
  if (u.ok()) {
    if (compiled) *compiled = true;
    if (auto st = store(key, *u); !st.ok())
      fmt::print(stderr, "deepinfer-jit: warning: not cached: {}\n", st.error().message);
  }
  ::close(lfd);  // releases the lock; the lock file stays (never deleted)
  return u;
}

Result<CompiledUnit> compileThroughCache(const BinaryCache* cache, const std::string& key, const std::string& what,
                                         const std::function<Result<CompiledUnit>()>& compile, bool requireHit,
                                         bool* compiled) {
  *compiled = false;
  if (cache) return cache->getOrCompile(key, what, compile, requireHit, compiled);
  if (requireHit)
    return Error{fmt::format("a cache hit is required for {}, but the kernel cache is not available", what)};
  fmt::print(stderr, "deepinfer-jit: compiling {}\n", what);
  *compiled = true;
  return compile();
}

}  // namespace deepinfer
