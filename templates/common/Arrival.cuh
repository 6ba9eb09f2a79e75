// Last-arrival merge in one launch: the CTAs that produce partials of one output unit each count
// themselves on the unit's integer counter after their partial stores, and the CTA that arrives
// last merges every partial (its own too) in a fixed order, so the result does not depend on which
// CTA was last (the same bits as a second launch running the same merge code).
//
// Counters live in the kernel's "__zeroed" workspace: zero when the workspace is allocated (the
// runtime clears it once when it allocates or grows it: runtime/lib/DiOps.cpp, OpRunner.cpp; the
// GPU tests' harness likewise), and set back to zero by the last CTA, so the next launch and every
// replay of a captured graph start from zero again.
//
// Memory ordering (the classic threadfence-reduction pattern): every thread fences its own partial
// stores (__threadfence: visible device-wide before anything it does after), the barrier orders
// all threads' fences before thread 0's atomicAdd; the last CTA's thread 0 fences again after
// seeing the final count, and the barrier publishes the verdict to the CTA. The merge must read
// the other CTAs' partials through L2 (ld.global.cg / __ldcg), never through the non-coherent L1
// or the read-only path.
//
// Under the host SIMT emulator (DI_SIMT_EMU) CTAs run one at a time and fibers switch only at
// barriers, so atomicAdd is a plain read-modify-write and __threadfence a no-op there
// (tests/unit/emu/EmuCuda.h); CTA order is shuffled by the emulator tests to check that the merge
// does not depend on which CTA is last.
#pragma once

namespace di {

// Counts the calling CTA on `*counter`, which reaches `arrivals` when every producer of the unit
// has published. Returns true (CTA-uniform) in the CTA that arrived last, which has set the counter
// back to zero. `verdict` is one int of shared memory the CTA no longer reads (the caller's choice:
// kernels sized against a static 48 KB cap reuse a dead buffer rather than add static shared
// memory). Every thread of the CTA must call it (it holds two barriers).
__device__ __forceinline__ bool cta_arrived_last(unsigned* counter, unsigned arrivals, volatile int* verdict) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned before = atomicAdd(counter, 1u);
    const bool last = before == arrivals - 1u;
    if (last) *counter = 0u;  // every producer has arrived: zero again for the next launch
    *verdict = last ? 1 : 0;
    __threadfence();
  }
  __syncthreads();
  return *verdict != 0;
}

}  // namespace di
