// A model directory's weights (docs/model.md §3): one `model.safetensors` or shards listed by
// `model.safetensors.index.json` ("weight_map": name -> file). Quantized tensors are
// dequantized exactly on load; engram tables are read row by row from the mapping.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"
#include "Safetensors.h"

namespace deepinfer {

// How a stored tensor becomes real numbers.
enum class WeightFormat {
  Plain,     // BF16 / F32 / F16 / integer: the values as stored
  Fp8Block,  // F8_E4M3 [out, in] + `<module>.scale` F8_E8M0 [ceil(out/32), ceil(in/32)]
  Fp8Row,    // F8_E4M3 [rows, in] + `<module>.scale` F8_E8M0 [rows, ceil(in/32)] (engram tables)
  Fp4,       // I8 [out, in/2], two e2m1 codes per byte (low nibble = even column)
             // + `<module>.scale` F8_E8M0 [out, in/32]
};
const char* weightFormatName(WeightFormat f);

struct TensorInfo {
  std::string name;
  std::string dtype;                  // stored safetensors dtype
  std::vector<int64_t> storedShape;   // as in the file
  std::vector<int64_t> logicalShape;  // after dequantization ([out, in] for fp4)
  WeightFormat format = WeightFormat::Plain;
  std::string scaleName;              // "<module>.scale" for quantized formats, else empty
  std::string file;                   // path of the shard holding the data
};

// What a load does with NaN or infinity among the decoded values: a model's weights never hold
// them (a NaN weight would make every logit NaN and generation emit token 0 forever), so the
// loaders reject them naming the tensor and the first bad element; format tests keep them.
enum class NonFinite { Reject, Keep };

// The scale tensor's name for a quantized weight: "a.b.weight" -> "a.b.scale".
std::string scaleNameFor(const std::string& weightName);

// A weight's UE8M0 scale byte as a number: 2^(e-127), with e = 0 meaning 2^-127 (docs/model.md §3;
// not +0 as in the KV-cache formats of docs/ops.md §1.2) and 0xFF NaN.
float weightScaleToFloat(uint8_t e);

// The scale bytes whose products with every finite code of the format are exact in bf16 (normal
// or subnormal): fp8 (e4m3) 3..246, fp4 (e2m1) 0..252 (docs/model.md §3). The GPU runtime's
// kernels dequantize straight to bf16, so the loaders accept only these.
struct ScaleByteRange {
  int lo = 0, hi = 0;
};
ScaleByteRange exactScaleBytes(WeightFormat f);

class Checkpoint {
 public:
  // Opens `<modelDir>/model.safetensors.index.json` if present, else `<modelDir>/model.safetensors`.
  static Result<Checkpoint> open(const std::string& modelDir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const;
  // Dtype, shapes, format and file of a tensor; a quantized weight whose scale is missing or
  // has the wrong dtype/shape is an error here already.
  Result<TensorInfo> info(const std::string& name) const;
  std::vector<std::string> names() const;  // every tensor, scales included, sorted

  // Loads a tensor as fp32 [expectedShape] (logical shape; an empty expectedShape is an
  // error). bf16/f16/f32 convert exactly; fp8 and fp4 dequantize exactly (code x 2^(e-127)).
  Result<HostTensor> loadF32(const std::string& name, const std::vector<int64_t>& expectedShape,
                             NonFinite nonFinite = NonFinite::Reject) const;
  // As loadF32 but bf16. Quantized values are rounded once to bf16 (exact for e4m3/e2m1 with
  // in-range scales; NaN -> 0x7FC0); f32 tensors are rounded to nearest even.
  Result<HostTensor> loadBf16(const std::string& name, const std::vector<int64_t>& expectedShape,
                              NonFinite nonFinite = NonFinite::Reject) const;

  // Gathers `n` rows of a 2-D table (fp8 row-scaled, bf16 or f32) into out[n * cols] fp32,
  // reading only those rows from the mapping. Rows out of range, and rows holding NaN or
  // infinity, are errors naming the row.
  Status readEngramRows(const std::string& name, const int64_t* rows, size_t n, float* out) const;

  // Raw stored bytes of a tensor (inside the mapping, valid while this object lives) for loaders
  // that upload quantized weights as they are.
  Result<const uint8_t*> rawData(const std::string& name, SafetensorsEntry* entryOut) const;

  // The load-time check of a quantized weight's bytes, shared by both loaders (loadF32/loadBf16
  // with NonFinite::Reject run it; the GPU loader runs it before uploading the bytes as they
  // are): no NaN code (e4m3 0x7F/0xFF; e2m1 has none) and every scale byte in exactScaleBytes.
  // The error names the tensor, the element (for a scale byte: the first element it scales) and
  // the byte. Plain tensors pass (their check is the decoded values' finiteness).
  Status checkQuantizedBytes(const TensorInfo& ti) const;

 private:
  Checkpoint() = default;
  struct Located {
    const SafetensorsFile* file;
    const SafetensorsEntry* entry;
  };
  Result<Located> locate(const std::string& name) const;

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Located> tensors_;
};

}  // namespace deepinfer
