// topk (docs/ops.md §7, §11): per row t, the indices of the k largest of the first lens[t] scores
// (exact ties: lower index first), sorted ascending by index and padded with -1; a row with
// lens[t] <= k is 0..lens[t]-1 then -1 without looking at the scores.
//
// Radix select, one CTA per row (or per chunk of a row, see below):
//   1. Scores become order-preserving uint32 keys (larger float -> larger key). -0 and +0 map to
//      the same key, since the reference compares floats. NaN (rejected by the reference) is
//      given key 1: below -inf, so NaN scores are the smallest and tie among themselves; key 0
//      is reserved for padding.
//   2. A list of at most POOL keys is copied to shared memory once; longer lists are re-read
//      from global memory (L2) each pass until one bucket's keys fit the pool.
//   3. Passes over RADIX_BITS-wide digits, most significant first: a shared histogram of the
//      digit among keys that match the prefix found so far (warp-aggregated atomics, since
//      scores cluster in few buckets), a CTA scan of the histogram, and the bucket holding the
//      kk-th largest key. A bucket that is taken whole ends the search early.
//   4. The result is a threshold key `thr` and `need_eq`: select every key > thr and the first
//      need_eq keys == thr in index order. One more pass in index order compacts the selected
//      indices with a CTA prefix sum of (greater, equal) counts, which also sorts them.
//
// Rows of at most pool_keys = threads x (4..32) items may instead use the bisection select
// (radix_bits = 1, select_topk_bisect): the row in registers, the threshold found two key bits
// at a time by CTA-wide counts (the last steps over a short shared list of the keys still in
// play), no histogram, atomics or shared pool; the same collect.
//
// Long rows with few rows in the batch use a split plan: step 1 runs the same select on each of
// `splits` chunks of a row and leaves the chunk's top-k as (key, index) pairs in index order
// (padded with key 0); step 2 selects the row's top-k from the concatenated candidates. A row's
// top-k is contained in the union of its chunks' top-k (an element beaten by k others overall is
// beaten by at most k-1 in its own chunk), and the candidates stay in index order, so step 2's
// tie order is the index order.
#pragma once
#include "common/Mma.cuh"
#include "common/Types.h"
#include "params/TopkParams.h"

namespace di {
namespace topk {

enum Step : int { kDirect = 0, kSplitChunk = 1, kSplitMerge = 2 };

// Selects, no branches: a branch on a loaded value ends the run of independent loads before it.
__device__ __forceinline__ uint32_t order_key(float f) {
  uint32_t u = __float_as_uint(f);
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;  // NaN: the smallest real key
  u = u == 0x80000000u ? 0u : u;                     // -0 ties with +0
  const uint32_t key = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return nan ? 1u : key;
}

template <int BINS, int POOL>
struct Smem {
  uint32_t pool[POOL];    // keys of the list (or of the current bucket)
  uint32_t hist[BINS];
  uint32_t scan[2][32];   // per-warp totals of block scans, two buffers used alternately
  int32_t res[3];         // the bucket found: digit, keys still needed from it, its count
  int32_t pool_fill;
};

// Exclusive sum over the CTA of one value per thread; `total` gets the sum. Two consecutive
// calls must use different `buf`s (the caller alternates): the single barrier inside orders a
// call's reads before the next-but-one call's writes.
template <int THREADS>
__device__ __forceinline__ uint32_t block_exclusive_scan(uint32_t v, uint32_t& total,
                                                         uint32_t* buf) {
  constexpr int NW = THREADS / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t x = v;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) buf[warp] = x;
  __syncthreads();
  uint32_t w = lane < NW ? buf[lane] : 0u;
#pragma unroll
  for (int d = 1; d < NW; d *= 2) {
    const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, w, d);
    if (lane >= d) w += y;
  }
  total = __shfl_sync(0xFFFFFFFFu, w, NW - 1);
  const uint32_t before = __shfl_sync(0xFFFFFFFFu, w, (warp + 31) & 31);
  return (warp > 0 ? before : 0u) + x - v;
}

// A row of scores (or a chunk of one): item i is scores[i], index base + i.
struct RowSource {
  const float* row;
  int32_t base;
  bool vec;  // row + i is 16-byte aligned for i % 4 == 0
  __device__ __forceinline__ void load4(int i, int n, uint32_t (&kv)[4]) const {
    if (vec && i + 3 < n) {
      const U32x4 v = ld_global_nc_v4(row + i);
      kv[0] = order_key(__uint_as_float(v.x));
      kv[1] = order_key(__uint_as_float(v.y));
      kv[2] = order_key(__uint_as_float(v.z));
      kv[3] = order_key(__uint_as_float(v.w));
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) kv[j] = i + j < n ? order_key(__ldg(row + i + j)) : 0u;
    }
  }
  // The raw bits of items i..i+3 (0 at or past n), not yet keys: the caller issues every load
  // of its row before converting any, so they are in flight together.
  __device__ __forceinline__ void load4_bits(int i, int n, uint32_t (&b)[4]) const {
    if (vec && i + 3 < n) {
      const U32x4 v = ld_global_nc_v4(row + i);
      b[0] = v.x; b[1] = v.y; b[2] = v.z; b[3] = v.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = i + j < n ? __float_as_uint(__ldg(row + i + j)) : 0u;
    }
  }
  __device__ __forceinline__ int32_t index(int i) const { return base + i; }
};

// Candidates of the split plan: keys and indices as written by the chunk step.
struct CandSource {
  const uint32_t* keys;
  const int32_t* idx;
  bool vec;
  __device__ __forceinline__ void load4(int i, int n, uint32_t (&kv)[4]) const {
    if (vec && i + 3 < n) {
      const U32x4 v = ld_global_nc_v4(keys + i);
      kv[0] = v.x; kv[1] = v.y; kv[2] = v.z; kv[3] = v.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) kv[j] = i + j < n ? __ldg(keys + i + j) : 0u;
    }
  }
  __device__ __forceinline__ int32_t index(int i) const { return __ldg(idx + i); }
};

// Adds one to hist[bin] for every lane with `take`; lanes with the same bin add together.
__device__ __forceinline__ void hist_add(uint32_t* hist, bool take, uint32_t bin) {
  const uint32_t lanes = __ballot_sync(0xFFFFFFFFu, take);
  if (lanes == 0u) return;
  const uint32_t peers = __match_any_sync(0xFFFFFFFFu, take ? bin : 0xFFFFFFFFu);
  const int lane = threadIdx.x & 31;
  if (take && lane == __ffs(peers) - 1) atomicAdd(hist + bin, uint32_t(__popc(peers)));
}

// Selects the k largest keys of items [0, n) of `src` (n > k) and calls
// emit(position, key, item) for each, position = rank of the item in index order among the
// selected (0..k-1). Called by the whole CTA, uniformly.
template <int THREADS, int RADIX_BITS, int POOL, class Source, class Emit>
__device__ __forceinline__ void select_topk(const Source& src, int n, int k,
                                            Smem<(1 << RADIX_BITS), POOL>& sm, Emit emit) {
  constexpr int BINS = 1 << RADIX_BITS;
  constexpr int NPASS = (32 + RADIX_BITS - 1) / RADIX_BITS;
  constexpr int BPT = BINS >= THREADS ? BINS / THREADS : 1;  // bins per scanning thread
  constexpr int ACTIVE = BINS / BPT;                         // threads that own bins
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "threads");
  static_assert(POOL % 4 == 0, "pool holds whole groups of 4");
  const int tid = threadIdx.x, lane = tid & 31;
  int parity = 0;

  // ---- short lists: every key to shared memory once ----
  const bool cached = n <= POOL;
  int pool_n = 0;          // keys the passes read from the pool (when from_pool)
  bool from_pool = cached;
  if (tid == 0) sm.pool_fill = 0;
  if (cached) {
    for (int i = tid * 4; i < n; i += THREADS * 4) {
      uint32_t kv[4];
      src.load4(i, n, kv);
      if (i + 3 < n) {
        *reinterpret_cast<U32x4*>(sm.pool + i) = U32x4{kv[0], kv[1], kv[2], kv[3]};
      } else {
        for (int j = 0; j < 4 && i + j < n; ++j) sm.pool[i + j] = kv[j];
      }
    }
    pool_n = n;
  }

  // ---- radix passes: the threshold key ----
  uint32_t prefix = 0u, pmask = 0u, thr = 0u;
  int kk = k, need_eq = 0;
  bool settled = false;
#pragma unroll 1
  for (int pass = 0; pass < NPASS; ++pass) {
    const int width = pass < NPASS - 1 ? RADIX_BITS : 32 - (NPASS - 1) * RADIX_BITS;
    const int shift = 32 - pass * RADIX_BITS - width;
    const uint32_t dmask = (1u << width) - 1u;
    for (int b = tid; b < BINS; b += THREADS) sm.hist[b] = 0u;
    __syncthreads();  // also publishes the pool
    if (from_pool) {
      // Trip count rounded up to whole warps so every lane reaches the warp-wide votes.
      for (int i = tid; i < ((pool_n + 31) & ~31); i += THREADS) {
        const uint32_t key = i < pool_n ? sm.pool[i] : 0u;
        hist_add(sm.hist, i < pool_n && (key & pmask) == prefix, (key >> shift) & dmask);
      }
    } else {
      for (int i = tid * 4; i < ((n + 127) & ~127); i += THREADS * 4) {
        uint32_t kv[4];
        src.load4(i, n, kv);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          hist_add(sm.hist, i + j < n && (kv[j] & pmask) == prefix, (kv[j] >> shift) & dmask);
      }
    }
    __syncthreads();

    // The bucket holding the kk-th largest matching key: scan of per-thread bin sums, then each
    // thread walks its own bins from high to low.
    uint32_t local = 0u;
    if (tid < ACTIVE) {
#pragma unroll
      for (int j = 0; j < BPT; ++j) local += sm.hist[tid * BPT + j];
    }
    uint32_t total;
    const uint32_t excl = block_exclusive_scan<THREADS>(local, total, sm.scan[parity]);
    parity ^= 1;
    if (tid < ACTIVE) {
      uint32_t above = total - excl - local;  // matching keys in higher bins
#pragma unroll
      for (int j = BPT - 1; j >= 0; --j) {
        const uint32_t c = sm.hist[tid * BPT + j];
        if (above < uint32_t(kk) && above + c >= uint32_t(kk)) {
          sm.res[0] = tid * BPT + j;
          sm.res[1] = kk - int(above);
          sm.res[2] = int(c);
        }
        above += c;
      }
    }
    __syncthreads();
    const uint32_t digit = uint32_t(sm.res[0]);
    const int need = sm.res[1], count = sm.res[2];
    prefix |= digit << shift;
    pmask |= dmask << shift;
    if (count == need) {  // the whole bucket is selected: every key >= prefix
      thr = prefix;
      need_eq = k;
      settled = true;
      break;
    }
    kk = need;
    // A long list: once a bucket fits, its keys move to the pool for the remaining passes.
    if (!from_pool && count <= POOL && pass + 1 < NPASS) {
      for (int i = tid * 4; i < ((n + 127) & ~127); i += THREADS * 4) {
        uint32_t kv[4];
        src.load4(i, n, kv);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const bool take = i + j < n && (kv[j] & pmask) == prefix;
          const uint32_t lanes = __ballot_sync(0xFFFFFFFFu, take);
          if (lanes == 0u) continue;
          int base = 0;
          if (lane == __ffs(lanes) - 1) base = atomicAdd(&sm.pool_fill, __popc(lanes));
          base = __shfl_sync(0xFFFFFFFFu, base, __ffs(lanes) - 1);
          if (take) sm.pool[base + __popc(lanes & ((1u << lane) - 1u))] = kv[j];
        }
      }
      // The next pass's first barrier publishes the pool.
      pool_n = count;
      from_pool = true;
    }
  }
  if (!settled) {
    thr = prefix;  // all 32 bits known: the k-th largest key itself
    need_eq = kk;
  }

  // ---- collect in index order: CTA scan of (greater, equal) counts, 4 items per thread ----
  constexpr int E = 4, TILE = THREADS * E;
  int gt_base = 0, eq_base = 0;
#pragma unroll 1
  for (int t0 = 0; t0 < n; t0 += TILE) {
    const int i0 = t0 + tid * E;
    uint32_t kv[E];
    if (cached) {
      if (i0 + 3 < n) {
        const U32x4 v = *reinterpret_cast<const U32x4*>(sm.pool + i0);
        kv[0] = v.x; kv[1] = v.y; kv[2] = v.z; kv[3] = v.w;
      } else {
#pragma unroll
        for (int j = 0; j < E; ++j) kv[j] = i0 + j < n ? sm.pool[i0 + j] : 0u;
      }
    } else {
      src.load4(i0, n, kv);
    }
    uint32_t cg = 0u, ce = 0u;
#pragma unroll
    for (int j = 0; j < E; ++j) {
      cg += kv[j] > thr ? 1u : 0u;  // padding (key 0) is never > thr or == thr: thr >= 1
      ce += kv[j] == thr ? 1u : 0u;
    }
    uint32_t total;  // a tile has at most 4096 items: 16-bit fields do not overflow
    const uint32_t excl = block_exclusive_scan<THREADS>((cg << 16) | ce, total, sm.scan[parity]);
    parity ^= 1;
    int g = gt_base + int(excl >> 16), e = eq_base + int(excl & 0xFFFFu);
#pragma unroll
    for (int j = 0; j < E; ++j) {
      if (kv[j] > thr) {
        emit(g + min(e, need_eq), kv[j], src.index(i0 + j));
        ++g;
      } else if (kv[j] == thr) {
        if (e < need_eq) emit(g + e, kv[j], src.index(i0 + j));
        ++e;
      }
    }
    gt_base += int(total >> 16);
    eq_base += int(total & 0xFFFFu);
    if (gt_base + min(eq_base, need_eq) >= k) break;  // uniform: all k written
  }
}

// Bisection select (radix_bits = 1), for rows of at most THREADS * KPT items held in registers:
// thread tid owns items q * THREADS * 4 + 4 * tid + j (q < KPT / 4, j < 4), the collect tiles'
// layout. The threshold is the largest key t with count(key >= t) >= k, found two bits at a time
// from the top: each step counts the keys >= each of the three candidates thr | x << sh
// (x = 1..3; per thread, then __reduce_add_sync per warp, one barrier, then the warp totals) and
// keeps the largest candidate whose count is >= k, which is what two one-bit steps would keep,
// at half the barriers (16 steps: the chain of dependent barriers and reductions is what a
// step costs). The row is read from memory once (every load issued before any is used) and no
// step uses atomics or a histogram. A step whose kept count is exactly k ends the search: the
// keys >= that candidate are the selection.
//
// The keys that can still move the count lie in [lo, hi): lo the last accepted candidate (1
// before any), hi the last rejected one (2^32 before any); their number is known from those two
// steps' counts. Once it is at most 2 * THREADS, they are copied once to shared memory (a CTA
// scan places them) and the remaining steps count over that list, plus the keys >= hi, instead
// of over every key of the row. Then the same index-order collect as select_topk.
template <int THREADS, int KPT, class Emit>
__device__ __forceinline__ void select_topk_bisect(const RowSource& src, int n, int k, Emit emit) {
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "threads");
  static_assert(KPT % 4 == 0 && KPT >= 4, "whole tiles of 4 items per thread");
  // Two counts share a word as 16-bit fields (a count is at most the row's THREADS * KPT items).
  static_assert(THREADS * KPT < 65536, "counts fit 16 bits");
  constexpr int NT = KPT / 4, TILE = THREADS * 4, NW = THREADS / 32, LIVE_CAP = 2 * THREADS;
  __shared__ uint32_t s_cnt[2][2][32];  // warp counts of a step (two words), two buffers used alternately
  __shared__ uint32_t s_scan[2][32];  // block_exclusive_scan's buffers (compaction, collect)
  __shared__ uint32_t s_live[LIVE_CAP];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  uint32_t key[NT][4];  // items at or past n are key 0, below every real key (>= 1)
#pragma unroll
  for (int q = 0; q < NT; ++q) src.load4_bits(q * TILE + 4 * tid, n, key[q]);
#pragma unroll
  for (int q = 0; q < NT; ++q)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      key[q][j] = q * TILE + 4 * tid + j < n ? order_key(__uint_as_float(key[q][j])) : 0u;

  int par = 0, sp = 0;
  // The CTA-wide sums of two values per thread; uniform. Buffer par is rewritten two calls
  // later, after every thread has passed the next call's barrier, so its reads here are done.
  auto cta_sum2 = [&](uint32_t v0, uint32_t v1, uint32_t& t0, uint32_t& t1) {
    const uint32_t w0 = __reduce_add_sync(0xFFFFFFFFu, v0);
    const uint32_t w1 = __reduce_add_sync(0xFFFFFFFFu, v1);
    if (lane == 0) {
      s_cnt[par][0][warp] = w0;
      s_cnt[par][1][warp] = w1;
    }
    __syncthreads();
    t0 = __reduce_add_sync(0xFFFFFFFFu, lane < NW ? s_cnt[par][0][lane] : 0u);
    t1 = __reduce_add_sync(0xFFFFFFFFu, lane < NW ? s_cnt[par][1][lane] : 0u);
    par ^= 1;
  };
  auto cta_sum = [&](uint32_t v) {
    uint32_t t0, t1;
    cta_sum2(v, 0u, t0, t1);
    return t0;
  };
  bool compact = false;      // uniform: the steps count over s_live
  uint32_t live_n = 0u, above = 0u;  // after compaction: keys in s_live, keys >= hi then
  auto count_ge = [&](uint32_t cand) {
    uint32_t c = 0u;
    if (compact) {
      for (int i = tid; i < int(live_n); i += THREADS) c += s_live[i] >= cand ? 1u : 0u;
      return above + cta_sum(c);
    }
    uint32_t c1 = 0u;
#pragma unroll
    for (int q = 0; q < NT; ++q) {
      c += (key[q][0] >= cand ? 1u : 0u) + (key[q][1] >= cand ? 1u : 0u);
      c1 += (key[q][2] >= cand ? 1u : 0u) + (key[q][3] >= cand ? 1u : 0u);
    }
    return cta_sum(c + c1);
  };
  // Counts of the keys >= base | x << sh for x = 1, 2, 3 (n1 >= n2 >= n3).
  auto count_ge3 = [&](uint32_t base, int sh, uint32_t& n1, uint32_t& n2, uint32_t& n3) {
    const uint32_t c1 = base | (1u << sh), c2 = base | (2u << sh), c3 = base | (3u << sh);
    uint32_t p12 = 0u, p3 = 0u;  // n1 | n2 << 16, n3
    auto tally = [&](uint32_t x) {
      p12 += (x >= c1 ? 1u : 0u) + (x >= c2 ? 0x10000u : 0u);
      p3 += x >= c3 ? 1u : 0u;
    };
    if (compact) {
      for (int i = tid; i < int(live_n); i += THREADS) tally(s_live[i]);
    } else {
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j) tally(key[q][j]);
    }
    uint32_t t12, t3;
    cta_sum2(p12, p3, t12, t3);
    const uint32_t add = compact ? above : 0u;
    n1 = (t12 & 0xFFFFu) + add;
    n2 = (t12 >> 16) + add;
    n3 = t3 + add;
  };

  uint32_t thr = 0u;
  uint64_t hi = uint64_t(1) << 32;
  uint32_t c_lo = uint32_t(n), c_hi = 0u;  // keys >= max(thr, 1) (all n real keys), keys >= hi
  int need_eq = k;
  bool exact = false;
#pragma unroll 1
  for (int sh = 30; sh >= 0; sh -= 2) {  // bits sh + 1 and sh
    uint32_t n1, n2, n3;
    count_ge3(thr, sh, n1, n2, n3);
    const uint32_t kk = uint32_t(k);
    const int x = n3 >= kk ? 3 : n2 >= kk ? 2 : n1 >= kk ? 1 : 0;  // the largest kept candidate
    if (x < 3) {  // candidate x + 1 is rejected
      hi = uint64_t(thr | (uint32_t(x + 1) << sh));
      c_hi = x == 0 ? n1 : x == 1 ? n2 : n3;
    }
    if (x > 0) {
      const uint32_t c = x == 1 ? n1 : x == 2 ? n2 : n3;
      thr |= uint32_t(x) << sh;
      c_lo = c;
      if (c == kk) {  // exactly k keys >= thr: all of them, ties included
        exact = true;
        break;
      }
    }
    if (!compact && sh > 0 && c_lo - c_hi <= uint32_t(LIVE_CAP)) {
      // Copy the keys of [lo, hi) to s_live, in any order (only their counts matter).
      const uint32_t lo = thr > 0u ? thr : 1u;
      uint32_t mine = 0u;
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j) mine += key[q][j] >= lo && uint64_t(key[q][j]) < hi ? 1u : 0u;
      uint32_t total;  // == c_lo - c_hi
      uint32_t at = block_exclusive_scan<THREADS>(mine, total, s_scan[sp]);
      sp ^= 1;
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (key[q][j] >= lo && uint64_t(key[q][j]) < hi) s_live[at++] = key[q][j];
      __syncthreads();
      live_n = total;
      above = c_hi;
      compact = true;
    }
  }
  // n > k real keys are >= 1, so thr >= 1 and padding (key 0) is never selected. Keys are at
  // most 0xFF800000 (+inf), so thr + 1 does not wrap.
  if (!exact) need_eq = k - int(count_ge(thr + 1u));

  int gt_base = 0, eq_base = 0;
#pragma unroll
  for (int q = 0; q < NT; ++q) {
    if (q * TILE >= n) break;  // uniform
    const int i0 = q * TILE + 4 * tid;
    uint32_t cg = 0u, ce = 0u;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      cg += key[q][j] > thr ? 1u : 0u;
      ce += key[q][j] == thr ? 1u : 0u;
    }
    uint32_t total;  // a tile has at most 4096 items: 16-bit fields do not overflow
    const uint32_t excl = block_exclusive_scan<THREADS>((cg << 16) | ce, total, s_scan[sp]);
    sp ^= 1;
    int g = gt_base + int(excl >> 16), e = eq_base + int(excl & 0xFFFFu);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (key[q][j] > thr) {
        emit(g + min(e, need_eq), key[q][j], src.index(i0 + j));
        ++g;
      } else if (key[q][j] == thr) {
        if (e < need_eq) emit(g + e, key[q][j], src.index(i0 + j));
        ++e;
      }
    }
    gt_base += int(total >> 16);
    eq_base += int(total & 0xFFFFu);
    if (gt_base + min(eq_base, need_eq) >= k) break;  // uniform: all k written
  }
}

}  // namespace topk

// The radix plans: RADIX_BITS per pass (8 or 11), POOL keys cached in shared memory.
template <int THREADS, int RADIX_BITS, int POOL, int STEP>
__device__ __forceinline__ void topk_kernel_radix(const TopkParams& p) {
  using namespace topk;
  __shared__ __align__(16) Smem<(1 << RADIX_BITS), POOL> sm;
  const int tid = threadIdx.x;
  const int row = STEP == kSplitChunk ? blockIdx.y : blockIdx.x;
  if (row >= p.num_rows) return;
  const int N = p.row_len, k = p.k;
  const int L = min(max(__ldg(p.lens + row), 0), N);
  const float* srow = p.scores + int64_t(row) * N;

  if constexpr (STEP == kSplitChunk) {
    if (L <= k) return;  // the merge step writes the trivial row
    const int64_t cbase = (int64_t(row) * p.splits + blockIdx.x) * k;
    uint32_t* okeys = p.cand_keys + cbase;
    int32_t* oidx = p.cand_idx + cbase;
    const int s0 = int(blockIdx.x) * p.chunk_len;
    const int m = max(0, min(L - s0, p.chunk_len));
    if (m <= k) {  // the whole chunk is a candidate; pad with key 0
      for (int i = tid; i < k; i += THREADS) {
        okeys[i] = i < m ? order_key(__ldg(srow + s0 + i)) : 0u;
        oidx[i] = i < m ? s0 + i : -1;
      }
      return;
    }
    const RowSource src{srow + s0, s0, (N & 3) == 0 && (p.chunk_len & 3) == 0};
    auto emit = [&](int pos, uint32_t key, int32_t index) {
      okeys[pos] = key;
      oidx[pos] = index;
    };
    select_topk<THREADS, RADIX_BITS, POOL>(src, m, k, sm, emit);
  } else {
    int32_t* out = p.indices + int64_t(row) * k;
    if (L <= k) {  // everything is selected: no scoring needed
      for (int i = tid; i < k; i += THREADS) out[i] = i < L ? i : -1;
      return;
    }
    auto emit = [&](int pos, uint32_t, int32_t index) { out[pos] = index; };
    if constexpr (STEP == kDirect) {
      const RowSource src{srow, 0, (N & 3) == 0};
      select_topk<THREADS, RADIX_BITS, POOL>(src, L, k, sm, emit);
    } else {
      const int64_t cbase = int64_t(row) * p.splits * k;
      const CandSource src{p.cand_keys + cbase, p.cand_idx + cbase, (k & 3) == 0};
      select_topk<THREADS, RADIX_BITS, POOL>(src, p.splits * k, k, sm, emit);
    }
  }
}

// THREADS per CTA; RADIX_BITS: 1 for the bisection select (POOL = the row items held in
// registers, THREADS x keys per thread), else bits per radix pass (8 or 11, POOL keys cached in
// shared memory); STEP: the plan step (topk::kDirect, kSplitChunk, kSplitMerge).
template <int THREADS, int RADIX_BITS, int POOL, int STEP>
__device__ __forceinline__ void topk_kernel(const TopkParams& p) {
  using namespace topk;
  if constexpr (RADIX_BITS == 1) {
    // Bisection: one CTA per row of at most POOL items, held in registers (no pool, no
    // histogram); the family allows it only with splits = 1 and N <= POOL.
    static_assert(STEP == kDirect, "the bisection select runs only as the direct plan");
    static_assert(POOL % THREADS == 0, "pool_keys is THREADS x keys per thread");
    const int tid = threadIdx.x;
    const int row = blockIdx.x;
    if (row >= p.num_rows) return;
    const int N = p.row_len, k = p.k;
    const int L = min(max(__ldg(p.lens + row), 0), N);
    int32_t* out = p.indices + int64_t(row) * k;
    if (L <= k) {  // everything is selected: no scoring needed
      for (int i = tid; i < k; i += THREADS) out[i] = i < L ? i : -1;
      return;
    }
    const RowSource src{p.scores + int64_t(row) * N, 0, (N & 3) == 0};
    select_topk_bisect<THREADS, POOL / THREADS>(src, L, k,
                                                [&](int pos, uint32_t, int32_t index) { out[pos] = index; });
  } else {
    topk_kernel_radix<THREADS, RADIX_BITS, POOL, STEP>(p);
  }
}

}  // namespace di
