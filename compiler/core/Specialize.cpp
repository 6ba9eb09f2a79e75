#include "deepinfer/Specialize.h"

#include <fmt/format.h>

#include <algorithm>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/SHA256.h"

#ifndef DI_GENERATOR_VERSION
#define DI_GENERATOR_VERSION 1
#endif

namespace deepinfer {

int occupancy(const ResourceEstimate& e, const TargetProfile& t) {
  if (e.threadsPerCta <= 0 || e.threadsPerCta > 1024) return 0;
  const int warps = (e.threadsPerCta + 31) / 32;
  int ctas = std::min(t.facts.maxCtasPerSm, t.facts.maxWarpsPerSm / warps);
  if (e.smemBytes > 0) ctas = std::min<int64_t>(ctas, t.facts.smemPerSm / e.smemBytes);
  if (e.regsPerThread > 0) {
    // Registers are allocated per warp in units of 256.
    const int perWarp = ((e.regsPerThread * 32 + 255) / 256) * 256;
    ctas = std::min(ctas, t.facts.regsPerSm / (perWarp * warps));
  }
  return std::max(ctas, 0);
}

Result<ConfigChoice> checkConfig(const OpDesc& d, const TargetProfile& t, const KernelConfig& c) {
  const KernelFamily* f = findKernelFamily(d.op);
  if (!f) return Error{fmt::format("no kernel family for op '{}'", d.op)};
  // The op first, then the config through the family (canImplement: the knobs, with the check
  // every launch runs), so estimates only ever see configs the template can instantiate.
  DI_TRY(f->validate(d));
  auto estimate = f->estimate(c, d);
  if (!estimate.ok()) return estimate.error();
  ConfigChoice ch{c, *estimate, 0};
  if (ch.estimate.smemBytes > t.smemPerCtaCap)
    return Error{fmt::format(
        "{}: config {{{}}} needs {} bytes of shared memory per CTA, over the {} cap of {} bytes ({})", d.op,
        configToString(c), ch.estimate.smemBytes, t.name, t.smemPerCtaCap, t.archName())};
  if (ch.estimate.regsPerThread > t.facts.maxRegsPerThread)
    return Error{fmt::format("{}: config {{{}}} needs {} registers per thread, over the limit of {}", d.op,
                             configToString(c), ch.estimate.regsPerThread, t.facts.maxRegsPerThread)};
  ch.ctasPerSm = occupancy(ch.estimate, t);
  if (ch.ctasPerSm == 0)
    return Error{fmt::format("{}: config {{{}}} ({} threads, {} registers/thread, {} bytes smem) cannot "
                             "run even one CTA per SM on {}",
                             d.op, configToString(c), ch.estimate.threadsPerCta, ch.estimate.regsPerThread,
                             ch.estimate.smemBytes, t.name)};
  return ch;
}

Result<Specialization> specialize(const OpDesc& d, const TargetProfile& t) {
  const KernelFamily* f = findKernelFamily(d.op);
  if (!f) return Error{fmt::format("no kernel family for op '{}'", d.op)};
  DI_TRY(f->validate(d));
  Specialization s;
  for (const KernelConfig& c : f->candidates(d, t)) {
    auto ch = checkConfig(d, t, c);
    if (ch.ok()) s.fitting.push_back(std::move(ch.value()));
    else ++s.droppedOverCap;
  }
  auto chosen = checkConfig(d, t, f->defaultConfig(d, t));
  if (!chosen.ok())
    return Error{fmt::format("the default config of {} does not fit {}: {}", d.op, t.name,
                             chosen.error().message)};
  s.chosen = std::move(chosen.value());
  return s;
}

std::string sha256Hex(std::string_view bytes) {
  auto h = llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  std::string s;
  for (uint8_t b : h) s += fmt::format("{:02x}", b);
  return s;
}

Result<EmittedKernel> emitKernel(const OpDesc& d, const KernelConfig& c) {
  const KernelFamily* f = findKernelFamily(d.op);
  if (!f) return Error{fmt::format("no kernel family for op '{}'", d.op)};
  DI_TRY(f->validate(d));  // the family's hooks check the config themselves (canImplement)
  static const std::string kPlaceholder = "__DI_ENTRY_NAME__";
  EmittedKernel k;
  auto unit = f->emit(c, d, kPlaceholder);
  if (!unit.ok()) return unit.error();
  k.unit = std::move(unit.value());
  const std::string hash = sha256Hex(fmt::format("gen={}\n{}", DI_GENERATOR_VERSION, k.unit.source));
  k.baseName = fmt::format("di_{}_{}", d.op, hash.substr(0, 16));
  auto rename = [&](std::string s) {
    for (size_t p = s.find(kPlaceholder); p != std::string::npos; p = s.find(kPlaceholder, p))
      s.replace(p, kPlaceholder.size(), k.baseName);
    return s;
  };
  k.unit.source = rename(k.unit.source);
  k.unit.label = fmt::format("{} {{{}}}", d.op, configToString(c));
  for (auto& e : k.unit.entries) e = rename(e);
  auto plan = f->launchPlan(c, d, k.baseName);
  if (!plan.ok()) return plan.error();
  k.plan = std::move(plan.value());
  auto workspace = f->workspaceBytes(c, d);
  if (!workspace.ok()) return workspace.error();
  k.workspaceBytes = *workspace;
  auto zeroed = f->zeroedWorkspaceBytes(c, d);
  if (!zeroed.ok()) return zeroed.error();
  k.zeroedBytes = *zeroed;
  return k;
}

}  // namespace deepinfer
