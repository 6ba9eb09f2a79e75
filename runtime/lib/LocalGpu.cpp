#include "deepinfer/LocalGpu.h"

#include <fmt/format.h>

#include "CudaDriver.h"

namespace deepinfer {

Result<LocalGpuInfo> localGpu(int ordinal) {
  auto drv = cuda::driver();
  if (!drv.ok()) return drv.error();
  const cuda::Driver& d = **drv;
  int count = 0;
  DI_CU(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (count == 0) return Error{"no GPU: the CUDA driver reports 0 devices"};
  if (ordinal < 0 || ordinal >= count)
    return Error{fmt::format("GPU {} does not exist ({} device(s))", ordinal, count)};
  CUdevice dev;
  DI_CU(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    d.cuDeviceGetAttribute(&v, a, dev);
    return v;
  };
  LocalGpuInfo g;
  g.ordinal = ordinal;
  g.computeMajor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  g.computeMinor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  const int arch = g.computeMajor * 10 + g.computeMinor;
  char name[256] = {0};
  DI_CU(d.cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
  size_t mem = 0;
  DI_CU(d.cuDeviceTotalMem(&mem, dev), "cuDeviceTotalMem");
  g.totalMemBytes = int64_t(mem);
  int drvVer = 0;
  d.cuDriverGetVersion(&drvVer);

  TargetProfile& t = g.profile;
  t.name = "local";
  // Newer architectures than we have facts for run the closest older profile's code (PTX).
  auto facts = archFacts(arch);
  if (!facts) facts = archFacts(arch >= 90 ? 90 : arch >= 89 ? 89 : arch >= 86 ? 86 : 80);
  t.facts = *facts;
  t.facts.arch = arch;  // compile for the real arch; limits from the closest known one
  t.smCount = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  t.l2Bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  g.smemPerCtaOptIn = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  g.smemPerSm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  t.facts.smemPerSm = g.smemPerSm;
  t.facts.smemPerCtaOptIn = g.smemPerCtaOptIn;
  t.facts.regsPerSm = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  t.facts.maxWarpsPerSm = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR) / 32;
  t.facts.maxCtasPerSm = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  t.smemPerCtaCap = (arch == 80 || arch == 86) ? 48 * 1024 : g.smemPerCtaOptIn;
  t.gpuName = name;
  t.driverVersion = fmt::format("{}.{}", drvVer / 1000, (drvVer % 1000) / 10);
  return g;
}

}  // namespace deepinfer
