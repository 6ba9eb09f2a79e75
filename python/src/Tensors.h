// Caller tensors through DLPack. The Python side asks each tensor for a DLPack capsule (with the
// consumer stream, so the producer orders its pending work first) and hands the capsule here;
// the memory is used in place: a TensorView of the producer's pointer, shape and element
// strides. Dtypes are checked against the op's signature with errors that name the tensor.
#pragma once
#include <nanobind/ndarray.h>

#include <string>

#include "Bindings.h"
#include "deepinfer/TensorView.h"

namespace deepinfer::py {

// DLPack device types the package takes (dlpack.h's kDLCPU, kDLCUDA).
constexpr int kDlCpu = 1;
constexpr int kDlCuda = 2;

struct ImportedTensor {
  nb::ndarray<nb::ro> keep;  // holds the capsule: keeps the producer's memory alive
  TensorView view;     // address, dtype, shape, element strides
  int deviceType = 0;  // kDlCpu or kDlCuda
  int deviceId = 0;

  std::string deviceName() const;  // "cpu", "cuda:0"
};

// Imports `capsule` (a DLPack capsule or an object with __dlpack__) as tensor `name` of `op`,
// whose signature dtype is `expected`. A BF16 tensor may arrive as bfloat16 or as uint16 holding
// bf16 bit patterns (NumPy has no bfloat16). `writable`: the op writes the tensor, so a
// read-only export is refused. Errors name the op, the tensor and what was wrong.
ImportedTensor importTensor(const std::string& op, const std::string& name, nb::handle capsule, DType expected,
                            bool writable);

// An array object with __dlpack__ / __dlpack_device__ over `data` (dense, row-major) that keeps
// `owner` alive: what the package hands out (torch/cupy/numpy.from_dlpack take it without a copy).
nb::object exportArray(void* data, const std::vector<int64_t>& shape, nb::handle owner, nb::dlpack::dtype dtype,
                       int deviceType, int deviceId);

// "bfloat16", "float32", "uint16", ... for a DLPack dtype.
std::string dlpackDtypeName(nb::dlpack::dtype t);

}  // namespace deepinfer::py
