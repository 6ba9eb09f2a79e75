// `deepinfer-jit targets`: the presets, and the local GPU if there is one.
#include <fmt/format.h>

#include "Args.h"
#include "Verbs.h"
#include "deepinfer/LocalGpu.h"
#include "deepinfer/TargetProfile.h"

using namespace deepinfer;

static std::string kb(int64_t b) { return fmt::format("{} KB", b / 1024); }
static std::string mb(int64_t b) { return b ? fmt::format("{} MB", b / (1024 * 1024)) : "?"; }

int verbTargets(const std::vector<std::string>& argv) {
  cli::Args args("targets", "targets [--local-only]");
  args.flag("local-only", "print only the local GPU");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;

  if (!args.has("local-only")) {
    fmt::print("{:<12} {:<6} {:>4} {:>10} {:>10} {:>8} {:>8} {:>7} {:>10} {:>10}\n", "preset", "arch",
               "SMs", "smem/CTA*", "smem/SM", "warps/SM", "CTAs/SM", "L2", "GB/s", "bf16 TF/s");
    for (const auto& t : targetPresets())
      fmt::print("{:<12} {:<6} {:>4} {:>10} {:>10} {:>8} {:>8} {:>7} {:>10} {:>10}\n", t.name,
                 t.archName(), t.smCount, kb(t.smemPerCtaCap), kb(t.facts.smemPerSm),
                 t.facts.maxWarpsPerSm, t.facts.maxCtasPerSm, mb(t.l2Bytes),
                 t.memBandwidthGBs > 0 ? fmt::format("{:.0f}", t.memBandwidthGBs) : "measure",
                 fmt::format("{:.0f}{}", t.bf16TensorTflops, t.bf16Fp32AccHalfRate ? " (½ fp32acc)" : ""));
    fmt::print("* the per-CTA shared-memory cap kernels for the target respect (48 KB on sm_80/sm_86)\n\n");
  }
  auto g = localGpu(0);
  if (!g.ok()) {
    fmt::print("local GPU: none ({})\n", g.error().message);
    return 0;
  }
  const auto& t = g->profile;
  fmt::print("local GPU 0: {}\n", t.gpuName);
  fmt::print("  arch            sm_{}{} (compute capability {}.{})\n", t.arch(), "", g->computeMajor,
             g->computeMinor);
  fmt::print("  SMs             {}\n", t.smCount);
  fmt::print("  smem per CTA    {} opt-in ({} cap used by kernels)\n", kb(g->smemPerCtaOptIn), kb(t.smemPerCtaCap));
  fmt::print("  smem per SM     {}\n", kb(g->smemPerSm));
  fmt::print("  L2              {}\n", mb(t.l2Bytes));
  fmt::print("  memory          {:.1f} GB\n", g->totalMemBytes / 1e9);
  fmt::print("  driver (CUDA)   {}\n", t.driverVersion);
  return 0;
}
