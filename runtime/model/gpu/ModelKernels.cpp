// Loading the model kernels: one NVRTC unit over templates/model/*.cuh, compiled with
// --fmad=false for one target through the content-keyed binary cache, loaded as a module
// (cubin for the local GPU's arch, PTX otherwise). The launchers are in ModelKernelsLaunch.cpp.
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "ModelKernels.h"
#include "deepinfer/Specialize.h"
#include "model/params/ModelLaunch.h"

namespace deepinfer {
namespace {

constexpr const char* kUnitName = "di_model_kernels.cu";

// Every templates/model header with kernels, and the entries they define.
const char* const kHeaders[] = {"model/ModelMisc.cuh",   "model/ModelNorm.cuh",       "model/ModelRope.cuh",
                                "model/ModelMoe.cuh",    "model/ModelEngram.cuh",     "model/ModelCompressor.cuh",
                                "model/ModelIndex.cuh",   "model/ModelParallel.cuh"};
const char* const kEntries[] = {
    "di_model_embed_streams",     "di_model_round_bf16",         "di_model_round_f32_inplace",
    "di_model_argmax",            "di_model_rms_norm_bf16_warp", "di_model_rms_norm_f32_warp",
    "di_model_rms_norm_bf16_cta", "di_model_rms_norm_f32_cta",   "di_model_rope_f32_to_bf16",
    "di_model_rope_bf16_inplace", "di_model_router_topk",
    "di_model_gather_rows_bf16",  "di_model_scatter_rows_f32",   "di_model_moe_sum",
    "di_model_engram_gate",       "di_model_pair_pool",          "di_model_index_query_quant",
    "di_model_index_key_insert",  "di_model_candidate_block_scores", "di_model_mask_to_blocks",
    "di_model_drop_neg_inf",      "di_model_stream_mean",
    "di_model_add",               "di_model_local_expert_ids"};

}  // namespace

CudaUnit ModelKernels::unit() {
  CudaUnit u;
  u.source = "// deepinfer model kernels (runtime/model/gpu/ModelKernels.h), compiled with --fmad=false\n";
  for (const char* h : kHeaders) u.source += fmt::format("#include \"{}\"\n", h);
  u.entries.assign(std::begin(kEntries), std::end(kEntries));
  u.label = "model kernels (embedding, norms, RoPE, router, MoE sum, ...)";
  return u;
}

std::vector<std::string> ModelKernels::options(int arch, bool cubin) { return nvrtcOptions(arch, cubin, /*fmad=*/false); }

std::string ModelKernels::cacheKey(int arch, bool cubin) {
  // Covers the source, every template header, the NVRTC version, the arch and the options this
  // unit really uses (--fmad=false).
  return unitContentKey(unit(), arch, cubin, /*fmad=*/false);
}

Result<std::unique_ptr<ModelKernels>> ModelKernels::load(std::shared_ptr<Device> dev, const TargetProfile& target,
                                                         const JitOptions& opts) {
  if (!dev) return Error{"ModelKernels::load: no device"};
  const int arch = target.arch();
  const bool native = arch == dev->info().profile.arch();
  const CudaUnit u = unit();
  const std::string key = cacheKey(arch, native);
  const std::string what = fmt::format("model kernels for {} ({})", target.archName(), native ? "cubin" : "PTX");
  auto compile = [&] { return compileUnit(u, kUnitName, arch, native, /*fmad=*/false); };

  std::optional<BinaryCache> cache;
  if (opts.useDiskCache) {
    auto bc = BinaryCache::open(opts.cacheDir.empty() ? BinaryCache::defaultDir() : opts.cacheDir);
    if (bc.ok()) cache = std::move(bc.value());
    else fmt::print(stderr, "deepinfer-jit: warning: kernel cache disabled: {}\n", bc.error().message);
  }
  bool compiledNow = false;
  auto c = compileThroughCache(cache ? &*cache : nullptr, key, what, compile, opts.requireCacheHit, &compiledNow);
  if (!c.ok()) return c.error();
  if (native && c->cubin.empty()) return Error{fmt::format("{}: the compiled unit has no cubin", what)};

  const void* image = native ? static_cast<const void*>(c->cubin.data()) : static_cast<const void*>(c->ptx.c_str());
  // Every model kernel starts with di::grid_dependency_sync() (KernelPrologueTest scans them).
  auto mod = DeviceModule::load(*dev, image, what, {arch, opts.programmaticLaunch});
  if (!mod.ok()) return mod.error();
  std::unique_ptr<ModelKernels> mk(new ModelKernels());
  mk->dev_ = std::move(dev);
  mk->target_ = target;
  mk->module_ = std::move(mod.value());
  mk->fromPtx_ = !native;
  mk->compiledNow_ = compiledNow;
  return mk;
}

Status ModelKernels::launch(const char* entry, int64_t grid, uint32_t dynamicSmem, const void* params, size_t bytes,
                            void* stream) const {
  if (grid <= 0) return {};
  if (grid > int64_t(0x7FFFFFFF)) return Error{fmt::format("{}: grid of {} CTAs is too large", entry, grid)};
  std::vector<uint8_t> b(bytes);
  std::memcpy(b.data(), params, bytes);
  return module_.launch(entry, {uint32_t(grid), 1, 1}, {uint32_t(di::model::kCtaThreads), 1, 1}, dynamicSmem, b,
                        stream);
}

}  // namespace deepinfer
