// `deepinfer-jit tune`: the flags, the model's dimensions, the tuning file and the report around
// the library's tuner (autotune/measure/Tuner.h), which times every kernel op the model needs on
// the local GPU over its shape buckets into the tuning cache the JIT consults.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "Args.h"
#include "Roofline.h"
#include "Tuner.h"
#include "Verbs.h"
#include "deepinfer/InputFiles.h"
#include "deepinfer/ShapeBuckets.h"
#include "deepinfer/TuningCache.h"
#include "deepinfer/TuningDims.h"
#include "model/ModelConfig.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

// The model dimensions that fix the non-bucketed sizes (V4.1-Flash unless --config).
struct ModelSource {
  ModelDims dims;
  std::string source = "V4.1-Flash defaults";
};

Result<ModelSource> modelDims(const std::string& path) {
  ModelSource m;
  if (path.empty()) return m;
  Result<ModelConfig> cfg = Error{""};
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".json") {
    auto text = readFileBounded(path, kMaxConfigBytes, "model config");
    if (!text.ok()) return text.error();
    cfg = parseModelConfig(*text, path);
  } else {
    cfg = loadModelConfig(path);
  }
  if (!cfg.ok()) return cfg.error();
  m.dims.heads = cfg->numAttentionHeads;
  m.dims.hidden = cfg->hiddenSize;
  m.dims.indexTopk = cfg->indexTopk;
  m.dims.window = cfg->slidingWindow;
  m.dims.indexHeads = cfg->indexNHeads;
  m.dims.headDim = cfg->headDim;
  m.dims.qLoraRank = cfg->qLoraRank;
  m.dims.oLoraRank = cfg->oLoraRank;
  m.dims.oGroups = cfg->oGroups;
  m.dims.indexHeadDim = cfg->indexHeadDim;
  m.dims.experts = cfg->nRoutedExperts;
  m.dims.expertsPerToken = cfg->numExpertsPerTok;
  m.dims.moeIntermediate = cfg->moeIntermediateSize;
  m.dims.ratios.clear();
  for (int l = 0; l < cfg->numHiddenLayers; ++l)
    if (const int r = cfg->compressRatios[size_t(l)];
        r > 0 && std::find(m.dims.ratios.begin(), m.dims.ratios.end(), int64_t(r)) == m.dims.ratios.end())
      m.dims.ratios.push_back(r);
  std::sort(m.dims.ratios.begin(), m.dims.ratios.end());
  m.source = path;
  return m;
}

// Progress on stderr: one rewritten line on a terminal, one line per finished item otherwise;
// result lines on stdout.
class Progress final : public TuneProgress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(::isatty(2)) {}
  void message(const std::string& line) override { fmt::print("{}\n", line); }
  void warning(const std::string& line) override { fmt::print(stderr, "deepinfer-jit tune: {}\n", line); }
  void update(size_t i, const TuneItem& it, size_t done, size_t todo, const std::string& best) override {
    if (!tty_) return;
    fmt::print(stderr, "\r\x1b[K[{:>3}/{}] {} {}: {}/{} candidates, best {}", i + 1, total_, it.op, it.bucket.label(),
               done, todo, best);
    std::fflush(stderr);
  }
  void finish(size_t i, const TuneItem& it, const std::string& what) override {
    fmt::print(stderr, "{}[{:>3}/{}] {} {}: {}\n", tty_ ? "\r\x1b[K" : "", i + 1, total_, it.op, it.bucket.label(),
               what);
    std::fflush(stderr);
  }

 private:
  size_t total_;
  bool tty_;
};

void printSummary(const TuningCache& cache, const std::vector<TuneRow>& rows) {
  const StoredRoofline& rf = cache.roofline();
  fmt::print("\n{:<19} {:<16} {:<34} {:>9}  {:<34} {:>9} {:>8} {:>8}\n", "op", "bucket", "default config", "us",
             "winner", "us", "speedup", "roofline");
  for (const TuneRow& r : rows) {
    const TuningEntry* e = cache.find(r.key);
    if (!e) {
      fmt::print("{:<19} {:<16} {}\n", r.op, r.bucket, r.note.empty() ? "not tuned" : r.note);
      continue;
    }
    auto us = [&](const std::string& cfg) -> double {
      auto it = e->timings.find(cfg);
      return it != e->timings.end() && it->second.eligible() ? it->second.medianUs : 0;
    };
    const double d = us(e->defaultConfig), w = e->winner.empty() ? 0 : us(e->winner);
    Ceilings ceil;
    ceil.copyGBs = rf.copyGBs;
    ceil.mmaTflops = rf.mmaTflops;
    const double floorUs = rooflineFloorUs(ceil, e->bytes, e->flops);
    auto show = [](double v) { return v > 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
    fmt::print("{:<19} {:<16} {:<34} {:>9}  {:<34} {:>9} {:>8} {:>8}{}\n", r.op, r.bucket,
               e->defaultConfig.empty() ? "<empty>" : e->defaultConfig, show(d),
               e->winner.empty() ? "(none passed)" : e->winner, show(w),
               d > 0 && w > 0 ? fmt::format("{:.2f}x", d / w) : "-",
               w > 0 && floorUs > 0 ? fmt::format("{:.0f}%", 100.0 * floorUs / w) : "-",
               r.note.empty() ? "" : "  " + r.note);
  }
  if (rf.copyGBs > 0 || rf.mmaTflops > 0)
    fmt::print("roofline: copy {:.0f} GB/s, mma.sync bf16 {:.0f} TFLOP/s (measured {})\n", rf.copyGBs, rf.mmaTflops,
               rf.measuredAt);
}

int planOnly(const cli::Args& args, const ModelSource& dims, const std::set<std::string>& ops,
             const std::set<std::string>& buckets) {
  std::optional<TargetProfile> target;
  if (args.has("target")) {
    target = findTarget(args.get("target"));
    if (!target) return args.usageError(fmt::format("unknown target '{}'", args.get("target")));
  } else if (auto dev = Device::open(0); dev.ok()) {
    target = (*dev)->info().profile;
  } else {
    return args.usageError("--plan without a GPU needs --target");
  }
  const std::vector<TuneItem> items = tunePlan(dims.dims, ops, buckets);
  fmt::print("tuning plan for {} ({}); model shapes from {}\n", target->name, target->archName(), dims.source);
  fmt::print("{:<19} {:<16} {:<36} {:>10}  {}\n", "op", "bucket", "shape", "candidates", "default");
  int bad = 0;
  size_t total = 0;
  for (const TuneItem& it : items) {
    const TuneCandidates c = tuneCandidates(it, *target);
    std::string shape;
    for (const auto& [k, v] : it.spec.params) shape += fmt::format("{}{}={}", shape.empty() ? "" : " ", k, v);
    if (!c.error.empty()) {
      fmt::print("{:<19} {:<16} {:<36} ERROR {}\n", it.op, it.bucket.label(), shape, c.error);
      ++bad;
      continue;
    }
    std::string inputs;
    if (args.has("check-inputs")) {
      const std::string why = checkTuneInputs(it);
      inputs = why.empty() ? "  inputs ok" : "  inputs: " + why;
      if (!why.empty()) ++bad;
    }
    total += c.configs.size();
    fmt::print("{:<19} {:<16} {:<36} {:>10}  {}  key dims {}{}\n", it.op, it.bucket.label(), shape, c.configs.size(),
               c.defaultConfig.empty() ? "<empty>" : c.defaultConfig, tuningDims(*c.desc).value_or("?"), inputs);
  }
  fmt::print("{} op/bucket pairs, {} candidates{}\n", items.size(), total, bad ? fmt::format(", {} with errors", bad) : "");
  return bad ? 1 : 0;
}

}  // namespace

int verbTune(const std::vector<std::string>& argv) {
  cli::Args args("tune", "tune [--config PATH] [--target T] [--op NAME]... [--bucket LABEL]... [options]");
  args.option("config", "PATH", "model config.json (or a model directory) giving heads, hidden size, top-k, window; "
                                "default: the V4.1-Flash shapes");
  args.option("target", "T", "tune this target's specialization on the local GPU (sm_80, sm_86, ... run as PTX); "
                             "default: the local GPU's own");
  args.option("op", "NAME", "only this op", true);
  args.option("bucket", "LABEL", "only this shape bucket, e.g. B=5..8", true);
  args.option("samples", "N", "timed runs per candidate (median; default 30)");
  args.option("warmup", "N", "untimed runs first (default 3)");
  args.option("margin", "F", "hysteresis: a challenger must beat the winner's median by this fraction (default 0.03)");
  args.option("jobs", "N", "CPU threads compiling candidates (default: all cores)");
  args.option("seed", "S", "input seed");
  args.flag("retime", "time every candidate again (default: only candidates without a recorded timing)");
  args.flag("remeasure-roofline", "measure the copy / mma ceilings again even when recorded");
  args.flag("plan", "no GPU work: list each op/bucket with its shape, default and candidate count (needs --target "
                    "without a GPU)");
  args.flag("check-inputs", "with --plan: build each op/bucket's inputs and check they fall in that bucket");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.positional().empty()) return args.usageError(fmt::format("unexpected argument '{}'", args.positional()[0]));
  auto num = [&](const char* name, double dflt, double lo) -> std::optional<double> {
    if (!args.has(name)) return dflt;
    char* end = nullptr;
    const std::string v = args.get(name);
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || x < lo) return std::nullopt;
    return x;
  };
  auto samples = num("samples", 30, 1), warmup = num("warmup", 3, 0), margin = num("margin", 0.03, 0),
       seed = num("seed", 0x5EED0B1C, 0);
  if (!samples || !warmup || !margin || !seed || *margin >= 1 || *samples > 100000 || *warmup > 100000)
    return args.usageError("--samples needs a number in 1..100000, --warmup 0..100000, --margin in [0, 1)");
  const auto jobs = cli::threadCount(args, "jobs", int(std::max(1u, std::thread::hardware_concurrency())), 1);
  if (!jobs) return 2;
  auto dims = modelDims(args.get("config"));
  if (!dims.ok()) return fmt::print(stderr, "deepinfer-jit tune: {}\n", dims.error().message), 1;
  const std::set<std::string> opFilter = [&] {
    auto v = args.getAll("op");
    return std::set<std::string>(v.begin(), v.end());
  }();
  const std::set<std::string> bucketFilter = [&] {
    auto v = args.getAll("bucket");
    return std::set<std::string>(v.begin(), v.end());
  }();
  for (const auto& op : opFilter)
    if (!bucketAxis(op)) return args.usageError(fmt::format("'{}' is not a tunable op", op));

  if (args.has("plan")) return planOnly(args, *dims, opFilter, bucketFilter);
  auto dev = Device::open(0);
  if (!dev.ok()) {
    fmt::print(stderr,
               "deepinfer-jit tune: no GPU: {}\n"
               "tune times kernels on the local NVIDIA GPU (sm_80 or newer); nothing was tuned.\n",
               dev.error().message);
    return 1;
  }
  const TargetProfile& local = (*dev)->info().profile;
  TargetProfile target = local;
  if (args.has("target")) {
    auto t = findTarget(args.get("target"));
    if (!t) return args.usageError(fmt::format("unknown target '{}' (see deepinfer-jit targets)", args.get("target")));
    if (t->arch() > local.arch())
      return fmt::print(stderr, "deepinfer-jit tune: {} code cannot run on this {} ({}); tune it on such a GPU\n",
                        t->archName(), local.gpuName, local.archName()),
             1;
    target = *t;
  }

  const TuningMetadata md = TuningMetadata::forLocalGpu(local);
  std::vector<std::string> warnings;
  auto cache = TuningCache::open(md, TuningCache::defaultDir(), &warnings);
  for (const auto& w : warnings) fmt::print(stderr, "deepinfer-jit: warning: {}\n", w);
  if (!cache.ok()) return fmt::print(stderr, "deepinfer-jit tune: {}\n", cache.error().message), 1;
  if (cache->foreignFile())
    return fmt::print(stderr, "deepinfer-jit tune: {} belongs to another key and is never overwritten; move it away\n",
                      cache->path()),
           1;
  cache->setMargin(*margin);
  fmt::print("tuning {} for {} on {}; model shapes from {}; tuning file {}\n",
             target.name == local.name ? "the local kernels" : target.name + "'s PTX", local.archName(),
             md.describe(), dims->source, cache->path());

  const std::vector<TuneItem> items = tunePlan(dims->dims, opFilter, bucketFilter);
  if (items.empty()) return fmt::print(stderr, "deepinfer-jit tune: no op/bucket matches the filters\n"), 1;

  TuneOptions opts;
  opts.samples = int(*samples);
  opts.warmup = int(*warmup);
  opts.jobs = unsigned(*jobs);
  opts.seed = uint64_t(*seed);
  opts.retime = args.has("retime");
  opts.remeasureRoofline = args.has("remeasure-roofline");
  Progress progress(items.size());
  auto r = runTuning(*dev, target, *cache, items, opts, progress);
  if (!r.ok()) return fmt::print(stderr, "deepinfer-jit tune: {}\n", r.error().message), 1;
  printSummary(*cache, r->rows);
  if (!r->worked) return 0;
  fmt::print("tuned {} candidates in {:.0f} s ({} JIT compiles){}; wrote {}\n", r->timed, r->seconds, r->compiles,
             r->failed ? fmt::format("; {} failed their reference check or errored (recorded, never winners)", r->failed)
                       : "",
             cache->path());
  return r->problems ? 1 : 0;
}
