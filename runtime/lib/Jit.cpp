#include "deepinfer/Jit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "CudaDriver.h"
#include "KernelLaunch.h"
#include "deepinfer/EmbeddedTemplates.h"
#include "deepinfer/LaunchTally.h"
#include "deepinfer/ShapeBuckets.h"
#include "deepinfer/TuningDims.h"

namespace deepinfer {

std::string kernelContentKey(const CudaUnit& unit, int arch, bool cubin) { return unitContentKey(unit, arch, cubin); }

Jit::Jit(std::shared_ptr<Device> dev, JitOptions opts)
    : dev_(std::move(dev)), requireHit_(opts.requireCacheHit), programmaticLaunch_(opts.programmaticLaunch) {
  if (opts.useTuned) {
    const std::string dir = !opts.tuningDir.empty() ? opts.tuningDir
                            : !opts.cacheDir.empty() ? opts.cacheDir + "/tuning"
                                                     : TuningCache::defaultDir();
    std::vector<std::string> warnings;
    auto tc = TuningCache::open(TuningMetadata::forLocalGpu(dev_->info().profile), dir, &warnings);
    for (const auto& w : warnings) fmt::print(stderr, "deepinfer-jit: warning: {}\n", w);
    if (tc.ok()) tuning_ = std::move(tc.value());
    else fmt::print(stderr, "deepinfer-jit: warning: tuned configs not used: {}\n", tc.error().message);
  }
  if (!opts.useDiskCache) return;
  auto c = BinaryCache::open(opts.cacheDir.empty() ? BinaryCache::defaultDir() : opts.cacheDir);
  if (c.ok()) cache_ = std::move(c.value());
  else fmt::print(stderr, "deepinfer-jit: warning: kernel cache disabled: {}\n", c.error().message);
}

Jit::~Jit() {
  auto d = cuda::driver();
  if (!d.ok()) return;
  for (auto& [k, lk] : byKey_)
    if (lk->module) (*d)->cuModuleUnload(static_cast<CUmodule>(lk->module));
}

// Everything the pipeline's output depends on: op, attributes, shapes, target facts, config.
static std::string requestKey(const OpDesc& d, const TargetProfile& t, const std::optional<KernelConfig>& config) {
  std::string k = d.op;
  for (const auto& [n, v] : d.attrs.all()) k += fmt::format("|{}={}:{}:{}", n, v.isInt, v.i, v.f);
  for (const auto& [n, s] : d.shapes) k += fmt::format("|{}[{}]", n, fmt::join(s, ","));
  k += fmt::format("|{}|{}|{}|{}", t.name, t.arch(), t.smCount, t.smemPerCtaCap);
  k += config ? "|" + configToString(*config) : "|default";
  return k;
}

Result<std::shared_ptr<const LoadedKernel>> Jit::get(const OpDesc& d, const TargetProfile& t,
                                                    const std::optional<KernelConfig>& config) {
  // The same request again (every layer of every forward): no pipeline run, no hashing.
  const std::string rkey = requestKey(d, t, config);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = byRequest_.find(rkey); it != byRequest_.end()) return it->second;
  }
  auto lk = load(d, t, config ? config : tunedConfig(d, t));
  if (!lk.ok()) return lk.error();
  std::lock_guard<std::mutex> lock(mu_);
  byRequest_[rkey] = *lk;
  return *lk;
}

std::optional<KernelConfig> Jit::tunedConfig(const OpDesc& d, const TargetProfile& t) const {
  if (!tuning_) return std::nullopt;
  auto bucket = bucketFor(d);
  auto dims = tuningDims(d);
  if (!bucket || !dims) return std::nullopt;
  auto w = tuning_->winner(TuningKey{t.name, d.op, opDtypes(d.op), bucket->label(), *dims});
  if (!w) return std::nullopt;
  auto cfg = parseConfigString(*w);
  // checkConfig runs the checks every launch runs (the op, the knobs, the target's limits): a
  // winner that cannot serve this description falls back to the family's default.
  if (!cfg || !checkConfig(d, t, *cfg).ok()) return std::nullopt;
  return *cfg;
}

Status Jit::precompile(const OpDesc& d, const TargetProfile& t, const KernelConfig& config) {
  // The same pipeline as get() (thread-safe: each run has its own context), so the same key.
  auto p = runKernelPipeline(d, t, config);
  if (!p.ok()) return p.error();
  const EmittedKernel* k = &p->kernel;
  if (!cache_) return {};
  const bool native = t.arch() == dev_->info().profile.arch();
  const std::string key = kernelContentKey(k->unit, t.arch(), native);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (byKey_.count(key)) return {};
  }
  const std::string what = fmt::format("{} for {} ({})", k->baseName, t.archName(), native ? "cubin" : "PTX");
  bool compiledNow = false;
  auto c = cache_->getOrCompile(
      key, what, [&] { return compileUnit(k->unit, k->baseName + ".cu", t.arch(), native); },
      requireHit_, &compiledNow);
  if (compiledNow) ++compiles_;
  if (!c.ok()) return c.error();
  return {};
}

Result<std::shared_ptr<const LoadedKernel>> Jit::load(const OpDesc& d, const TargetProfile& t,
                                                     const std::optional<KernelConfig>& config) {
  auto p = runKernelPipeline(d, t, config);
  if (!p.ok()) return p.error();
  const bool native = t.arch() == dev_->info().profile.arch();
  const std::string key = kernelContentKey(p->kernel.unit, t.arch(), native);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = byKey_.find(key); it != byKey_.end()) {
    // Same code; the plan (grid sizes) may differ with runtime shapes, so refresh it.
    auto lk = std::make_shared<LoadedKernel>(*it->second);
    lk->desc = d;
    lk->kernel = p->kernel;
    lk->config = p->config;
    return std::shared_ptr<const LoadedKernel>(lk);
  }
  auto compile = [&] { return compileUnit(p->kernel.unit, p->kernel.baseName + ".cu", t.arch(), native); };
  const std::string what = fmt::format("{} for {} ({})", p->kernel.baseName, t.archName(), native ? "cubin" : "PTX");
  bool compiledNow = false;
  auto c = compileThroughCache(cache_ ? &*cache_ : nullptr, key, what, compile, requireHit_, &compiledNow);
  if (!c.ok()) return c.error();
  if (compiledNow) ++compiles_;
  else ++diskHits_;
  auto lk = std::make_shared<LoadedKernel>();
  lk->key = key;
  lk->desc = d;
  lk->target = t;
  lk->config = p->config;
  lk->kernel = p->kernel;
  lk->resources = c->resources;
  lk->fromPtx = !native;
  auto drv = cuda::driver();
  if (!drv.ok()) return drv.error();
  const cuda::Driver& dr = **drv;
  DI_TRY(dev_->use());
  CUmodule mod;
  const void* image = native ? static_cast<const void*>(c->cubin.data()) : static_cast<const void*>(c->ptx.c_str());
  DI_CU(dr.cuModuleLoadData(&mod, image),
        fmt::format("loading {} ({} for {})", p->kernel.baseName, native ? "cubin" : "PTX", t.archName()));
  lk->module = mod;
  for (const auto& e : p->kernel.unit.entries) {
    CUfunction f;
    DI_CU(dr.cuModuleGetFunction(&f, mod, e.c_str()), fmt::format("cuModuleGetFunction({})", e));
    lk->functions[e] = f;
  }
  byKey_[key] = lk;
  return std::shared_ptr<const LoadedKernel>(lk);
}

Status Jit::launch(const LoadedKernel& k, const DeviceAddrMap& addrs, void* stream) const {
  const KernelFamily* fam = findKernelFamily(k.desc.op);
  if (!fam) return Error{fmt::format("no kernel family for '{}'", k.desc.op)};
  if (k.kernel.workspaceBytes > 0 && !addrs.count("__workspace"))
    return Error{fmt::format("{} needs a {} byte workspace (\"__workspace\")", k.kernel.baseName,
                             k.kernel.workspaceBytes)};
  if (k.kernel.zeroedBytes > 0 && !addrs.count("__zeroed"))
    return Error{fmt::format("{} needs a {} byte workspace that is zero on entry (\"__zeroed\")", k.kernel.baseName,
                             k.kernel.zeroedBytes)};
  auto params = fam->packParams(k.config.config, k.desc, addrs);
  if (!params.ok()) return params.error();
  return launchPacked(k, *params, stream);
}

Status Jit::launchPacked(const LoadedKernel& k, const std::vector<uint8_t>& params, void* stream) const {
  auto drv = cuda::driver();
  if (!drv.ok()) return drv.error();
  const cuda::Driver& dr = **drv;
  // Every family's entries wait on the previous grid (di::grid_dependency_wait) before their first
  // dependent read or global write, at most after an independent weight prologue (KernelPrologueTest
  // scans them), so the steps of a plan, and the kernels before and after it, may overlap.
  const bool programmatic = useProgrammaticLaunch({programmaticLaunch_, /*entryWaits=*/true, k.target.arch(),
                                                   dev_->info().profile.arch(), stream == nullptr});
  for (const auto& st : k.kernel.plan) {
    auto it = k.functions.find(st.entry);
    if (it == k.functions.end()) return Error{fmt::format("launch plan names unknown entry {}", st.entry)};
    CUfunction f = static_cast<CUfunction>(it->second);
    if (st.dynamicSmem > 48 * 1024)
      DI_CU(dr.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(st.dynamicSmem)),
            fmt::format("raising {}'s dynamic shared memory to {} bytes", st.entry, st.dynamicSmem));
    if (st.grid[0] == 0 || st.grid[1] == 0 || st.grid[2] == 0) continue;  // nothing to do (empty batch)
    void* args[] = {const_cast<uint8_t*>(params.data())};
    DI_CU(cuda::launchKernel(dr, f, st.grid, st.block, st.dynamicSmem, static_cast<CUstream>(stream), args, programmatic),
          fmt::format("launching {} grid ({},{},{}) block ({},{},{}) smem {}{}", st.entry, st.grid[0], st.grid[1],
                      st.grid[2], st.block[0], st.block[1], st.block[2], st.dynamicSmem,
                      programmatic ? " (programmatic)" : ""));
    ++threadLaunchTally().kernels;
  }
  return {};
}

}  // namespace deepinfer
