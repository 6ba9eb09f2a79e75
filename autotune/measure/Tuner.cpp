#include "Tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <thread>

#include "BenchCheck.h"
#include "BenchKernels.h"
#include "CaseRunner.h"
#include "Roofline.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TuningDims.h"

namespace deepinfer::bench {
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

// Compiles configs on worker threads (Jit::precompile runs the pipeline and fills the disk
// cache); wait(i) blocks until config i is compiled and returns its status.
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

}  // namespace

std::vector<TuneItem> tunePlan(const ModelDims& m, const std::set<std::string>& ops,
                               const std::set<std::string>& buckets) {
  std::vector<TuneItem> items;
  for (const KernelFamily* fam : allKernelFamilies()) {
    const std::string op = fam->opName();
    if (!ops.empty() && !ops.count(op)) continue;
    const std::vector<ShapeBucket> all = shapeBuckets(op);
    // Each shape the model runs the op at (a projection, a compress ratio) over the buckets.
    const size_t nShapes = all.empty() ? 0 : fam->tuneShapes(m, all.front().representative).size();
    for (size_t j = 0; j < nShapes; ++j)
      for (ShapeBucket b : all) {
        const int64_t v = b.representative;
        const std::vector<TuneShape> shapes = fam->tuneShapes(m, v);
        if (j >= shapes.size()) continue;
        const TuneShape& ts = shapes[j];
        // The class (weight_gemm's projection) is part of the bucket's label and the tuned shape's name.
        auto probe = makeOpDesc(op, ts.shape, {});
        b.cls = probe.ok() ? bucketClass(*probe) : "";
        if (!buckets.empty() && !buckets.count(b.label())) continue;
        const std::string shapeName = b.cls.empty() ? fmt::format("{}={}", b.var, v) : b.label();
        items.push_back({op, b, {op, shapeName, ts.inputs, 0, 0}, ts.shape});
      }
  }
  return items;
}

TuneCandidates tuneCandidates(const TuneItem& it, const TargetProfile& target) {
  TuneCandidates c;
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

std::string checkTuneInputs(const TuneItem& it) {
  auto bc = buildCase(it.spec, 1);
  auto d = bc.ok() ? describeOp(it.op, bc->attrs, bc->inputs) : Result<OpDesc>(bc.error());
  if (!d.ok()) return "ERROR " + d.error().message;
  auto b = bucketFor(*d);
  if (!b || b->label() != it.bucket.label()) return fmt::format("WRONG bucket {}", b ? b->label() : "none");
  auto want = makeOpDesc(it.op, it.shape, {});
  if (!want.ok()) return "ERROR " + want.error().message;
  if (tuningDims(*d) != tuningDims(*want)) return fmt::format("WRONG dims {}", tuningDims(*d).value_or("(none)"));
  return "";
}

std::string bestSoFar(const TuningCache& cache, const TuningKey& k) {
  auto w = cache.winner(k);
  if (!w) return "-";
  return fmt::format("{:.2f} us ({})", cache.find(k)->timings.at(*w).medianUs, w->empty() ? "<empty>" : *w);
}

Result<TuneResult> runTuning(const std::shared_ptr<Device>& dev, const TargetProfile& target, TuningCache& cache,
                             const std::vector<TuneItem>& items, const TuneOptions& opts, TuneProgress& progress) {
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
    TuneCandidates c = tuneCandidates(items[i], target);
    w.key = TuningKey{target.name, items[i].op, opDtypes(items[i].op), items[i].bucket.label(),
                      c.desc ? tuningDims(*c.desc).value_or("") : ""};
    if (!c.error.empty()) {
      w.error = c.error;
      continue;
    }
    w.defaultConfig = c.defaultConfig;
    w.candidates = c.configs;
    w.todo = opts.retime ? w.candidates : cache.untimed(w.key, w.candidates);
    totalTodo += w.todo.size();
    totalCandidates += w.candidates.size();
  }

  TuneResult res;
  const auto start = Clock::now();
  const bool needRoofline =
      opts.remeasureRoofline || (cache.roofline().copyGBs <= 0 && cache.roofline().mmaTflops <= 0);
  if (totalTodo == 0)
    progress.message(fmt::format("full cache hit: all {} candidates of {} op/bucket pairs are already timed for this "
                                 "key; nothing to time",
                                 totalCandidates, items.size()));
  if (totalTodo == 0 && !needRoofline) {
    for (size_t i = 0; i < items.size(); ++i)
      res.rows.push_back({items[i].op, items[i].bucket.label(), work[i].error, work[i].key});
    return res;
  }
  res.worked = true;
  if (totalTodo > 0)
    progress.message(fmt::format("{} of {} candidates over {} op/bucket pairs to time", totalTodo, totalCandidates,
                                 items.size()));

  JitOptions jopts;
  jopts.useTuned = false;  // candidates are asked for by config; defaults must stay the families'
  Jit jit(dev, jopts);
  auto kernels = loadBenchKernels(*dev);
  const DeviceModule* km = kernels.ok() ? &*kernels : nullptr;
  if (!km)
    progress.warning(fmt::format("warning: the measurement kernels are unavailable ({}); no delay kernel, no roofline",
                                 kernels.error().message));
  if (needRoofline && km) {
    const Ceilings c = measureCeilings(*dev, km, "", opts.samples);
    if (c.copyGBs > 0 || c.mmaTflops > 0) cache.setRoofline({c.copyGBs, c.mmaTflops, utcNow()});
    if (!c.copyError.empty()) progress.warning("copy ceiling: " + c.copyError);
    if (!c.mmaError.empty()) progress.warning("mma ceiling: " + c.mmaError);
    progress.message(fmt::format("roofline: copy {:.0f} GB/s, mma.sync bf16 {:.0f} TFLOP/s", c.copyGBs, c.mmaTflops));
  }
  const TargetProfile& local = dev->info().profile;
  const int64_t flushBytes = local.l2Bytes > 0 ? 2 * local.l2Bytes : int64_t(256) << 20;
  auto flush = DeviceBuffer::alloc(size_t(flushBytes));
  if (!flush.ok()) return Error{"the L2 flush buffer: " + flush.error().message};
  const TimingOptions topt{opts.warmup, opts.samples, flushAndDelay(*flush, km, kSampleDelayUs)};

  std::string contextLost;
  for (size_t i = 0; i < items.size(); ++i) {
    const TuneItem& it = items[i];
    Work& w = work[i];
    res.rows.push_back({it.op, it.bucket.label(), w.error, w.key});
    if (!w.error.empty()) {
      progress.finish(i, it, "ERROR " + w.error);
      res.problems = true;
      continue;
    }
    cache.setDefault(w.key, w.defaultConfig);
    if (w.todo.empty()) {
      progress.finish(i, it, fmt::format("cached ({} candidates), best {}", w.candidates.size(), bestSoFar(cache, w.key)));
      continue;
    }
    const auto t0 = Clock::now();
    auto fail = [&](const std::string& why) {
      res.rows.back().note = why;
      progress.finish(i, it, "ERROR " + why);
      res.problems = true;
    };
    auto c = buildCase(it.spec, opts.seed);
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
    if (const auto dims = tuningDims(*d); dims.value_or("?") != w.key.dims) {
      fail(fmt::format("built inputs have dims {}, not {}", dims.value_or("(none)"), w.key.dims));
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
    TuningEntry& entryMeta = cache.entry(w.key);
    entryMeta.shape = it.spec.shape;
    entryMeta.bytes = c->bytes;
    entryMeta.flops = c->flops;
    int failed = 0;
    {
      CompileQueue queue(jit, *d, target, configs, opts.jobs);
      for (size_t k = 0; k < configs.size(); ++k) {
        progress.update(i, it, k, configs.size(), bestSoFar(cache, w.key));
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
        if (!t.eligible()) ++failed, ++res.failed;
        cache.record(w.key, w.todo[k], t);
      }
    }
    if (Status s = cache.save(); !s.ok()) return s.error();
    if (!contextLost.empty()) {
      progress.finish(i, it, "ERROR " + contextLost);
      return Error{fmt::format("stopped: {}; the timings so far are saved in {}", contextLost, cache.path())};
    }
    progress.finish(i, it,
                    fmt::format("{} timed in {:.1f} s{}, best {}", configs.size(),
                                std::chrono::duration<double>(Clock::now() - t0).count(),
                                failed ? fmt::format(" ({} failed check or errored)", failed) : "",
                                bestSoFar(cache, w.key)));
  }
  if (Status s = cache.save(); !s.ok()) return s.error();
  res.timed = totalTodo;
  res.compiles = jit.compiles();
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return res;
}

}  // namespace deepinfer::bench
