#include "deepinfer/DeviceModule.h"

#include <fmt/format.h>

#include "CudaDriver.h"
#include "deepinfer/LaunchTally.h"

namespace deepinfer {

Result<DeviceModule> DeviceModule::load(const Device& dev, const void* image, const std::string& what) {
  auto drv = cuda::driver();
  if (!drv.ok()) return drv.error();
  if (!image) return Error{fmt::format("loading module {}: no image", what)};
  DI_TRY(dev.use());
  CUmodule mod;
  DI_CU((*drv)->cuModuleLoadData(&mod, image), fmt::format("loading module {}", what));
  DeviceModule m;
  m.module_ = mod;
  m.what_ = what;
  return m;
}

DeviceModule& DeviceModule::operator=(DeviceModule&& o) noexcept {
  if (this != &o) {
    unload();
    module_ = o.module_;
    what_ = std::move(o.what_);
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
  DI_CU(d.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], dynamicSmem,
                         static_cast<CUstream>(stream), params.empty() ? nullptr : args, nullptr),
        fmt::format("launching {} grid ({},{},{}) block ({},{},{})", entry, grid[0], grid[1], grid[2], block[0],
                    block[1], block[2]));
  ++threadLaunchTally().kernels;
  return {};
}

}  // namespace deepinfer
