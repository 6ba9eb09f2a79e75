// Model directory weights: shard lookup, scale pairing and exact dequantization.
#include "Checkpoint.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "deepinfer/Formats.h"
#include "deepinfer/InputFiles.h"
#include "deepinfer/JsonInput.h"
#include "llvm/Support/JSON.h"

namespace deepinfer {
namespace {

namespace json = llvm::json;

std::string shapeStr(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool fileExists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Engram tables carry one scale per row and 32 columns (docs/model.md §3); all other fp8 weights
// one per 32x32 block.
bool isRowScaledTable(const std::string& name) { return endsWith(name, "engram.embed.weight"); }

float halfToFloat(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  float mag;
  if (e == 0) mag = std::ldexp(float(m), -24);
  else if (e == 31) mag = m ? std::nanf("") : INFINITY;
  else mag = std::ldexp(1.f + float(m) / 1024.f, e - 15);
  return s ? -mag : mag;
}

uint16_t toBf16Canonical(float v) { return std::isnan(v) ? kBf16CanonicalNaN : floatToBf16(v); }

// Code -> value tables: decoding multi-GB checkpoints element by element needs to be cheap.
struct CodeTables {
  float e4m3[256];
  float e2m1[16];
  float ue8m0[256];
  CodeTables() {
    for (int i = 0; i < 256; ++i) {
      e4m3[i] = e4m3ToFloat(uint8_t(i));
      ue8m0[i] = weightScaleToFloat(uint8_t(i));
    }
    for (int i = 0; i < 16; ++i) e2m1[i] = e2m1ToFloat(uint8_t(i));
  }
};
const CodeTables& tables() {
  static const CodeTables t;
  return t;
}

enum class PlainKind { BF16, F16, F32 };

// One decoded element source: a stored tensor plus its scale, decoding element (r, c).
struct Decoder {
  WeightFormat format;
  PlainKind plain = PlainKind::F32;
  const CodeTables& t = tables();
  const uint8_t* data;
  const uint8_t* scale = nullptr;
  int64_t rows = 1, cols = 1;     // logical 2-D view (plain tensors: rows = 1, cols = numel)
  int64_t scaleCols = 0;

  float at(int64_t r, int64_t c) const {
    switch (format) {
      case WeightFormat::Fp8Block:
        return t.e4m3[data[r * cols + c]] * t.ue8m0[scale[(r / 32) * scaleCols + c / 32]];
      case WeightFormat::Fp8Row:
        return t.e4m3[data[r * cols + c]] * t.ue8m0[scale[r * scaleCols + c / 32]];
      case WeightFormat::Fp4: {
        const uint8_t byte = data[r * (cols / 2) + c / 2];
        const uint8_t nib = (c & 1) ? uint8_t(byte >> 4) : uint8_t(byte & 0xF);
        return t.e2m1[nib] * t.ue8m0[scale[r * scaleCols + c / 32]];
      }
      case WeightFormat::Plain: break;
    }
    const int64_t i = r * cols + c;
    uint16_t h;
    if (plain == PlainKind::BF16) {
      std::memcpy(&h, data + 2 * i, 2);
      return bf16ToFloat(h);
    }
    if (plain == PlainKind::F16) {
      std::memcpy(&h, data + 2 * i, 2);
      return halfToFloat(h);
    }
    float f;
    std::memcpy(&f, data + 4 * i, 4);
    return f;
  }
};

}  // namespace

const char* weightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::Plain: return "plain";
    case WeightFormat::Fp8Block: return "fp8 (32x32 block scales)";
    case WeightFormat::Fp8Row: return "fp8 (row x 32-column scales)";
    case WeightFormat::Fp4: return "fp4 (row x 32-column scales)";
  }
  return "?";
}

float weightScaleToFloat(uint8_t e) {
  return e == 0 ? bitsToFloat(0x00400000u) : ue8m0ToFloat(e);  // 2^-127: the fp32 subnormal 1 << 22
}

ScaleByteRange exactScaleBytes(WeightFormat f) {
  // e4m3: codes m * 2^-9 .. 448 = 1.75 * 2^8 need 2^(s-136) >= 2^-133 (bf16's smallest subnormal
  // step) and 2^(s-127+8) <= 2^127; e2m1: 0.5 .. 6 = 1.5 * 2^2 need 2^(s-128) >= 2^-133 and
  // 2^(s-125) <= 2^127.
  if (f == WeightFormat::Fp4) return {0, 252};
  return {3, 246};
}

std::string scaleNameFor(const std::string& weightName) {
  if (endsWith(weightName, ".weight")) return weightName.substr(0, weightName.size() - 7) + ".scale";
  return weightName + ".scale";
}

Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Result<Checkpoint> Checkpoint::open(const std::string& modelDir) {
  Checkpoint ck;
  ck.dir_ = modelDir;
  const std::string indexPath = modelDir + "/model.safetensors.index.json";
  const std::string singlePath = modelDir + "/model.safetensors";
  if (fileExists(indexPath)) {
    auto text = readFileBounded(indexPath, kMaxConfigBytes, "checkpoint index");
    if (!text.ok()) return text.error();
    Result<json::Value> parsed = parseJsonInput(*text);
    if (!parsed.ok()) return Error{fmt::format("{}: invalid JSON: {}", indexPath, parsed.error().message)};
    const json::Object* root = parsed->getAsObject();
    const json::Object* wm = root ? root->getObject("weight_map") : nullptr;
    if (!wm) return Error{fmt::format("{}: 'weight_map' object is missing", indexPath)};
    std::map<std::string, const SafetensorsFile*> opened;
    for (const auto& kv : *wm) {
      const std::string name = kv.first.str();
      auto fname = kv.second.getAsString();
      if (!fname) return Error{fmt::format("{}: weight_map['{}'] must be a file name", indexPath, name)};
      if (fname->contains('/'))
        return Error{fmt::format("{}: weight_map['{}'] = '{}' must name a file inside the model directory",
                                 indexPath, name, fname->str())};
      auto it = opened.find(fname->str());
      if (it == opened.end()) {
        auto f = SafetensorsFile::open(modelDir + "/" + fname->str());
        if (!f.ok()) return f.error();
        ck.files_.push_back(std::move(*f));
        it = opened.emplace(fname->str(), ck.files_.back().get()).first;
      }
      const SafetensorsEntry* e = it->second->find(name);
      if (!e)
        return Error{fmt::format("{}: weight_map puts tensor '{}' in {}, but that file has no such tensor",
                                 indexPath, name, fname->str())};
      ck.tensors_[name] = Located{it->second, e};
    }
  } else if (fileExists(singlePath)) {
    auto f = SafetensorsFile::open(singlePath);
    if (!f.ok()) return f.error();
    ck.files_.push_back(std::move(*f));
    for (const SafetensorsEntry& e : ck.files_.back()->entries())
      ck.tensors_[e.name] = Located{ck.files_.back().get(), &e};
  } else {
    return Error{fmt::format("{}: no model.safetensors or model.safetensors.index.json", modelDir)};
  }
  return ck;
}

bool Checkpoint::has(const std::string& name) const { return tensors_.count(name) != 0; }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

Result<Checkpoint::Located> Checkpoint::locate(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return Error{fmt::format("{}: tensor '{}' is not in the checkpoint ({} tensors in {} file(s))", dir_, name,
                             tensors_.size(), files_.size())};
  return it->second;
}

Result<TensorInfo> Checkpoint::info(const std::string& name) const {
  auto loc = locate(name);
  if (!loc.ok()) return loc.error();
  const SafetensorsEntry& e = *loc->entry;
  TensorInfo ti;
  ti.name = name;
  ti.dtype = e.dtype;
  ti.storedShape = e.shape;
  ti.logicalShape = e.shape;
  ti.file = loc->file->path();
  const std::string where = fmt::format("{}: tensor '{}'", baseName(ti.file), name);
  const bool fp8 = e.dtype == "F8_E4M3";
  const bool fp4 = e.dtype == "I8";
  if (!fp8 && !fp4) return ti;

  if (e.shape.size() != 2)
    return Error{fmt::format("{}: quantized {} weight must be 2-D, has shape {}", where, e.dtype, shapeStr(e.shape))};
  ti.scaleName = scaleNameFor(name);
  const int64_t out = e.shape[0];
  int64_t in = e.shape[1];
  std::vector<int64_t> wantScale;
  if (fp4) {
    ti.format = WeightFormat::Fp4;
    in *= 2;  // two e2m1 codes per byte
    if (in % 32 != 0)
      return Error{fmt::format("{}: fp4 weight has {} input columns, not a multiple of 32", where, in)};
    ti.logicalShape = {out, in};
    wantScale = {out, in / 32};
  } else if (isRowScaledTable(name)) {
    ti.format = WeightFormat::Fp8Row;
    wantScale = {out, ceilDiv(in, 32)};
  } else {
    ti.format = WeightFormat::Fp8Block;
    wantScale = {ceilDiv(out, 32), ceilDiv(in, 32)};
  }
  auto sc = tensors_.find(ti.scaleName);
  if (sc == tensors_.end())
    return Error{fmt::format("{}: {} weight has no scale tensor '{}' in the checkpoint", where,
                             weightFormatName(ti.format), ti.scaleName)};
  const SafetensorsEntry& s = *sc->second.entry;
  const std::string swhere = fmt::format("{}: scale '{}'", baseName(sc->second.file->path()), ti.scaleName);
  if (s.dtype != "F8_E8M0")
    return Error{fmt::format("{} of '{}' has dtype {}, expected F8_E8M0", swhere, name, s.dtype)};
  if (s.shape != wantScale)
    return Error{fmt::format("{} of '{}' ({} {}) has shape {}, expected {}", swhere, name, weightFormatName(ti.format),
                             shapeStr(ti.logicalShape), shapeStr(s.shape), shapeStr(wantScale))};
  return ti;
}

namespace {

Result<Decoder> makeDecoder(const Checkpoint& ck, const TensorInfo& ti) {
  SafetensorsEntry e;
  auto data = ck.rawData(ti.name, &e);
  if (!data.ok()) return data.error();
  Decoder d;
  d.format = ti.format;
  d.data = *data;
  if (ti.format == WeightFormat::Plain) {
    if (ti.dtype == "BF16") d.plain = PlainKind::BF16;
    else if (ti.dtype == "F16") d.plain = PlainKind::F16;
    else if (ti.dtype != "F32")
      return Error{fmt::format("{}: tensor '{}' has dtype {}, which is not a floating-point weight",
                               baseName(ti.file), ti.name, ti.dtype)};
    d.rows = 1;
    d.cols = 1;
    for (int64_t x : ti.storedShape) d.cols *= x;
    if (ti.storedShape.size() == 2) {
      d.rows = ti.storedShape[0];
      d.cols = ti.storedShape[1];
    }
    return d;
  }
  SafetensorsEntry se;
  auto scale = ck.rawData(ti.scaleName, &se);
  if (!scale.ok()) return scale.error();
  d.scale = *scale;
  d.rows = ti.logicalShape[0];
  d.cols = ti.logicalShape[1];
  d.scaleCols = se.shape[1];
  return d;
}

// The first element whose exponent bits are all ones (NaN or infinity), or -1. One pass over the
// decoded copy, far cheaper than the decode itself.
int64_t firstNonFinite(const HostTensor& t) {
  const int64_t n = t.numel();
  if (t.dtype == DType::F32) {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(t.bytes.data());
    for (int64_t i = 0; i < n; ++i)
      if ((p[i] & 0x7F800000u) == 0x7F800000u) return i;
  } else {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(t.bytes.data());
    for (int64_t i = 0; i < n; ++i)
      if ((p[i] & 0x7F80u) == 0x7F80u) return i;
  }
  return -1;
}

Status rejectNonFinite(const HostTensor& t, const std::string& where, const TensorInfo& ti) {
  const int64_t i = firstNonFinite(t);
  if (i < 0) return {};
  const int64_t cols = t.shape.size() == 2 ? t.shape[1] : t.numel();
  const float v = t.dtype == DType::F32 ? t.ptr<float>()[i] : bf16ToFloat(t.ptr<uint16_t>()[i]);
  return Error{fmt::format("{}: holds {} at element [{}, {}] ({} {}{}): weights must be finite (a corrupt file, or "
                           "a scale byte outside the range real checkpoints use)",
                           where, std::isnan(v) ? "NaN" : "infinity", i / cols, i % cols, ti.dtype,
                           weightFormatName(ti.format),
                           ti.scaleName.empty() ? "" : fmt::format(", scale '{}'", ti.scaleName))};
}

// The first byte of an 8-aligned run whose low 7 bits are all ones (the e4m3 NaN codes 0x7F and
// 0xFF), or -1; 8 bytes per step: a byte's low 7 bits + 1 reach bit 7 only for 0x7F, and carry
// into no other byte.
int64_t firstE4m3NaN(const uint8_t* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (((w & 0x7F7F7F7F7F7F7F7Full) + 0x0101010101010101ull) & 0x8080808080808080ull) break;
  }
  for (; i < n; ++i)
    if ((p[i] & 0x7F) == 0x7F) return i;
  return -1;
}

Result<HostTensor> loadDecoded(const Checkpoint& ck, const std::string& name,
                               const std::vector<int64_t>& expectedShape, DType outType, NonFinite nonFinite) {
  auto ti = ck.info(name);
  if (!ti.ok()) return ti.error();
  const std::string where = fmt::format("{}: tensor '{}'", baseName(ti->file), name);
  if (expectedShape.empty())
    return Error{fmt::format("{}: no expected shape given (the loader checks every tensor's shape)", where)};
  if (ti->logicalShape != expectedShape)
    return Error{fmt::format("{}: shape {} ({} {}), expected {}", where, shapeStr(ti->logicalShape), ti->dtype,
                             weightFormatName(ti->format), shapeStr(expectedShape))};
  const bool quantized = ti->format != WeightFormat::Plain;
  if (quantized && nonFinite == NonFinite::Reject) DI_TRY(ck.checkQuantizedBytes(*ti));
  auto dec = makeDecoder(ck, *ti);
  if (!dec.ok()) return dec.error();
  HostTensor out(outType, expectedShape);
  const int64_t rows = dec->rows, cols = dec->cols;
  if (outType == DType::F32) {
    float* o = out.ptr<float>();
    if (dec->format == WeightFormat::Plain && dec->plain == PlainKind::F32) {
      std::memcpy(o, dec->data, out.bytes.size());
    } else {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = dec->at(r, c);
    }
  } else {
    uint16_t* o = out.ptr<uint16_t>();
    if (dec->format == WeightFormat::Plain && dec->plain == PlainKind::BF16) {
      std::memcpy(o, dec->data, out.bytes.size());
    } else {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = toBf16Canonical(dec->at(r, c));
    }
  }
  // Quantized values are finite once their bytes passed the check above.
  if (!quantized && nonFinite == NonFinite::Reject) DI_TRY(rejectNonFinite(out, where, *ti));
  return out;
}

}  // namespace

Result<HostTensor> Checkpoint::loadF32(const std::string& name, const std::vector<int64_t>& expectedShape,
                                       NonFinite nonFinite) const {
  return loadDecoded(*this, name, expectedShape, DType::F32, nonFinite);
}

Result<HostTensor> Checkpoint::loadBf16(const std::string& name, const std::vector<int64_t>& expectedShape,
                                        NonFinite nonFinite) const {
  return loadDecoded(*this, name, expectedShape, DType::BF16, nonFinite);
}

Status Checkpoint::readEngramRows(const std::string& name, const int64_t* rows, size_t n, float* out) const {
  auto ti = info(name);
  if (!ti.ok()) return ti.error();
  const std::string where = fmt::format("{}: tensor '{}'", baseName(ti->file), name);
  if (ti->logicalShape.size() != 2)
    return Error{fmt::format("{}: row gathers need a 2-D table, shape is {}", where, shapeStr(ti->logicalShape))};
  auto dec = makeDecoder(*this, *ti);
  if (!dec.ok()) return dec.error();
  const int64_t nrows = dec->rows, cols = dec->cols;
  for (size_t i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    if (r < 0 || r >= nrows)
      return Error{fmt::format("{}: row {} (request entry {}) is outside the table's {} rows", where, r, i, nrows)};
    for (int64_t c = 0; c < cols; ++c) {
      const float v = dec->at(r, c);
      if (!std::isfinite(v))
        return Error{fmt::format("{}: row {} holds {} at column {}: weights must be finite", where, r,
                                 std::isnan(v) ? "NaN" : "infinity", c)};
      out[i * size_t(cols) + size_t(c)] = v;
    }
  }
  return {};
}

Status Checkpoint::checkQuantizedBytes(const TensorInfo& ti) const {
  if (ti.format == WeightFormat::Plain) return {};
  const std::string where = fmt::format("{}: tensor '{}'", baseName(ti.file), ti.name);
  SafetensorsEntry e, se;
  auto data = rawData(ti.name, &e);
  if (!data.ok()) return data.error();
  auto scale = rawData(ti.scaleName, &se);
  if (!scale.ok()) return scale.error();
  const int64_t rows = ti.logicalShape[0], cols = ti.logicalShape[1];
  if (ti.format != WeightFormat::Fp4) {
    const int64_t i = firstE4m3NaN(*data, rows * cols);
    if (i >= 0)
      return Error{fmt::format("{}: holds NaN at element [{}, {}] ({} {}, code 0x{:02X}): weights must be finite (a "
                               "corrupt file)",
                               where, i / cols, i % cols, ti.dtype, weightFormatName(ti.format), (*data)[i])};
  }
  const ScaleByteRange range = exactScaleBytes(ti.format);
  const int64_t scaleRows = se.shape[0], scaleCols = se.shape[1];
  for (int64_t i = 0; i < scaleRows * scaleCols; ++i) {
    const int b = (*scale)[i];
    if (b >= range.lo && b <= range.hi) continue;
    const int64_t sr = i / scaleCols, sc = i % scaleCols;
    const int64_t r = ti.format == WeightFormat::Fp8Block ? sr * 32 : sr;
    return Error{fmt::format("{}: scale '{}' holds byte {}{} at [{}, {}] (scaling element [{}, {}] on), outside {}..{}, "
                             "the bytes whose products with every {} code are exact in bf16 (docs/model.md §3): a "
                             "corrupt file, or not a V4.1 checkpoint",
                             where, ti.scaleName, b, b == 0xFF ? " (NaN)" : "", sr, sc, r, sc * 32, range.lo,
                             range.hi, ti.format == WeightFormat::Fp4 ? "e2m1" : "e4m3")};
  }
  return {};
}

Result<const uint8_t*> Checkpoint::rawData(const std::string& name, SafetensorsEntry* entryOut) const {
  auto loc = locate(name);
  if (!loc.ok()) return loc.error();
  if (entryOut) *entryOut = *loc->entry;
  return loc->file->data(*loc->entry);
}

}  // namespace deepinfer
