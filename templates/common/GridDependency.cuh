// Programmatic dependent launch (sm_90+, docs/targets.md §4): the runtime may launch a kernel with
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so that its CTAs become resident while
// the previous kernel of the stream drains. Such a kernel must not touch memory an earlier
// kernel reads or writes before `griddepcontrol.wait`, which returns once every prerequisite
// grid has completed and its memory operations are visible. Every entry of every unit
// therefore calls grid_dependency_sync() as its first statement, or, where it has work that
// touches no such memory (the weight-streaming kernels issue their first weight loads: weights
// are written once at load time, never by a kernel of the stream), grid_dependency_wait() and
// grid_launch_dependents() in its body after that independent prologue, before any read of
// another kernel's output and any global write (a unit test scans for one or the other).
//
// The wait comes first, so the order of a chain A -> B -> C stays transitive: B completes only
// after A has, and C waits for B. The trigger that follows lets the next kernel launch as soon
// as every CTA of this one has started; it cannot see this kernel's results before its own wait.
//
// Compiled for sm_80/sm_86/sm_89 (no griddepcontrol) the call is empty, and the runtime never
// sets the attribute for code compiled below sm_90 (deepinfer/ProgrammaticLaunch.h).
// Without the attribute both instructions are harmless no-ops.
#pragma once

namespace di {

// Returns once every prerequisite grid has completed and its memory is visible.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel of the stream launch once every CTA of this one has issued it (or ended).
__device__ __forceinline__ void grid_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void grid_dependency_sync() {
  grid_dependency_wait();
  grid_launch_dependents();
}

}  // namespace di
