// A small host emulator of the CUDA execution model, enough to run the quantized-GEMM templates
// (templates/QuantGemmTile.cuh, WeightGemm.cuh, MoeExperts.cuh) on the CPU in tests: every
// thread of a CTA is a fiber (ucontext), __syncthreads and the warp-collective operations
// (mma.sync, shuffles, match.any, ballot) are barriers that exchange the lanes' values, and
// cp.async copies land at the matching cp.async.wait_group (the latest moment the PTX rules
// allow), so a read that does not wait sees stale shared memory. CTAs run one after another;
// shared memory starts filled with garbage.
//
// This is a test harness, not a model of timing: it checks the kernels' data flow (fragment
// layouts, swizzles, scale addressing, row grouping) on a machine without a GPU.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

namespace di_emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// Runs `kernel` for every CTA of `grid` with `block` threads and `smemBytes` of dynamic shared
// memory. Throws std::runtime_error on a deadlock (threads waiting at different barriers).
// CTAs run in grid order (x fastest), or in a permutation of it drawn from `ctaOrderSeed` when
// that is not 0 (a schedule the hardware could also pick: results must not depend on it).
void launch(Dim3 grid, Dim3 block, size_t smemBytes, const std::function<void()>& kernel, uint64_t ctaOrderSeed = 0);

// The current thread's coordinates.
const Dim3& threadIdx();
const Dim3& blockIdx();
const Dim3& blockDim();
const Dim3& gridDim();
uint8_t* dynamic_smem();

void syncthreads();
void syncwarp();
// Warp collectives over all 32 lanes (the templates only use the full mask).
uint32_t shfl_up(uint32_t v, int delta);
uint32_t shfl_xor(uint32_t v, int mask);
uint32_t match_any(uint32_t key);
uint32_t ballot(bool pred);
uint32_t shfl_idx(uint32_t v, int srcLane);
uint32_t reduce_add(uint32_t v);  // __reduce_add_sync: the sum over the warp (mod 2^32)
// D = A * B + C for one m16n8k16 bf16 tile, fragments as the PTX ISA lays them out.
void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]);

// ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: every lane passes a row address (lanes
// 8i..8i+7: rows 0..7 of matrix i; lanes past 8 * count are ignored). Plain: lane l receives, from
// each matrix i, the 32-bit word l % 4 of row l / 4 in r[i]. Transposed: the 16-bit column l / 4
// of rows 2 (l % 4) and 2 (l % 4) + 1 (low, high). Shared memory is read once all lanes have arrived.
void ldmatrix(uint32_t* r, int count, const void* rowAddr, bool trans = false);

// cp.async: `srcBytes` of `cpBytes` copied (the rest zero-filled) when the thread waits for the
// group it is committed in.
void cp_async(void* dst, const void* src, int cpBytes, int srcBytes);
void cp_async_commit();
void cp_async_wait(int pendingGroups);

// bf16 arithmetic as the hardware rounds it (round to nearest even, subnormals kept).
uint32_t bf16x2_mul(uint32_t v, uint32_t f);
uint16_t f32_to_bf16(float f);

}  // namespace di_emu
