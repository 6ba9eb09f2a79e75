// Valid random inputs for every benchmark op at the model's shapes: never zeros, realistic scale
// (the test cases' conventions, tests/cases), indices and lens that make the kernel do all its
// work (every top-k row full, every attention row with all its keys valid), caches holding tokens
// the kv_quant_insert reference wrote. Large tensors come from value pools (FastFill.h) so that a
// 200 MB input takes a fraction of a second.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "BenchCase.h"
#include "BenchCheck.h"
#include "FastFill.h"
#include "deepinfer/Formats.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/OpShapes.h"
#include "reference/KvCacheLayout.h"

namespace deepinfer::bench {
namespace {

constexpr int64_t kHeadDim = 512;
const double kSmScale = 1.0 / std::sqrt(512.0);

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001B3ull;
  return h;
}

// A spec's parameters with defaults; any name the builder does not know is an error.
class Params {
 public:
  explicit Params(const BenchSpec& s) : s_(s) {}
  int64_t get(const std::string& name, int64_t dflt) {
    known_.insert(name);
    auto it = s_.params.find(name);
    return it == s_.params.end() ? dflt : it->second;
  }
  Status finish() const {
    for (const auto& [k, v] : s_.params)
      if (!known_.count(k))
        return Error{fmt::format("{} [{}]: unknown benchmark parameter '{}'", s_.op, s_.shape, k)};
    return {};
  }
  Status require(bool cond, const std::string& what) const {
    if (cond) return {};
    return Error{fmt::format("{} [{}]: {}", s_.op, s_.shape, what)};
  }

 private:
  const BenchSpec& s_;
  std::set<std::string> known_;
};

double tensorBytes(const HostTensor& t) { return double(t.bytes.size()); }

// Bytes of every input and every output of a dense op (each read or written once).
Result<double> denseBytes(const BenchCase& c) {
  auto d = describeOp(c.spec.op, c.attrs, c.inputs);
  if (!d.ok()) return d.error();
  double b = 0;
  for (const auto& [name, t] : c.inputs) b += tensorBytes(t);
  for (const auto& [name, spec] : findKernelFamily(c.spec.op)->outputs(*d)) {
    int64_t n = 1;
    for (int64_t x : spec.second) n *= x;
    b += double(n) * double(dtypeSize(spec.first));
  }
  return b;
}

// Rows for the reference check: all, or rows spread over the first dimension when the CPU
// reference of the whole shape costs more than the FLOP budget, or comparing one variant's
// outputs (done for every variant, with a per-element tolerance rule) more than the element
// budget; a spec may force a subset ("check_rows"). The plain-loop references run at about
// 1-4 GFLOP/s on one core.
constexpr double kRefFlopBudget = 4e9;
constexpr double kCompareElementBudget = 8e6;

void planRows(BenchCase& c, Params& p, int64_t totalRows, double refFlopsPerRow, double outElementsPerRow,
              std::vector<std::string> rowInputs) {
  const int64_t forced = p.get("check_rows", 0);
  const double affordable = std::min(kRefFlopBudget / std::max(refFlopsPerRow, 1.0),
                                     kCompareElementBudget / std::max(outElementsPerRow, 1.0));
  const int64_t rows = forced > 0 ? forced : std::max<int64_t>(8, int64_t(affordable));
  if (rows >= totalRows) return;  // Full
  c.check.kind = CheckPlan::Kind::Rows;
  c.check.rows = rows;
  c.check.rowInputs = std::move(rowInputs);
  c.check.note = fmt::format("{} of {} rows checked, spread evenly (rows are independent; checking all of them "
                             "on the CPU costs too much)",
                             rows, totalRows);
}

Status buildCombine(BenchCase& c, Rng& rng, Params& p) {
  const int64_t T = p.get("T", 1536), R = p.get("R", 1), K = p.get("topk", 512), window = p.get("window", 128),
                ratio = p.get("ratio", 2), context = p.get("context", 16384),
                maxModelLen = p.get("max_model_len", 65536);
  DI_TRY(p.require(R >= 1 && T >= R, "needs 1 <= R <= T"));
  // R requests, each the last chunk of a `context`-token prompt: every token sees more than K
  // compressed positions, so every row is full (K top-k entries + `window` window entries).
  const int64_t N = ratio > 0 ? cdiv(maxModelLen, ratio) : 0;
  std::vector<int32_t> qsl = {0}, seq, gather;
  int64_t maxQ = 0;
  for (int64_t b = 0; b < R; ++b) {
    const int64_t q = T / R + (b == R - 1 ? T % R : 0);
    DI_TRY(p.require(context >= q && context <= maxModelLen, "needs query length <= context <= max_model_len"));
    qsl.push_back(int32_t(qsl.back() + q));
    seq.push_back(int32_t(context));
    gather.push_back(int32_t(std::min(context, q + window - 1)));
    maxQ = std::max(maxQ, q);
  }
  HostTensor topk(DType::I32, {T, K});
  int32_t* tk = topk.ptr<int32_t>();
  for (int64_t b = 0; b < R; ++b) {
    const int64_t q = qsl[size_t(b) + 1] - qsl[size_t(b)];
    for (int64_t j = 0; j < q; ++j) {
      int32_t* row = tk + (qsl[size_t(b)] + j) * K;
      const int64_t pos = context - q + j;
      const int64_t visible = ratio > 0 ? std::min((pos + 1) / ratio, N) : 0;
      const int64_t n = std::min(visible, K);
      stratifiedSorted(rng, visible, n, row);
      std::fill(row + n, row + K, -1);
    }
  }
  c.attrs.setInt("window", window);
  c.attrs.setInt("ratio", ratio);
  c.attrs.setInt("topk", K);
  c.attrs.setInt("N", N);
  c.attrs.setInt("M", N + window + maxQ);
  c.inputs["topk_indices"] = std::move(topk);
  c.inputs["query_start_loc"] = testing::i32Tensor({R + 1}, qsl);
  c.inputs["seq_lens"] = testing::i32Tensor({R}, seq);
  c.inputs["gather_lens"] = testing::i32Tensor({R}, gather);
  auto b = denseBytes(c);
  if (!b.ok()) return b.error();
  c.bytes = *b;
  return {};
}

Status buildGather(BenchCase& c, Rng& rng, Params& p) {
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
  const int64_t maxPages = cdiv(context, bs), ownPages = ring > 0 ? ring / bs : maxPages, P = R * ownPages + 4;
  const std::vector<int64_t> order = testing::shuffledRange(rng, P);
  std::vector<int32_t> table(size_t(R * maxPages));
  std::vector<int64_t> used(order.begin(), order.begin() + R * ownPages);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t lp = 0; lp < maxPages; ++lp)
      table[size_t(r * maxPages + lp)] = int32_t(order[size_t(r * ownPages + lp % ownPages)]);
  c.attrs.setInt("block_size", bs);
  c.attrs.setInt("offset", offset);
  c.inputs["k_cache"] = tiledKvCache(rng, P, bs, used);
  c.inputs["seq_lens"] = testing::i32Tensor({R}, std::vector<int32_t>(size_t(R), int32_t(context)));
  c.inputs["gather_lens"] = testing::i32Tensor({R}, std::vector<int32_t>(size_t(R), int32_t(g)));
  c.inputs["block_table"] = testing::i32Tensor({R, maxPages}, table);
  // out as the runtime sizes its workspace: rows [0, offset) belong to other gathers, then the
  // ring (or the gathered rows). Random contents: rows the op does not write must keep them.
  const int64_t M = offset + (ring > 0 ? ring : g);
  c.inputs["out"] = testing::randomBytes(rng, DType::BF16, {R, M, kHeadDim});
  // Only the block-table entries of the gathered positions are read.
  const double rows = double(R * g), entries = double(R * ((context - 1) / bs - (context - g) / bs + 1));
  c.bytes = rows * double(ref::kTokenDataBytes + ref::kTokenScaleBytes) + rows * kHeadDim * 2 + entries * 4 +
            double(2 * R * 4);
  return {};
}

Status buildKvQuantInsert(BenchCase& c, Rng& rng, Params& p) {
  const int64_t T = p.get("T", 1536), bs = p.get("block_size", 64), pages = p.get("pages", 256);
  DI_TRY(p.require(T >= 1 && bs >= 1 && cdiv(T, bs) <= pages, "needs T >= 1 and ceil(T / block_size) <= pages"));
  // A prefill of T consecutive positions of one request into pages scattered over the cache.
  const std::vector<int64_t> order = testing::shuffledRange(rng, pages);
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) slots[size_t(t)] = order[size_t(t / bs)] * bs + t % bs;
  const auto pool = bf16NormalPool(rng);
  c.attrs.setInt("block_size", bs);
  c.inputs["k"] = bf16FromPool(rng, pool, {T, kHeadDim});
  c.inputs["slot_mapping"] = testing::i64Tensor({T}, slots);
  c.inputs["k_cache"] = testing::randomBytes(rng, DType::U8, {pages, mlaPageBytes(bs)});
  c.bytes = double(T) * (kHeadDim * 2 + 8 + ref::kTokenDataBytes + ref::kTokenScaleBytes);
  return {};
}

// mHC inputs as the test cases build them (tests/cases/MhcCases.cpp): residual rows of per-token
// magnitude 0.5..4, fn ~ N(0, 1/(4C)) so the mixes are ~N(0, 1) and nothing saturates.
HostTensor mhcResidual(Rng& rng, const ValuePool<uint16_t>& pool, int64_t T, int64_t C) {
  HostTensor x = bf16FromPool(rng, pool, {T, 4, C});
  for (int64_t t = 0; t < T; ++t) {
    const float s = float(0.5 + 3.5 * rng.uniform());
    uint16_t* row = x.ptr<uint16_t>() + t * 4 * C;
    for (int64_t i = 0; i < 4 * C; ++i) row[i] = floatToBf16(bf16ToFloat(row[i]) * s);
  }
  return x;
}

Status buildMhc(BenchCase& c, Rng& rng, Params& p) {
  const std::string& op = c.spec.op;
  const int64_t T = p.get("T", 6), C = p.get("C", 5120);
  DI_TRY(p.require(T >= 1 && C >= 128 && C % 128 == 0, "needs T >= 1 and C a positive multiple of 128"));
  const auto pool = bf16NormalPool(rng);
  const bool pre = op == "mhc_pre" || op == "mhc_fused_post_pre";
  const bool post = op == "mhc_post" || op == "mhc_fused_post_pre";
  if (post) {
    c.inputs["f_out"] = bf16FromPool(rng, pool, {T, C});
    c.inputs["residual"] = mhcResidual(rng, pool, T, C);
    c.inputs["post"] = testing::f32Uniform(rng, {T, 4}, 0.05, 1.95);
    c.inputs["comb"] = testing::f32Uniform(rng, {T, 4, 4}, 0.02, 0.5);
  }
  if (pre) {
    if (op == "mhc_pre") c.inputs["x"] = mhcResidual(rng, pool, T, C);
    const auto fnPool = f32NormalPool(rng, 1.0 / std::sqrt(4.0 * double(C)));
    c.inputs["fn"] = f32FromPool(rng, fnPool, {24, 4 * C});
    c.inputs["scale"] = testing::f32Uniform(rng, {3}, 0.5, 1.5);
    c.inputs["base"] = testing::f32Normal(rng, {24}, 0.5);
    c.inputs["pre_in"] = testing::f32Uniform(rng, {T, 4}, 0.1, 1.1);
    c.inputs["norm_weight"] = testing::bf16Normal(rng, {C}, 0.1, 1.0);
    // The model's values (docs/model.md §1: rms_norm_eps 1e-20, hc_eps 1e-6, 20 Sinkhorn rounds).
    c.attrs.setFloat("rms_eps", 1e-20);
    c.attrs.setFloat("hc_eps", 1e-6);
    c.attrs.setInt("sinkhorn_iters", 20);
    c.attrs.setFloat("norm_eps", 1e-20);
    c.flops = 2.0 * double(T) * 24 * 4 * double(C);  // the mix GEMM
  }
  if (op == "mhc_collapse") {
    c.inputs["x"] = mhcResidual(rng, pool, T, C);
    c.inputs["pre"] = testing::f32Uniform(rng, {T, 4}, 0.1, 1.1);
  }
  auto b = denseBytes(c);
  if (!b.ok()) return b.error();
  c.bytes = *b;
  // The fp64 reference of the mix GEMM dominates: 24 * 4C multiply-adds per token.
  std::vector<std::string> rowInputs;
  for (const char* n : {"x", "f_out", "residual", "post", "comb", "pre_in", "pre"})
    if (c.inputs.count(n)) rowInputs.push_back(n);
  auto d = describeOp(op, c.attrs, c.inputs);
  if (!d.ok()) return d.error();
  double outPerRow = 0;  // output elements per token
  for (const auto& [name, spec] : findKernelFamily(op)->outputs(*d))
    outPerRow += double(rowBytes(spec.first, spec.second)) / double(dtypeSize(spec.first));
  planRows(c, p, T, pre ? 2.0 * 24 * 4 * double(C) : 40.0 * double(C), outPerRow, rowInputs);
  return {};
}

// Pages of one request in a paged cache: logical page -> physical page, from a shared pool.
struct PageAlloc {
  std::vector<int64_t> order;
  size_t next = 0;
  int64_t take() { return order.at(next++); }
};

Status buildDecode(BenchCase& c, Rng& rng, Params& p) {
  const int64_t B = p.get("B", 6), H = p.get("H", 64), swaK = p.get("swa_k", 128), extK = p.get("extra_k", 512),
                ctxMin = p.get("context_min", 4096), ctxMax = p.get("context_max", 16384),
                ratio = p.get("ratio", 2), bs = 64;
  DI_TRY(p.require(B >= 1 && ctxMin <= ctxMax && ctxMin >= swaK && (ctxMin / ratio) >= extK,
                   "needs context_min <= context_max, context_min >= swa_k and context_min / ratio >= extra_k"));
  // Request b decodes position ctx_b - 1: its window is the last swa_k positions (window cache),
  // its compressed keys extra_k sorted distinct positions of its (ctx_b / ratio) compressed ones.
  std::vector<int64_t> ctx(static_cast<size_t>(B));
  int64_t swaPages = 0, extPages = 0;
  for (auto& x : ctx) {
    x = rng.range(ctxMin, ctxMax + 1);
    swaPages += cdiv(swaK, bs) + 1;
    extPages += cdiv(x / ratio, bs);
  }
  PageAlloc swa{testing::shuffledRange(rng, swaPages + 4)}, ext{testing::shuffledRange(rng, extPages + 4)};
  std::vector<int32_t> swaIdx(size_t(B * swaK)), extIdx(size_t(B * extK));
  std::vector<int64_t> swaUsed, extUsed;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pos = ctx[size_t(b)] - 1, first = pos - swaK + 1;
    std::map<int64_t, int64_t> pageOf;  // logical -> physical
    for (int64_t i = 0; i < swaK; ++i) {
      const int64_t at = first + i;
      auto it = pageOf.find(at / bs);
      if (it == pageOf.end()) {
        it = pageOf.emplace(at / bs, swa.take()).first;
        swaUsed.push_back(it->second);
      }
      swaIdx[size_t(b * swaK + i)] = int32_t(it->second * bs + at % bs);
    }
    const int64_t ncomp = ctx[size_t(b)] / ratio;
    std::vector<int64_t> pages(static_cast<size_t>(cdiv(ncomp, bs)));
    for (auto& pg : pages) {
      pg = ext.take();
      extUsed.push_back(pg);
    }
    std::vector<int32_t> sel(static_cast<size_t>(extK));
    stratifiedSorted(rng, ncomp, extK, sel.data());
    for (int64_t i = 0; i < extK; ++i)
      extIdx[size_t(b * extK + i)] = int32_t(pages[size_t(sel[size_t(i)] / bs)] * bs + sel[size_t(i)] % bs);
  }
  const auto pool = bf16NormalPool(rng);
  c.attrs.setFloat("sm_scale", kSmScale);
  c.attrs.setInt("swa_block_size", bs);
  c.attrs.setInt("extra_block_size", bs);
  c.inputs["q"] = bf16FromPool(rng, pool, {B, 1, H, kHeadDim});
  c.inputs["swa_cache"] = tiledKvCache(rng, int64_t(swa.order.size()), bs, swaUsed);
  c.inputs["swa_indices"] = testing::i32Tensor({B, 1, swaK}, swaIdx);
  c.inputs["swa_lens"] = testing::i32Tensor({B}, std::vector<int32_t>(size_t(B), int32_t(swaK)));
  c.inputs["extra_cache"] = tiledKvCache(rng, int64_t(ext.order.size()), bs, extUsed);
  c.inputs["extra_indices"] = testing::i32Tensor({B, 1, extK}, extIdx);
  c.inputs["extra_lens"] = testing::i32Tensor({B}, std::vector<int32_t>(size_t(B), int32_t(extK)));
  c.inputs["attn_sink"] = testing::f32Normal(rng, {H});
  const double keys = double(B * (swaK + extK));  // all distinct rows
  c.bytes = tensorBytes(c.inputs["q"]) * 2 /* q in, out */ + double(B * H * 4) /* lse */ +
            double(B * (swaK + extK + 2) * 4) + double(H * 4) +
            keys * double(ref::kTokenDataBytes + ref::kTokenScaleBytes);
  c.flops = double(B) * double(H) * double(swaK + extK) * 4.0 * kHeadDim;
  planRows(c, p, B, double(H) * double(swaK + extK) * 4.0 * kHeadDim, double(H) * (kHeadDim + 1),
           {"q", "swa_indices", "swa_lens", "extra_indices", "extra_lens"});
  return {};
}

Status buildPrefill(BenchCase& c, Rng& rng, Params& p) {
  const int64_t T = p.get("T", 1536), H = p.get("H", 64), topk = p.get("index_topk", 512),
                window = p.get("window", 128), S = p.get("kv_rows", 65536), context = p.get("context", 65536),
                ratio = p.get("ratio", 2);
  // The workspace combine_topk_swa indexes (docs/ops.md §3/§4), one request: compressed rows
  // [0, N), then the gathered window rows of this chunk from N on; rows past them are unused.
  const int64_t N = cdiv(context, ratio), gatherLen = std::min(context, T + window - 1), g0 = context - gatherLen;
  DI_TRY(p.require(T >= 1 && context >= T && N + gatherLen <= S, "needs T <= context and N + T + window - 1 <= kv_rows"));
  const int64_t kmax = topk + window;
  HostTensor idx(DType::I32, {T, kmax});
  std::vector<int32_t> lens(static_cast<size_t>(T));
  std::vector<uint8_t> touched(static_cast<size_t>(S), 0);
  double validKeys = 0;
  for (int64_t t = 0; t < T; ++t) {
    int32_t* row = idx.ptr<int32_t>() + t * kmax;
    const int64_t pos = context - T + t;
    const int64_t visible = std::min((pos + 1) / ratio, N), nk = std::min(topk, visible);
    stratifiedSorted(rng, visible, nk, row);
    const int64_t swaStart = std::max<int64_t>(pos - window + 1, 0), swaLen = pos - swaStart + 1;
    for (int64_t i = 0; i < swaLen; ++i) row[nk + i] = int32_t(N + (swaStart - g0) + i);
    std::fill(row + nk + swaLen, row + kmax, -1);
    lens[size_t(t)] = int32_t(nk + swaLen);
    for (int64_t i = 0; i < nk + swaLen; ++i) touched[size_t(row[i])] = 1;
    validKeys += double(nk + swaLen);
  }
  const auto pool = bf16NormalPool(rng);
  c.attrs.setFloat("sm_scale", kSmScale);
  c.inputs["q"] = bf16FromPool(rng, pool, {T, H, kHeadDim});
  c.inputs["kv"] = bf16FromPool(rng, pool, {S, kHeadDim});
  c.inputs["indices"] = std::move(idx);
  c.inputs["lens"] = testing::i32Tensor({T}, lens);
  c.inputs["attn_sink"] = testing::f32Normal(rng, {H});
  const double rows = double(std::accumulate(touched.begin(), touched.end(), int64_t(0)));
  c.bytes = tensorBytes(c.inputs["q"]) * 2 + double(T * H * 4) + rows * kHeadDim * 2 +
            tensorBytes(c.inputs["indices"]) + double(T * 4 + H * 4);
  c.flops = validKeys * double(H) * 4.0 * kHeadDim;
  planRows(c, p, T, double(H) * double(kmax) * 4.0 * kHeadDim, double(H) * (kHeadDim + 1), {"q", "indices", "lens"});
  return {};
}

Status buildIndexer(BenchCase& c, Rng& rng, Params& p) {
  const int64_t T = p.get("T", 1536), Hi = p.get("Hi", 32), context = p.get("context", 8192),
                bs = p.get("block_size", 64), ratio = p.get("ratio", 2);
  DI_TRY(p.require(T >= 1 && context * ratio >= T, "needs T <= context * ratio"));
  // One request, the last chunk of a (context * ratio)-token prompt: token t sees the compressed
  // positions below (pos + 1) / ratio, pages of the index-key cache in random order.
  const int64_t maxPages = cdiv(context, bs), P = maxPages + 2;
  const std::vector<int64_t> order = testing::shuffledRange(rng, P);
  std::vector<int32_t> table(order.begin(), order.begin() + maxPages);
  std::vector<int32_t> visible(static_cast<size_t>(T)), toReq(static_cast<size_t>(T), 0);
  double visSum = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = context * ratio - T + t;
    visible[size_t(t)] = int32_t(std::min(context, (pos + 1) / ratio));
    visSum += visible[size_t(t)];
  }
  // Queries hold e4m3 values (exact in bf16) with their power-of-two scale folded into the
  // weights, as the caller quantizes them (tests/cases/IndexerLogitsCases.cpp); rows are drawn
  // from a pool of quantized rows.
  constexpr int64_t kPoolRows = 2048, kDim = 128;
  std::vector<uint16_t> qPool(size_t(kPoolRows * kDim));
  std::vector<float> qScale(static_cast<size_t>(kPoolRows));
  for (int64_t r = 0; r < kPoolRows; ++r) {
    float x[kDim], amax = 0.f;
    for (float& v : x) {
      v = bf16ToFloat(floatToBf16(float(rng.normal())));
      amax = std::max(amax, std::fabs(v));
    }
    qScale[size_t(r)] = ue8m0ToFloat(ue8m0CeilEncode(std::max(amax, 1e-4f) / 448.f));
    for (int64_t d = 0; d < kDim; ++d)
      qPool[size_t(r * kDim + d)] =
          floatToBf16(e4m3ToFloat(ref::e4m3Code(std::clamp(x[d] / qScale[size_t(r)], -448.f, 448.f))));
  }
  HostTensor q(DType::BF16, {T, Hi, kDim});
  HostTensor w(DType::F32, {T, Hi});
  const double headScale = 1.0 / std::sqrt(double(Hi) * double(kDim));
  for (int64_t row = 0; row < T * Hi; ++row) {
    const int64_t r = rng.range(0, kPoolRows);
    std::memcpy(q.ptr<uint16_t>() + row * kDim, qPool.data() + r * kDim, kDim * 2);
    w.ptr<float>()[row] = float(rng.normal() * headScale * qScale[size_t(r)]);
  }
  c.attrs.setInt("block_size", bs);
  c.inputs["q"] = std::move(q);
  c.inputs["weights"] = std::move(w);
  c.inputs["k_cache"] = testing::indexerKeyCache(rng, P, bs);
  c.inputs["block_table"] = testing::i32Tensor({1, maxPages}, table);
  c.inputs["token_to_req"] = testing::i32Tensor({T}, toReq);
  c.inputs["visible"] = testing::i32Tensor({T}, visible);
  c.bytes = tensorBytes(c.inputs["q"]) + tensorBytes(c.inputs["weights"]) + double(maxPages * bs * (kDim + 4)) +
            double(maxPages * 4 + 2 * T * 4) + double(T * maxPages * bs * 4);
  c.flops = visSum * double(Hi) * 2.0 * kDim;
  planRows(c, p, T, double(maxPages * bs) * double(Hi) * 2.0 * kDim, double(maxPages * bs),
           {"q", "weights", "token_to_req", "visible"});
  return {};
}

Status buildTopk(BenchCase& c, Rng& rng, Params& p) {
  const int64_t T = p.get("T", 1536), N = p.get("N", 8192), k = p.get("k", 512);
  DI_TRY(p.require(T >= 1 && k >= 1 && N > k, "needs T >= 1 and N > k >= 1"));
  // The indexer's rows of a prefill chunk: lens grow with the position (as `visible` does), all
  // above k so every row selects k entries.
  std::vector<int32_t> lens(static_cast<size_t>(T));
  double read = 0;
  for (int64_t t = 0; t < T; ++t) {
    lens[size_t(t)] = int32_t(std::max(k + 1, N - (T - 1 - t) / 2));
    read += lens[size_t(t)];
  }
  const auto pool = f32NormalPool(rng);
  c.attrs.setInt("k", k);
  c.inputs["scores"] = f32FromPool(rng, pool, {T, N});
  c.inputs["lens"] = testing::i32Tensor({T}, lens);
  c.bytes = read * 4 + double(T * 4) + double(T * k * 4);
  planRows(c, p, T, double(N) * 40.0, 0 /* bit-exact: compared with memcmp */, {"scores", "lens"});
  return {};
}

// Quantized weights at benchmark sizes, built fast: e4m3 codes are random bytes with the top
// exponent bit cleared (|value| <= 1.875, subnormals included, never NaN), e2m1 codes random
// nibbles (all valid); UE8M0 scales random in 118..122. Kernel speed does not depend on the
// values; the reference check covers them like any others.
HostTensor quantCodes(Rng& rng, int bits, int64_t rows, int64_t cols) {
  HostTensor t(DType::U8, {rows, bits == 8 ? cols : cols / 2});
  testing::fillRandomBytes(rng, t.bytes.data(), int64_t(t.bytes.size()));
  if (bits == 8)
    for (uint8_t& b : t.bytes) b &= 0xBF;
  return t;
}
HostTensor quantScales(Rng& rng, std::vector<int64_t> shape) {
  HostTensor t(DType::U8, std::move(shape));
  for (uint8_t& b : t.bytes) b = uint8_t(118 + rng.range(0, 5));
  return t;
}

Status buildWeightGemm(BenchCase& c, Rng& rng, Params& p) {
  const int64_t M = p.get("M", 1), N = p.get("N", 1280), K = p.get("K", 5120), bits = p.get("weight_bits", 8),
                G = p.get("groups", 1), epi = p.get("epilogue", 0);
  DI_TRY(p.require(M >= 1 && N >= 1 && K >= 32 && G >= 1 && K % G == 0 && N % G == 0 && (bits == 4 || bits == 8) &&
                       epi >= 0 && epi <= 2,
                   "needs M, N >= 1, K >= 32, groups dividing N and K, weight_bits 4 or 8, epilogue 0..2"));
  const int64_t Kg = K / G;
  const auto pool = bf16NormalPool(rng);
  c.attrs.setInt("weight_bits", bits);
  c.attrs.setInt("groups", G);
  c.attrs.setInt("epilogue", epi);
  c.inputs["x"] = bf16FromPool(rng, pool, {M, K});
  const std::vector<int64_t> scale = bits == 8 ? std::vector<int64_t>{cdiv(N, 32), cdiv(Kg, 32)}
                                               : std::vector<int64_t>{N, Kg / 32};
  c.inputs["w"] = quantCodes(rng, int(bits), N, Kg);
  c.inputs["w_scale"] = quantScales(rng, scale);
  if (epi == 2) {
    c.inputs["w_up"] = quantCodes(rng, int(bits), N, Kg);
    c.inputs["w_up_scale"] = quantScales(rng, scale);
  }
  auto b = denseBytes(c);
  if (!b.ok()) return b.error();
  c.bytes = *b;
  c.flops = 2.0 * double(M) * double(N) * double(Kg) * (epi == 2 ? 2 : 1);
  planRows(c, p, M, 2.0 * double(N) * double(Kg) * (epi == 2 ? 2 : 1), double(N), {"x"});
  return {};
}

// Tokens routed to k distinct experts each, uniformly (every expert gets about T*k/E rows).
Status buildMoeExperts(BenchCase& c, Rng& rng, Params& p) {
  const int64_t T = p.get("T", 1), k = p.get("k", 6), E = p.get("E", 128), C = p.get("C", 5120),
                I = p.get("I", 2304);
  DI_TRY(p.require(T >= 1 && k >= 1 && k <= E && C % 32 == 0 && I % 32 == 0 && C > 0 && I > 0,
                   "needs T >= 1, 1 <= k <= E, C and I positive multiples of 32"));
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<char> usedExpert(static_cast<size_t>(E), 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < k; ++r) {
      int32_t e;
      bool fresh;
      do {  // k distinct experts per token
        e = int32_t(rng.range(0, E));
        fresh = true;
        for (int64_t q = 0; q < r; ++q) fresh = fresh && ids[size_t(t * k + q)] != e;
      } while (!fresh);
      ids[size_t(t * k + r)] = e;
      usedExpert[size_t(e)] = 1;
    }
  const auto pool = bf16NormalPool(rng);
  c.inputs["x"] = bf16FromPool(rng, pool, {T, C});
  c.inputs["ids"] = testing::i32Tensor({T, k}, ids);
  c.inputs["weights"] = testing::f32Uniform(rng, {T, k}, 0.1, 1.5);
  auto experts = [&](const char* name, const char* scale, int64_t rows, int64_t cols) {
    HostTensor codes = quantCodes(rng, 4, E * rows, cols);
    codes.shape = {E, rows, cols / 2};
    c.inputs[name] = std::move(codes);
    c.inputs[scale] = quantScales(rng, {E, rows, cols / 32});
  };
  experts("w1", "w1_scale", I, C);
  experts("w3", "w3_scale", I, C);
  experts("w2", "w2_scale", C, I);
  // Each used expert's weights once, the activations, ids and weights once, y written once.
  const double used = double(std::count(usedExpert.begin(), usedExpert.end(), 1));
  c.bytes = used * 3.0 * double(I) * double(C) * (0.5 + 1.0 / 32) + double(T * C * 2) + double(T * k * 8) +
            double(T * k * C * 4);
  c.flops = 6.0 * double(T * k) * double(I) * double(C);
  planRows(c, p, T, 6.0 * double(k) * double(I) * double(C), double(k * C), {"x", "ids", "weights"});
  return {};
}

}  // namespace

Result<BenchCase> buildCase(const BenchSpec& spec, uint64_t seed) {
  using Builder = Status (*)(BenchCase&, Rng&, Params&);
  static const std::map<std::string, Builder> kBuilders = {
      {"combine_topk_swa", buildCombine}, {"gather_kcache", buildGather},
      {"kv_quant_insert", buildKvQuantInsert}, {"mhc_pre", buildMhc},
      {"mhc_post", buildMhc}, {"mhc_fused_post_pre", buildMhc},
      {"mhc_collapse", buildMhc}, {"sparse_mla_decode", buildDecode},
      {"sparse_mla_prefill", buildPrefill}, {"indexer_logits", buildIndexer},
      {"topk", buildTopk},
      {"weight_gemm", buildWeightGemm}, {"moe_experts", buildMoeExperts},
  };
  auto it = kBuilders.find(spec.op);
  if (it == kBuilders.end()) return Error{fmt::format("no benchmark input builder for op '{}'", spec.op)};
  BenchCase c;
  c.spec = spec;
  // Each shape gets its own stream of random numbers, the same for a given seed on every machine.
  Rng rng(seed ^ fnv1a(spec.op + "|" + spec.shape));
  Params p(spec);
  try {
    DI_TRY(it->second(c, rng, p));
  } catch (const std::exception& e) {  // the test-case helpers throw on generator bugs
    return Error{fmt::format("{} [{}]: building inputs failed: {}", spec.op, spec.shape, e.what())};
  }
  DI_TRY(p.finish());
  return c;
}

}  // namespace deepinfer::bench
