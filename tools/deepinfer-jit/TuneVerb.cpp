// `deepinfer-jit tune`: autotunes every kernel op the model needs on the local GPU, over the
// shape buckets of ShapeBuckets.h, into the tuning cache (TuningCache.h) that the JIT consults.
//
// Per (op, bucket): the candidates that fit the target at the bucket's representative shape;
// those without a recorded timing for this key are compiled on CPU threads (through the JIT, so
// the binary cache is filled with the same keys) while the GPU checks and times the ones already
// compiled. Each candidate is checked against the C++ reference before it is timed (only a
// passing candidate may win) and timed like deepinfer-bench (CUDA events, L2 flushed with 2x the
// L2 and a delay kernel before each sample, median). A warm re-run has nothing to time.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "Args.h"
#include "BenchCheck.h"
#include "BenchKernels.h"
#include "CaseRunner.h"
#include "Roofline.h"
#include "Verbs.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/ShapeBuckets.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TuningCache.h"
#include "model/ModelConfig.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

using Clock = std::chrono::steady_clock;

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

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
    std::ifstream f(path);
    if (!f) return Error{fmt::format("cannot read {}", path)};
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    cfg = parseModelConfig(text, path);
  } else {
    cfg = loadModelConfig(path);
  }
  if (!cfg.ok()) return cfg.error();
  m.dims.heads = cfg->numAttentionHeads;
  m.dims.hidden = cfg->hiddenSize;
  m.dims.indexTopk = cfg->indexTopk;
  m.dims.window = cfg->slidingWindow;
  m.dims.indexHeads = cfg->indexNHeads;
  m.source = path;
  return m;
}

// One (op, bucket) to tune: the op's description parameters at the bucket's representative
// and its benchmark inputs' parameters, both from the op's family (KernelFamily::tuneShape).
struct Item {
  std::string op;
  ShapeBucket bucket;
  BenchSpec spec;
  std::map<std::string, int64_t> shape;
};

std::vector<Item> planItems(const ModelDims& m) {
  std::vector<Item> items;
  for (const KernelFamily* fam : allKernelFamilies()) {
    for (const ShapeBucket& b : shapeBuckets(fam->opName())) {
      const int64_t v = b.representative;
      const TuneShape ts = fam->tuneShape(m, v);
      items.push_back({fam->opName(), b, {fam->opName(), fmt::format("{}={}", b.var, v), ts.inputs, 0, 0}, ts.shape});
    }
  }
  return items;
}

// Progress on stderr: one rewritten line on a terminal, one line per finished item otherwise.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(::isatty(2)) {}
  void update(size_t i, const Item& it, size_t done, size_t todo, const std::string& best) {
    if (!tty_) return;
    fmt::print(stderr, "\r\x1b[K[{:>3}/{}] {} {}: {}/{} candidates, best {}", i + 1, total_, it.op, it.bucket.label(),
               done, todo, best);
    std::fflush(stderr);
  }
  void finish(size_t i, const Item& it, const std::string& what) {
    fmt::print(stderr, "{}[{:>3}/{}] {} {}: {}\n", tty_ ? "\r\x1b[K" : "", i + 1, total_, it.op, it.bucket.label(),
               what);
    std::fflush(stderr);
  }

 private:
  size_t total_;
  bool tty_;
};

std::string bestSoFar(const TuningCache& cache, const TuningKey& k) {
  auto w = cache.winner(k);
  if (!w) return "-";
  return fmt::format("{:.2f} us ({})", cache.find(k)->timings.at(*w).medianUs, w->empty() ? "<empty>" : *w);
}

CandidateTiming timingOf(const VariantResult& r) {
  CandidateTiming t;
  t.measuredAt = utcNow();
  t.error = r.error;
  t.samples = r.timing.samples;
  t.medianUs = r.timing.medianUs;
  t.minUs = r.timing.minUs;
  t.p90Us = r.timing.p90Us;
  t.checked = r.check.checked;
  t.checkOk = r.check.ok;
  if (t.error.empty() && t.checked && !t.checkOk) {
    for (const auto& o : r.check.outputs)
      if (!o.ok) {
        t.error = fmt::format("check failed: {} {} {}", o.output, o.metric, o.detail);
        break;
      }
    if (t.error.empty()) t.error = "check failed";
  }
  return t;
}

// Compiles configs on worker threads (Jit::precompile fills the disk cache); wait(i) blocks until
// config i is compiled and returns its status.
class CompileQueue {
 public:
  CompileQueue(Jit& jit, const OpDesc& d, const TargetProfile& t, std::vector<KernelConfig> configs, unsigned threads)
      : configs_(std::move(configs)), status_(configs_.size()), done_(configs_.size(), false) {
    for (unsigned w = 0; w < std::max(1u, threads); ++w)
      pool_.emplace_back([this, &jit, d, t] {
        for (;;) {
          size_t i;
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (next_ >= configs_.size()) return;
            i = next_++;
          }
          Status s = jit.precompile(d, t, configs_[i]);
          std::lock_guard<std::mutex> lock(mu_);
          status_[i] = s.ok() ? std::string() : s.error().message;
          done_[i] = true;
          cv_.notify_all();
        }
      });
  }
  ~CompileQueue() {
    for (auto& th : pool_) th.join();
  }
  std::string wait(size_t i) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return bool(done_[i]); });
    return status_[i];
  }

 private:
  std::vector<KernelConfig> configs_;
  std::vector<std::string> status_;
  std::vector<bool> done_;
  size_t next_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> pool_;
};

struct Row {
  std::string op, bucket, note;
  TuningKey key;
};

void printSummary(const TuningCache& cache, const std::vector<Row>& rows) {
  const StoredRoofline& rf = cache.roofline();
  fmt::print("\n{:<19} {:<16} {:<34} {:>9}  {:<34} {:>9} {:>8} {:>8}\n", "op", "bucket", "default config", "us",
             "winner", "us", "speedup", "roofline");
  for (const Row& r : rows) {
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

// The candidate list of an op/bucket at its representative shape, the default first.
struct Candidates {
  std::optional<OpDesc> desc;
  std::string defaultConfig;
  std::vector<std::string> configs;
  std::string error;
};

Candidates candidatesFor(const Item& it, const TargetProfile& target) {
  Candidates c;
  auto d = makeOpDesc(it.op, it.shape, {});
  if (!d.ok()) return c.error = d.error().message, c;
  auto sp = specialize(*d, target);
  if (!sp.ok()) return c.error = sp.error().message, c;
  c.desc = *d;
  c.defaultConfig = configToString(sp->chosen.config);
  for (const ConfigChoice& ch : sp->fitting) c.configs.push_back(configToString(ch.config));
  if (std::find(c.configs.begin(), c.configs.end(), c.defaultConfig) == c.configs.end())
    c.configs.insert(c.configs.begin(), c.defaultConfig);
  return c;
}

std::vector<Item> selectItems(const ModelSource& dims, const std::set<std::string>& ops,
                              const std::set<std::string>& buckets) {
  std::vector<Item> items;
  for (Item& it : planItems(dims.dims))
    if ((ops.empty() || ops.count(it.op)) && (buckets.empty() || buckets.count(it.bucket.label())))
      items.push_back(std::move(it));
  return items;
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
  const std::vector<Item> items = selectItems(dims, ops, buckets);
  fmt::print("tuning plan for {} ({}); model shapes from {}\n", target->name, target->archName(), dims.source);
  fmt::print("{:<19} {:<16} {:<36} {:>10}  {}\n", "op", "bucket", "shape", "candidates", "default");
  int bad = 0;
  size_t total = 0;
  for (const Item& it : items) {
    const Candidates c = candidatesFor(it, *target);
    std::string shape;
    for (const auto& [k, v] : it.spec.params) shape += fmt::format("{}{}={}", shape.empty() ? "" : " ", k, v);
    if (!c.error.empty()) {
      fmt::print("{:<19} {:<16} {:<36} ERROR {}\n", it.op, it.bucket.label(), shape, c.error);
      ++bad;
      continue;
    }
    std::string inputs;
    if (args.has("check-inputs")) {
      auto bc = buildCase(it.spec, 1);
      auto d = bc.ok() ? describeOp(it.op, bc->attrs, bc->inputs) : Result<OpDesc>(bc.error());
      auto b = d.ok() ? bucketFor(*d) : std::nullopt;
      if (!d.ok()) inputs = "  inputs: ERROR " + d.error().message;
      else if (!b || b->label() != it.bucket.label()) inputs = fmt::format("  inputs: WRONG bucket {}", b ? b->label() : "none");
      else inputs = "  inputs ok";
      if (inputs != "  inputs ok") ++bad;
    }
    total += c.configs.size();
    fmt::print("{:<19} {:<16} {:<36} {:>10}  {}{}\n", it.op, it.bucket.label(), shape, c.configs.size(),
               c.defaultConfig.empty() ? "<empty>" : c.defaultConfig, inputs);
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
       jobs = num("jobs", std::max(1u, std::thread::hardware_concurrency()), 1), seed = num("seed", 0x5EED0B1C, 0);
  if (!samples || !warmup || !margin || !jobs || !seed || *margin >= 1)
    return args.usageError("--samples/--jobs need a number >= 1, --warmup >= 0, --margin in [0, 1)");
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

  const std::vector<Item> items = selectItems(*dims, opFilter, bucketFilter);
  if (items.empty()) return fmt::print(stderr, "deepinfer-jit tune: no op/bucket matches the filters\n"), 1;

  // What is left to time, from the candidate lists alone (no inputs built, no GPU work).
  struct Work {
    TuningKey key;
    std::string defaultConfig;
    std::vector<std::string> candidates, todo;
    std::string error;
  };
  std::vector<Work> work(items.size());
  size_t totalTodo = 0, totalCandidates = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    Work& w = work[i];
    w.key = TuningKey{target.name, items[i].op, opDtypes(items[i].op), items[i].bucket.label()};
    Candidates c = candidatesFor(items[i], target);
    if (!c.error.empty()) {
      w.error = c.error;
      continue;
    }
    w.defaultConfig = c.defaultConfig;
    w.candidates = c.configs;
    w.todo = args.has("retime") ? w.candidates : cache->untimed(w.key, w.candidates);
    totalTodo += w.todo.size();
    totalCandidates += w.candidates.size();
  }

  const auto start = Clock::now();
  const bool needRoofline = args.has("remeasure-roofline") || (cache->roofline().copyGBs <= 0 && cache->roofline().mmaTflops <= 0);
  if (totalTodo == 0)
    fmt::print("full cache hit: all {} candidates of {} op/bucket pairs are already timed for this key; nothing to "
               "time\n",
               totalCandidates, items.size());
  if (totalTodo == 0 && !needRoofline) {
    std::vector<Row> rows;
    for (size_t i = 0; i < items.size(); ++i) rows.push_back({items[i].op, items[i].bucket.label(), work[i].error, work[i].key});
    printSummary(*cache, rows);
    return 0;
  }
  if (totalTodo > 0)
    fmt::print("{} of {} candidates over {} op/bucket pairs to time\n", totalTodo, totalCandidates, items.size());

  JitOptions jopts;
  jopts.useTuned = false;  // candidates are asked for by config; defaults must stay the families'
  Jit jit(*dev, jopts);
  auto kernels = loadBenchKernels(**dev);
  const DeviceModule* km = kernels.ok() ? &*kernels : nullptr;
  if (!km)
    fmt::print(stderr, "deepinfer-jit tune: warning: the measurement kernels are unavailable ({}); no delay kernel, "
                       "no roofline\n",
               kernels.error().message);
  if (needRoofline && km) {
    const Ceilings c = measureCeilings(**dev, km, "", int(*samples));
    if (c.copyGBs > 0 || c.mmaTflops > 0) cache->setRoofline({c.copyGBs, c.mmaTflops, utcNow()});
    if (!c.copyError.empty()) fmt::print(stderr, "deepinfer-jit tune: copy ceiling: {}\n", c.copyError);
    if (!c.mmaError.empty()) fmt::print(stderr, "deepinfer-jit tune: mma ceiling: {}\n", c.mmaError);
    fmt::print("roofline: copy {:.0f} GB/s, mma.sync bf16 {:.0f} TFLOP/s\n", c.copyGBs, c.mmaTflops);
  }
  const int64_t flushBytes = local.l2Bytes > 0 ? 2 * local.l2Bytes : int64_t(256) << 20;
  auto flush = DeviceBuffer::alloc(size_t(flushBytes));
  if (!flush.ok()) return fmt::print(stderr, "deepinfer-jit tune: the L2 flush buffer: {}\n", flush.error().message), 1;
  const TimingOptions topt{int(*warmup), int(*samples), flushAndDelay(*flush, km, kSampleDelayUs)};

  Progress progress(items.size());
  std::vector<Row> rows;
  bool problems = false;
  std::string contextLost;
  int totalFailed = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    Work& w = work[i];
    rows.push_back({it.op, it.bucket.label(), w.error, w.key});
    if (!w.error.empty()) {
      progress.finish(i, it, "ERROR " + w.error);
      problems = true;
      continue;
    }
    cache->setDefault(w.key, w.defaultConfig);
    if (w.todo.empty()) {
      progress.finish(i, it, fmt::format("cached ({} candidates), best {}", w.candidates.size(), bestSoFar(*cache, w.key)));
      continue;
    }
    const auto t0 = Clock::now();
    auto fail = [&](const std::string& why) {
      rows.back().note = why;
      progress.finish(i, it, "ERROR " + why);
      problems = true;
    };
    auto c = buildCase(it.spec, uint64_t(*seed));
    if (!c.ok()) {
      fail(c.error().message);
      continue;
    }
    auto d = describeOp(it.op, c->attrs, c->inputs);
    if (!d.ok()) {
      fail(d.error().message);
      continue;
    }
    // The inputs must be the bucket's shape, or the timings would be filed under a wrong key.
    auto b = bucketFor(*d);
    if (!b || b->label() != it.bucket.label()) {
      fail(fmt::format("built inputs fall in bucket {}, not {}", b ? b->label() : "none", it.bucket.label()));
      continue;
    }
    auto exp = computeExpected(*c);
    if (!exp.ok()) {  // no candidate may win unchecked
      fail(exp.error().message);
      continue;
    }
    auto runner = CaseRunner::create(jit, *c, *d);
    if (!runner.ok()) {
      fail(runner.error().message);
      continue;
    }
    std::vector<KernelConfig> configs;
    for (const auto& s : w.todo) configs.push_back(*parseConfigString(s));
    TuningEntry& entryMeta = cache->entry(w.key);
    entryMeta.shape = it.spec.shape;
    entryMeta.bytes = c->bytes;
    entryMeta.flops = c->flops;
    int failed = 0;
    {
      CompileQueue queue(jit, *d, target, configs, unsigned(*jobs));
      for (size_t k = 0; k < configs.size(); ++k) {
        progress.update(i, it, k, configs.size(), bestSoFar(*cache, w.key));
        VariantResult r;
        if (std::string err = queue.wait(k); !err.empty()) {
          r.error = err;
        } else {
          r = (*runner)->run(Variant{"candidate", target, configs[k]}, &*exp, topt);
          // A faulting kernel leaves the CUDA context unusable: every later candidate would fail
          // too and be recorded as broken. Stop, keeping what was measured before it.
          if (!r.error.empty()) {
            if (Status s = jit.device().synchronize(); !s.ok()) {
              contextLost = fmt::format("{} {} config {} broke the CUDA context ({}; {})", it.op, it.bucket.label(),
                                        w.todo[k], r.error, s.error().message);
              break;
            }
          }
        }
        const CandidateTiming t = timingOf(r);
        if (!t.eligible()) ++failed, ++totalFailed;
        cache->record(w.key, w.todo[k], t);
      }
    }
    if (Status s = cache->save(); !s.ok()) {
      fmt::print(stderr, "deepinfer-jit tune: {}\n", s.error().message);
      return 1;
    }
    if (!contextLost.empty()) {
      progress.finish(i, it, "ERROR " + contextLost);
      fmt::print(stderr, "deepinfer-jit tune: stopped: {}; the timings so far are saved in {}\n", contextLost,
                 cache->path());
      return 1;
    }
    progress.finish(i, it,
                    fmt::format("{} timed in {:.1f} s{}, best {}", configs.size(),
                                std::chrono::duration<double>(Clock::now() - t0).count(),
                                failed ? fmt::format(" ({} failed check or errored)", failed) : "",
                                bestSoFar(*cache, w.key)));
  }
  if (Status s = cache->save(); !s.ok()) return fmt::print(stderr, "deepinfer-jit tune: {}\n", s.error().message), 1;
  printSummary(*cache, rows);
  fmt::print("tuned {} candidates in {:.0f} s ({} JIT compiles){}; wrote {}\n", totalTodo,
             std::chrono::duration<double>(Clock::now() - start).count(), jit.compiles(),
             totalFailed ? fmt::format("; {} failed their reference check or errored (recorded, never winners)",
                                       totalFailed)
                         : "",
             cache->path());
  return problems ? 1 : 0;
}
