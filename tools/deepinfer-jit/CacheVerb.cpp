// `deepinfer-jit cache list|verify|clear|export FILE|import FILE`: the content-keyed kernel cache
// on disk, and archives of it with the tuning files.
//
// Archive format (one file): the line "DEEPINFER-JIT-CACHE-ARCHIVE-1", then per record the line
// "<kernel|tuning> <name> <bytes> <sha256 of the bytes>", the bytes and a newline, and last
// "end <records>". Import checks every record's size and hash, then its contents (a kernel entry
// must be whole and pass its own hash; a tuning file its format, content hash and the key its name
// says); a record failing any check is refused with the reason and nothing of it is written.
#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <sstream>

#include "Args.h"
#include "Verbs.h"
#include "deepinfer/BinaryCache.h"
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

int importArchive(const BinaryCache& c, const std::string& file, bool replace) {
  std::ifstream f(file, std::ios::binary);
  if (!f) return fmt::print(stderr, "deepinfer-jit cache import: cannot read {}\n", file), 1;
  const std::string all((std::istreambuf_iterator<char>(f)), {});
  size_t at = 0;
  auto line = [&](std::string* l) {
    const size_t nl = all.find('\n', at);
    if (nl == std::string::npos) return false;
    *l = all.substr(at, nl - at);
    at = nl + 1;
    return true;
  };
  std::string l;
  if (!line(&l) || l != kArchiveMagic)
    return fmt::print(stderr, "deepinfer-jit cache import: {} is not a deepinfer-jit cache archive (bad header); "
                              "nothing imported\n", file), 1;
  int kernels = 0, tunings = 0, unchanged = 0, refused = 0, records = 0;
  const std::string tdir = c.dir() + "/tuning";
  for (;;) {
    if (!line(&l)) {
      fmt::print(stderr, "deepinfer-jit cache import: {} is truncated after {} records (no end line)\n", file, records);
      ++refused;
      break;
    }
    std::istringstream hdr(l);
    std::string kind, name, hash;
    size_t size = 0;
    hdr >> kind;
    if (kind == "end") {
      int n = -1;
      if (!(hdr >> n) || n != records) {
        fmt::print(stderr, "deepinfer-jit cache import: {} says {} records, read {}\n", file, n, records);
        ++refused;
      }
      break;
    }
    if (!(hdr >> name >> size >> hash) || at + size + 1 > all.size() || all[at + size] != '\n') {
      fmt::print(stderr, "deepinfer-jit cache import: malformed or truncated record header '{}'; stopping\n",
                 l.substr(0, 120));
      ++refused;
      break;
    }
    const std::string bytes = all.substr(at, size);
    at += size + 1;
    ++records;
    if (sha256Hex(bytes) != hash) {
      fmt::print(stderr, "deepinfer-jit cache import: refused {} {}: its bytes fail the archive's SHA-256 (corrupt)\n",
                 kind, name);
      ++refused;
      continue;
    }
    if (kind == "kernel") {
      if (Status s = c.importEntry(name, bytes); !s.ok()) {
        fmt::print(stderr, "deepinfer-jit cache import: refused: {}\n", s.error().message);
        ++refused;
      } else {
        ++kernels;
      }
    } else if (kind == "tuning") {
      auto w = TuningCache::importFile(tdir, name, bytes, replace);
      if (!w.ok()) {
        fmt::print(stderr, "deepinfer-jit cache import: refused: {}\n", w.error().message);
        ++refused;
      } else if (*w) {
        ++tunings;
      } else {
        ++unchanged;
      }
    } else {
      fmt::print(stderr, "deepinfer-jit cache import: refused record of unknown kind '{}' ({})\n", kind, name);
      ++refused;
    }
  }
  fmt::print("imported {} kernel entries and {} tuning files into {}{}{}\n", kernels, tunings, c.dir(),
             unchanged ? fmt::format(" ({} tuning files already identical)", unchanged) : "",
             refused ? fmt::format("; {} refused", refused) : "");
  return refused ? 1 : 0;
}

}  // namespace

int verbCache(const std::vector<std::string>& argv) {
  cli::Args args("cache", "cache list|verify|clear|export FILE|import FILE [--dir DIR]");
  args.option("dir", "DIR", "the cache directory (default: $DEEPINFER_JIT_CACHE_DIR, $XDG_CACHE_HOME/deepinfer-jit, ~/.cache/deepinfer-jit)");
  args.flag("replace", "import: replace an existing tuning file of the same key with the archive's");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (args.positional().empty()) return args.usageError("say list, verify, clear, export FILE or import FILE");
  const std::string what = args.positional()[0];
  const bool withFile = what == "export" || what == "import";
  if (what != "list" && what != "verify" && what != "clear" && !withFile)
    return args.usageError(fmt::format("'{}' is not list, verify, clear, export or import", what));
  if (args.positional().size() != (withFile ? 2u : 1u))
    return args.usageError(withFile ? what + " takes one FILE" : what + " takes no further arguments");
  auto c = BinaryCache::open(args.get("dir", BinaryCache::defaultDir()));
  if (!c.ok()) return fmt::print(stderr, "error: {}\n", c.error().message), 1;
  if (what == "export") return exportArchive(*c, args.positional()[1]);
  if (what == "import") return importArchive(*c, args.positional()[1], args.has("replace"));
  if (what == "list") {
    int64_t total = 0;
    for (const auto& e : c->list()) {
      char when[32];
      const std::time_t t = e.mtime;
      std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M", std::gmtime(&t));
      fmt::print("{}  {:>10} B  {}\n", e.key, e.bytes, when);
      total += e.bytes;
    }
    fmt::print("{} entries, {} bytes in {}\n", c->list().size(), total, c->dir());
    const auto tfiles = TuningCache::listFiles(c->dir() + "/tuning");
    if (!tfiles.empty()) fmt::print("{} tuning files in {}/tuning\n", tfiles.size(), c->dir());
    return 0;
  }
  if (what == "verify") {
    const size_t n = c->list().size();
    auto problems = c->verify();
    for (const auto& p : problems) fmt::print("{}\n", p);
    fmt::print("{} entries checked, {} bad (evicted where ours)\n", n, problems.size());
    return problems.empty() ? 0 : 1;
  }
  auto n = c->clear();
  if (!n.ok()) return fmt::print(stderr, "error: {}\n", n.error().message), 1;
  fmt::print("removed {} entries from {}\n", *n, c->dir());
  return 0;
}
