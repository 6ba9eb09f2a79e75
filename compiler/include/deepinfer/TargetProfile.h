// Target profiles: architecture facts + part facts (docs/targets.md). No MLIR, no CUDA.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

struct ArchFacts {
  int arch = 0;                  // 80, 86, 89, 90
  int64_t smemPerSm = 0;         // bytes
  int64_t smemPerCtaOptIn = 0;   // bytes, the opt-in maximum
  int64_t smemPerCtaStatic = 48 * 1024;
  int regsPerSm = 65536;
  int maxRegsPerThread = 255;
  int maxWarpsPerSm = 0;
  int maxCtasPerSm = 0;
  bool nativeFp8Convert = false;
  bool hasWgmma = false;
};

struct TargetProfile {
  std::string name;              // preset name, "local", or "sm_80"
  ArchFacts facts;
  int smCount = 0;
  int64_t l2Bytes = 0;
  double memBandwidthGBs = 0;    // datasheet lead; 0 = unknown (measure)
  double bf16TensorTflops = 0;   // datasheet lead; 0 = unknown
  bool bf16Fp32AccHalfRate = false;  // consumer GA10x: fp32-accumulate mma at half rate
  // The per-CTA shared-memory cap kernels for this target must respect. The project's rule:
  // 48 KB on sm_80/sm_86 (one kernel body for both, two CTAs per SM86 SM); lifted elsewhere.
  int64_t smemPerCtaCap = 48 * 1024;
  std::string gpuName;           // local GPU only
  std::string driverVersion;     // local GPU only

  int arch() const { return facts.arch; }
  std::string archName() const { return "sm_" + std::to_string(facts.arch); }
};

std::optional<ArchFacts> archFacts(int arch);
// Presets of docs/targets.md, plus bare "sm_80", "sm_86", "sm_89", "sm_90" (a typical part).
const std::vector<TargetProfile>& targetPresets();
// Look up a preset or an "sm_XX" name; nullopt when unknown. (The local GPU's profile comes
// from localGpu(); a module carries its target, so nothing is registered by name.)
std::optional<TargetProfile> findTarget(const std::string& name);
// Default targets compiled when no GPU is present.
std::vector<std::string> defaultTargetNames();

}  // namespace deepinfer
