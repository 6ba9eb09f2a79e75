#include "model/gpu/GpuWeights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "model/ModelTensors.h"

namespace deepinfer {
namespace {

std::string shapeStr(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of a quantized [rows, cols] matrix's codes and scales as the checkpoint stores them.
int64_t codeBytes(GpuWeightFormat f, int64_t rows, int64_t cols) {
  return f == GpuWeightFormat::Fp4 ? rows * cols / 2 : rows * cols;
}
int64_t scaleBytes(GpuWeightFormat f, int64_t rows, int64_t cols) {
  return f == GpuWeightFormat::Fp4 ? rows * (cols / 32) : ceilDiv(rows, 32) * ceilDiv(cols, 32);
}

// The formats weight_gemm and moe_experts read (Fp8Row is the engram tables', never uploaded).
bool gemmFormat(WeightFormat f) { return f == WeightFormat::Fp8Block || f == WeightFormat::Fp4; }
GpuWeightFormat gpuFormat(WeightFormat f) {
  return f == WeightFormat::Fp4 ? GpuWeightFormat::Fp4 : GpuWeightFormat::Fp8;
}

// Checks each tensor as Checkpoint::loadBf16 / loadF32 would before decoding it (with their
// messages) and that the GEMM slots hold a format their op reads, and counts the device bytes.
class PlanSink : public GpuWeightSink {
 public:
  explicit PlanSink(const GpuWeightTable& table) : table_(table) {}
  Status bf16Matrix(const std::string& name, int64_t rows, int64_t cols, GpuMatrix&, const GpuSlice& sl) override {
    auto ti = check(name, {rows, cols});
    if (!ti.ok()) return ti.error();
    DI_TRY(checkSlice(name, rows, cols, sl, 1));
    bytes += sl.rowsOf(rows) * sl.colsOf(cols) * 2;
    return {};
  }
  Status projection(const std::string& name, int64_t rows, int64_t cols, GpuMatrix&, const GpuSlice& sl) override {
    auto ti = check(name, {rows, cols});
    if (!ti.ok()) return ti.error();
    if (!gemmFormat(ti->format))
      return Error{fmt::format("{}: tensor '{}' is {} ({}); the GPU runtime multiplies it by weight_gemm, which reads "
                               "the checkpoint's fp8 (e4m3 + UE8M0 per 32x32 block) or fp4 (e2m1 + UE8M0 per 32 "
                               "columns) formats",
                               baseName(ti->file), name, ti->dtype, weightFormatName(ti->format))};
    const GpuWeightFormat f = gpuFormat(ti->format);
    DI_TRY(checkSlice(name, rows, cols, sl, 32));
    bytes += codeBytes(f, sl.rowsOf(rows), sl.colsOf(cols)) + scaleBytes(f, sl.rowsOf(rows), sl.colsOf(cols));
    return {};
  }
  Status experts(const std::string& prefix, int64_t E, int64_t C, int64_t I, int64_t eBegin, int64_t eEnd,
                 GpuRoutedExperts&) override {
    if (eBegin < 0 || eBegin > eEnd || eEnd > E)
      return Error{fmt::format("{}experts: range [{}, {}) is not within the {} experts", prefix, eBegin, eEnd, E)};
    for (int64_t e = 0; e < E; ++e)
      for (const auto& [which, rows, cols] : {std::tuple{"w1", I, C}, std::tuple{"w3", I, C}, std::tuple{"w2", C, I}}) {
        const std::string name = fmt::format("{}experts.{}.{}.weight", prefix, e, which);
        auto ti = check(name, {rows, cols});
        if (!ti.ok()) return ti.error();
        if (ti->format != WeightFormat::Fp4)
          return Error{fmt::format("{}: tensor '{}' is {} ({}); the GPU runtime runs the routed experts through "
                                   "moe_experts, which reads fp4 (e2m1 + UE8M0 per 32 columns) experts",
                                   baseName(ti->file), name, ti->dtype, weightFormatName(ti->format))};
        if (e >= eBegin && e < eEnd)
          bytes += codeBytes(GpuWeightFormat::Fp4, rows, cols) + scaleBytes(GpuWeightFormat::Fp4, rows, cols);
      }
    return {};
  }
  Status bf16(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer&) override {
    auto ti = check(name, shape);
    if (!ti.ok()) return ti.error();
    bytes += numel(shape) * 2;
    return {};
  }
  Status f32(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer&, const GpuSlice& sl) override {
    auto ti = check(name, shape);
    if (!ti.ok()) return ti.error();
    const int64_t rows = shape.size() == 2 ? shape[0] : 1, cols = numel(shape) / std::max<int64_t>(rows, 1);
    DI_TRY(checkSlice(name, rows, cols, sl, 1));
    bytes += sl.rowsOf(rows) * sl.colsOf(cols) * 4;
    return {};
  }
  int64_t bytes = 0;
  int64_t tensors = 0;

 private:
  // A slice within the tensor, on `quantum`-aligned bounds (the quantization blocks).
  static Status checkSlice(const std::string& name, int64_t rows, int64_t cols, const GpuSlice& sl, int64_t quantum) {
    const int64_t r1 = sl.rowEnd < 0 ? rows : sl.rowEnd, c1 = sl.colEnd < 0 ? cols : sl.colEnd;
    auto aligned = [&](int64_t v, int64_t n) { return v % quantum == 0 || v == n; };
    if (sl.rowBegin < 0 || sl.rowBegin >= r1 || r1 > rows || sl.colBegin < 0 || sl.colBegin >= c1 || c1 > cols ||
        !aligned(sl.rowBegin, rows) || !aligned(r1, rows) || !aligned(sl.colBegin, cols) || !aligned(c1, cols))
      return Error{fmt::format("tensor '{}' [{}, {}]: shard rows [{}, {}) x columns [{}, {}) is not a non-empty "
                               "range of whole {}-wide blocks",
                               name, rows, cols, sl.rowBegin, r1, sl.colBegin, c1, quantum)};
    return {};
  }
  Result<TensorInfo> check(const std::string& name, const std::vector<int64_t>& shape) {
    auto ti = table_.info(name);
    if (!ti.ok()) return ti.error();
    const std::string where = fmt::format("{}: tensor '{}'", baseName(ti->file), name);
    if (ti->logicalShape != shape)
      return Error{fmt::format("{}: shape {} ({} {}), expected {}", where, shapeStr(ti->logicalShape), ti->dtype,
                               weightFormatName(ti->format), shapeStr(shape))};
    if (ti->format == WeightFormat::Plain && ti->dtype != "BF16" && ti->dtype != "F16" && ti->dtype != "F32")
      return Error{fmt::format("{}: tensor '{}' has dtype {}, which is not a floating-point weight",
                               baseName(ti->file), name, ti->dtype)};
    ++tensors;
    return ti;
  }
  const GpuWeightTable& table_;
};

// Uploads each tensor from the checkpoint: quantized ones byte-checked and as stored, bf16 ones
// through Checkpoint::loadBf16 (a host copy, uploaded and dropped).
class UploadSink : public GpuWeightSink {
 public:
  explicit UploadSink(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  Status bf16Matrix(const std::string& name, int64_t rows, int64_t cols, GpuMatrix& out, const GpuSlice& sl) override {
    const int64_t sr = sl.rowsOf(rows), sc = sl.colsOf(cols);
    auto ti = ckpt_.info(name);
    if (!ti.ok()) return ti.error();
    if (sl.whole(rows, cols)) {
      DI_TRY(uploadHost(name, ckpt_.loadBf16(name, {rows, cols}), out.data));
    } else if (ti->format == WeightFormat::Plain && ti->dtype == "BF16") {
      // A shard of a bf16 tensor: only its rows' bytes of the mapping are read.
      SafetensorsEntry e;
      auto raw = ckpt_.rawData(name, &e);
      if (!raw.ok()) return raw.error();
      std::vector<uint8_t> part(size_t(sr * sc * 2));
      for (int64_t r = 0; r < sr; ++r)
        std::memcpy(&part[size_t(r * sc * 2)], *raw + ((sl.rowBegin + r) * cols + sl.colBegin) * 2, size_t(sc * 2));
      for (size_t i = 0; i < part.size(); i += 2) {  // what loadBf16 rejects: NaN or infinity
        const unsigned v = unsigned(part[i]) | unsigned(part[i + 1]) << 8;
        if ((v & 0x7F80u) == 0x7F80u)
          return Error{fmt::format("{}: tensor '{}' holds a non-finite value at [{}, {}]: weights must be finite",
                                   baseName(ti->file), name, sl.rowBegin + int64_t(i / 2) / sc,
                                   sl.colBegin + int64_t(i / 2) % sc)};
      }
      DI_TRY(uploadBytes(name, part, out.data));
    } else {
      auto full = ckpt_.loadBf16(name, {rows, cols});
      if (!full.ok()) return full.error();
      std::vector<uint8_t> part(size_t(sr * sc * 2));
      for (int64_t r = 0; r < sr; ++r)
        std::memcpy(&part[size_t(r * sc * 2)], full->bytes.data() + ((sl.rowBegin + r) * cols + sl.colBegin) * 2,
                    size_t(sc * 2));
      DI_TRY(uploadBytes(name, part, out.data));
    }
    out.rows = sr;
    out.cols = sc;
    out.format = GpuWeightFormat::Bf16;
    return {};
  }
  Status projection(const std::string& name, int64_t rows, int64_t cols, GpuMatrix& out, const GpuSlice& sl) override {
    auto ti = ckpt_.info(name);
    if (!ti.ok()) return ti.error();
    const GpuWeightFormat f = gpuFormat(ti->format);
    const int64_t sr = sl.rowsOf(rows), sc = sl.colsOf(cols);
    if (sl.whole(rows, cols)) {
      DI_TRY(alloc(name, codeBytes(f, rows, cols), out.data));
      DI_TRY(alloc(ti->scaleName, scaleBytes(f, rows, cols), out.scales));
      DI_TRY(uploadRaw(*ti, out.data, 0, out.scales, 0));
    } else {
      // A shard (whole 32-wide blocks): its rows' code bytes and its blocks' scale bytes, checked
      // like checkQuantizedBytes checks a whole tensor (no e4m3 NaN code, exact scale bytes) but
      // reading only the shard.
      SafetensorsEntry ce, se;
      auto c = ckpt_.rawData(ti->name, &ce);
      if (!c.ok()) return c.error();
      auto scl = ckpt_.rawData(ti->scaleName, &se);
      if (!scl.ok()) return scl.error();
      const bool fp4 = f == GpuWeightFormat::Fp4;
      const int64_t rowBytes = fp4 ? cols / 2 : cols, partRow = fp4 ? sc / 2 : sc, c0 = fp4 ? sl.colBegin / 2 : sl.colBegin;
      std::vector<uint8_t> codes(size_t(sr * partRow));
      for (int64_t r = 0; r < sr; ++r)
        std::memcpy(&codes[size_t(r * partRow)], *c + (sl.rowBegin + r) * rowBytes + c0, size_t(partRow));
      // Scales: fp4 one per row and 32 columns; fp8 one per 32x32 block.
      const int64_t scaleRows = fp4 ? sr : ceilDiv(sr, 32), scaleRow0 = fp4 ? sl.rowBegin : sl.rowBegin / 32;
      const int64_t fullScaleCols = fp4 ? cols / 32 : ceilDiv(cols, 32), partScaleCols = fp4 ? sc / 32 : ceilDiv(sc, 32);
      std::vector<uint8_t> scales(size_t(scaleRows * partScaleCols));
      for (int64_t r = 0; r < scaleRows; ++r)
        std::memcpy(&scales[size_t(r * partScaleCols)], *scl + (scaleRow0 + r) * fullScaleCols + sl.colBegin / 32,
                    size_t(partScaleCols));
      if (!fp4)
        for (size_t i = 0; i < codes.size(); ++i)
          if ((codes[i] & 0x7F) == 0x7F)
            return Error{fmt::format("{}: tensor '{}' holds NaN at element [{}, {}] of the shard ({}, code 0x{:02X}): "
                                     "weights must be finite (a corrupt file)",
                                     baseName(ti->file), name, sl.rowBegin + int64_t(i) / partRow,
                                     sl.colBegin + int64_t(i) % partRow, weightFormatName(ti->format), codes[i])};
      const ScaleByteRange range = exactScaleBytes(ti->format);
      for (size_t i = 0; i < scales.size(); ++i)
        if (scales[i] < range.lo || scales[i] > range.hi)
          return Error{fmt::format("{}: scale '{}' holds byte {} in the shard of '{}', outside {}..{} (a corrupt file, "
                                   "or not a V4.1 checkpoint)",
                                   baseName(ti->file), ti->scaleName, int(scales[i]), name, range.lo, range.hi)};
      DI_TRY(uploadBytes(name, codes, out.data));
      DI_TRY(uploadBytes(ti->scaleName, scales, out.scales));
    }
    out.rows = sr;
    out.cols = sc;
    out.format = f;
    return {};
  }
  Status experts(const std::string& prefix, int64_t Eall, int64_t C, int64_t I, int64_t eBegin, int64_t eEnd,
                 GpuRoutedExperts& out) override {
    (void)Eall;
    const int64_t E = eEnd - eBegin;
    const GpuWeightFormat f = GpuWeightFormat::Fp4;
    const int64_t c13 = codeBytes(f, I, C), s13 = scaleBytes(f, I, C), c2 = codeBytes(f, C, I), s2 = scaleBytes(f, C, I);
    const std::string what = prefix + "experts";
    DI_TRY(alloc(what + " w1", E * c13, out.w1));
    DI_TRY(alloc(what + " w1 scales", E * s13, out.w1Scale));
    DI_TRY(alloc(what + " w3", E * c13, out.w3));
    DI_TRY(alloc(what + " w3 scales", E * s13, out.w3Scale));
    DI_TRY(alloc(what + " w2", E * c2, out.w2));
    DI_TRY(alloc(what + " w2 scales", E * s2, out.w2Scale));
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = fmt::format("{}experts.{}.", prefix, eBegin + e);
      for (const auto& [which, codes, scales, cb, sb] :
           {std::tuple{"w1", &out.w1, &out.w1Scale, c13, s13}, std::tuple{"w3", &out.w3, &out.w3Scale, c13, s13},
            std::tuple{"w2", &out.w2, &out.w2Scale, c2, s2}}) {
        auto ti = ckpt_.info(p + which + ".weight");
        if (!ti.ok()) return ti.error();
        DI_TRY(uploadRaw(*ti, *codes, size_t(e * cb), *scales, size_t(e * sb)));
      }
    }
    out.experts = E;
    out.hidden = C;
    out.intermediate = I;
    return {};
  }
  Status bf16(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out) override {
    return uploadHost(name, ckpt_.loadBf16(name, shape), out);
  }
  Status f32(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out, const GpuSlice& sl) override {
    const int64_t rows = shape.size() == 2 ? shape[0] : 1, cols = numel(shape) / std::max<int64_t>(rows, 1);
    if (sl.whole(rows, cols)) return uploadHost(name, ckpt_.loadF32(name, shape), out);
    auto full = ckpt_.loadF32(name, shape);
    if (!full.ok()) return full.error();
    const int64_t sr = sl.rowsOf(rows), sc = sl.colsOf(cols);
    std::vector<uint8_t> part(size_t(sr * sc * 4));
    for (int64_t r = 0; r < sr; ++r)
      std::memcpy(&part[size_t(r * sc * 4)], full->bytes.data() + ((sl.rowBegin + r) * cols + sl.colBegin) * 4,
                  size_t(sc * 4));
    return uploadBytes(name, part, out);
  }
  int64_t bytes = 0;

 private:
  Status uploadBytes(const std::string& name, const std::vector<uint8_t>& bytesIn, DeviceBuffer& out) {
    DI_TRY(alloc(name, int64_t(bytesIn.size()), out));
    if (auto st = out.upload(bytesIn.data(), bytesIn.size()); !st.ok())
      return Error{fmt::format("weight '{}': {}", name, st.error().message)};
    return {};
  }
  Status alloc(const std::string& what, int64_t n, DeviceBuffer& out) {
    auto buf = DeviceBuffer::alloc(size_t(n));
    if (!buf.ok()) return Error{fmt::format("weight '{}' ({} bytes): {}", what, n, buf.error().message)};
    out = std::move(*buf);
    bytes += n;
    return {};
  }
  // The checkpoint's code and scale bytes of `ti`, checked, to the buffers at the offsets.
  Status uploadRaw(const TensorInfo& ti, const DeviceBuffer& codes, size_t codeOffset, const DeviceBuffer& scales,
                   size_t scaleOffset) {
    DI_TRY(ckpt_.checkQuantizedBytes(ti));
    SafetensorsEntry ce, se;
    auto c = ckpt_.rawData(ti.name, &ce);
    if (!c.ok()) return c.error();
    auto s = ckpt_.rawData(ti.scaleName, &se);
    if (!s.ok()) return s.error();
    if (auto st = codes.upload(*c, size_t(ce.byteSize()), codeOffset); !st.ok())
      return Error{fmt::format("weight '{}': {}", ti.name, st.error().message)};
    if (auto st = scales.upload(*s, size_t(se.byteSize()), scaleOffset); !st.ok())
      return Error{fmt::format("weight '{}': {}", ti.scaleName, st.error().message)};
    return {};
  }
  Status uploadHost(const std::string& name, Result<HostTensor> t, DeviceBuffer& out) {
    if (!t.ok()) return t.error();
    DI_TRY(alloc(name, int64_t(t->bytes.size()), out));
    if (auto st = out.upload(t->bytes.data(), t->bytes.size()); !st.ok())
      return Error{fmt::format("weight '{}': {}", name, st.error().message)};
    return {};
  }
  const Checkpoint& ckpt_;
};

// The slices of a tensor rank (GpuStageTensors): whole tensors when tp == 1.
struct RankSlices {
  bool sharded = false;
  GpuSlice wqB, attnSink, woA, woB, sharedW13, sharedW2, vocab;
  int64_t expertBegin = 0, expertEnd = -1;  // -1: all
};

RankSlices rankSlices(const ModelConfig& cfg, const GpuStageTensors& stage, int64_t sharedRows) {
  RankSlices r;
  if (stage.tp <= 1) return r;
  const RankPlan& rp = stage.rank;
  const int64_t D = cfg.headDim, oL = cfg.oLoraRank, C = cfg.hiddenSize;
  r.sharded = true;
  r.wqB = {rp.headBegin * D, rp.headEnd * D, 0, -1};
  r.attnSink = {0, -1, rp.headBegin, rp.headEnd};
  r.woA = {rp.groupBegin * oL, rp.groupEnd * oL, 0, -1};
  r.woB = {0, -1, rp.groupBegin * oL, rp.groupEnd * oL};
  const int64_t sb = rp.sharedEnd > rp.sharedBegin ? rp.sharedBegin : 0;
  const int64_t se = rp.sharedEnd > rp.sharedBegin ? rp.sharedEnd : sharedRows;
  r.sharedW13 = {sb, se, 0, -1};
  r.sharedW2 = {0, -1, sb, se};
  r.vocab = {rp.vocabBegin, rp.vocabEnd, 0, -1};
  r.expertBegin = rp.expertBegin;
  r.expertEnd = rp.expertEnd;
  (void)C;
  return r;
}

Status walkMhc(GpuWeightSink& s, const std::string& p, const std::string& which, int64_t C, GpuMhcWeights& w) {
  DI_TRY(s.f32(p + "hc_" + which + "_fn", {24, 4 * C}, w.fn, {}));
  DI_TRY(s.f32(p + "hc_" + which + "_base", {24}, w.base, {}));
  DI_TRY(s.f32(p + "hc_" + which + "_scale", {3}, w.scale, {}));
  return {};
}

// A kv source's compressor and index-key projection under `p` (what a mirror of it computes with).
Status walkKvSource(GpuWeightSink& s, const ModelConfig& cfg, const std::string& p, const LayerRole& role,
                    GpuAttentionWeights& w) {
  const int64_t C = cfg.hiddenSize, D = cfg.headDim, Di = cfg.indexHeadDim;
  DI_TRY(s.bf16Matrix(p + "compressor.wkv.weight", D, C, w.compWkv, {}));
  DI_TRY(s.bf16(p + "compressor.norm.weight", {D}, w.compNorm));
  if (role.ratio == 2) DI_TRY(s.bf16Matrix(p + "compressor.wgate.weight", D, C, w.compWgate, {}));
  DI_TRY(s.bf16Matrix(p + "indexer.wk.weight", Di, D, w.idxWk, {}));
  DI_TRY(s.bf16(p + "indexer.k_norm.weight", {Di}, w.idxKNorm));
  return {};
}

// The attention tensors under `p` ("layers.L.attn." or "mtp.s.attn."); `role` says which
// compressor/indexer tensors the layer owns (none for draft stages).
Status walkAttention(GpuWeightSink& s, const ModelConfig& cfg, const std::string& p, const LayerRole& role,
                     GpuAttentionWeights& w, const RankSlices& rs = {}) {
  const int64_t C = cfg.hiddenSize, H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t G = cfg.oGroups, qL = cfg.qLoraRank, oL = cfg.oLoraRank;
  DI_TRY(s.projection(p + "wq_a.weight", qL, C, w.wqA, {}));
  DI_TRY(s.bf16(p + "q_norm.weight", {qL}, w.qNorm));
  DI_TRY(s.projection(p + "wq_b.weight", H * D, qL, w.wqB, rs.wqB));
  DI_TRY(s.projection(p + "wkv.weight", D, C, w.wkv, {}));
  DI_TRY(s.bf16(p + "kv_norm.weight", {D}, w.kvNorm));
  DI_TRY(s.projection(p + "wo_a.weight", G * oL, (H / G) * D, w.woA, rs.woA));
  DI_TRY(s.projection(p + "wo_b.weight", C, G * oL, w.woB, rs.woB));
  DI_TRY(s.f32(p + "attn_sink", {H}, w.attnSink, rs.attnSink));
  const int64_t Hi = cfg.indexNHeads, Di = cfg.indexHeadDim;
  if (role.isKvSource) DI_TRY(walkKvSource(s, cfg, p, role, w));
  if (role.isIndexSource) {
    DI_TRY(s.projection(p + "indexer.wq_b.weight", Hi * Di, qL, w.idxWqB, {}));
    DI_TRY(s.bf16Matrix(p + "indexer.weights_proj.weight", Hi, C, w.idxWeightsProj, {}));
  }
  return {};
}

// The MoE tensors under `p` ("layers.L.ffn." or "mtp.s.ffn.") with E routed experts.
Status walkMoe(GpuWeightSink& s, const GpuWeightTable& table, const ModelConfig& cfg, const std::string& p, int64_t E,
               GpuMoeWeights& w, const RankSlices& rs = {}) {
  const int64_t C = cfg.hiddenSize, I = cfg.moeIntermediateSize;
  DI_TRY(s.bf16Matrix(p + "gate.weight", E, C, w.gate, {}));
  DI_TRY(s.f32(p + "gate.bias", {E}, w.gateBias, {}));
  DI_TRY(s.experts(p, E, C, I, rs.expertBegin, rs.expertEnd < 0 ? E : rs.expertEnd, w.routed));
  if (cfg.nSharedExperts > 0) {
    // The shared experts' width comes from the table (loadCpuWeights reads it the same way).
    const std::string w1 = p + "shared_experts.w1.weight";
    auto info = table.info(w1);
    if (!info.ok()) return info.error();
    if (info->logicalShape.size() != 2)
      return Error{fmt::format("checkpoint: tensor '{}' has rank {}, expected 2", w1, info->logicalShape.size())};
    const int64_t Is = info->logicalShape[0];
    DI_TRY(s.projection(w1, Is, C, w.shared.w1, rs.sharedW13));
    DI_TRY(s.projection(p + "shared_experts.w3.weight", Is, C, w.shared.w3, rs.sharedW13));
    DI_TRY(s.projection(p + "shared_experts.w2.weight", C, Is, w.shared.w2, rs.sharedW2));
  }
  return {};
}

Status walkEngram(GpuWeightSink& s, const ModelConfig& cfg, int layer, GpuEngramWeights& w) {
  const std::string p = fmt::format("layers.{}.engram.", layer);
  const int64_t C = cfg.hiddenSize;
  w.tableName = p + "embed.weight";
  DI_TRY(s.projection(p + "wkv.weight", 5 * C, engramConcatWidth(cfg), w.wkv, {}));
  DI_TRY(s.bf16(p + "q_weight", {4, C}, w.qWeight));
  DI_TRY(s.bf16(p + "k_weight", {4, C}, w.kWeight));
  return {};
}

// The DSpark tensors (docs/dspark.md §1), in loadCpuWeights' order: the stages (window-only
// blocks with the draft MoE), stage 0's main_proj/main_norm, the last stage's heads.
Status walkDspark(GpuWeightSink& s, const GpuWeightTable& table, const ModelConfig& cfg, GpuDsparkWeights& w) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, r = cfg.dspark.markovRank;
  const int64_t taps = int64_t(cfg.dsparkTargetLayerIds.size());
  const int S = cfg.numNextnPredictLayers;
  w.stages.resize(size_t(S));
  for (int st = 0; st < S; ++st) {
    GpuLayerWeights& lw = w.stages[size_t(st)];
    const std::string p = draftTensorName(st, "");
    DI_TRY(s.bf16(p + "attn_norm.weight", {C}, lw.attnNorm));
    DI_TRY(s.bf16(p + "ffn_norm.weight", {C}, lw.ffnNorm));
    DI_TRY(walkMhc(s, p, "attn", C, lw.hcAttn));
    DI_TRY(walkMhc(s, p, "ffn", C, lw.hcFfn));
    DI_TRY(walkAttention(s, cfg, p + "attn.", cfg.role(cfg.numHiddenLayers + st), lw.attn));
    DI_TRY(walkMoe(s, table, cfg, p + "ffn.", cfg.draftRoutedExperts(), lw.ffn));
  }
  DI_TRY(s.projection(draftTensorName(0, "main_proj.weight"), C, taps * C, w.mainProj, {}));
  DI_TRY(s.bf16(draftTensorName(0, "main_norm.weight"), {C}, w.mainNorm));
  DI_TRY(s.bf16(draftTensorName(S - 1, "norm.weight"), {C}, w.norm));
  DI_TRY(s.bf16Matrix(draftTensorName(S - 1, "markov_head.embed.weight"), V, r, w.markovEmbed, {}));
  DI_TRY(s.bf16Matrix(draftTensorName(S - 1, "markov_head.head.weight"), V, r, w.markovHead, {}));
  DI_TRY(s.bf16(draftTensorName(S - 1, "confidence_head.proj.weight"), {1, C + r}, w.confidence));
  return {};
}

struct Plan {
  int64_t bytes = 0;
  int64_t tensors = 0;
};

Result<Plan> plan(const ModelConfig& cfg, const GpuWeightTable& table, const GpuStageTensors& stage) {
  PlanSink s(table);
  GpuWeights unused;
  DI_TRY(walkGpuWeights(cfg, table, s, unused, stage));
  return Plan{s.bytes, s.tensors};
}

double gib(int64_t bytes) { return double(bytes) / double(int64_t(1) << 30); }

}  // namespace

DeviceQuantWeight GpuMatrix::quant() const {
  DeviceQuantWeight q;
  q.codes = data.addr();
  q.scales = scales.addr();
  q.rows = rows;
  q.cols = cols;
  q.bits = format == GpuWeightFormat::Fp4 ? 4 : 8;
  return q;
}

DeviceExpertWeights GpuRoutedExperts::view() const {
  DeviceExpertWeights v;
  v.w1 = w1.addr();
  v.w1Scale = w1Scale.addr();
  v.w3 = w3.addr();
  v.w3Scale = w3Scale.addr();
  v.w2 = w2.addr();
  v.w2Scale = w2Scale.addr();
  v.experts = experts;
  v.hidden = hidden;
  v.intermediate = intermediate;
  return v;
}

bool CheckpointWeightTable::hasDraft() const { return checkpointHasDraft(ckpt_); }

ConfigWeightTable::ConfigWeightTable(const ModelConfig& cfg, bool draft) : draft_(draft && cfg.dsparkConfigured()) {
  for (const ModelTensorSpec& t : modelTensorSpecs(cfg)) {
    if (!draft_ && t.name.rfind("mtp.", 0) == 0) continue;
    TensorInfo ti;
    ti.name = t.name;
    ti.dtype = t.dtype;
    ti.storedShape = t.storedShape();
    ti.logicalShape = t.shape;
    ti.format = t.format;
    ti.scaleName = t.hasScale() ? scaleNameFor(t.name) : "";
    ti.file = "config";
    infos_.emplace(t.name, std::move(ti));
  }
}

Result<TensorInfo> ConfigWeightTable::info(const std::string& name) const {
  auto it = infos_.find(name);
  if (it == infos_.end()) return Error{fmt::format("config: the model has no tensor '{}'", name)};
  return it->second;
}

Status walkGpuWeights(const ModelConfig& cfg, const GpuWeightTable& table, GpuWeightSink& s, GpuWeights& w,
                      const GpuStageTensors& stage) {
  const int64_t V = cfg.vocabSize, C = cfg.hiddenSize;
  const int end = stage.layerEnd < 0 ? cfg.numHiddenLayers : stage.layerEnd;
  if (stage.layerBegin < 0 || stage.layerBegin >= end || end > cfg.numHiddenLayers)
    return Error{fmt::format("weights of a stage: layers [{}, {}) are not a non-empty range of the model's {}",
                             stage.layerBegin, end, cfg.numHiddenLayers)};
  if (stage.tp > 1 && (stage.rank.headEnd <= stage.rank.headBegin || stage.rank.vocabEnd <= stage.rank.vocabBegin))
    return Error{fmt::format("weights of tensor rank {} of {}: its ranges are empty (planShards makes them)",
                             stage.rank.tpRank, stage.tp)};
  if (stage.tp > 1 && stage.draft && stage.head && cfg.dsparkConfigured() && table.hasDraft())
    return Error{"weights of a tensor rank: the DSpark draft is not sharded (tp > 1 runs without it)"};
  int64_t sharedRows = 0;
  if (cfg.nSharedExperts > 0 && stage.tp > 1) {
    auto info = table.info(fmt::format("layers.{}.ffn.shared_experts.w1.weight", stage.layerBegin));
    if (!info.ok()) return info.error();
    sharedRows = info->logicalShape.empty() ? 0 : info->logicalShape[0];
  }
  const RankSlices rs = rankSlices(cfg, stage, sharedRows);
  if (stage.embedding) DI_TRY(s.bf16Matrix("embed.weight", V, C, w.embed, rs.vocab));
  if (stage.head) {
    DI_TRY(s.bf16Matrix("head.weight", V, C, w.head, rs.vocab));
    DI_TRY(s.bf16("norm.weight", {C}, w.norm));
  }
  w.layers.resize(size_t(cfg.numHiddenLayers));
  for (int L : stage.mirroredSources) {
    if (L < 0 || L >= stage.layerBegin || !cfg.role(L).isKvSource)
      return Error{fmt::format("weights of a stage: layer {} is not a kv source of an earlier stage", L)};
    DI_TRY(walkKvSource(s, cfg, fmt::format("layers.{}.attn.", L), cfg.role(L), w.layers[size_t(L)].attn));
  }
  for (int L = stage.layerBegin; L < end; ++L) {
    GpuLayerWeights& lw = w.layers[size_t(L)];
    const std::string p = fmt::format("layers.{}.", L);
    DI_TRY(s.bf16(p + "attn_norm.weight", {C}, lw.attnNorm));
    DI_TRY(s.bf16(p + "ffn_norm.weight", {C}, lw.ffnNorm));
    DI_TRY(walkMhc(s, p, "attn", C, lw.hcAttn));
    DI_TRY(walkMhc(s, p, "ffn", C, lw.hcFfn));
    DI_TRY(walkAttention(s, cfg, p + "attn.", cfg.role(L), lw.attn, rs));
    DI_TRY(walkMoe(s, table, cfg, p + "ffn.", cfg.nRoutedExperts, lw.ffn, rs));
    lw.hasEngram = cfg.role(L).isEngram;
    if (lw.hasEngram) DI_TRY(walkEngram(s, cfg, L, lw.engram));
  }
  w.hasDraft = stage.head && stage.draft && cfg.dsparkConfigured() && table.hasDraft();
  if (w.hasDraft) DI_TRY(walkDspark(s, table, cfg, w.draft));
  return {};
}

Result<int64_t> gpuWeightBytes(const ModelConfig& cfg, const GpuWeightTable& table, const GpuStageTensors& stage) {
  auto p = plan(cfg, table, stage);
  if (!p.ok()) return p.error();
  return p->bytes;
}

Result<int64_t> gpuWeightBytes(const ModelConfig& cfg, const Checkpoint& ckpt, const GpuStageTensors& stage) {
  return gpuWeightBytes(cfg, CheckpointWeightTable(ckpt), stage);
}

Result<GpuWeights> loadGpuWeights(const ModelConfig& cfg, const Checkpoint& ckpt, const Device& dev,
                                  const GpuStageTensors& stage) {
  const CheckpointWeightTable table(ckpt);
  auto p = plan(cfg, table, stage);
  if (!p.ok()) return p.error();
  DI_TRY(dev.use());
  auto mem = dev.memInfo();
  if (!mem.ok()) return mem.error();
  if (p->bytes > int64_t(mem->first))
    return Error{fmt::format("model weights need {:.2f} GiB of device memory ({} bytes in {} tensors), {:.2f} GiB "
                             "free of {:.2f} GiB on GPU {}",
                             gib(p->bytes), p->bytes, p->tensors, gib(int64_t(mem->first)), gib(int64_t(mem->second)),
                             dev.ordinal())};
  UploadSink s(ckpt);
  GpuWeights w;
  DI_TRY(walkGpuWeights(cfg, table, s, w, stage));
  // A pageable host-to-device copy may return before its DMA lands; kernels on non-blocking
  // streams would not wait for it.
  DI_TRY(dev.synchronize());
  w.deviceBytes = s.bytes;
  return w;
}

}  // namespace deepinfer
