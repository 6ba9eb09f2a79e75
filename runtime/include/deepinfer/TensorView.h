// A strided view of a device tensor: an address, a dtype, a shape and element strides. Views
// are how a caller hands a kernel part of a larger allocation (a slice of a workspace, one
// layer of a stacked cache) without a copy. No CUDA headers; the address is a plain integer.
//
// A view made from a DeviceBuffer remembers the buffer's range, and every view derived from it
// (slice, select, reshape) keeps that range, so `checkBounds()` can prove that all elements a
// kernel may touch lie inside the allocation. Errors name the operation, the view and the bad
// argument.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

class DeviceBuffer;

struct TensorView {
  uint64_t addr = 0;             // device address of element [0, 0, ...]
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements, one per dim, non-negative
  // The allocation the view lies in ([base, base + bytes)); bytes == 0: unknown.
  uint64_t bufferBase = 0;
  uint64_t bufferBytes = 0;

  // A dense row-major view at `addr` (no buffer range).
  static TensorView contiguous(uint64_t addr, DType dtype, std::vector<int64_t> shape);
  // A view with explicit strides; checks ranks, sizes and strides (no buffer range).
  static Result<TensorView> strided(uint64_t addr, DType dtype, std::vector<int64_t> shape,
                                    std::vector<int64_t> strides);
  // A dense view of `shape` starting `byteOffset` bytes into `buf`; it must fit and the offset
  // must be a multiple of the element size.
  static Result<TensorView> of(const DeviceBuffer& buf, DType dtype, std::vector<int64_t> shape,
                               uint64_t byteOffset = 0);

  size_t rank() const { return shape.size(); }
  int64_t numel() const;
  size_t elementSize() const { return dtypeSize(dtype); }
  // Dense row-major: strides are exactly those of `shape` (size-1 dims may have any stride).
  bool isContiguous() const;
  // No two elements share an address (sorted by stride, each dim steps past the smaller ones).
  bool isNonOverlapping() const;

  // Elements [start, end) of `dim` (Python-style negative indices are not accepted).
  Result<TensorView> slice(size_t dim, int64_t start, int64_t end) const;
  // `length` elements of `dim` from `start` (slice(dim, start, start + length)).
  Result<TensorView> narrow(size_t dim, int64_t start, int64_t length) const;
  // Index `index` of `dim`, dropping the dim.
  Result<TensorView> select(size_t dim, int64_t index) const;
  // The same elements under another shape; only for contiguous views (element count kept).
  Result<TensorView> reshape(std::vector<int64_t> newShape) const;

  // Bytes from `addr` to one past the last element any index reaches; 0 for an empty view.
  uint64_t byteExtent() const;
  // All elements inside [base, base + bytes); the error names the view and both ranges.
  Status checkWithin(uint64_t base, uint64_t bytes) const;
  // checkWithin the remembered buffer range (fine when the range is unknown).
  Status checkBounds() const;

  std::string toString() const;  // "BF16[2, 64, 512] strides [32768, 512, 1] at 0x7f..."
};

using TensorViewMap = std::map<std::string, TensorView>;

std::string dimsString(const std::vector<int64_t>& v);  // "[2, 64, 512]"
// Row-major strides of `shape`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape);

}  // namespace deepinfer
