#include "CudaDriver.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace deepinfer::cuda {

#define DI_STR2(x) #x
#define DI_STR(x) DI_STR2(x)

Result<const Driver*> driver() {
  static Result<const Driver*> loaded = []() -> Result<const Driver*> {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return Error{fmt::format("no CUDA driver: libcuda.so.1 could not be loaded ({})", dlerror())};
    static Driver d;
#define DI_RESOLVE(fn)                                                                       \
  d.fn = reinterpret_cast<decltype(d.fn)>(dlsym(h, DI_STR(fn)));                            \
  if (!d.fn) return Error{fmt::format("CUDA driver lacks {} (driver too old?)", DI_STR(fn))};
    DI_CUDA_DRIVER_FUNCS(DI_RESOLVE)
#undef DI_RESOLVE
    CUresult rc = d.cuInit(0);
    if (rc != CUDA_SUCCESS) {
      const char* name = nullptr;
      d.cuGetErrorName(rc, &name);
      return Error{fmt::format("no usable GPU: cuInit failed with {}", name ? name : "?")};
    }
    return &d;
  }();
  return loaded;
}

std::string errorString(CUresult r) {
  auto d = driver();
  const char* name = nullptr;
  const char* desc = nullptr;
  if (d.ok()) {
    (*d)->cuGetErrorName(r, &name);
    (*d)->cuGetErrorString(r, &desc);
  }
  return fmt::format("{} ({})", name ? name : fmt::format("CUresult {}", int(r)), desc ? desc : "?");
}

Error cudaError(CUresult r, const std::string& what) {
  return Error{fmt::format("{}: {}", what, errorString(r))};
}

}  // namespace deepinfer::cuda
