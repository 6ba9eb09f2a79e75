#include "deepinfer/DeviceModule.h"

#include <fmt/format.h>

#include "CudaDriver.h"
#include "KernelLaunch.h"
#include "deepinfer/LaunchTally.h"
#include "deepinfer/ProgrammaticLaunch.h"

namespace deepinfer {

Result<DeviceModule> DeviceModule::load(const Device& dev, const void* image, const std::string& what,
                                        WaitingEntries waiting) {
  auto drv = cuda::driver();
  if (!drv.ok()) return drv.error();
  if (!image) return Error{fmt::format("loading module {}: no image", what)};
  DI_TRY(dev.use());
  CUmodule mod;
  DI_CU((*drv)->cuModuleLoadData(&mod, image), fmt::format("loading module {}", what));
  DeviceModule m;
  m.module_ = mod;
  m.what_ = what;
  m.waiting_ = waiting;
  m.deviceArch_ = dev.info().profile.arch();
  return m;
}

DeviceModule& DeviceModule::operator=(DeviceModule&& o) noexcept {
  if (this != &o) {
    unload();
    module_ = o.module_;
    what_ = std::move(o.what_);
    waiting_ = o.waiting_;
    deviceArch_ = o.deviceArch_;
    o.module_ = nullptr;
  }
  return *this;
}

DeviceModule::~DeviceModule() { unload(); }

void DeviceModule::unload() noexcept {
  if (!module_) return;
  auto drv = cuda::driver();
  if (drv.ok()) (*drv)->cuModuleUnload(static_cast<CUmodule>(module_));
  module_ = nullptr;
}

Status DeviceModule::launch(const std::string& entry, std::array<uint32_t, 3> grid,
                            std::array<uint32_t, 3> block, uint32_t dynamicSmem,
                            const std::vector<uint8_t>& params, void* stream) const {
  if (!module_) return Error{fmt::format("launching {}: the module is not loaded", entry)};
  auto drv = cuda::driver();
  if (!drv.ok()) return drv.error();
  const cuda::Driver& d = **drv;
  CUfunction f;
  DI_CU(d.cuModuleGetFunction(&f, static_cast<CUmodule>(module_), entry.c_str()),
        fmt::format("cuModuleGetFunction({}) in {}", entry, what_));
  // The kernel copies its by-value struct from this buffer at launch; nothing outlives the call.
  std::vector<uint8_t> bytes = params;
  void* args[] = {bytes.data()};
  const bool programmatic = stream != nullptr && programmaticLaunch();
  DI_CU(cuda::launchKernel(d, f, grid, block, dynamicSmem, static_cast<CUstream>(stream),
                           params.empty() ? nullptr : args, programmatic),
        fmt::format("launching {} grid ({},{},{}) block ({},{},{}){}", entry, grid[0], grid[1], grid[2], block[0],
                    block[1], block[2], programmatic ? " (programmatic)" : ""));
  ++threadLaunchTally().kernels;
  return {};
}

bool DeviceModule::programmaticLaunch() const {
  return useProgrammaticLaunch({waiting_.programmaticLaunch, /*entryWaits=*/waiting_.compiledArch > 0,
                                waiting_.compiledArch, deviceArch_, /*legacyStream=*/false});
}

}  // namespace deepinfer
