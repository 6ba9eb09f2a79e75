#include "deepinfer/TargetProfile.h"

namespace deepinfer {

std::optional<ArchFacts> archFacts(int arch) {
  constexpr int64_t KB = 1024;
  ArchFacts f;
  f.arch = arch;
  switch (arch) {
    case 80: f.smemPerSm = 164 * KB; f.smemPerCtaOptIn = 163 * KB; f.maxWarpsPerSm = 64; f.maxCtasPerSm = 32; break;
    case 86: f.smemPerSm = 100 * KB; f.smemPerCtaOptIn = 99 * KB; f.maxWarpsPerSm = 48; f.maxCtasPerSm = 16; break;
    case 89: f.smemPerSm = 100 * KB; f.smemPerCtaOptIn = 99 * KB; f.maxWarpsPerSm = 48; f.maxCtasPerSm = 24;
             f.nativeFp8Convert = true; break;
    case 90: f.smemPerSm = 228 * KB; f.smemPerCtaOptIn = 227 * KB; f.maxWarpsPerSm = 64; f.maxCtasPerSm = 32;
             f.nativeFp8Convert = true; f.hasWgmma = true; break;
    default: return std::nullopt;
  }
  return f;
}

namespace {

TargetProfile preset(const char* name, int arch, int sms, int64_t l2MB, double gbs, double tflops,
                     bool halfRate = false) {
  TargetProfile t;
  t.name = name;
  t.facts = *archFacts(arch);
  t.smCount = sms;
  t.l2Bytes = l2MB * 1024 * 1024;
  t.memBandwidthGBs = gbs;
  t.bf16TensorTflops = tflops;
  t.bf16Fp32AccHalfRate = halfRate;
  // The project's rule: sm_80/sm_86 kernels stay within 48 KB per CTA (one body for both,
  // two CTAs per SM86 SM). sm_89/sm_90 lift the cap to the opt-in limit.
  t.smemPerCtaCap = (arch == 80 || arch == 86) ? 48 * 1024 : t.facts.smemPerCtaOptIn;
  return t;
}

std::vector<TargetProfile> buildPresets() {
  return {
      // Bare architecture names: a typical part of each (A100-80GB, A6000-class, L40S, H100).
      preset("sm_80", 80, 108, 40, 2039, 312),
      preset("sm_86", 86, 84, 6, 768, 155),
      preset("sm_89", 89, 142, 96, 864, 362),
      preset("sm_90", 90, 132, 50, 3350, 989),
      preset("a100-80gb", 80, 108, 40, 2039, 312),
      preset("a100-40gb", 80, 108, 40, 1555, 312),
      preset("ga100-64gb", 80, 74, 40, 0, 312.0 * 74 / 108),  // bandwidth unknown: measure
      preset("a30", 80, 56, 24, 933, 165),
      preset("rtx3090", 86, 82, 6, 936, 71, /*halfRate=*/true),
      preset("rtx-a6000", 86, 84, 6, 768, 155),
      preset("a40", 86, 84, 6, 696, 150),
      preset("a10", 86, 72, 6, 600, 125),
      preset("l40s", 89, 142, 96, 864, 362),
      preset("h100-sxm", 90, 132, 50, 3350, 989),
      preset("h200", 90, 132, 60, 4800, 989),
  };
}

}  // namespace

const std::vector<TargetProfile>& targetPresets() {
  static const std::vector<TargetProfile> p = buildPresets();
  return p;
}

std::optional<TargetProfile> findTarget(const std::string& name) {
  for (const auto& t : targetPresets())
    if (t.name == name) return t;
  return std::nullopt;
}

std::vector<std::string> defaultTargetNames() { return {"sm_80", "sm_86", "sm_89", "sm_90"}; }

}  // namespace deepinfer
