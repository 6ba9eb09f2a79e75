// `deepinfer-jit roofline`: measures the local GPU's ceilings (large device-to-device copy
// bandwidth, mma.sync bf16 rate; the benchmark's microkernels, Roofline.h) and stores them in the
// tuning file of this GPU's key, where `tune` reads them for roofline fractions.
#include <fmt/format.h>

#include <ctime>

#include "Args.h"
#include "BenchKernels.h"
#include "Roofline.h"
#include "Verbs.h"
#include "deepinfer/TuningCache.h"

using namespace deepinfer;

int verbRoofline(const std::vector<std::string>& argv) {
  cli::Args args("roofline", "roofline [--samples N]");
  args.option("samples", "N", "timed runs of each microkernel (median; default 30)");
  args.flag("no-store", "print only; leave the tuning file as it is");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.positional().empty()) return args.usageError(fmt::format("unexpected argument '{}'", args.positional()[0]));
  int samples = 30;
  if (args.has("samples")) {
    samples = std::atoi(args.get("samples").c_str());
    if (samples < 1) return args.usageError("--samples needs a number >= 1");
  }
  auto dev = Device::open(0);
  if (!dev.ok()) {
    fmt::print(stderr,
               "deepinfer-jit roofline: no GPU: {}\n"
               "roofline measures the local NVIDIA GPU's copy bandwidth and mma.sync rate; nothing was measured.\n",
               dev.error().message);
    return 1;
  }
  const TargetProfile& local = (*dev)->info().profile;
  auto kernels = bench::loadBenchKernels(**dev);
  if (!kernels.ok())
    return fmt::print(stderr, "deepinfer-jit roofline: the microkernels: {}\n", kernels.error().message), 1;
  const bench::Ceilings c = bench::measureCeilings(**dev, &*kernels, "", samples);
  const TuningMetadata md = TuningMetadata::forLocalGpu(local);
  fmt::print("{}\n", md.describe());
  if (c.copyGBs > 0)
    fmt::print("copy bandwidth: {:.0f} GB/s (read + write of {} MiB, median of {}, {:.1f} us)\n", c.copyGBs,
               c.copyBytes >> 20, c.copyTiming.samples, c.copyTiming.medianUs);
  else
    fmt::print("copy bandwidth: not measured: {}\n", c.copyError);
  if (c.mmaTflops > 0)
    fmt::print("mma.sync bf16 (fp32 accumulate): {:.0f} TFLOP/s (median of {}, {:.1f} us)\n", c.mmaTflops,
               c.mmaTiming.samples, c.mmaTiming.medianUs);
  else
    fmt::print("mma.sync bf16: not measured: {}\n", c.mmaError);
  if (c.copyGBs <= 0 && c.mmaTflops <= 0) return 1;
  if (args.has("no-store")) return 0;
  std::vector<std::string> warnings;
  auto cache = TuningCache::open(md, TuningCache::defaultDir(), &warnings);
  for (const auto& w : warnings) fmt::print(stderr, "deepinfer-jit: warning: {}\n", w);
  if (!cache.ok()) return fmt::print(stderr, "deepinfer-jit roofline: {}\n", cache.error().message), 1;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
  cache->setRoofline({c.copyGBs, c.mmaTflops, when});
  if (Status s = cache->save(); !s.ok()) return fmt::print(stderr, "deepinfer-jit roofline: {}\n", s.error().message), 1;
  fmt::print("stored in {}\n", cache->path());
  return c.copyGBs > 0 && c.mmaTflops > 0 ? 0 : 1;
}
