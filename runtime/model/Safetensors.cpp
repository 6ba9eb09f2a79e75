// safetensors reader (validated mmap) and atomic writers.
#include "Safetensors.h"

#include "AtomicFile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "deepinfer/JsonInput.h"
#include "llvm/Support/JSON.h"

namespace deepinfer {
namespace {

namespace json = llvm::json;

// The safetensors format caps the header at 100 MB; a larger length means a corrupt file.
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string shapeStr(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Element count with overflow detection (false on overflow or a negative dimension).
bool checkedNumel(const std::vector<int64_t>& shape, uint64_t* out) {
  unsigned __int128 n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    n *= uint64_t(d);
    if (n > (unsigned __int128)(UINT64_MAX)) return false;
  }
  *out = uint64_t(n);
  return true;
}

Status parseEntry(const std::string& file, const std::string& name, const json::Value& v,
                  SafetensorsEntry& e) {
  const json::Object* o = v.getAsObject();
  if (!o) return Error{fmt::format("{}: tensor '{}': header entry is not an object", file, name)};
  e.name = name;
  auto dtype = o->getString("dtype");
  if (!dtype) return Error{fmt::format("{}: tensor '{}': 'dtype' missing or not a string", file, name)};
  e.dtype = dtype->str();
  const size_t esize = safetensorsDtypeSize(e.dtype);
  if (esize == 0) return Error{fmt::format("{}: tensor '{}': unknown dtype '{}'", file, name, e.dtype)};
  const json::Array* shape = o->getArray("shape");
  if (!shape) return Error{fmt::format("{}: tensor '{}': 'shape' missing or not a list", file, name)};
  for (const json::Value& d : *shape) {
    auto i = d.getAsInteger();
    if (!i || *i < 0)
      return Error{fmt::format("{}: tensor '{}': shape entries must be non-negative integers", file, name)};
    e.shape.push_back(*i);
  }
  const json::Array* off = o->getArray("data_offsets");
  if (!off || off->size() != 2)
    return Error{fmt::format("{}: tensor '{}': 'data_offsets' must be a list [begin, end]", file, name)};
  auto b = (*off)[0].getAsUINT64(), en = (*off)[1].getAsUINT64();
  if (!b || !en || *b > *en)
    return Error{fmt::format("{}: tensor '{}': data_offsets must be non-negative integers with begin <= end",
                             file, name)};
  e.begin = *b;
  e.end = *en;
  uint64_t numel = 0;
  if (!checkedNumel(e.shape, &numel) || numel > UINT64_MAX / esize)
    return Error{fmt::format("{}: tensor '{}': shape {} overflows", file, name, shapeStr(e.shape))};
  if (numel * esize != e.byteSize())
    return Error{fmt::format("{}: tensor '{}': {} {} needs {} bytes but data_offsets [{}, {}] hold {}", file,
                             name, e.dtype, shapeStr(e.shape), numel * esize, e.begin, e.end, e.byteSize())};
  return {};
}

json::Object headerEntry(const std::string& dtype, const std::vector<int64_t>& shape, uint64_t begin,
                         uint64_t end) {
  json::Array s;
  for (int64_t d : shape) s.push_back(d);
  return json::Object{{"dtype", dtype},
                      {"shape", std::move(s)},
                      {"data_offsets", json::Array{int64_t(begin), int64_t(end)}}};
}

// Header bytes (JSON padded with spaces to a multiple of 8) for tensors laid out in order.
Result<std::string> buildHeader(const std::string& path, const std::vector<TensorSpec>& specs) {
  json::Object header;
  uint64_t offset = 0;
  for (const TensorSpec& s : specs) {
    const size_t esize = safetensorsDtypeSize(s.dtype);
    if (esize == 0) return Error{fmt::format("{}: tensor '{}': unknown dtype '{}'", path, s.name, s.dtype)};
    uint64_t numel = 0;
    if (!checkedNumel(s.shape, &numel))
      return Error{fmt::format("{}: tensor '{}': invalid shape {}", path, s.name, shapeStr(s.shape))};
    if (s.name == "__metadata__" || header.find(s.name) != header.end())
      return Error{fmt::format("{}: tensor name '{}' is reserved or used twice", path, s.name)};
    header[s.name] = headerEntry(s.dtype, s.shape, offset, offset + numel * esize);
    offset += numel * esize;
  }
  header["__metadata__"] = json::Object{{"format", "pt"}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(header));
  os.flush();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

uint64_t specBytes(const TensorSpec& s) {
  uint64_t n = 0;
  checkedNumel(s.shape, &n);
  return n * safetensorsDtypeSize(s.dtype);
}

}  // namespace

size_t safetensorsDtypeSize(const std::string& d) {
  if (d == "BF16" || d == "F16") return 2;
  if (d == "F32" || d == "I32") return 4;
  if (d == "I64") return 8;
  if (d == "I8" || d == "U8" || d == "F8_E4M3" || d == "F8_E8M0") return 1;
  return 0;
}

const char* safetensorsDtypeOf(DType t) {
  switch (t) {
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "U8";
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const std::string name = baseName(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{fmt::format("{}: cannot open: {}", path, std::strerror(errno))};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Error{fmt::format("{}: cannot stat: {}", path, std::strerror(err))};
  }
  const uint64_t fileSize = uint64_t(st.st_size);
  if (fileSize < 8) {
    ::close(fd);
    return Error{fmt::format("{}: file is {} bytes, too short for the 8-byte header length (truncated file?)",
                             name, fileSize)};
  }
  void* map = ::mmap(nullptr, fileSize, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mapErr = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) return Error{fmt::format("{}: mmap failed: {}", path, std::strerror(mapErr))};

  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = map;
  f->mapSize_ = fileSize;
  const uint8_t* base = static_cast<const uint8_t*>(map);
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | base[i];
  if (headerLen == 0 || headerLen > kMaxHeaderBytes || headerLen > fileSize - 8)
    return Error{fmt::format("{}: header length {} is out of range (file is {} bytes; limit {}): not a "
                             "safetensors file or truncated",
                             name, headerLen, fileSize, kMaxHeaderBytes)};
  f->dataStart_ = base + 8 + headerLen;
  f->dataSize_ = fileSize - 8 - headerLen;

  llvm::StringRef text(reinterpret_cast<const char*>(base + 8), size_t(headerLen));
  Result<json::Value> parsed = parseJsonInput(text.rtrim(' '));
  if (!parsed.ok()) return Error{fmt::format("{}: header is not valid JSON: {}", name, parsed.error().message)};
  const json::Object* root = parsed->getAsObject();
  if (!root) return Error{fmt::format("{}: header is not a JSON object", name)};
  for (const auto& kv : *root) {
    const std::string tname = kv.first.str();
    if (tname == "__metadata__") continue;
    SafetensorsEntry e;
    DI_TRY(parseEntry(name, tname, kv.second, e));
    if (e.end > f->dataSize_)
      return Error{fmt::format("{}: tensor '{}': data offsets [{}, {}] exceed the file's data size {} (truncated "
                               "file?)",
                               name, tname, e.begin, e.end, f->dataSize_)};
    f->entries_.push_back(std::move(e));
  }
  // Sorting by offset makes the overlap check linear and the entry order the file's order.
  std::sort(f->entries_.begin(), f->entries_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
  });
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : f->entries_) {
    if (e.byteSize() == 0) continue;
    if (prev && e.begin < prev->end)
      return Error{fmt::format("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", name, prev->name, prev->begin,
                               prev->end, e.name, e.begin, e.end)};
    prev = &e;
  }
  for (size_t i = 0; i < f->entries_.size(); ++i) f->byName_[f->entries_[i].name] = i;
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, mapSize_);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : &entries_[it->second];
}

RawTensor rawFromHost(const HostTensor& t) {
  return RawTensor{safetensorsDtypeOf(t.dtype), t.shape, t.bytes};
}

Result<HostTensor> hostFromRaw(const std::string& dtype, const std::vector<int64_t>& shape, const uint8_t* data,
                               size_t bytes, const std::string& what) {
  DType t;
  if (dtype == "BF16") t = DType::BF16;
  else if (dtype == "F32") t = DType::F32;
  else if (dtype == "I32") t = DType::I32;
  else if (dtype == "I64") t = DType::I64;
  else if (dtype == "U8") t = DType::U8;
  else return Error{fmt::format("{}: dtype {} cannot be held by a host tensor (BF16, F32, I32, I64, U8)", what, dtype)};
  HostTensor h;
  h.dtype = t;
  h.shape = shape;
  if (size_t(h.numel()) * dtypeSize(t) != bytes)
    return Error{fmt::format("{}: {} {} does not match {} bytes", what, dtype, shapeStr(shape), bytes)};
  h.bytes.assign(data, data + bytes);
  return h;
}

Status writeSafetensorsStreamed(const std::string& path, const std::vector<TensorSpec>& specs,
                                const TensorProducer& produce) {
  auto header = buildHeader(path, specs);
  if (!header.ok()) return header.error();
  AtomicFile out(path);
  DI_TRY(out.open());
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header->size()) >> (8 * i));
  DI_TRY(out.write(len, 8));
  DI_TRY(out.write(header->data(), header->size()));
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < specs.size(); ++i) {
    bytes.clear();
    DI_TRY(produce(i, specs[i], bytes));
    if (bytes.size() != specBytes(specs[i]))
      return Error{fmt::format("{}: tensor '{}': produced {} bytes, {} {} needs {}", path, specs[i].name,
                               bytes.size(), specs[i].dtype, shapeStr(specs[i].shape), specBytes(specs[i]))};
    DI_TRY(out.write(bytes.data(), bytes.size()));
  }
  return out.commit();
}

Status writeSafetensors(const std::string& path, const std::map<std::string, RawTensor>& tensors) {
  std::vector<TensorSpec> specs;
  std::vector<const RawTensor*> data;
  for (const auto& [name, t] : tensors) {
    specs.push_back(TensorSpec{name, t.dtype, t.shape});
    data.push_back(&t);
  }
  return writeSafetensorsStreamed(path, specs, [&](size_t i, const TensorSpec&, std::vector<uint8_t>& bytes) {
    bytes = data[i]->bytes;
    return Status{};
  });
}

Status writeSafetensors(const std::string& path, const TensorMap& tensors) {
  std::map<std::string, RawTensor> raw;
  for (const auto& [name, t] : tensors) {
    if (size_t(t.numel()) * dtypeSize(t.dtype) != t.bytes.size())
      return Error{fmt::format("{}: tensor '{}': shape {} does not match its {} bytes", path, name,
                               shapeStr(t.shape), t.bytes.size())};
    raw.emplace(name, rawFromHost(t));
  }
  return writeSafetensors(path, raw);
}

Result<TensorMap> readSafetensorsToHost(const std::string& path) {
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) return file.error();
  TensorMap out;
  for (const SafetensorsEntry& e : (*file)->entries()) {
    auto h = hostFromRaw(e.dtype, e.shape, (*file)->data(e), e.byteSize(),
                         fmt::format("{}: tensor '{}'", baseName(path), e.name));
    if (!h.ok()) return h.error();
    out.emplace(e.name, std::move(*h));
  }
  return out;
}

}  // namespace deepinfer
