// Parameters and CTA geometry of sparse_mla_prefill (docs/ops.md §5). Shared by host C++ (packing,
// shared-memory estimate, launch plan) and the kernel, so the byte counts cannot drift apart.
#pragma once
#include "common/Types.h"

#if defined(__CUDACC__)
#define DI_SMP_HD __host__ __device__
#else
#define DI_SMP_HD
#endif

namespace di {

struct SparseMlaPrefillParams {
  const uint16_t* q;          // [T, H, 512] bf16
  const uint16_t* kv;         // [S, 512] bf16, one KV head shared by every query head
  const int32_t* indices;     // [T, kmax] rows of kv; < 0 or >= S is skipped
  const int32_t* lens;        // [T] entries of each index row in use (clamped to [0, kmax])
  const float* attn_sink;     // [H]
  uint16_t* out;              // [T, H, 512] bf16
  float* lse;                 // [T, H] natural log, +inf for a row with no valid entry
  int64_t num_tokens;         // T
  int64_t kv_rows;            // S
  int32_t num_heads;          // H
  int32_t kmax;               // row length of `indices`
  int32_t head_blocks;        // ceil(H / heads_per_cta); blockIdx.x = t * head_blocks + block
  float scale_log2;           // sm_scale * log2(e): scores are kept in base-2 units
};

// One CTA serves one token and `heads` query heads. The heads form `groups` of 16*mTiles; inside
// a group `dimSplits` warps split the 512 dims: each warp keeps its Q slice in registers (QK^T
// reduction dim) and owns the same dims of the output accumulator (PV output dim). The split QK^T
// partial scores are exchanged through shared memory once per key tile.
struct SparseMlaPrefillGeometry {
  int heads = 0, warps = 0, blockN = 0, stages = 0;
  int mTiles = 0;          // 16-row mma tiles per warp (1 or 2)
  int groups = 0;          // head groups
  int dimSplits = 0;       // warps per group
  int dimsPerWarp = 0;     // 512 / dimSplits
  int loaderThreadsPerRow = 0;
  // With block_n > 16 the owner warp's own partial goes through shared memory as well, so it is
  // not held in registers across the QK^T loop (block_n = 16 configs keep it in registers).
  bool ownerPartialInSmem = false;
  bool valid = false;
  // Shared memory, in bytes, in this order.
  int64_t kvBytes = 0;       // stages x blockN rows x 1024 (swizzled 16-byte chunks)
  int64_t partialBytes = 0;  // split QK^T partials: groups x octets x slots x blockN x 32
  int64_t probBytes = 0;     // bf16 P in mma A-fragment order: heads x blockN x 2
  int64_t rowScaleBytes = 0; // per-head rescale / final scale: heads x 4
  int64_t flagBytes = 0;     // per-stage key validity: stages x blockN x 4
  int64_t smemBytes = 0;

  DI_SMP_HD constexpr int64_t partialOffset() const { return kvBytes; }
  DI_SMP_HD constexpr int64_t probOffset() const { return kvBytes + partialBytes; }
  DI_SMP_HD constexpr int64_t rowScaleOffset() const { return probOffset() + probBytes; }
  DI_SMP_HD constexpr int64_t flagOffset() const { return rowScaleOffset() + rowScaleBytes; }
};

// Static shared memory is limited to 48 KB; above that the kernel takes dynamic shared memory
// (which the runtime opts into per launch).
constexpr int64_t kSparseMlaPrefillStaticSmemLimit = 48 * 1024;

// Geometry for a config; `valid` is false when the knobs do not form a supported CTA shape.
DI_SMP_HD constexpr SparseMlaPrefillGeometry sparseMlaPrefillGeometry(int heads, int warps,
                                                                      int blockN, int stages) {
  SparseMlaPrefillGeometry g;
  g.heads = heads;
  g.warps = warps;
  g.blockN = blockN;
  g.stages = stages;
  if (heads != 16 && heads != 32 && heads != 64) return g;
  if (blockN != 16 && blockN != 32 && blockN != 64) return g;
  if (stages < 2 || stages > 8) return g;
  g.mTiles = heads >= 32 ? 2 : 1;
  g.groups = heads / (16 * g.mTiles);
  if (warps <= 0 || warps % g.groups != 0) return g;
  g.dimSplits = warps / g.groups;
  if (g.dimSplits != 2 && g.dimSplits != 4 && g.dimSplits != 8) return g;
  g.dimsPerWarp = 512 / g.dimSplits;
  // Q slice (mTiles*dims/4 regs) + accumulator (mTiles*dims/2 regs) must leave room to work.
  if (g.mTiles * g.dimsPerWarp > 256) return g;
  const int threads = 32 * warps;
  // The loader gives each thread one key row per tile and a power-of-two share of its 64 chunks.
  if (threads % blockN != 0) return g;
  g.loaderThreadsPerRow = threads / blockN;
  if (g.loaderThreadsPerRow > 64 || 64 % g.loaderThreadsPerRow != 0) return g;
  g.kvBytes = int64_t(stages) * blockN * 1024;
  g.ownerPartialInSmem = blockN > 16;
  const int slots = g.ownerPartialInSmem ? g.dimSplits : g.dimSplits - 1;
  g.partialBytes = int64_t(g.groups) * 2 * g.mTiles * slots * blockN * 32;
  g.probBytes = int64_t(heads) * blockN * 2;
  g.rowScaleBytes = int64_t(heads) * 4;
  g.flagBytes = int64_t(stages) * blockN * 4;
  g.smemBytes = g.kvBytes + g.partialBytes + g.probBytes + g.rowScaleBytes + g.flagBytes;
  // The epilogue stages each warp's 8 x dimsPerWarp bf16 output rows in the (then idle) KV area.
  if (int64_t(warps) * 8 * g.dimsPerWarp * 2 > g.kvBytes) return g;
  g.valid = true;
  return g;
}

}  // namespace di
