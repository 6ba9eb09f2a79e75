#include "BenchSpecs.h"
#include "BenchOptions.h"

#include <fmt/format.h>

#include <cstdlib>
#include <set>

namespace deepinfer::bench {

std::string benchUsage() {
  return "usage: deepinfer-bench [--op NAME ...] [--case SHAPE ...] [--knob KEY=VALUE ...] [--quick]\n"
         "                       [--out FILE] [--commit SHA] [--samples N] [--warmup N] [--seed N] [--list]\n"
         "                       [--self-test [--full-size]]\n"
         "\n"
         "Times every kernel op at the benchmark shapes of docs/ops.md §10 on GPU 0: the sm_80 default\n"
         "(PTX, the baseline), the sm_86 default (PTX), the local arch's default and every candidate\n"
         "config of the local target (the best is 'tuned'); each checked once against the C++ reference.\n"
         "\n"
         "  --op NAME      only this op (repeatable)\n"
         "  --case SHAPE   only the case of this shape name, as --list prints it (repeatable)\n"
         "  --knob K=V     only the candidate configs whose knob K is V (repeatable: several values of one\n"
         "                 knob are alternatives, different knobs must all hold); every candidate is then\n"
         "                 printed as its own row next to the defaults\n"
         "  --quick        10 samples, no candidate sweep\n"
         "  --out FILE     JSON output (default benchmarks/results/<gpu-slug>-<date>.json)\n"
         "  --commit SHA   git commit recorded in the JSON (default $DI_GIT_COMMIT)\n"
         "  --samples N    timed samples per variant (default 30)\n"
         "  --warmup N     untimed launches per variant before sampling (default 3)\n"
         "  --seed N       input seed (default fixed, so runs compare)\n"
         "  --list         print the benchmark shapes and targets, then exit\n"
         "  --self-test    no GPU: build scaled-down inputs of every op, run the C++ reference on them\n"
         "                 and check the builders (with --full-size: the real shapes and check plans)\n";
}

Result<BenchOptions> parseBenchOptions(int argc, char** argv) {
  BenchOptions o;
  auto value = [&](int& i, const std::string& flag) -> Result<std::string> {
    if (i + 1 >= argc) return Error{fmt::format("{} needs a value", flag)};
    return std::string(argv[++i]);
  };
  auto integer = [](const std::string& flag, const std::string& v, int64_t lo) -> Result<int64_t> {
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 0);
    if (v.empty() || *end != '\0' || x < lo)
      return Error{fmt::format("{} expects an integer >= {}, got '{}'", flag, lo, v)};
    return int64_t(x);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--op" || a == "--out" || a == "--commit" || a == "--samples" || a == "--warmup" || a == "--seed" ||
        a == "--case" || a == "--knob") {
      auto v = value(i, a);
      if (!v.ok()) return v.error();
      if (a == "--op") o.ops.push_back(*v);
      if (a == "--case") o.cases.push_back(*v);
      if (a == "--knob") {
        const size_t eq = v->find('=');
        if (eq == std::string::npos || eq == 0)
          return Error{fmt::format("--knob expects KEY=VALUE (e.g. stream=2), got '{}'", *v)};
        auto n = integer("--knob " + v->substr(0, eq), v->substr(eq + 1), INT64_MIN);
        if (!n.ok()) return n.error();
        o.knobs.emplace_back(v->substr(0, eq), *n);
      }
      if (a == "--out") o.out = *v;
      if (a == "--commit") o.commit = *v;
      if (a == "--samples" || a == "--warmup" || a == "--seed") {
        auto n = integer(a, *v, a == "--samples" ? 1 : 0);
        if (!n.ok()) return n.error();
        if (a == "--samples") o.samples = int(*n);
        if (a == "--warmup") o.warmup = int(*n);
        if (a == "--seed") o.seed = uint64_t(*n);
      }
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--self-test") {
      o.selfTest = true;
    } else if (a == "--full-size") {
      o.fullSize = true;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else {
      return Error{fmt::format("unknown option '{}'", a)};
    }
  }
  if (o.fullSize && !o.selfTest) return Error{"--full-size only applies to --self-test"};
  if (!o.knobs.empty() && o.quick) return Error{"--knob selects candidates; --quick runs none"};
  if (o.samples < 0) o.samples = o.quick ? 10 : 30;
  if (o.warmup < 0) o.warmup = o.quick ? 2 : 3;
  if (o.commit.empty()) {
    const char* env = std::getenv("DI_GIT_COMMIT");
    o.commit = env && *env ? env : "unknown";
  }
  return o;
}

Result<std::vector<BenchSpec>> selectSpecs(const std::vector<BenchSpec>& all, const std::vector<std::string>& ops) {
  if (ops.empty()) return all;
  std::set<std::string> known;
  for (const BenchSpec& s : all) known.insert(s.op);
  for (const std::string& op : ops) {
    if (known.count(op)) continue;
    std::string names;
    for (const std::string& k : benchOps()) names += (names.empty() ? "" : ", ") + k;
    return Error{fmt::format("--op {}: no benchmark for this op (ops: {})", op, names)};
  }
  const std::set<std::string> wanted(ops.begin(), ops.end());
  std::vector<BenchSpec> out;
  for (const BenchSpec& s : all)
    if (wanted.count(s.op)) out.push_back(s);
  return out;
}

Result<std::vector<BenchSpec>> selectCases(const std::vector<BenchSpec>& specs, const std::vector<std::string>& cases) {
  if (cases.empty()) return specs;
  std::vector<BenchSpec> out;
  for (const std::string& name : cases) {
    size_t found = 0;
    for (const BenchSpec& s : specs)
      if (s.shape == name) {
        out.push_back(s);
        ++found;
      }
    if (found == 0) return Error{fmt::format("--case '{}': no such shape among the selected ops (see --list)", name)};
  }
  return out;
}

}  // namespace deepinfer::bench
