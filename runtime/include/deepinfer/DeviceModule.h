// A CUDA module loaded from a PTX or cubin image, for device code that is not an op family's
// kernel (the benchmark's own microkernels). Op kernels go through Jit, which keys loaded
// modules by content; this class is the plain load-and-launch underneath, over the driver API.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/Device.h"

namespace deepinfer {

// For an image whose every entry starts with di::grid_dependency_sync() (the model kernels): the
// arch it was compiled for, and the switch. Its launches then use programmatic stream
// serialization where deepinfer/ProgrammaticLaunch.h allows. The default (compiledArch 0) keeps
// every launch plain: images without the prologue (benchmark and test kernels).
struct WaitingEntries {
  int compiledArch = 0;
  bool programmaticLaunch = false;
};

class DeviceModule {
 public:
  // `image` is a NUL-terminated PTX text or a cubin; `what` names it in errors.
  static Result<DeviceModule> load(const Device& dev, const void* image, const std::string& what,
                                   WaitingEntries waiting = WaitingEntries());
  DeviceModule() = default;
  DeviceModule(DeviceModule&& o) noexcept
      : module_(o.module_), what_(std::move(o.what_)), waiting_(o.waiting_), deviceArch_(o.deviceArch_) {
    o.module_ = nullptr;
  }
  DeviceModule& operator=(DeviceModule&& o) noexcept;
  DeviceModule(const DeviceModule&) = delete;
  DeviceModule& operator=(const DeviceModule&) = delete;
  ~DeviceModule();

  // Launch `entry`, whose one by-value argument is the parameter struct `params` (the project's
  // kernel convention), on `stream` (nullptr = the legacy default stream).
  Status launch(const std::string& entry, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
                uint32_t dynamicSmem, const std::vector<uint8_t>& params, void* stream) const;
  // Whether a launch on a real stream uses programmatic stream serialization.
  bool programmaticLaunch() const;

 private:
  void unload() noexcept;
  void* module_ = nullptr;  // CUmodule
  std::string what_;
  WaitingEntries waiting_;
  int deviceArch_ = 0;
};

}  // namespace deepinfer
