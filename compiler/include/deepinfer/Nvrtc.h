// NVRTC: compile an emitted CUDA unit (with the embedded templates as in-memory headers) to PTX
// and, for an sm_XX target, a cubin with its ptxas resource report. Needs no GPU or driver.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/KernelFamily.h"

namespace deepinfer {

struct ResourceReport {
  int registers = 0;
  int64_t smemBytes = 0;      // static shared memory per CTA
  int64_t stackFrame = 0;
  int64_t spillStores = 0;
  int64_t spillLoads = 0;
  int64_t cmemBytes = 0;      // cmem[0]
};

// Everything a compile started from: a cache entry stores it, so `cache import` and `cache
// verify` can recompute the entry's key and recompile it to check its PTX and cubin.
struct UnitOrigin {
  CudaUnit unit;          // source, entry names, label
  std::string unitName;   // e.g. "di_topk_07ca17987eea5d16.cu"
  int arch = 0;
  bool cubin = false;
  bool fmad = true;
};

struct CompiledUnit {
  std::string ptx;
  std::vector<uint8_t> cubin;                   // empty for compute_XX (PTX-only) compiles
  std::map<std::string, ResourceReport> resources;  // by entry name (cubin compiles only)
  std::string log;
  std::vector<std::string> options;             // canonical option list used
  UnitOrigin origin;                            // what compileUnit was given
};

// `arch` is e.g. 80; `cubin` selects sm_XX (PTX + cubin + report) over compute_XX (PTX only).
// `fmad = false` forbids contracting a * b + c into one fma (units whose per-element math must
// round like a CPU reference, e.g. the model kernels of runtime/model/gpu/ModelKernels.h).
Result<CompiledUnit> compileUnit(const CudaUnit& unit, const std::string& unitName, int arch, bool cubin,
                                 bool fmad = true);

// The content key of a unit compiled with these settings (the binary cache's key): SHA-256 of
// the NVRTC version, arch, cubin flag, a digest of every embedded template header, the canonical
// options and the source. Versions and content only; never paths or timestamps.
std::string unitContentKey(const CudaUnit& unit, int arch, bool cubin, bool fmad = true);
// The same for the settings a compile recorded.
std::string unitContentKey(const UnitOrigin& origin);

// Canonical NVRTC options for an arch (part of every cache key; paths never are).
std::vector<std::string> nvrtcOptions(int arch, bool cubin, bool fmad = true);
std::string nvrtcVersionString();   // "13.0"
// Parse the `ptxas -v` lines of an NVRTC log into per-entry reports.
std::map<std::string, ResourceReport> parsePtxasReport(const std::string& log);

}  // namespace deepinfer
