// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1) so that a machine with no
// driver still runs everything that needs no GPU. Internal to the runtime.
#pragma once
#include <cuda.h>

#include <string>

#include "deepinfer/Error.h"

namespace deepinfer::cuda {

// X-macro of every driver entry point we use; names go through cuda.h's versioning macros
// (cuMemAlloc -> cuMemAlloc_v2) so the resolved symbol matches the header's prototype.
#define DI_CUDA_DRIVER_FUNCS(X)                                                                   \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)           \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuGetErrorName) X(cuGetErrorString)               \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8)        \
  X(cuMemsetD32) X(cuMemsetD8Async) X(cuMemGetInfo) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)     \
  X(cuMemcpyDtoDAsync) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)               \
  X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernelEx) X(cuStreamCreate)               \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)   \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamBeginCapture) X(cuStreamEndCapture)       \
  X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGraphGetNodes)       \
  X(cuGraphNodeGetType) X(cuGraphGetEdges) X(cuMemAllocHost)                                       \
  X(cuMemFreeHost) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemcpyPeerAsync) X(cuStreamWaitEvent)    \
  X(cuMemcpy2DAsync)

struct Driver {
#define DI_DECLARE(fn) decltype(&::fn) fn = nullptr;
  DI_CUDA_DRIVER_FUNCS(DI_DECLARE)
#undef DI_DECLARE
};

// The loaded driver (cuInit done), or an error saying why there is none ("no driver").
Result<const Driver*> driver();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for an error code.
std::string errorString(CUresult r);
// An Error carrying the CUDA error name and what we were doing.
Error cudaError(CUresult r, const std::string& what);

}  // namespace deepinfer::cuda

// Call a driver function; on failure return an Error with the name and context.
#define DI_CU(call, what)                                                              \
  do {                                                                                 \
    CUresult di_cu_rc_ = (call);                                                       \
    if (di_cu_rc_ != CUDA_SUCCESS) return ::deepinfer::cuda::cudaError(di_cu_rc_, what); \
  } while (0)
