// References of kv_quant_insert (docs/ops.md §2) and gather_kcache (§3).
#include <unordered_map>

#include <fmt/ranges.h>

#include "reference/KvCacheLayout.h"
#include "reference/KvCacheRef.h"
#include "reference/RefOps.h"

namespace deepinfer::ref {

Status kvQuantInsert(RefArgs& a) {
  REF_ASSIGN(bs, a.intAttr("block_size", 1, kMaxBlockSize));
  REF_ASSIGN(k, a.in("k", {anyDim("T"), exactDim(kHeadDim)}));
  const int64_t T = k->dim(0);
  REF_ASSIGN(slots, a.in("slot_mapping", {dimOf("T", T)}));
  const int64_t pageBytes = mlaPageBytes(bs);
  REF_ASSIGN(cache, a.inOut("k_cache",
                            {anyDim("P"), dimOf(fmt::format("page_bytes(block_size={})", bs), pageBytes)}));
  const int64_t P = cache->dim(0);

  // Check every slot before writing anything, so an error leaves the cache as it was.
  const int64_t* slot = slots->ptr<int64_t>();
  std::unordered_map<int64_t, int64_t> firstUse;
  for (int64_t t = 0; t < T; ++t) {
    if (slot[t] == -1) continue;
    if (slot[t] < -1 || slot[t] >= P * bs)
      return a.fail("slot_mapping[{}] = {} is outside [-1, P*block_size = {})", t, slot[t], P * bs);
    // Two tokens in one slot would make the GPU result depend on write order.
    auto [it, fresh] = firstUse.emplace(slot[t], t);
    if (!fresh) return a.fail("slot_mapping[{}] = {} repeats slot_mapping[{}]", t, slot[t], it->second);
  }

  const uint16_t* kb = k->ptr<uint16_t>();
  uint8_t* pages = cache->ptr<uint8_t>();
  for (int64_t t = 0; t < T; ++t) {
    if (slot[t] == -1) continue;
    const int64_t page = slot[t] / bs, offset = slot[t] % bs;
    quantizeKvToken(kb + t * kHeadDim, pages + page * pageBytes, bs, offset);
  }
  return {};
}

namespace {

// gather_kcache into out rows placed by `rowStart(r, m)` (element pointer of row (r, m));
// `outRows(R)` checks the output for R requests and gives its M. Inputs are checked (in the
// order the messages promise) before anything is written.
template <class OutRows, class RowStart>
Status gatherInto(RefArgs& a, OutRows outRows, RowStart rowStart) {
  REF_ASSIGN(bs, a.intAttr("block_size", 1, kMaxBlockSize));
  REF_ASSIGN(offset, a.intAttr("offset", 0, INT32_MAX));
  const int64_t pageBytes = mlaPageBytes(bs);
  REF_ASSIGN(cache,
             a.in("k_cache", {anyDim("P"), dimOf(fmt::format("page_bytes(block_size={})", bs), pageBytes)}));
  const int64_t P = cache->dim(0);
  REF_ASSIGN(seqLens, a.in("seq_lens", {anyDim("R")}));
  const int64_t R = seqLens->dim(0);
  REF_ASSIGN(gatherLens, a.optionalIn("gather_lens", {dimOf("R", R)}));
  REF_ASSIGN(table, a.in("block_table", {dimOf("R", R), anyDim("max_pages")}));
  const int64_t maxPages = table->dim(1);
  REF_ASSIGN(M, outRows(R));

  const int32_t* seq = seqLens->ptr<int32_t>();
  const int32_t* bt = table->ptr<int32_t>();
  auto gatherLen = [&](int64_t r) {
    return gatherLens ? int64_t(gatherLens->ptr<int32_t>()[r]) : int64_t(seq[r]);
  };
  for (int64_t r = 0; r < R; ++r) {
    const int64_t s = seq[r], g = gatherLen(r);
    if (s < 0) return a.fail("seq_lens[{}] = {} is negative", r, s);
    if (g < 0 || g > s) return a.fail("gather_lens[{}] = {} is outside [0, seq_lens[{}] = {}]", r, g, r, s);
    if (offset + g > M)
      return a.fail("request {} gathers {} rows at offset {}, past 'out' dim 1 (M = {})", r, g, offset, M);
    if (g == 0) continue;
    const int64_t lastPage = (s - 1) / bs;
    if (lastPage >= maxPages)
      return a.fail("request {} needs block_table[{}, {}] for position {} but 'block_table' has {} columns",
                    r, r, lastPage, s - 1, maxPages);
    for (int64_t pi = (s - g) / bs; pi <= lastPage; ++pi) {
      const int64_t page = bt[r * maxPages + pi];
      if (page < 0 || page >= P)
        return a.fail("block_table[{}, {}] = {} is not a page of 'k_cache' (P = {}); request {} reads it", r,
                      pi, page, P, r);
    }
  }

  const uint8_t* pages = cache->ptr<uint8_t>();
  for (int64_t r = 0; r < R; ++r) {
    const int64_t s = seq[r], g = gatherLen(r);
    for (int64_t i = 0; i < g; ++i) {
      const int64_t pos = s - g + i;
      const int64_t page = bt[r * maxPages + pos / bs];
      dequantizeKvToken(pages + page * pageBytes, bs, pos % bs, rowStart(r, offset + i));
    }
  }
  return {};
}

}  // namespace

Status gatherKcache(RefArgs& a) {
  uint16_t* o = nullptr;
  int64_t M = 0;
  auto outRows = [&](int64_t R) -> Result<int64_t> {
    REF_ASSIGN(out, a.inOut("out", {dimOf("R", R), anyDim("M"), exactDim(kHeadDim)}));
    o = out->ptr<uint16_t>();
    M = out->dim(1);
    return M;
  };
  return gatherInto(a, outRows, [&](int64_t r, int64_t m) { return o + (r * M + m) * kHeadDim; });
}

Status gatherKcacheStrided(const OpAttrs& attrs, TensorMap& tensors, int64_t outOffset,
                           const std::vector<int64_t>& outShape, const std::vector<int64_t>& outStrides) {
  const OpSignature* sig = findOpSignature("gather_kcache");
  auto full = completeAttrs(*sig, attrs);
  if (!full.ok()) return full.error();
  RefArgs a(*sig, *full, tensors);
  DI_TRY(a.checkSignature());
  HostTensor& buf = tensors.at("out");
  auto outRows = [&](int64_t R) -> Result<int64_t> {
    if (outShape.size() != 3 || outStrides.size() != 3 || outShape[0] != R || outShape[1] < 0 ||
        outShape[2] != kHeadDim || outStrides[2] != 1 || outStrides[0] < 0 || outStrides[1] < 0 || outOffset < 0)
      return a.fail("strided 'out' view: shape [{}] strides [{}] offset {}; expected shape [R={}, M, {}], "
                    "non-negative strides with dim 2 stride 1",
                    fmt::join(outShape, ", "), fmt::join(outStrides, ", "), outOffset, R, kHeadDim);
    const int64_t M = outShape[1];
    if (R > 0 && M > 0) {
      const int64_t end = outOffset + (R - 1) * outStrides[0] + (M - 1) * outStrides[1] + kHeadDim;
      if (end > buf.numel())
        return a.fail("strided 'out' view ends at element {}, past the {} elements of the buffer", end, buf.numel());
    }
    return M;
  };
  return gatherInto(a, outRows, [&](int64_t r, int64_t m) {
    return buf.ptr<uint16_t>() + outOffset + r * outStrides[0] + m * outStrides[1];
  });
}

}  // namespace deepinfer::ref
