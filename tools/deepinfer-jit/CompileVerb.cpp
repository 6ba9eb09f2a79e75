// `deepinfer-jit compile`: every op x target x candidate config through NVRTC, with the
// resource report and the checks CI enforces (cap, spills, and the PTX checks of each op's family:
// tensor cores where it needs them, at every shape for the quantized-weight GEMMs, no
// transcendentals in a data-movement kernel).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <future>
#include <fstream>
#include <mutex>
#include <thread>

#include "OpArgs.h"
#include "Verbs.h"
#include "deepinfer/BinaryCache.h"
#include "deepinfer/Jit.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;

namespace {

struct Job {
  std::string shapeName;
  OpDesc desc;
  TargetProfile target;
  ConfigChoice choice;
  PtxChecks checks;  // the family's
  bool isDefault = false;
  // results
  std::string error;
  int regs = 0;
  int64_t smem = 0, spills = 0;
  bool hasMma = false, hasTranscendental = false;
  std::vector<std::string> failures;
};

// Units are compiled once per (source, arch): candidates that differ only in launch geometry
// (grid splits) share their binary and its report.
struct UnitCache {
  std::optional<BinaryCache> disk;  // compiled units persist across runs (and serve the JIT)
  std::mutex mu;
  std::map<std::string, std::shared_future<Result<CompiledUnit>>> byKey;
};

void runJob(Job& j, UnitCache& cache) {
  auto k = emitKernel(j.desc, j.choice.config);
  if (!k.ok()) {
    j.error = k.error().message;
    j.failures.push_back("emit failed");
    return;
  }
  const std::string key = fmt::format("{}\n{}", j.target.arch(), k->unit.source);
  std::shared_future<Result<CompiledUnit>> fut;
  std::promise<Result<CompiledUnit>> mine;
  bool compileHere = false;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.byKey.find(key);
    if (it == cache.byKey.end()) {
      fut = mine.get_future().share();
      cache.byKey.emplace(key, fut);
      compileHere = true;
    } else {
      fut = it->second;
    }
  }
  if (compileHere) {
    auto compile = [&] { return compileUnit(k->unit, k->baseName + ".cu", j.target.arch(), /*cubin=*/true); };
    if (cache.disk)
      mine.set_value(cache.disk->getOrCompile(kernelContentKey(k->unit, j.target.arch(), true),
                                              fmt::format("{} for {}", k->baseName, j.target.archName()), compile,
                                              false));
    else
      mine.set_value(compile());
  }
  const Result<CompiledUnit>& c = fut.get();
  if (!c.ok()) {
    j.error = c.error().message;
    j.failures.push_back("NVRTC failed");
    return;
  }
  uint32_t maxDyn = 0;
  for (const auto& st : k->plan) maxDyn = std::max(maxDyn, st.dynamicSmem);
  for (const auto& [e, r] : c->resources) {
    j.regs = std::max(j.regs, r.registers);
    j.smem = std::max<int64_t>(j.smem, r.smemBytes + maxDyn);
    j.spills += r.spillStores + r.spillLoads;
  }
  j.hasMma = c->ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos;
  j.hasTranscendental = c->ptx.find("ex2.") != std::string::npos || c->ptx.find("lg2.") != std::string::npos;
  if (j.smem > j.target.smemPerCtaCap)
    j.failures.push_back(fmt::format("smem {} > cap {}", j.smem, j.target.smemPerCtaCap));
  if (j.isDefault && j.spills > 0) j.failures.push_back(fmt::format("default config spills {} B", j.spills));
  if (j.checks.tensorCores && !j.hasMma) j.failures.push_back("no mma.sync.m16n8k16 in PTX");
  if (j.checks.noTranscendentals && j.hasTranscendental) j.failures.push_back("ex2/lg2 in the PTX");
}

}  // namespace

int verbCompile(const std::vector<std::string>& argv) {
  cli::Args args("compile", "compile [--op NAME ...] [--target T ...] [--defaults-only] [--jobs N] [--json FILE]");
  args.option("op", "NAME", "only these ops (default: all)", true)
      .option("target", "T", "only these targets (default: sm_80 sm_86 sm_89 sm_90)", true)
      .flag("defaults-only", "compile only each op's default config")
      .option("jobs", "N", "parallel NVRTC compiles (default: CPU count)")
      .option("json", "FILE", "write every row as JSON")
      .flag("quiet", "print only failures and the summary")
      .flag("no-cache", "do not read or write the on-disk kernel cache");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.positional().empty())
    return args.usageError(fmt::format("unexpected argument '{}'", args.positional().front()));
  const auto jobCount = cli::threadCount(args, "jobs", int(std::max(1u, std::thread::hardware_concurrency())), 1);
  if (!jobCount) return 2;
  if (args.has("json"))
    if (Status s = cli::checkOutputPath("--json", args.get("json")); !s.ok()) return args.usageError(s.error().message);

  std::vector<std::string> ops = args.getAll("op");
  if (ops.empty())
    for (const auto& s : opSignatures()) ops.push_back(s.op);
  std::vector<std::string> targetNames = args.getAll("target");
  if (targetNames.empty()) targetNames = defaultTargetNames();

  std::vector<Job> jobs;
  int setupErrors = 0;
  for (const auto& tn : targetNames) {
    auto t = cli::resolveTarget(tn);
    if (!t.ok()) return fmt::print(stderr, "error: {}\n", t.error().message), 2;
    for (const auto& op : ops) {
      const KernelFamily* fam = findKernelFamily(op);
      if (!fam) {
        std::string names;
        for (const auto& s : opSignatures()) names += (names.empty() ? "" : ", ") + s.op;
        return args.usageError(fmt::format("unknown op '{}' (ops: {})", op, names));
      }
      for (const auto& [shapeName, shape] : fam->compileShapes()) {
        auto d = makeOpDesc(op, shape, {});
        if (!d.ok()) { fmt::print(stderr, "error: {}\n", d.error().message); ++setupErrors; continue; }
        auto spec = specialize(*d, *t);
        if (!spec.ok()) {
          fmt::print(stderr, "FAIL {} [{}] on {}: {}\n", op, shapeName, t->name, spec.error().message);
          ++setupErrors;
          continue;
        }
        auto add = [&](const ConfigChoice& c, bool isDefault) {
          Job j;
          j.shapeName = shapeName;
          j.desc = *d;
          j.target = *t;
          j.choice = c;
          j.checks = fam->ptxChecks(*d);
          j.isDefault = isDefault;
          jobs.push_back(std::move(j));
        };
        add(spec->chosen, true);
        if (!args.has("defaults-only"))
          for (const auto& c : spec->fitting)
            if (c.config != spec->chosen.config) add(c, false);
      }
    }
  }

  const unsigned nThreads = unsigned(*jobCount);
  UnitCache unitCache;
  if (!args.has("no-cache")) {
    auto disk = BinaryCache::open();
    if (disk.ok()) unitCache.disk = std::move(disk.value());
    else fmt::print(stderr, "warning: kernel cache disabled: {}\n", disk.error().message);
  }
  std::atomic<size_t> next{0};
  std::mutex printMu;
  size_t done = 0;
  // One rewritten line on a terminal; in a log, a plain line every tenth of the work (no \r).
  const bool tty = ::isatty(2);
  const size_t step = std::max<size_t>(1, jobs.size() / 10);
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      runJob(jobs[i], unitCache);
      std::lock_guard<std::mutex> lock(printMu);
      ++done;
      if (args.has("quiet")) continue;
      if (tty) fmt::print(stderr, "\r[{}/{}] compiled", done, jobs.size());
      else if (done % step == 0 || done == jobs.size()) fmt::print(stderr, "[{}/{}] compiled\n", done, jobs.size());
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < nThreads; ++i) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  if (!args.has("quiet") && tty) fmt::print(stderr, "\n");

  int failures = setupErrors;
  fmt::print("{:<20} {:<8} {:<7} {:<52} {:>4} {:>7} {:>6} {:>4} {}\n", "op", "shape", "target", "config",
             "regs", "smem", "spill", "mma", "status");
  for (const auto& j : jobs) {
    const bool ok = j.failures.empty();
    failures += !ok;
    if (args.has("quiet") && ok) continue;
    std::string status = ok ? (j.isDefault ? "ok (default)" : "ok") : "FAIL: ";
    for (const auto& f : j.failures) status += f + "; ";
    fmt::print("{:<20} {:<8} {:<7} {:<52} {:>4} {:>7} {:>6} {:>4} {}\n", j.desc.op, j.shapeName, j.target.name,
               configToString(j.choice.config), j.regs, j.smem, j.spills, j.hasMma ? "yes" : "-", status);
    if (!j.error.empty()) fmt::print("    {}\n", j.error);
  }
  if (args.has("json")) {
    std::ofstream f(args.get("json"));
    if (!f) return fmt::print(stderr, "deepinfer-jit compile: cannot write {}\n", args.get("json")), 1;
    f << "[\n";
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto& j = jobs[i];
      f << fmt::format(
          "  {{\"op\": \"{}\", \"shape\": \"{}\", \"target\": \"{}\", \"config\": \"{}\", \"default\": {}, "
          "\"regs\": {}, \"smem\": {}, \"spill_bytes\": {}, \"mma\": {}, \"ok\": {}}}{}\n",
          j.desc.op, j.shapeName, j.target.name, configToString(j.choice.config), j.isDefault, j.regs, j.smem,
          j.spills, j.hasMma, j.failures.empty(), i + 1 < jobs.size() ? "," : "");
    }
    f << "]\n";
  }
  fmt::print("{} kernel configs ({} distinct NVRTC units) for {} target(s): {} passed, {} failed\n", jobs.size(),
             unitCache.byKey.size(), targetNames.size(), int(jobs.size()) - (failures - setupErrors), failures);
  return failures ? 1 : 0;
}
