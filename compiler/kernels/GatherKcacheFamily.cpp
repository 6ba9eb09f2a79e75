// gather_kcache (docs/ops.md §3): dequantize paged fp8_ds_mla rows into the caller's out[R, M, 512]
// (templates/KvCache.cuh). The grid is sized to the GPU, not to M: gathered rows are dealt
// round-robin to all warps of the grid.
//
// Config knobs: `warps` per CTA, `tokens_per_warp` (rows a warp has in flight per step),
// `ctas_per_sm` (the residency the kernel's __launch_bounds__ promises), `grid_ctas`.
#include <fmt/format.h>

#include <algorithm>

#include "Families.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/EncodedInputs.h"
#include "deepinfer/TypedKernelFamily.h"
#include "GatherKcacheGeometry.h"
#include "KvCacheLayout.h"
#include "params/GatherKcacheParams.h"

namespace deepinfer {
namespace {

using namespace kvcache;

// Flat row indices inside the kernel are int32 with headroom for one grid step past the end.
constexpr int64_t kMaxOutRows = int64_t(1) << 30;
// The kernel keeps each output row start in 32 bits of 16-byte units (KvCache.cuh), so `out`
// (dense or a strided view) may span at most 2^35 elements (64 GiB of bf16).
constexpr int64_t kMaxViewElements = int64_t(1) << 35;

// Rows a call may write: R * (M - offset) (gather_lens is data, so this bounds the rows gathered).
int64_t gatherableRows(const OpDesc& d) {
  return d.dim("seq_lens", 0) * std::max<int64_t>(d.dim("out", 1) - d.attrs.getInt("offset", 0), 0);
}

// How many CTAs of this shape stay resident on one SM of the target.
int residentCtas(const TargetProfile& t, int64_t warps, int64_t tokensPerWarp) {
  return residentGatherCtas(t, warps, gatherRegisters(tokensPerWarp));
}

struct GatherKcacheConfig {
  int64_t warps = 0, tokensPerWarp = 0, ctasPerSm = 0, gridCtas = 0;
  static constexpr auto fields() {
    using F = ConfigField<GatherKcacheConfig>;
    return std::array{F{"warps", &GatherKcacheConfig::warps},
                      F{"tokens_per_warp", &GatherKcacheConfig::tokensPerWarp},
                      F{"ctas_per_sm", &GatherKcacheConfig::ctasPerSm},
                      F{"grid_ctas", &GatherKcacheConfig::gridCtas}};
  }
};

class GatherKcacheFamily final : public TypedKernelFamily<GatherKcacheConfig> {
 public:
  std::string opName() const override { return "gather_kcache"; }

  std::vector<std::string> templateHeaders() const override {
    return {"KvCache.cuh", "params/GatherKcacheParams.h", "params/KvQuantInsertParams.h",
            "common/Types.h", "common/Numerics.cuh", "common/Mma.cuh"};
  }

  Status validate(const OpDesc& d) const override {
    auto bs = blockSizeAttr(d);
    if (!bs.ok()) return bs.error();
    const int64_t offset = d.attrs.getInt("offset", 0);  // optional, 0 by default (OpSignatures)
    auto pages = checkPagedCache(d, "k_cache", *bs);
    if (!pages.ok()) return pages.error();
    auto seq = shapeOf(d, "seq_lens", 1);
    if (!seq.ok()) return seq.error();
    const int64_t R = (*seq)[0];
    if (d.hasTensor("gather_lens")) DI_TRY(expectShape(d, "gather_lens", {R}));
    auto table = shapeOf(d, "block_table", 2);
    if (!table.ok()) return table.error();
    if ((*table)[0] != R)
      return Error{fmt::format("gather_kcache: block_table has {} rows but seq_lens has {} requests",
                               (*table)[0], R)};
    if ((*table)[1] > INT32_MAX)
      return Error{fmt::format("gather_kcache: block_table has {} pages per request; at most {}",
                               (*table)[1], INT32_MAX)};
    auto out = shapeOf(d, "out", 3);
    if (!out.ok()) return out.error();
    if ((*out)[0] != R || (*out)[2] != kHeadDim)
      return Error{fmt::format("gather_kcache: out has shape [{}, {}, {}]; expected [R={}, M, {}]",
                               (*out)[0], (*out)[1], (*out)[2], R, kHeadDim)};
    const int64_t M = (*out)[1];
    if (offset < 0 || offset > M)
      return Error{fmt::format("gather_kcache: offset is {}; it must be in 0..M = {}", offset, M)};
    if (R * M * kHeadDim > kMaxViewElements)
      return Error{fmt::format("gather_kcache: out has R*M*512 = {}*{}*512 elements; at most {} (64 GiB) are "
                               "supported", R, M, kMaxViewElements)};
    if (R * M > kMaxOutRows)
      return Error{fmt::format("gather_kcache: out has R*M = {}*{} rows; at most {} are supported",
                               R, M, kMaxOutRows)};
    return {};
  }

  OutputSpec outputs(const OpDesc& d) const override {
    return {{"out", {DType::BF16, d.shapes.at("out")}}};
  }

  // Every (warps, tokens_per_warp) whose registers allow it, at full and at half residency; the
  // grid is one resident wave (never more CTAs than rows to fill them).
  std::vector<Config> configs(const OpDesc& d, const TargetProfile& t) const override {
    std::vector<Config> out;
    for (int64_t warps : {4, 8})
      for (int64_t tpw : {1, 2, 4}) {
        const int full = residentCtas(t, warps, tpw);
        for (int ctas : {full, full / 2}) {
          if (ctas < 1) continue;
          Config c = makeConfig(d, t, warps, tpw, ctas);
          if (std::none_of(out.begin(), out.end(), [&](const Config& o) { return toKnobs(o) == toKnobs(c); }))
            out.push_back(c);
        }
      }
    return out;
  }

  // warps per CTA 1..32 (1024 threads), tokens_per_warp 1, 2 or 4 (KvCache.cuh), ctas_per_sm the
  // __launch_bounds__ minimum 1..32, grid_ctas at least 1 (the grid's x limit is the knob range).
  Status canImplement(const Config& c, const OpDesc&) const override {
    const std::string cfg = configToString(toKnobs(c));
    if (c.warps < 1 || c.warps > 32)
      return Error{fmt::format("gather_kcache: warps = {} must be in 1..32 ({})", c.warps, cfg)};
    if (c.tokensPerWarp != 1 && c.tokensPerWarp != 2 && c.tokensPerWarp != 4)
      return Error{fmt::format("gather_kcache: tokens_per_warp = {} must be 1, 2 or 4 ({})", c.tokensPerWarp, cfg)};
    if (c.ctasPerSm < 1 || c.ctasPerSm > 32)
      return Error{fmt::format("gather_kcache: ctas_per_sm = {} must be in 1..32 ({})", c.ctasPerSm, cfg)};
    if (c.gridCtas < 1)
      return Error{fmt::format("gather_kcache: grid_ctas = {} must be at least 1 ({})", c.gridCtas, cfg)};
    return {};
  }

  ResourceEstimate resources(const Config& c, const OpDesc&) const override {
    const int64_t warps = c.warps;
    const int threads = int(32 * warps);
    // s_start[threads + 1], s_pos0[threads], then s_warp_sum on its own 16-byte vectors
    // (aligned, warps rounded up to 4): int32 each.
    const int64_t smem = (4 * (2 * threads + 1) + 15) / 16 * 16 + 4 * ((warps + 3) / 4 * 4);
    const int cap = launchBoundsRegisterCap(threads, c.ctasPerSm);
    const int64_t tpw = c.tokensPerWarp;
    return {smem, threads, std::max(gatherRegisters(tpw), std::min(gatherRegistersUnbounded(tpw), cap))};
  }

  // The rows R * (M - offset) a call may gather decide the schedule:
  //  - They fit one resident wave of 4-warp CTAs taking one row per warp (sm_80 / sm_90: 132 x 16
  //    x 4 = 8448 rows on an H200; sm_86: 12 x 4 per SM): every warp loads one row, so the call is
  //    one latency chain (lengths, block table, cache row, store) spread over as many SMs as the
  //    rows fill. The prefill window gather (1,663 rows) runs 416 CTAs on all 132 SMs instead of
  //    104 8-warp CTAs of two rows per warp.
  //  - They fit one wave of 8-warp CTAs at 4 rows per warp (4 CTAs per SM: 132 x 128 = 16896 rows,
  //    16K x1): one step with up to 128 rows (74 KB of cache) in flight per SM and no second,
  //    mostly idle step (tokens_per_warp 2 at 792 CTAs dealt 16384 rows as 12672 + 3712).
  //  - Otherwise a bandwidth kernel over several steps: keep as many rows in flight per SM as
  //    possible (resident warps x tokens_per_warp) while at least 3/4 of the warp slots stay
  //    filled to overlap decode work with memory (sm_80 / sm_90: tpw 2, 6 x 8-warp CTAs = 96
  //    rows; sm_86 / sm_89 likewise), and the grid is balanced so the last step is full too.
  Config defaultFor(const OpDesc& d, const TargetProfile& t) const override {
    const int64_t rows = gatherableRows(d);
    const int small = residentCtas(t, 4, 1);
    if (small >= 1 && rows <= int64_t(t.smCount) * small * 4) return makeConfig(d, t, 4, 1, small);
    const int wide = residentCtas(t, 8, 4);
    if (wide >= 1 && rows <= int64_t(t.smCount) * wide * 8 * 4) return makeConfig(d, t, 8, 4, wide);
    const int64_t warps = 8;
    int64_t bestTpw = 1, bestRows = -1;
    int bestCtas = 1;
    for (int64_t tpw : {1, 2, 4}) {
      const int ctas = residentCtas(t, warps, tpw);
      const int64_t residentWarps = int64_t(ctas) * warps;
      if (ctas < 1 || 4 * residentWarps < 3 * t.facts.maxWarpsPerSm) continue;
      if (residentWarps * tpw > bestRows) {
        bestRows = residentWarps * tpw;
        bestTpw = tpw;
        bestCtas = ctas;
      }
    }
    Config c = makeConfig(d, t, warps, bestTpw, std::max(1, bestCtas));
    // Steps of the resident grid the rows need; then as few CTAs as keep that many steps, so
    // every step deals a full grid of rows (the kernel's loop is uniform across warps).
    const int64_t rowsPerCta = warps * bestTpw;
    const int64_t steps = (rows + c.gridCtas * rowsPerCta - 1) / (c.gridCtas * rowsPerCta);
    c.gridCtas = std::max<int64_t>(1, (rows + steps * rowsPerCta - 1) / (steps * rowsPerCta));
    return c;
  }

  CudaUnit unit(const Config& c, const OpDesc& d, const std::string& baseName) const override {
    const int64_t warps = c.warps;
    CudaUnit u;
    u.source = fmt::format(
        "#include \"KvCache.cuh\"\n"
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const di::GatherKcacheParams p) {{\n"
        "  di::grid_dependency_sync();\n"
        "  di::gather_kcache_kernel<{}, {}, {}>(p);\n"
        "}}\n",
        32 * warps, c.ctasPerSm, baseName, d.attrs.getInt("block_size", 0), warps, c.tokensPerWarp);
    u.entries = {baseName};
    return u;
  }

  std::vector<LaunchStep> plan(const Config& c, const OpDesc&, const std::string& baseName) const override {
    LaunchStep s;
    s.entry = baseName;
    s.grid = {uint32_t(c.gridCtas), 1, 1};
    s.block = {uint32_t(32 * c.warps), 1, 1};
    return {s};
  }

  Result<std::vector<uint8_t>> params(const Config& c, const OpDesc& d, const DeviceAddrMap& addrs) const override {
    return stridedParams(c, d, addrs, {});
  }

  // `out` may be any view whose rows are whole and 16-byte aligned: dim 2 contiguous, row and
  // request strides multiples of 8 elements, and no two written elements at one address
  // (docs/ops.md §3: the kernel writes with the caller's strides, no copy afterwards).
  Status checkStrides(const OpDesc& d, const std::string& name,
                      const std::vector<int64_t>& strides) const override {
    if (name != "out") return KernelFamily::checkStrides(d, name, strides);
    auto shape = shapeOf(d, "out", 3);
    if (!shape.ok()) return shape.error();
    const auto& sh = *shape;
    if (strides.size() != 3)
      return Error{fmt::format("gather_kcache: 'out' has {} strides for a rank-3 tensor", strides.size())};
    const std::string st = fmt::format("[{}, {}, {}]", strides[0], strides[1], strides[2]);
    if (strides[2] != 1)
      return Error{fmt::format("gather_kcache: 'out' strides {}: the 512 values of a row must be contiguous "
                               "(stride 1 in dim 2)", st)};
    for (int i : {0, 1})
      if (strides[i] < 0 || strides[i] % 8 != 0)
        return Error{fmt::format("gather_kcache: 'out' strides {}: dim {} stride must be a non-negative "
                                 "multiple of 8 elements (rows are written as 16-byte vectors)", st, i)};
    // Distinct elements at distinct addresses: sorted by stride, each dim of size > 1 steps past
    // everything the smaller-stride dims span.
    std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
    for (int i = 0; i < 3; ++i)
      if (sh[i] > 1) dims.push_back({strides[i], sh[i]});
    std::sort(dims.begin(), dims.end());
    int64_t span = 1;  // elements covered by the dims so far, as one block
    for (const auto& [stride, size] : dims) {
      if (stride < span)
        return Error{fmt::format("gather_kcache: 'out' strides {} for shape [{}, {}, {}] make rows overlap",
                                 st, sh[0], sh[1], sh[2])};
      if (stride > (kMaxViewElements - span) / std::max<int64_t>(1, size - 1))
        return Error{fmt::format("gather_kcache: 'out' strides {} for shape [{}, {}, {}] span more than {} "
                                 "elements", st, sh[0], sh[1], sh[2], kMaxViewElements)};
      span = stride * (size - 1) + span;
    }
    return {};
  }

  Result<std::vector<uint8_t>> stridedParams(const Config&, const OpDesc& d, const DeviceAddrMap& addrs,
                                             const TensorStrides& strides) const override {
    std::vector<int64_t> outStrides = {d.dim("out", 1) * kHeadDim, kHeadDim, 1};  // dense
    for (const auto& [name, st] : strides) {
      DI_TRY(checkStrides(d, name, st));
      outStrides = st;  // checkStrides accepts `out` only
    }
    di::GatherKcacheParams p{};
    auto cache = addrOf(d, addrs, "k_cache", 16);
    auto seq = addrOf(d, addrs, "seq_lens", 4);
    auto table = addrOf(d, addrs, "block_table", 4);
    auto out = addrOf(d, addrs, "out", 16);
    for (const auto* r : {&cache, &seq, &table, &out})
      if (!r->ok()) return r->error();
    p.k_cache = reinterpret_cast<const uint8_t*>(*cache);
    p.seq_lens = reinterpret_cast<const int32_t*>(*seq);
    p.block_table = reinterpret_cast<const int32_t*>(*table);
    p.out = reinterpret_cast<uint16_t*>(*out);
    p.gather_lens = nullptr;  // absent: gather seq_lens[r] rows
    if (d.hasTensor("gather_lens")) {
      auto gl = addrOf(d, addrs, "gather_lens", 4);
      if (!gl.ok()) return gl.error();
      p.gather_lens = reinterpret_cast<const int32_t*>(*gl);
    }
    p.num_pages = d.dim("k_cache", 0);
    p.num_reqs = int32_t(d.dim("seq_lens", 0));
    p.max_pages = int32_t(d.dim("block_table", 1));
    p.rows = int32_t(d.dim("out", 1));
    p.offset = int32_t(d.attrs.getInt("offset", 0));
    p.out_req_stride = outStrides[0];
    p.out_row_stride = outStrides[1];
    return paramBytes(p);
  }

 private:
  // grid_ctas: one resident wave on the target, but never more CTAs than the rows that could be
  // written (R * (M - offset)) can keep busy.
  static Config makeConfig(const OpDesc& d, const TargetProfile& t, int64_t warps, int64_t tpw, int ctasPerSm) {
    const int64_t rowsPerCta = warps * tpw;
    const int64_t maxUseful = std::max<int64_t>(1, (gatherableRows(d) + rowsPerCta - 1) / rowsPerCta);
    const int64_t grid = std::min<int64_t>(gatherWave(t, ctasPerSm), maxUseful);
    return {warps, tpw, ctasPerSm, std::max<int64_t>(1, grid)};
  }
  std::vector<ShapeParam> shapeParams() const override {
    return {{"R", 1, "requests"}, {"context", 16384, "tokens gathered per request"},
            {"block_size", 64, "tokens per page"}, {"offset", 0, "first output row"}};
  }

  OpDesc describe(const ShapeParams& p) const override {
    const int64_t R = p.at("R"), bs = std::max<int64_t>(p.at("block_size"), 1);
    const int64_t maxPages = (p.at("context") + bs - 1) / bs;
    OpDesc d;
    d.op = opName();
    d.shapes["k_cache"] = {R * maxPages, pageBytes(bs)};
    d.shapes["seq_lens"] = {R};
    d.shapes["gather_lens"] = {R};
    d.shapes["block_table"] = {R, maxPages};
    d.shapes["out"] = {R, p.at("offset") + p.at("context"), kHeadDim};
    d.attrs.setInt("block_size", bs);
    d.attrs.setInt("offset", p.at("offset"));
    return d;
  }

  // Dequantize and copy: no transcendental belongs in its PTX.
  PtxChecks ptxChecks(const OpDesc&) const override { return {.noTranscendentals = true}; }

  // Tuned along the rows a request may gather: out's rows past `offset`. Not out's rows: the
  // prefill window gather writes ~1.7K rows behind the compressed rows of a 64K context
  // (offset 32768), and its work is that of a 2K gather, not of a 32K one.
  std::optional<BucketAxis> bucketAxis() const override { return BucketAxis{"context", {2048, 8192, 32768, 131072}}; }
  std::optional<int64_t> bucketValue(const OpDesc& d) const override {
    const auto m = dimOf(d, "out", 1);
    if (!m) return std::nullopt;
    return std::max<int64_t>(0, *m - d.attrs.getInt("offset", 0));
  }
  std::vector<TuneShape> tuneShapes(const ModelDims&, int64_t v) const override {
    return {{{{"R", 1}, {"context", v}}, {{"R", 1}, {"context", v}}}};
  }
  std::vector<std::pair<std::string, std::optional<int64_t>>> tuningDims(const OpDesc& d) const override {
    return {{"bs", intAttrOf(d, "block_size")}};
  }

  // Each of R requests gathers its whole sequence (the compressed cache at offset 0) from pages
  // handed out in random order, as a paged allocator leaves them: a block table of distinct pages
  // in [0, P), every referenced page holding tokens the kv_quant_insert reference wrote.
  Result<BenchInputs> benchInputs(BenchInputContext& ctx) const override {
    BenchParams& p = ctx.params;
    Rng& rng = ctx.rng;
    const int64_t R = p.get("R", 1), context = p.get("context", 16384), bs = p.get("block_size", 64);
    const int64_t g = p.get("gather", context), offset = p.get("offset", 0), ring = p.get("ring_rows", 0);
    DI_TRY(p.require(R >= 1 && context >= 1 && bs >= 1, "needs R, context, block_size >= 1"));
    DI_TRY(p.require(g >= 1 && g <= context && offset >= 0, "needs 1 <= gather <= context and offset >= 0"));
    DI_TRY(p.require(ring == 0 || (ring % bs == 0 && ring >= g),
                     "ring_rows must be 0 or a multiple of block_size holding the gathered rows"));
    // Each request gathers the last `gather` positions of its `context` (the whole sequence by
    // default: the compressed cache at offset 0). Pages are handed out in random order, as a paged
    // allocator leaves them. With ring_rows, a request owns only ring_rows / block_size pages and
    // position p lives in ring row p mod ring_rows, as the runtime's per-layer window rings
    // (docs/model.md §11): its block table maps every logical page of the context onto them.
    const int64_t maxPages = (context + bs - 1) / bs, ownPages = ring > 0 ? ring / bs : maxPages, P = R * ownPages + 4;
    const std::vector<int64_t> order = shuffledRange(rng, P);
    std::vector<int32_t> table(size_t(R * maxPages));
    std::vector<int64_t> used(order.begin(), order.begin() + R * ownPages);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t lp = 0; lp < maxPages; ++lp)
        table[size_t(r * maxPages + lp)] = int32_t(order[size_t(r * ownPages + lp % ownPages)]);
    BenchInputs in;
    in.attrs.setInt("block_size", bs);
    in.attrs.setInt("offset", offset);
    auto cache = tiledKvCache(rng, P, bs, used, ctx.reference);
    if (!cache.ok()) return cache.error();
    in.inputs["k_cache"] = std::move(*cache);
    in.inputs["seq_lens"] = i32Tensor({R}, std::vector<int32_t>(size_t(R), int32_t(context)));
    in.inputs["gather_lens"] = i32Tensor({R}, std::vector<int32_t>(size_t(R), int32_t(g)));
    in.inputs["block_table"] = i32Tensor({R, maxPages}, table);
    // out as the runtime sizes its workspace: rows [0, offset) belong to other gathers, then the
    // ring (or the gathered rows). Random contents: rows the op does not write must keep them.
    const int64_t M = offset + (ring > 0 ? ring : g);
    in.inputs["out"] = randomBytes(rng, DType::BF16, {R, M, kHeadDim});
    // Only the block-table entries of the gathered positions are read.
    const double rows = double(R * g), entries = double(R * ((context - 1) / bs - (context - g) / bs + 1));
    in.bytes = rows * double(kTokenBytes + kScaleBytes) + rows * kHeadDim * 2 + entries * 4 + double(2 * R * 4);
    return in;
  }
};

}  // namespace

const KernelFamily& gatherKcacheFamily() {
  static const GatherKcacheFamily f;
  return f;
}

}  // namespace deepinfer
