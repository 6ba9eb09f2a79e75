// The JIT: ask for an op with shapes and a target, get a loaded kernel (compiled on first use
// through the di passes and NVRTC), and launch it on device buffers. Loaded kernels are keyed
// by content (source, every template header, NVRTC version, options, arch), never by name.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "deepinfer/BinaryCache.h"
#include "deepinfer/Device.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/Pipeline.h"
#include "deepinfer/ProgrammaticLaunch.h"
#include "deepinfer/TuningCache.h"

namespace deepinfer {

struct LoadedKernel {
  std::string key;                          // content key (hex SHA-256)
  OpDesc desc;
  TargetProfile target;
  ConfigChoice config;
  EmittedKernel kernel;
  std::map<std::string, ResourceReport> resources;  // when compiled to a cubin
  bool fromPtx = false;                     // loaded as PTX (target arch != the GPU's)
  void* module = nullptr;                   // CUmodule
  std::map<std::string, void*> functions;   // CUfunction by entry name
};

struct JitOptions {
  bool useDiskCache = true;        // the content-keyed binary cache (BinaryCache.h)
  std::string cacheDir;            // "" = BinaryCache::defaultDir()
  bool requireCacheHit = BinaryCache::requireHitFromEnv();  // a miss is an error, not a compile
  // A request for an op's default config gets the tuning cache's winner for its shape bucket
  // on this GPU (TuningCache.h; `deepinfer-jit tune` writes it) when one is recorded for the
  // requested target name ("local", or e.g. "sm_80" for that PTX tuned on this GPU).
  bool useTuned = true;
  std::string tuningDir;           // "" = <cache dir>/tuning
  // Launch kernels compiled for sm_90+ with programmatic stream serialization on a 9.0+ GPU
  // (deepinfer/ProgrammaticLaunch.h); the model kernels follow the same switch.
  bool programmaticLaunch = programmaticLaunchDefault();
};

class Jit {
 public:
  explicit Jit(std::shared_ptr<Device> dev, JitOptions opts = {});
  ~Jit();
  // The kernel for this op on this target: cubin when the target is the GPU's own arch, PTX
  // otherwise (so sm_80/sm_86 specializations run on newer GPUs).
  Result<std::shared_ptr<const LoadedKernel>> get(const OpDesc& d, const TargetProfile& t,
                                                  const std::optional<KernelConfig>& config = std::nullopt);
  // Launch every step of the kernel's plan on `stream` with tensors bound by canonical name
  // (and "__workspace" when the plan needs one).
  Status launch(const LoadedKernel& k, const DeviceAddrMap& addrs, void* stream) const;
  // The same with the parameter struct already packed (ViewLaunch.h packs it from strided views).
  Status launchPacked(const LoadedKernel& k, const std::vector<uint8_t>& params, void* stream) const;
  // Compile this config into the disk cache without loading it (nothing to do on a hit). Safe
  // to call from many threads at once (NVRTC compiles run in parallel; get() then loads the
  // entry from the disk cache). Without a disk cache this only checks and emits.
  Status precompile(const OpDesc& d, const TargetProfile& t, const KernelConfig& config);
  // The tuned winner get() would use for a default request (nullopt: none recorded, tuning
  // off, or the recorded config does not fit this description).
  std::optional<KernelConfig> tunedConfig(const OpDesc& d, const TargetProfile& t) const;
  int compiles() const { return compiles_; }       // NVRTC compiles this Jit ran
  int diskHits() const { return diskHits_; }       // kernels loaded from the disk cache
  const Device& device() const { return *dev_; }
  bool programmaticLaunch() const { return programmaticLaunch_; }  // the switch (JitOptions)

 private:
  std::shared_ptr<Device> dev_;
  std::mutex mu_;
  Result<std::shared_ptr<const LoadedKernel>> load(const OpDesc& d, const TargetProfile& t,
                                                   const std::optional<KernelConfig>& config);
  std::map<std::string, std::shared_ptr<LoadedKernel>> byKey_;                 // by content
  std::map<std::string, std::shared_ptr<const LoadedKernel>> byRequest_;       // by op+shapes+target+config
  std::optional<BinaryCache> cache_;
  bool requireHit_ = false;
  bool programmaticLaunch_ = true;
  std::optional<TuningCache> tuning_;
  std::atomic<int> compiles_{0};
  std::atomic<int> diskHits_{0};
};

// The content key of a unit compiled for an arch (also the binary cache's key).
std::string kernelContentKey(const CudaUnit& unit, int arch, bool cubin);

}  // namespace deepinfer
