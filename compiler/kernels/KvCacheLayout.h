// Host-side facts of the fp8_ds_mla paged KV cache (docs/ops.md §2) and the validation helpers
// shared by the kv_quant_insert, gather_kcache and combine_topk_swa families.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpShapes.h"

namespace deepinfer::kvcache {

constexpr int64_t kHeadDim = 512;     // bf16 values per key row (448 NoPE + 64 RoPE)
constexpr int64_t kTokenBytes = 576;  // 448 e4m3 + 64 bf16
constexpr int64_t kScaleBytes = 8;    // 7 UE8M0 bytes + 1 pad byte
// Kernels keep in-page arithmetic simple with this bound (a page of 2^20 tokens is ~600 MB).
constexpr int64_t kMaxBlockSize = int64_t(1) << 20;

// Bytes of one page of `bs` tokens: data, scales, zero padding up to a multiple of 576.
constexpr int64_t pageBytes(int64_t bs) { return mlaPageBytes(bs); }
static_assert(pageBytes(64) == 37440 && pageBytes(2) == 1728 && pageBytes(256) == 149760);

// The attention kernels are built for 448 NoPE + 64 RoPE dims: the ops' nope_dim / rope_dim
// attributes (defaults 448 / 64) may not say otherwise.
inline Status expectMlaDims(const OpDesc& d) {
  if (const int64_t n = d.attrs.getInt("nope_dim", 448); n != 448)
    return Error{fmt::format("{}: nope_dim = {}; the kernels need 448 NoPE dims", d.op, n)};
  if (const int64_t r = d.attrs.getInt("rope_dim", 64); r != 64)
    return Error{fmt::format("{}: rope_dim = {}; the kernels need 64 RoPE dims", d.op, r)};
  return {};
}

// Registers are granted per warp in units of 256; CTAs of `threads` that fit one SM by registers.
inline int ctasByRegisters(const TargetProfile& t, int threads, int regsPerThread) {
  const int perWarp = ((regsPerThread * 32 + 255) / 256) * 256;
  return t.facts.regsPerSm / (perWarp * ((threads + 31) / 32));
}

// A required integer attribute, or an error naming the op and the attribute.
inline Result<int64_t> intAttr(const OpDesc& d, const std::string& name) {
  if (!d.attrs.has(name)) return Error{fmt::format("{}: missing attribute '{}'", d.op, name)};
  return d.attrs.getInt(name, 0);
}

// The shape of a required tensor of the given rank.
inline Result<std::vector<int64_t>> shapeOf(const OpDesc& d, const std::string& name, size_t rank) {
  DI_TRY(expectRank(d, name, rank));
  const std::vector<int64_t>& s = d.shapes.at(name);
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < 0)
      return Error{fmt::format("{}: tensor '{}' has a negative extent {} in dim {}", d.op, name, s[i], i)};
  return s;
}

// block_size within [1, kMaxBlockSize].
inline Result<int64_t> blockSizeAttr(const OpDesc& d) {
  auto bs = intAttr(d, "block_size");
  if (!bs.ok()) return bs.error();
  if (*bs < 1 || *bs > kMaxBlockSize)
    return Error{fmt::format("{}: block_size is {}; it must be in 1..{}", d.op, *bs, kMaxBlockSize)};
  return *bs;
}

// A paged cache tensor [P, page_bytes] whose page size matches the block size; returns P.
inline Result<int64_t> checkPagedCache(const OpDesc& d, const std::string& name, int64_t bs) {
  auto s = shapeOf(d, name, 2);
  if (!s.ok()) return s.error();
  const int64_t want = pageBytes(bs);
  if ((*s)[1] != want)
    return Error{fmt::format("{}: {} has {} bytes per page, but block_size {} needs "
                             "ceil({}*584/576)*576 = {}",
                             d.op, name, (*s)[1], bs, bs, want)};
  if ((*s)[0] > INT32_MAX)
    return Error{fmt::format("{}: {} has {} pages; page ids are int32", d.op, name, (*s)[0])};
  return (*s)[0];
}

// The device address bound to a canonical tensor name; `align` > 1 also checks its alignment
// (the kernels move 8- and 16-byte vectors).
inline Result<uint64_t> addrOf(const OpDesc& d, const DeviceAddrMap& addrs, const std::string& name,
                               uint64_t align = 1) {
  auto it = addrs.find(name);
  if (it == addrs.end()) return Error{fmt::format("{}: no device address for tensor '{}'", d.op, name)};
  if (it->second % align != 0)
    return Error{fmt::format("{}: tensor '{}' is at 0x{:x}, which is not {}-byte aligned", d.op, name,
                             it->second, align)};
  return it->second;
}

}  // namespace deepinfer::kvcache
