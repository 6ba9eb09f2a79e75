#include "deepinfer/TensorView.h"

#include <fmt/format.h>

#include <algorithm>

#include "deepinfer/Device.h"

namespace deepinfer {
namespace {

// Element counts and offsets stay far below int64 overflow (2^62 elements is beyond any memory).
constexpr int64_t kMaxElements = int64_t(1) << 62;

Status checkDims(const char* what, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if (shape.size() != strides.size())
    return Error{fmt::format("{}: shape {} has {} dims but strides {} has {}", what, dimsString(shape), shape.size(),
                             dimsString(strides), strides.size())};
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) return Error{fmt::format("{}: shape {} has a negative dim {}", what, dimsString(shape), i)};
    if (strides[i] < 0)
      return Error{fmt::format("{}: strides {} has a negative stride in dim {}", what, dimsString(strides), i)};
    if (shape[i] > 0 && n > kMaxElements / shape[i])
      return Error{fmt::format("{}: shape {} has too many elements", what, dimsString(shape))};
    n *= std::max<int64_t>(shape[i], 1);
  }
  // The last element's offset must stay representable.
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 1) continue;
    if (strides[i] > (kMaxElements - last) / (shape[i] - 1))
      return Error{fmt::format("{}: shape {} with strides {} spans too many elements", what, dimsString(shape),
                               dimsString(strides))};
    last += strides[i] * (shape[i] - 1);
  }
  return {};
}

}  // namespace

std::string dimsString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", v[i]);
  return s + "]";
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * std::max<int64_t>(shape[i], 1);
  return st;
}

TensorView TensorView::contiguous(uint64_t addr, DType dtype, std::vector<int64_t> shape) {
  TensorView v;
  v.addr = addr;
  v.dtype = dtype;
  v.strides = contiguousStrides(shape);
  v.shape = std::move(shape);
  return v;
}

Result<TensorView> TensorView::strided(uint64_t addr, DType dtype, std::vector<int64_t> shape,
                                       std::vector<int64_t> strides) {
  DI_TRY(checkDims("TensorView::strided", shape, strides));
  TensorView v;
  v.addr = addr;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  return v;
}

Result<TensorView> TensorView::of(const DeviceBuffer& buf, DType dtype, std::vector<int64_t> shape,
                                  uint64_t byteOffset) {
  DI_TRY(checkDims("TensorView::of", shape, contiguousStrides(shape)));
  if (byteOffset % dtypeSize(dtype) != 0)
    return Error{fmt::format("TensorView::of: byte offset {} is not a multiple of the {} element size {}",
                             byteOffset, dtypeName(dtype), dtypeSize(dtype))};
  TensorView v = contiguous(buf.addr() + byteOffset, dtype, std::move(shape));
  v.bufferBase = buf.addr();
  v.bufferBytes = buf.size();
  if (byteOffset > buf.size())
    return Error{fmt::format("TensorView::of: byte offset {} is past the end of a {} byte buffer", byteOffset,
                             buf.size())};
  DI_TRY(v.checkWithin(buf.addr(), buf.size()));
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorView::isContiguous() const {
  int64_t expect = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

bool TensorView::isNonOverlapping() const {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] > 1) dims.push_back({strides[i], shape[i]});
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span += stride * (size - 1);
  }
  return true;
}

Result<TensorView> TensorView::slice(size_t dim, int64_t start, int64_t end) const {
  if (dim >= rank())
    return Error{fmt::format("slice: dim {} is out of range for {} (rank {})", dim, toString(), rank())};
  if (start < 0 || end < start || end > shape[dim])
    return Error{fmt::format("slice: [{}, {}) is not a range of dim {} (size {}) of {}", start, end, dim,
                             shape[dim], toString())};
  TensorView v = *this;
  v.addr = addr + uint64_t(start) * uint64_t(strides[dim]) * elementSize();
  v.shape[dim] = end - start;
  return v;
}

Result<TensorView> TensorView::narrow(size_t dim, int64_t start, int64_t length) const {
  if (length < 0)
    return Error{fmt::format("narrow: negative length {} in dim {} of {}", length, dim, toString())};
  return slice(dim, start, start + length);
}

Result<TensorView> TensorView::select(size_t dim, int64_t index) const {
  if (dim >= rank())
    return Error{fmt::format("select: dim {} is out of range for {} (rank {})", dim, toString(), rank())};
  if (index < 0 || index >= shape[dim])
    return Error{fmt::format("select: index {} is outside dim {} (size {}) of {}", index, dim, shape[dim],
                             toString())};
  TensorView v = *this;
  v.addr = addr + uint64_t(index) * uint64_t(strides[dim]) * elementSize();
  v.shape.erase(v.shape.begin() + std::ptrdiff_t(dim));
  v.strides.erase(v.strides.begin() + std::ptrdiff_t(dim));
  return v;
}

Result<TensorView> TensorView::reshape(std::vector<int64_t> newShape) const {
  if (!isContiguous())
    return Error{fmt::format("reshape: {} is not contiguous; only a contiguous view can be reshaped to {}",
                             toString(), dimsString(newShape))};
  DI_TRY(checkDims("reshape", newShape, contiguousStrides(newShape)));
  int64_t n = 1;
  for (int64_t d : newShape) n *= d;
  if (n != numel())
    return Error{fmt::format("reshape: {} has {} elements, shape {} has {}", toString(), numel(),
                             dimsString(newShape), n)};
  TensorView v = *this;
  v.strides = contiguousStrides(newShape);
  v.shape = std::move(newShape);
  return v;
}

uint64_t TensorView::byteExtent() const {
  uint64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    last += uint64_t(shape[i] - 1) * uint64_t(strides[i]);
  }
  return (last + 1) * elementSize();
}

Status TensorView::checkWithin(uint64_t base, uint64_t bytes) const {
  const uint64_t extent = byteExtent();
  if (extent == 0) return {};
  if (addr < base || addr - base > bytes || extent > bytes - (addr - base))
    return Error{fmt::format("{} covers bytes [{:#x}, {:#x}), outside the buffer [{:#x}, {:#x})", toString(), addr,
                             addr + extent, base, base + bytes)};
  return {};
}

Status TensorView::checkBounds() const {
  if (bufferBytes == 0) return {};
  return checkWithin(bufferBase, bufferBytes);
}

std::string TensorView::toString() const {
  return fmt::format("{}{} strides {} at {:#x}", dtypeName(dtype), dimsString(shape), dimsString(strides), addr);
}

}  // namespace deepinfer
