// Benchmark inputs come from each op's kernel family (KernelFamily::benchInputs) through the
// measurement core (buildCase): for every registered op, at small and edge shapes, the inputs
// are the same bytes for a seed, fit the op, are accepted by its C++ reference, and hold the
// constraints the op needs (index ranges, sorted and distinct ids, -1 padding, lens, scale bytes,
// codes that are never NaN, caches the writer wrote).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "BenchCase.h"
#include "deepinfer/Formats.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Reference.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

// Small shapes of every op (the model's defaults elsewhere), edge sizes included.
const std::map<std::string, std::vector<BenchSpec>>& smallSpecs() {
  static const std::map<std::string, std::vector<BenchSpec>> specs = [] {
    std::map<std::string, std::vector<BenchSpec>> m;
    auto add = [&](const std::string& op, const std::string& shape, std::map<std::string, int64_t> params) {
      m[op].push_back({op, shape, std::move(params)});
    };
    add("kv_quant_insert", "T=150", {{"T", 150}, {"pages", 8}});
    add("kv_quant_insert", "T=1 bs=3", {{"T", 1}, {"block_size", 3}, {"pages", 1}});
    add("gather_kcache", "300 x3", {{"R", 3}, {"context", 300}});
    add("gather_kcache", "1 x1 bs=16", {{"R", 1}, {"context", 1}, {"block_size", 16}});
    add("combine_topk_swa", "T=96 R=2", {{"T", 96}, {"R", 2}, {"context", 3000}, {"max_model_len", 8192}});
    // A whole prompt: its first tokens see fewer than topk positions, their rows end in -1 padding.
    add("combine_topk_swa", "T=40 whole", {{"T", 40}, {"topk", 20}, {"context", 40}, {"ratio", 1},
                                           {"max_model_len", 256}});
    add("combine_topk_swa", "T=3 R=3", {{"T", 3}, {"R", 3}, {"topk", 8}, {"context", 64}, {"ratio", 4},
                                        {"max_model_len", 256}});
    add("gather_kcache_combine", "T=96 R=2", {{"T", 96}, {"R", 2}, {"context", 3000}, {"max_model_len", 8192}});
    // A whole prompt shorter than the window, ratio 0 (window rows only), block size 2.
    add("gather_kcache_combine", "T=5 whole r0 bs=2", {{"T", 5}, {"topk", 8}, {"window", 16}, {"context", 5},
                                                       {"ratio", 0}, {"max_model_len", 64}, {"block_size", 2}});
    add("sparse_mla_decode", "B=3 H=16", {{"B", 3}, {"H", 16}, {"context_min", 1100}, {"context_max", 2500}});
    add("sparse_mla_decode", "B=1 H=16 exact",
        {{"B", 1}, {"H", 16}, {"swa_k", 64}, {"extra_k", 64}, {"context_min", 128}, {"context_max", 128}});
    add("sparse_mla_prefill", "T=12 H=16",
        {{"T", 12}, {"H", 16}, {"index_topk", 64}, {"kv_rows", 4096}, {"context", 3000}});
    // A whole prompt: early tokens see fewer than index_topk compressed rows and a short window.
    add("sparse_mla_prefill", "T=40 H=16 whole",
        {{"T", 40}, {"H", 16}, {"index_topk", 16}, {"window", 8}, {"kv_rows", 80}, {"context", 40}});
    add("indexer_logits", "T=20 N=600", {{"T", 20}, {"Hi", 8}, {"context", 600}});
    add("indexer_logits", "T=12 whole", {{"T", 12}, {"Hi", 4}, {"context", 6}, {"block_size", 4}});
    add("topk", "T=9 N=2000", {{"T", 9}, {"N", 2000}, {"k", 64}});
    add("topk", "T=1 N=k+1", {{"T", 1}, {"N", 17}, {"k", 16}});
    for (const char* op : {"mhc_pre", "mhc_post", "mhc_fused_post_pre", "mhc_collapse"}) {
      add(op, "T=5 C=256", {{"T", 5}, {"C", 256}});
      add(op, "T=1 C=128", {{"T", 1}, {"C", 128}});
    }
    add("weight_gemm", "fp8 M=5 N=200 K=272", {{"M", 5}, {"N", 200}, {"K", 272}});
    add("weight_gemm", "fp4 M=7 N=96 K=512", {{"M", 7}, {"N", 96}, {"K", 512}, {"weight_bits", 4}});
    add("weight_gemm", "fp8 swiglu M=3 N=64 K=256", {{"M", 3}, {"N", 64}, {"K", 256}, {"epilogue", 2}});
    add("weight_gemm", "fp8 g4 M=2 N=128 K=512", {{"M", 2}, {"N", 128}, {"K", 512}, {"groups", 4}, {"epilogue", 1}});
    add("moe_experts", "T=9 E=8 C=256 I=128", {{"T", 9}, {"E", 8}, {"C", 256}, {"I", 128}});
    add("moe_experts", "T=3 k=E=4", {{"T", 3}, {"k", 4}, {"E", 4}, {"C", 64}, {"I", 32}});
    return m;
  }();
  return specs;
}

std::string where(const BenchSpec& s) { return s.op + " [" + s.shape + "]"; }

template <class T>
std::vector<T> valuesOf(const HostTensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}

std::vector<float> floatsOf(const HostTensor& t) {
  if (t.dtype == DType::F32) return valuesOf<float>(t);
  std::vector<float> v;
  for (uint16_t b : valuesOf<uint16_t>(t)) v.push_back(bf16ToFloat(b));
  return v;
}

void expectWithin(const BenchCase& c, const std::string& name, double lo, double hi) {
  for (float v : floatsOf(c.inputs.at(name)))
    if (!(v >= lo && v <= hi)) return ADD_FAILURE() << where(c.spec) << ": " << name << " holds " << v;
}

void expectFinite(const BenchCase& c, const std::string& name) { expectWithin(c, name, -INFINITY, INFINITY); }

// Token `o` of page `page` of an fp8_ds_mla cache is one the writer wrote: 7 UE8M0 scales in
// 1..254, a zero pad byte, no NaN code among its 448 e4m3 bytes.
bool writtenToken(const HostTensor& cache, int64_t blockSize, int64_t page, int64_t o) {
  const uint8_t* p = cache.ptr<uint8_t>() + page * cache.dim(1);
  const uint8_t* scales = p + blockSize * 576 + o * 8;
  for (int i = 0; i < 7; ++i)
    if (scales[i] == 0 || scales[i] == 0xFF) return false;
  if (scales[7] != 0) return false;
  for (int64_t d = 0; d < 448; ++d)
    if ((p[o * 576 + d] & 0x7F) == 0x7F) return false;
  return true;
}

// The slots of a paged fp8_ds_mla cache that `indices` reference lie in it and hold written tokens.
void expectWrittenSlots(const BenchCase& c, const std::string& indices, const std::string& cache, int64_t bs) {
  const HostTensor& kc = c.inputs.at(cache);
  EXPECT_EQ(kc.dim(1), mlaPageBytes(bs)) << where(c.spec);
  for (int32_t slot : valuesOf<int32_t>(c.inputs.at(indices))) {
    if (slot < 0 || slot >= kc.dim(0) * bs)
      return ADD_FAILURE() << where(c.spec) << ": " << indices << " holds slot " << slot << " outside " << cache;
    if (!writtenToken(kc, bs, slot / bs, slot % bs))
      return ADD_FAILURE() << where(c.spec) << ": " << indices << " slot " << slot << " was never written";
  }
}

// Distinct values in [lo, hi).
void expectDistinctIn(const BenchCase& c, const std::string& what, const std::vector<int64_t>& v, int64_t lo,
                      int64_t hi) {
  std::set<int64_t> seen;
  for (int64_t x : v) {
    if (x < lo || x >= hi) return ADD_FAILURE() << where(c.spec) << ": " << what << " holds " << x << " outside [" << lo << ", " << hi << ")";
    if (!seen.insert(x).second) return ADD_FAILURE() << where(c.spec) << ": " << what << " repeats " << x;
  }
}

template <class T>
std::vector<int64_t> wide(const std::vector<T>& v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

using Check = std::function<void(const BenchCase&)>;

// What each op's inputs must hold (docs/ops.md), beyond what its reference checks.
const std::map<std::string, Check>& constraintChecks() {
  static const std::map<std::string, Check> checks = {
      {"kv_quant_insert",
       [](const BenchCase& c) {
         const int64_t bs = c.attrs.getInt("block_size", 0), pages = c.inputs.at("k_cache").dim(0);
         const auto slots = valuesOf<int64_t>(c.inputs.at("slot_mapping"));
         expectDistinctIn(c, "slot_mapping", slots, 0, pages * bs);  // none skipped (-1)
         for (size_t t = 0; t < slots.size(); ++t)  // consecutive positions of one request
           EXPECT_EQ(slots[t] % bs, int64_t(t) % bs) << where(c.spec) << " token " << t;
         expectFinite(c, "k");
       }},
      {"gather_kcache",
       [](const BenchCase& c) {
         const int64_t bs = c.attrs.getInt("block_size", 0);
         const HostTensor& kc = c.inputs.at("k_cache");
         const auto table = valuesOf<int32_t>(c.inputs.at("block_table"));
         expectDistinctIn(c, "block_table", wide(table), 0, kc.dim(0));
         const auto seq = valuesOf<int32_t>(c.inputs.at("seq_lens"));
         EXPECT_EQ(seq, valuesOf<int32_t>(c.inputs.at("gather_lens"))) << where(c.spec);
         const int64_t maxPages = c.inputs.at("block_table").dim(1);
         for (size_t r = 0; r < seq.size(); ++r)
           for (int64_t pos = 0; pos < seq[r]; ++pos)
             if (!writtenToken(kc, bs, table[r * size_t(maxPages) + size_t(pos / bs)], pos % bs))
               return ADD_FAILURE() << where(c.spec) << ": request " << r << " reads unwritten position " << pos;
       }},
      {"combine_topk_swa",
       [](const BenchCase& c) {
         const auto qsl = valuesOf<int32_t>(c.inputs.at("query_start_loc"));
         const auto seq = valuesOf<int32_t>(c.inputs.at("seq_lens"));
         const auto gather = valuesOf<int32_t>(c.inputs.at("gather_lens"));
         const HostTensor& tk = c.inputs.at("topk_indices");
         const int64_t K = tk.dim(1), N = c.attrs.getInt("N", 0), ratio = c.attrs.getInt("ratio", 0),
                       window = c.attrs.getInt("window", 0);
         ASSERT_EQ(qsl.front(), 0) << where(c.spec);
         ASSERT_EQ(qsl.back(), tk.dim(0)) << where(c.spec);
         int64_t maxQ = 0;
         for (size_t b = 0; b + 1 < qsl.size(); ++b) {
           const int64_t q = qsl[b + 1] - qsl[b];
           maxQ = std::max(maxQ, q);
           ASSERT_GE(q, 1) << where(c.spec);
           ASSERT_GE(seq[b], q) << where(c.spec);
           EXPECT_EQ(gather[b], std::min<int64_t>(seq[b], q + window - 1)) << where(c.spec);
           for (int64_t j = 0; j < q; ++j) {
             const int32_t* row = tk.ptr<int32_t>() + (qsl[b] + j) * K;
             const int64_t visible = std::min<int64_t>((seq[b] - q + j + 1) / ratio, N);
             int64_t n = 0;
             while (n < K && row[n] != -1) ++n;
             EXPECT_EQ(n, std::min(visible, K)) << where(c.spec) << " token " << qsl[b] + j;
             for (int64_t i = 0; i < n; ++i)
               if (row[i] < 0 || row[i] >= visible || (i > 0 && row[i] <= row[i - 1]))
                 return ADD_FAILURE() << where(c.spec) << ": token " << qsl[b] + j << " entry " << i << " = "
                                      << row[i] << " is not sorted and distinct in [0, " << visible << ")";
             for (int64_t i = n; i < K; ++i)
               if (row[i] != -1) return ADD_FAILURE() << where(c.spec) << ": -1 padding is not at the row's end";
           }
         }
         EXPECT_EQ(c.attrs.getInt("M", 0), N + window + maxQ) << where(c.spec);
       }},
      {"gather_kcache_combine",
       [](const BenchCase& c) {
         // Every gathered position is a token the writer wrote, on a page of the table; the rows'
         // lengths are attendPrefill's (the window of each chunk's first token), and the top-k rows
         // hold sorted distinct visible positions, -1 padded at their end.
         const int64_t bs = c.attrs.getInt("block_size", 0), N = c.attrs.getInt("N", 0),
                       ratio = c.attrs.getInt("ratio", 0), window = c.attrs.getInt("window", 0);
         const HostTensor& kc = c.inputs.at("k_cache");
         const auto table = valuesOf<int32_t>(c.inputs.at("block_table"));
         const int64_t maxPages = c.inputs.at("block_table").dim(1);
         const auto qsl = valuesOf<int32_t>(c.inputs.at("query_start_loc"));
         const auto seq = valuesOf<int32_t>(c.inputs.at("seq_lens"));
         const auto gather = valuesOf<int32_t>(c.inputs.at("gather_lens"));
         const HostTensor& tk = c.inputs.at("topk_indices");
         const int64_t K = tk.dim(1);
         ASSERT_EQ(qsl.front(), 0) << where(c.spec);
         ASSERT_EQ(qsl.back(), tk.dim(0)) << where(c.spec);
         int64_t maxQ = 0;
         for (size_t b = 0; b + 1 < qsl.size(); ++b) {
           const int64_t q = qsl[b + 1] - qsl[b];
           maxQ = std::max(maxQ, q);
           ASSERT_GE(q, 1) << where(c.spec);
           ASSERT_GE(seq[b], q) << where(c.spec);
           ASSERT_EQ(gather[b], std::min<int64_t>(seq[b], q + window - 1)) << where(c.spec);
           for (int64_t pos = seq[b] - gather[b]; pos < seq[b]; ++pos) {
             const int32_t page = table[b * size_t(maxPages) + size_t(pos / bs)];
             ASSERT_TRUE(page >= 0 && page < kc.dim(0)) << where(c.spec) << " request " << b << " position " << pos;
             if (!writtenToken(kc, bs, page, pos % bs))
               return ADD_FAILURE() << where(c.spec) << ": request " << b << " reads unwritten position " << pos;
           }
           for (int64_t j = 0; j < q; ++j) {
             const int32_t* row = tk.ptr<int32_t>() + (qsl[b] + j) * K;
             const int64_t visible = ratio > 0 ? std::min<int64_t>((seq[b] - q + j + 1) / ratio, N) : 0;
             int64_t n = 0;
             while (n < K && row[n] != -1) ++n;
             EXPECT_EQ(n, std::min(visible, K)) << where(c.spec) << " token " << qsl[b] + j;
             for (int64_t i = 0; i < n; ++i)
               if (row[i] < 0 || row[i] >= visible || (i > 0 && row[i] <= row[i - 1]))
                 return ADD_FAILURE() << where(c.spec) << ": token " << qsl[b] + j << " entry " << i << " = "
                                      << row[i] << " is not sorted and distinct in [0, " << visible << ")";
           }
         }
         EXPECT_EQ(c.inputs.at("out").dim(1), N + window + maxQ) << where(c.spec);
       }},
      {"sparse_mla_decode",
       [](const BenchCase& c) {
         const int64_t B = c.inputs.at("q").dim(0), swaK = c.inputs.at("swa_indices").dim(2),
                       extK = c.inputs.at("extra_indices").dim(2);
         expectWrittenSlots(c, "swa_indices", "swa_cache", c.attrs.getInt("swa_block_size", 0));
         expectWrittenSlots(c, "extra_indices", "extra_cache", c.attrs.getInt("extra_block_size", 0));
         const auto swa = valuesOf<int32_t>(c.inputs.at("swa_indices"));
         const auto ext = valuesOf<int32_t>(c.inputs.at("extra_indices"));
         for (int64_t b = 0; b < B; ++b) {  // every key of a request valid and distinct
           expectDistinctIn(c, "swa_indices", wide(std::vector<int32_t>(swa.begin() + b * swaK, swa.begin() + (b + 1) * swaK)),
                            0, INT32_MAX);
           expectDistinctIn(c, "extra_indices", wide(std::vector<int32_t>(ext.begin() + b * extK, ext.begin() + (b + 1) * extK)),
                            0, INT32_MAX);
         }
         EXPECT_EQ(valuesOf<int32_t>(c.inputs.at("swa_lens")), std::vector<int32_t>(size_t(B), int32_t(swaK)));
         EXPECT_EQ(valuesOf<int32_t>(c.inputs.at("extra_lens")), std::vector<int32_t>(size_t(B), int32_t(extK)));
         expectFinite(c, "q");
         expectFinite(c, "attn_sink");
       }},
      {"sparse_mla_prefill",
       [](const BenchCase& c) {
         const HostTensor& idx = c.inputs.at("indices");
         const auto lens = valuesOf<int32_t>(c.inputs.at("lens"));
         const int64_t S = c.inputs.at("kv").dim(0), width = idx.dim(1);
         for (int64_t t = 0; t < idx.dim(0); ++t) {
           const int32_t* row = idx.ptr<int32_t>() + t * width;
           int64_t n = 0;
           while (n < width && row[n] != -1) ++n;
           EXPECT_EQ(n, lens[size_t(t)]) << where(c.spec) << " token " << t;
           EXPECT_GE(n, 1) << where(c.spec) << " token " << t;
           for (int64_t i = 0; i < n; ++i)  // compressed rows ascending, then consecutive window rows
             if (row[i] < 0 || row[i] >= S || (i > 0 && row[i] <= row[i - 1]))
               return ADD_FAILURE() << where(c.spec) << ": token " << t << " entry " << i << " = " << row[i]
                                    << " is not ascending in [0, " << S << ")";
           for (int64_t i = n; i < width; ++i)
             if (row[i] != -1) return ADD_FAILURE() << where(c.spec) << ": -1 padding is not at the row's end";
         }
         expectFinite(c, "q");
         expectFinite(c, "kv");
         expectFinite(c, "attn_sink");
       }},
      {"indexer_logits",
       [](const BenchCase& c) {
         const int64_t bs = c.attrs.getInt("block_size", 0);
         const HostTensor& kc = c.inputs.at("k_cache");
         const HostTensor& table = c.inputs.at("block_table");
         expectDistinctIn(c, "block_table", wide(valuesOf<int32_t>(table)), 0, kc.dim(0));
         for (int32_t r : valuesOf<int32_t>(c.inputs.at("token_to_req"))) EXPECT_EQ(r, 0) << where(c.spec);
         int32_t last = 0;
         for (int32_t v : valuesOf<int32_t>(c.inputs.at("visible"))) {
           EXPECT_TRUE(v >= last && v <= table.dim(1) * bs) << where(c.spec) << ": visible " << v;
           last = v;
         }
         for (float v : floatsOf(c.inputs.at("q")))  // e4m3 values, exact in bf16
           if (!(std::fabs(v) <= 448.f && e4m3ToFloat(e4m3Code(v)) == v))
             return ADD_FAILURE() << where(c.spec) << ": q holds " << v << ", not an e4m3 value";
         expectFinite(c, "weights");
         for (int64_t p = 0; p < kc.dim(0); ++p)
           for (int64_t o = 0; o < bs; ++o) {
             const uint8_t* page = kc.ptr<uint8_t>() + p * kc.dim(1);
             float scale;
             std::memcpy(&scale, page + bs * 128 + o * 4, 4);
             int e = 0;
             if (!(scale > 0 && std::frexp(scale, &e) == 0.5f))
               return ADD_FAILURE() << where(c.spec) << ": key scale " << scale << " is not a power of two";
             for (int64_t d = 0; d < 128; ++d)
               if ((page[o * 128 + d] & 0x7F) == 0x7F) return ADD_FAILURE() << where(c.spec) << ": a NaN key code";
           }
       }},
      {"topk",
       [](const BenchCase& c) {
         const int64_t k = c.attrs.getInt("k", 0), N = c.inputs.at("scores").dim(1);
         for (int32_t len : valuesOf<int32_t>(c.inputs.at("lens")))
           EXPECT_TRUE(len > k && len <= N) << where(c.spec) << ": len " << len;
         expectFinite(c, "scores");
       }},
      {"weight_gemm",
       [](const BenchCase& c) {
         const bool fp8 = c.attrs.getInt("weight_bits", 0) == 8;
         for (const char* w : {"w", "w_up"}) {
           if (!c.inputs.count(w)) continue;
           if (fp8)
             for (uint8_t b : c.inputs.at(w).bytes)
               if ((b & 0x7F) == 0x7F) return ADD_FAILURE() << where(c.spec) << ": a NaN e4m3 code in " << w;
           for (uint8_t s : c.inputs.at(std::string(w) + "_scale").bytes)
             if (s < 118 || s > 122) return ADD_FAILURE() << where(c.spec) << ": scale byte " << int(s);
         }
         EXPECT_EQ(c.inputs.count("w_up") != 0, c.attrs.getInt("epilogue", 0) == 2) << where(c.spec);
         expectFinite(c, "x");
       }},
      {"moe_experts",
       [](const BenchCase& c) {
         const HostTensor& ids = c.inputs.at("ids");
         const int64_t E = c.inputs.at("w1").dim(0), k = ids.dim(1);
         const auto v = valuesOf<int32_t>(ids);
         for (int64_t t = 0; t < ids.dim(0); ++t)  // k distinct experts per token
           expectDistinctIn(c, "ids", wide(std::vector<int32_t>(v.begin() + t * k, v.begin() + (t + 1) * k)), 0, E);
         expectWithin(c, "weights", 0.1, 1.5);
         for (const char* s : {"w1_scale", "w3_scale", "w2_scale"})
           for (uint8_t b : c.inputs.at(s).bytes)
             if (b < 118 || b > 122) return ADD_FAILURE() << where(c.spec) << ": " << s << " byte " << int(b);
         expectFinite(c, "x");
       }},
  };
  return checks;
}

// The mHC ops' coefficient ranges (tests/cases/MhcCases.cpp's conventions).
void checkMhc(const BenchCase& c) {
  const std::map<std::string, std::pair<double, double>> ranges = {
      {"post", {0.05, 1.95}}, {"comb", {0.02, 0.5}}, {"pre_in", {0.1, 1.1}}, {"pre", {0.1, 1.1}}, {"scale", {0.5, 1.5}}};
  for (const auto& [name, r] : ranges)
    if (c.inputs.count(name)) expectWithin(c, name, r.first, r.second);
  for (const char* n : {"x", "f_out", "residual", "fn", "base", "norm_weight"})
    if (c.inputs.count(n)) expectFinite(c, n);
  if (c.inputs.count("fn")) EXPECT_EQ(c.attrs.getInt("sinkhorn_iters", 0), 20) << where(c.spec);
}

const Check& checkFor(const std::string& op) {
  static const Check mhc = checkMhc;
  if (op.rfind("mhc_", 0) == 0) return mhc;
  return constraintChecks().at(op);
}

bool sameCase(const BenchCase& a, const BenchCase& b) {
  if (a.inputs.size() != b.inputs.size() || a.bytes != b.bytes || a.flops != b.flops || a.check.kind != b.check.kind ||
      a.check.rows != b.check.rows || a.check.rowInputs != b.check.rowInputs)
    return false;
  for (const auto& [name, t] : a.inputs) {
    auto it = b.inputs.find(name);
    if (it == b.inputs.end() || it->second.dtype != t.dtype || it->second.shape != t.shape || it->second.bytes != t.bytes)
      return false;
  }
  const auto &x = a.attrs.all(), &y = b.attrs.all();
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](const auto& p, const auto& q) {
           return p.first == q.first && p.second.isInt == q.second.isInt && p.second.i == q.second.i &&
                  p.second.f == q.second.f;
         });
}

TEST(BenchInputs, EveryOpHasThemAndAChecklist) {
  for (const KernelFamily* f : allKernelFamilies()) {
    const std::string op = f->opName();
    ASSERT_TRUE(smallSpecs().count(op)) << op << ": add its small benchmark shapes to this test";
    EXPECT_TRUE(op.rfind("mhc_", 0) == 0 || constraintChecks().count(op)) << op << ": add its constraint check";
    for (const BenchSpec& s : smallSpecs().at(op)) {
      auto c = buildCase(s, 1);
      EXPECT_TRUE(c.ok()) << where(s) << ": " << (c.ok() ? "" : c.error().message);
    }
  }
}

TEST(BenchInputs, SameSeedSameBytesOtherSeedOtherBytes) {
  for (const auto& [op, specs] : smallSpecs())
    for (const BenchSpec& s : specs) {
      auto a = buildCase(s, 11), b = buildCase(s, 11), other = buildCase(s, 12);
      ASSERT_TRUE(a.ok() && b.ok() && other.ok()) << where(s);
      EXPECT_TRUE(sameCase(*a, *b)) << where(s);
      bool differs = false;
      for (const auto& [name, t] : a->inputs) differs = differs || t.bytes != other->inputs.at(name).bytes;
      EXPECT_TRUE(differs) << where(s) << ": seeds 11 and 12 gave the same inputs";
    }
}

TEST(BenchInputs, FitTheOpAndTheReferenceAcceptsThem) {
  for (const auto& [op, specs] : smallSpecs())
    for (const BenchSpec& s : specs)
      for (uint64_t seed : {3u, 4u}) {
        auto c = buildCase(s, seed);
        ASSERT_TRUE(c.ok()) << where(s) << ": " << c.error().message;
        auto d = describeOp(op, c->attrs, c->inputs);
        ASSERT_TRUE(d.ok()) << where(s) << ": " << d.error().message;
        EXPECT_GT(c->bytes, 0) << where(s);
        TensorMap io = c->inputs;
        Status r = runReference(op, c->attrs, io);
        EXPECT_TRUE(r.ok()) << where(s) << ": " << (r.ok() ? "" : r.error().message);
        // Every input the op only reads holds finite values where it is floating point.
        const OpSignature* sig = findOpSignature(op);
        for (const auto& [name, t] : c->inputs)
          if ((t.dtype == DType::F32 || t.dtype == DType::BF16) && !sig->findInput(name)->inOut)
            expectFinite(*c, name);
      }
}

TEST(BenchInputs, HoldTheOpsConstraints) {
  for (const auto& [op, specs] : smallSpecs())
    for (const BenchSpec& s : specs)
      for (uint64_t seed : {5u, 6u, 7u}) {
        auto c = buildCase(s, seed);
        ASSERT_TRUE(c.ok()) << where(s) << ": " << c.error().message;
        SCOPED_TRACE(where(s) + " seed " + std::to_string(seed));
        checkFor(op)(*c);
      }
}

// The model's default shapes of the cheaper ops hold the constraints too (the families' defaults).
TEST(BenchInputs, DefaultShapesHoldTheConstraints) {
  for (const char* op : {"kv_quant_insert", "gather_kcache", "combine_topk_swa", "gather_kcache_combine",
                         "sparse_mla_decode", "topk", "indexer_logits", "mhc_fused_post_pre", "weight_gemm"}) {
    auto c = buildCase({op, "default", {}}, 1);
    ASSERT_TRUE(c.ok()) << op << ": " << c.error().message;
    SCOPED_TRACE(op);
    checkFor(op)(*c);
  }
}

TEST(BenchInputs, RowPlanFollowsTheFamilyAndCheckRows) {
  auto full = buildCase({"topk", "small", {{"T", 9}, {"N", 100}, {"k", 8}}}, 1);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->check.kind, CheckPlan::Kind::Full);
  auto rows = buildCase({"topk", "small", {{"T", 9}, {"N", 100}, {"k", 8}, {"check_rows", 3}}}, 1);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->check.kind, CheckPlan::Kind::Rows);
  EXPECT_EQ(rows->check.rows, 3);
  EXPECT_EQ(rows->check.rowInputs, (std::vector<std::string>{"scores", "lens"}));
  // The same inputs either way: the plan does not draw from the generator.
  EXPECT_EQ(rows->inputs.at("scores").bytes, full->inputs.at("scores").bytes);
}

TEST(BenchInputs, BadParametersAreNamed) {
  auto unknown = buildCase({"gather_kcache", "x", {{"contxt", 5}}}, 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("gather_kcache [x]: unknown benchmark parameter 'contxt'"), std::string::npos)
      << unknown.error().message;
  // Ops whose rows are not split take no check_rows.
  auto noRows = buildCase({"combine_topk_swa", "x", {{"check_rows", 4}}}, 1);
  ASSERT_FALSE(noRows.ok());
  EXPECT_NE(noRows.error().message.find("unknown benchmark parameter 'check_rows'"), std::string::npos);
  auto bad = buildCase({"topk", "k>N", {{"T", 4}, {"N", 3}, {"k", 5}}}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("topk [k>N]: needs T >= 1 and N > k >= 1"), std::string::npos)
      << bad.error().message;
  auto op = buildCase({"no_such_op", "x", {}}, 1);
  ASSERT_FALSE(op.ok());
  EXPECT_NE(op.error().message.find("no_such_op"), std::string::npos);
}

}  // namespace
