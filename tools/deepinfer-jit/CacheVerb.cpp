// `deepinfer-jit cache list|verify|clear`: the content-keyed kernel cache on disk.
#include <fmt/format.h>

#include <ctime>

#include "Args.h"
#include "Verbs.h"
#include "deepinfer/BinaryCache.h"

using namespace deepinfer;

int verbCache(const std::vector<std::string>& argv) {
  cli::Args args("cache", "cache list|verify|clear [--dir DIR]");
  args.option("dir", "DIR", "the cache directory (default: $DEEPINFER_JIT_CACHE_DIR, $XDG_CACHE_HOME/deepinfer-jit, ~/.cache/deepinfer-jit)");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (args.positional().size() != 1) return args.usageError("say list, verify or clear");
  const std::string what = args.positional()[0];
  if (what != "list" && what != "verify" && what != "clear")
    return args.usageError(fmt::format("'{}' is not list, verify or clear", what));
  auto c = BinaryCache::open(args.get("dir", BinaryCache::defaultDir()));
  if (!c.ok()) return fmt::print(stderr, "error: {}\n", c.error().message), 1;
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
