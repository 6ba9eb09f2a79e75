// safetensors files: a validating read-only mmap reader and an atomic writer.
// Format: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// data section; offsets are relative to the data section.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

// Bytes per element of a safetensors dtype string ("BF16", "F32", "F16", "I32", "I64", "I8",
// "U8", "F8_E4M3", "F8_E8M0"); 0 for a dtype this project does not know.
size_t safetensorsDtypeSize(const std::string& dtype);

// One tensor of a file. `begin`/`end` are byte offsets into the data section.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t byteSize() const { return end - begin; }
};

// A mapped file (MAP_PRIVATE, read-only). Every entry has been validated at open: dtype
// known, shape product x dtype size == byte length, offsets inside the data section, no
// two tensors overlap. Not copyable; the mapping lives as long as the object.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* find(const std::string& name) const;  // nullptr when absent
  // First byte of an entry's data inside the mapping.
  const uint8_t* data(const SafetensorsEntry& e) const { return dataStart_ + e.begin; }
  uint64_t dataSectionSize() const { return dataSize_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t mapSize_ = 0;
  const uint8_t* dataStart_ = nullptr;
  uint64_t dataSize_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> byName_;
};

// A tensor to write: dtype as a safetensors string so F8/I8 dtypes can be written too.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The safetensors spelling of a host dtype ("BF16", "F32", "I32", "I64", "U8").
const char* safetensorsDtypeOf(DType t);
RawTensor rawFromHost(const HostTensor& t);
// A host tensor from raw data; fails for dtypes HostTensor cannot hold (F8, I8, F16).
Result<HostTensor> hostFromRaw(const std::string& dtype, const std::vector<int64_t>& shape,
                               const uint8_t* data, size_t bytes, const std::string& what);

// Writes all tensors (in map order) to `path` atomically: a temporary file in the same
// folder, then rename. Checks each tensor's byte length against dtype and shape.
Status writeSafetensors(const std::string& path, const std::map<std::string, RawTensor>& tensors);
Status writeSafetensors(const std::string& path, const TensorMap& tensors);

// Streaming writer for files larger than memory: the header is written from `specs`, then
// `produce(i, specs[i], bytes)` fills each tensor's bytes in order (it must resize `bytes` to
// exactly the tensor's byte length) and they are appended. Atomic like writeSafetensors.
struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};
using TensorProducer =
    std::function<Status(size_t index, const TensorSpec& spec, std::vector<uint8_t>& bytes)>;
Status writeSafetensorsStreamed(const std::string& path, const std::vector<TensorSpec>& specs,
                                const TensorProducer& produce);

// Reads every tensor of a file into host tensors (for `run-op` inputs and tests). Fails on
// dtypes HostTensor cannot hold, naming the tensor.
Result<TensorMap> readSafetensorsToHost(const std::string& path);

}  // namespace deepinfer
