// deepinfer-bench: times every kernel op at the benchmark shapes of docs/ops.md §10 on GPU 0,
// against the portable Ampere baseline (the sm_80 default config, run as PTX) in the same run,
// with the measured copy/mma ceilings as the roofline. Prints a table; writes JSON.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "BenchSpecs.h"
#include "ReportText.h"
#include "BenchCheck.h"
#include "BenchKernels.h"
#include "BenchOptions.h"
#include "BenchReport.h"
#include "CaseRunner.h"
#include "CublasBaseline.h"
#include "SelfTest.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

constexpr double kDelayUs = kSampleDelayUs;

void listSpecs(const std::vector<BenchSpec>& specs) {
  fmt::print("{:<19} {:<14} {:>10} {:>12}  {}\n", "op", "shape", "target us", "public us", "parameters");
  for (const BenchSpec& s : specs) {
    std::string p;
    for (const auto& [k, v] : s.params) p += fmt::format("{}{}={}", p.empty() ? "" : " ", k, v);
    fmt::print("{:<19} {:<14} {:>10} {:>12}  {}\n", s.op, s.shape, s.targetUs > 0 ? fmt::format("{}", s.targetUs) : "-",
               s.publicBestUs > 0 ? fmt::format("{}", s.publicBestUs) : "-", p);
  }
}

// The variants of one case: the three defaults, then (unless --quick) every candidate config
// that fits the local target and has the --knob values.
Result<std::vector<Variant>> variantsFor(const OpDesc& d, const TargetProfile& local, bool quick,
                                         const std::vector<std::pair<std::string, int64_t>>& knobs) {
  std::vector<Variant> v;
  for (const char* name : {"sm_80", "sm_86"}) {
    auto t = findTarget(name);
    if (!t) return Error{fmt::format("no target preset '{}'", name)};
    v.push_back({std::string(name) == "sm_80" ? "sm80-default" : "sm86-default", *t, std::nullopt});
  }
  v.push_back({"local-default", local, std::nullopt});
  if (quick) return v;
  auto spec = specialize(d, local);
  if (!spec.ok()) return spec.error();
  for (const ConfigChoice& c : spec->fitting) {
    // Every knob named must have one of the values given for it.
    const bool wanted = std::all_of(knobs.begin(), knobs.end(), [&](const auto& kv) {
      auto it = c.config.find(kv.first);
      return it != c.config.end() && std::any_of(knobs.begin(), knobs.end(), [&](const auto& other) {
               return other.first == kv.first && other.second == it->second;
             });
    });
    if (wanted) v.push_back({"candidate", local, c.config});
  }
  return v;
}

CaseReport runCase(Jit& jit, Cublas* blas, const BenchSpec& spec, const BenchOptions& opts, const TimingOptions& topt,
                   const TargetProfile& local) {
  CaseReport rep;
  rep.spec = spec;
  auto t0 = Clock::now();
  auto c = buildCase(spec, opts.seed);
  rep.buildSeconds = secondsSince(t0);
  if (!c.ok()) {
    rep.error = c.error().message;
    return rep;
  }
  rep.bytes = c->bytes;
  rep.flops = c->flops;
  rep.check = c->check;
  auto d = describeOp(spec.op, c->attrs, c->inputs);
  if (!d.ok()) {
    rep.error = d.error().message;
    return rep;
  }
  auto exp = computeExpected(*c);
  if (exp.ok()) {
    rep.checked = true;
    rep.referenceSeconds = exp->seconds;
    rep.checkNote = exp->rows.empty() ? "all rows" : c->check.note;
  } else {
    rep.checkNote = exp.error().message;  // a builder bug: reported, and the case still timed
  }
  auto variants = variantsFor(*d, local, opts.quick, opts.knobs);
  if (!variants.ok()) {
    rep.error = variants.error().message;
    return rep;
  }
  auto runner = CaseRunner::create(jit, *c, *d);
  if (!runner.ok()) {
    rep.error = runner.error().message;
    return rep;
  }
  for (const Variant& v : *variants) rep.variants.push_back((*runner)->run(v, exp.ok() ? &*exp : nullptr, topt));
  // weight_gemm: the cuBLAS bf16 GEMM on dequantized weights, in the same run.
  if (blas && spec.op == "weight_gemm") rep.variants.push_back(cublasBaseline(*blas, *c, topt));
  return rep;
}

void printProgress(size_t i, size_t n, CaseReport& rep, double seconds, int compiles) {
  if (!rep.error.empty()) {
    fmt::print("[{:2}/{}] {} {}: ERROR {}\n", i + 1, n, rep.spec.op, rep.spec.shape, rep.error);
    return;
  }
  const CaseSummary s = summarizeCase(rep);
  const VariantResult* best = s.tuned ? s.tuned : s.local;
  fmt::print("[{:2}/{}] {} {}: inputs {:.2f} s, reference {:.2f} s, {} variants, {} compiles, {:.1f} s; best {}{}{}\n",
             i + 1, n, rep.spec.op, rep.spec.shape, rep.buildSeconds, rep.referenceSeconds, rep.variants.size(), compiles,
             seconds, best && rowUsable(*best) ? fmt::format("{:.2f} us", best->timing.medianUs) : "-",
             s.failedChecks ? fmt::format(", {} FAILED check(s)", s.failedChecks) : "",
             s.errors ? fmt::format(", {} error(s)", s.errors) : "");
  std::fflush(stdout);
}

int runBenchmarks(const BenchOptions& opts, const std::vector<BenchSpec>& specs) {
  const auto start = Clock::now();
  auto dev = Device::open(0);
  if (!dev.ok()) {
    fmt::print(stderr,
               "deepinfer-bench: no GPU: {}\n"
               "deepinfer-bench times kernels on an NVIDIA GPU (sm_80 or newer); nothing was measured.\n"
               "(`deepinfer-bench --self-test` checks the host side without a GPU.)\n",
               dev.error().message);
    return 1;
  }
  const LocalGpuInfo& gpu = (*dev)->info();
  const TargetProfile& local = gpu.profile;
  // Defaults are measured as the families choose them, never replaced by tuned winners.
  JitOptions jopts;
  jopts.useTuned = false;
  Jit jit(*dev, jopts);

  RunInfo run;
  run.gpuName = local.gpuName;
  run.arch = local.archName();
  run.driver = local.driverVersion;
  run.nvrtc = nvrtcVersionString();
  run.commit = opts.commit;
  run.date = utcNow("%Y-%m-%dT%H:%M:%SZ");
  run.mode = opts.quick ? "quick" : opts.knobs.empty() ? "full" : "knobs";
  run.showCandidates = !opts.knobs.empty();
  run.smCount = local.smCount;
  run.l2Bytes = local.l2Bytes;
  run.memoryBytes = gpu.totalMemBytes;
  run.samples = opts.samples;
  run.warmup = opts.warmup;
  run.seed = opts.seed;
  fmt::print("deepinfer-bench on {} ({}, {} SMs, L2 {} MB), driver {}, NVRTC {}, commit {}\n", run.gpuName, run.arch,
             run.smCount, run.l2Bytes >> 20, run.driver, run.nvrtc, run.commit);

  // The benchmark's own kernels: roofline microkernels and the delay kernel of each sample.
  auto kernels = loadBenchKernels(**dev);
  const DeviceModule* km = kernels.ok() ? &*kernels : nullptr;
  if (!km) {
    run.kernelsError = kernels.error().message;
    fmt::print(stderr, "deepinfer-bench: the benchmark kernels are unavailable ({}); no ceilings, no delay kernel\n",
               run.kernelsError);
  }
  // Before every sample: rewrite twice the L2, then keep the GPU busy while the launch is enqueued.
  run.flushBytes = local.l2Bytes > 0 ? 2 * local.l2Bytes : int64_t(256) << 20;
  run.delayUs = km ? kDelayUs : 0;
  auto flush = DeviceBuffer::alloc(size_t(run.flushBytes));
  if (!flush.ok()) {
    fmt::print(stderr, "deepinfer-bench: allocating the L2 flush buffer: {}\n", flush.error().message);
    return 1;
  }
  const TimingOptions topt{opts.warmup, opts.samples, flushAndDelay(*flush, km, kDelayUs)};

  run.ceilings = measureCeilings(**dev, km, run.kernelsError, opts.samples);
  // The weight_gemm rows' baseline (cuBLAS bf16 on dequantized weights); without cuBLAS, none.
  std::optional<std::unique_ptr<Cublas>> blas;
  if (auto b = Cublas::create(*dev); b.ok()) blas = std::move(*b);
  else fmt::print(stderr, "deepinfer-bench: no cuBLAS baseline: {}\n", b.error().message);
  fmt::print("ceilings: copy {} GB/s{}, mma.sync bf16 {} TFLOP/s{}\n",
             run.ceilings.copyGBs > 0 ? fmt::format("{:.0f}", run.ceilings.copyGBs) : "-",
             run.ceilings.copyError.empty() ? "" : " (" + run.ceilings.copyError + ")",
             run.ceilings.mmaTflops > 0 ? fmt::format("{:.0f}", run.ceilings.mmaTflops) : "-",
             run.ceilings.mmaError.empty() ? "" : " (" + run.ceilings.mmaError + ")");

  std::vector<CaseReport> reports;
  bool problems = false;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto t0 = Clock::now();
    const int compiles0 = jit.compiles();
    reports.push_back(runCase(jit, blas ? blas->get() : nullptr, specs[i], opts, topt, local));
    CaseReport& rep = reports.back();
    printProgress(i, specs.size(), rep, secondsSince(t0), jit.compiles() - compiles0);
    const CaseSummary s = summarizeCase(rep);
    problems = problems || !rep.error.empty() || !rep.checked || s.failedChecks > 0 || s.errors > 0;
  }
  run.compiles = jit.compiles();
  run.seconds = secondsSince(start);
  printTable(run, reports);

  const std::string path = !opts.out.empty() ? opts.out
                                             : fmt::format("benchmarks/results/{}-{}.json", slug(run.gpuName),
                                                           utcNow("%Y-%m-%d"));
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream f(path, std::ios::trunc);
  f << toJson(run, reports);
  f.close();
  if (!f) {
    fmt::print(stderr, "deepinfer-bench: could not write {}{}\n", path, ec ? ": " + ec.message() : "");
    return 1;
  }
  fmt::print("\nwrote {} ({} shapes, {} JIT compiles, {:.0f} s){}\n", path, reports.size(), run.compiles, run.seconds,
             problems ? "; some variants FAILED their check or errored (exit 2)" : "");
  return problems ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto opts = parseBenchOptions(argc, argv);
  if (!opts.ok()) {
    fmt::print(stderr, "deepinfer-bench: {}\n\n{}", opts.error().message, benchUsage());
    return 1;
  }
  if (opts->help) {
    fmt::print("{}", benchUsage());
    return 0;
  }
  auto specs = selectSpecs(opts->selfTest && !opts->fullSize ? selfTestSpecs() : benchSpecs(), opts->ops);
  if (specs.ok()) specs = selectCases(*specs, opts->cases);
  if (!specs.ok()) {
    fmt::print(stderr, "deepinfer-bench: {}\n", specs.error().message);
    return 1;
  }
  if (opts->list) {
    listSpecs(*specs);
    return 0;
  }
  if (opts->selfTest) return runSelfTest(*specs, opts->seed, opts->fullSize);
  return runBenchmarks(*opts, *specs);
}
