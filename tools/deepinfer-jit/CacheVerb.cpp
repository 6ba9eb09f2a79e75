// `deepinfer-jit cache list|verify|clear|export FILE|import FILE`: the content-keyed kernel cache
// on disk, and archives of it with the tuning files.
//
// Archive format (one file): the line "DEEPINFER-JIT-CACHE-ARCHIVE-1", then per record the line
// "<kernel|tuning> <name> <bytes> <sha256 of the bytes>", the bytes and a newline, and last
// "end <records>". Import reads it with a bound on every read and checks every record's size and
// hash, then its contents; a record failing any check is refused with the reason and nothing of
// it is written, and nothing existing is replaced without --replace:
//   - a kernel entry must be stored under the key of the source it records (this build's NVRTC
//     and templates), and that source, recompiled here, must give exactly its PTX and cubin; what
//     lands is this compile (BinaryCache::importEntry). An archive therefore cannot plant a
//     kernel; the price is one compile per imported kernel.
//   - a tuning file must pass its format, content hash and the key its name says. It holds config
//     strings, which the JIT checks like any config before use (checkConfig), so a planted one can
//     at worst pick a slower valid config.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "Args.h"
#include "Verbs.h"
#include "deepinfer/BinaryCache.h"
#include "deepinfer/InputFiles.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TuningCache.h"

using namespace deepinfer;

namespace {

constexpr char kArchiveMagic[] = "DEEPINFER-JIT-CACHE-ARCHIVE-1";

int exportArchive(const BinaryCache& c, const std::string& file) {
  std::string out = std::string(kArchiveMagic) + "\n";
  int records = 0, skipped = 0;
  auto add = [&](const char* kind, const std::string& name, const std::string& bytes) {
    out += fmt::format("{} {} {} {}\n", kind, name, bytes.size(), sha256Hex(bytes));
    out += bytes;
    out += "\n";
    ++records;
  };
  int kernels = 0, tunings = 0;
  for (const auto& e : c.list()) {
    auto bytes = c.readEntry(e.key);
    if (!bytes.ok()) {
      fmt::print(stderr, "deepinfer-jit cache export: skipped: {}\n", bytes.error().message);
      ++skipped;
      continue;
    }
    add("kernel", e.key, *bytes);
    ++kernels;
  }
  const std::string tdir = c.dir() + "/tuning";
  for (const auto& name : TuningCache::listFiles(tdir)) {
    std::ifstream f(tdir + "/" + name, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    if (auto md = TuningCache::inspect(text); !md.ok()) {
      fmt::print(stderr, "deepinfer-jit cache export: skipped tuning file {}: {}\n", name, md.error().message);
      ++skipped;
      continue;
    }
    add("tuning", name, text);
    ++tunings;
  }
  out += fmt::format("end {}\n", records);
  const std::string tmp = file + ".partial";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out;
    f.close();
    if (!f) return fmt::print(stderr, "deepinfer-jit cache export: cannot write {}\n", tmp), 1;
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0)
    return fmt::print(stderr, "deepinfer-jit cache export: cannot publish {}\n", file), 1;
  fmt::print("exported {} kernel entries and {} tuning files from {} to {} ({} bytes){}\n", kernels, tunings, c.dir(),
             file, out.size(), skipped ? fmt::format("; {} bad entries skipped", skipped) : "");
  return skipped ? 1 : 0;
}

// Reads an archive record by record with a bound on every read: a header line of at most
// kMaxLine bytes, then exactly the record's declared size, refused before reading when it
// exceeds its kind's limit (so `/dev/zero`, a runaway file or a size of 2^64-1 is a message).
class ArchiveReader {
 public:
  static constexpr size_t kMaxLine = 512;
  explicit ArchiveReader(FILE* f) : f_(f) {}
  // The next line without its newline; false at end of file or when longer than kMaxLine.
  bool line(std::string* out, bool* tooLong) {
    out->clear();
    *tooLong = false;
    for (int c; (c = std::fgetc(f_)) != EOF;) {
      if (c == '\n') return true;
      if (out->size() >= kMaxLine) return *tooLong = true, false;
      out->push_back(char(c));
    }
    return false;
  }
  // Exactly n bytes followed by a newline.
  bool body(uint64_t n, std::string* out) {
    out->resize(size_t(n));
    if (n > 0 && std::fread(out->data(), 1, size_t(n), f_) != size_t(n)) return false;
    return std::fgetc(f_) == '\n';
  }

 private:
  FILE* f_;
};

// A decimal size with nothing else in it, or nullopt.
std::optional<uint64_t> parseSize(const std::string& s) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (errno != 0) return std::nullopt;
  return uint64_t(v);
}

int importArchive(const BinaryCache& c, const std::string& file, bool replace) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(file.c_str(), "rb"), std::fclose);
  if (!f) return fmt::print(stderr, "deepinfer-jit cache import: cannot read {}: {}\n", file, std::strerror(errno)), 1;
  ArchiveReader in(f.get());
  std::string l;
  bool tooLong = false;
  if (!in.line(&l, &tooLong) || l != kArchiveMagic)
    return fmt::print(stderr, "deepinfer-jit cache import: {} is not a deepinfer-jit cache archive (bad header); "
                              "nothing imported\n", file), 1;
  int kernels = 0, tunings = 0, unchanged = 0, refused = 0, records = 0;
  const std::string tdir = c.dir() + "/tuning";
  for (;;) {
    if (!in.line(&l, &tooLong)) {
      fmt::print(stderr, "deepinfer-jit cache import: {} {} after {} records{}\n", file,
                 tooLong ? "has an over-long record header" : "is truncated", records,
                 tooLong ? "; stopping" : " (no end line)");
      ++refused;
      break;
    }
    std::istringstream hdr(l);
    std::string kind, name, sizeText, hash, extra;
    hdr >> kind;
    if (kind == "end") {
      int n = -1;
      if (!(hdr >> n) || n != records) {
        fmt::print(stderr, "deepinfer-jit cache import: {} says {} records, read {}\n", file, n, records);
        ++refused;
      }
      break;
    }
    const auto size = (hdr >> name >> sizeText >> hash) && !(hdr >> extra) ? parseSize(sizeText) : std::nullopt;
    if (!size) {
      fmt::print(stderr, "deepinfer-jit cache import: malformed record header '{}'; stopping\n", l.substr(0, 120));
      ++refused;
      break;
    }
    const uint64_t limit = kind == "tuning" ? kMaxTuningFileBytes : kMaxKernelEntryBytes;
    if (*size > limit) {
      fmt::print(stderr, "deepinfer-jit cache import: record {} {} declares {} bytes, over the {}-byte limit of a {} "
                         "record; stopping\n",
                 kind, name.substr(0, 80), *size, limit, kind);
      ++refused;
      break;
    }
    std::string bytes;
    if (!in.body(*size, &bytes)) {
      fmt::print(stderr, "deepinfer-jit cache import: {} is truncated inside record {} {}; stopping\n", file, kind,
                 name.substr(0, 80));
      ++refused;
      break;
    }
    ++records;
    if (sha256Hex(bytes) != hash) {
      fmt::print(stderr, "deepinfer-jit cache import: refused {} {}: its bytes fail the archive's SHA-256 (corrupt)\n",
                 kind, name.substr(0, 80));
      ++refused;
      continue;
    }
    Result<bool> wrote = Error{""};
    if (kind == "kernel") wrote = c.importEntry(name, bytes, replace);
    else if (kind == "tuning") wrote = TuningCache::importFile(tdir, name, bytes, replace);
    else wrote = Error{fmt::format("record of unknown kind '{}' ({})", kind.substr(0, 40), name.substr(0, 80))};
    if (!wrote.ok()) {
      fmt::print(stderr, "deepinfer-jit cache import: refused: {}\n", wrote.error().message);
      ++refused;
    } else if (!*wrote) {
      ++unchanged;
    } else {
      ++(kind == "kernel" ? kernels : tunings);
    }
  }
  fmt::print("imported {} kernel entries and {} tuning files into {}{}{}\n", kernels, tunings, c.dir(),
             unchanged ? fmt::format(" ({} already present and identical)", unchanged) : "",
             refused ? fmt::format("; {} refused", refused) : "");
  return refused ? 1 : 0;
}

}  // namespace

int verbCache(const std::vector<std::string>& argv) {
  cli::Args args("cache", "cache list|verify [--quick]|clear|export FILE|import FILE [--replace] [--dir DIR]");
  args.option("dir", "DIR", "the cache directory (default: $DEEPINFER_JIT_CACHE_DIR, $XDG_CACHE_HOME/deepinfer-jit, ~/.cache/deepinfer-jit)");
  args.flag("replace", "import: replace an existing kernel entry or tuning file of the same key");
  args.flag("quick", "verify: check headers and hashes only (no recompile)");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (args.positional().empty()) return args.usageError("say list, verify, clear, export FILE or import FILE");
  const std::string what = args.positional()[0];
  const bool withFile = what == "export" || what == "import";
  if (what != "list" && what != "verify" && what != "clear" && !withFile)
    return args.usageError(fmt::format("'{}' is not list, verify, clear, export or import", what));
  if (args.positional().size() != (withFile ? 2u : 1u))
    return args.usageError(withFile ? what + " takes one FILE" : what + " takes no further arguments");
  // Only import writes; the other verbs create nothing (a mistyped --dir is an error).
  const bool writes = what == "import";
  auto c = BinaryCache::open(args.get("dir", BinaryCache::defaultDir()), /*create=*/writes);
  if (!c.ok()) return fmt::print(stderr, "deepinfer-jit cache {}: {}\n", what, c.error().message), 1;
  if (what == "export") return exportArchive(*c, args.positional()[1]);
  if (what == "import") return importArchive(*c, args.positional()[1], args.has("replace"));
  if (what == "list") {
    int64_t total = 0;
    const auto entries = c->list();
    for (const auto& e : entries) {
      char when[32];
      const std::time_t t = e.mtime;
      std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M", std::gmtime(&t));
      auto u = c->inspect(e.key);
      const std::string target =
          u.ok() ? fmt::format("{}_{} {}", u->origin.cubin ? "sm" : "compute", u->origin.arch, u->origin.cubin ? "cubin" : "PTX")
                 : std::string("?");
      fmt::print("{}  {:<18} {:>10} B  {}  {}\n", e.key.substr(0, 16), target, e.bytes, when,
                 u.ok() ? u->origin.unit.label : "(unreadable: " + u.error().message + ")");
      total += e.bytes;
    }
    fmt::print("{} entries, {} bytes in {}\n", entries.size(), total, c->dir());
    const auto tfiles = TuningCache::listFiles(c->dir() + "/tuning");
    if (!tfiles.empty()) fmt::print("{} tuning files in {}/tuning\n", tfiles.size(), c->dir());
    return 0;
  }
  if (what == "verify") {
    const size_t n = c->list().size();
    auto problems = c->verify(!args.has("quick"));
    for (const auto& p : problems) fmt::print("{}\n", p);
    fmt::print("{} entries checked{}, {} bad (evicted where ours)\n", n,
               args.has("quick") ? " (headers and hashes only)" : " (each recompiled from its recorded source)",
               problems.size());
    return problems.empty() ? 0 : 1;
  }
  auto n = c->clear();
  if (!n.ok()) return fmt::print(stderr, "deepinfer-jit cache clear: {}\n", n.error().message), 1;
  fmt::print("removed {} entries from {}\n", *n, c->dir());
  return 0;
}
