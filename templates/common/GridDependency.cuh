// Programmatic dependent launch (sm_90+, docs/targets.md §4): the runtime may launch a kernel with
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so that its CTAs become resident while
// the previous kernel of the stream drains. Such a kernel must not touch memory an earlier
// kernel reads or writes before `griddepcontrol.wait`, which returns once every prerequisite
// grid has completed and its memory operations are visible. Every entry of every unit
// therefore calls grid_dependency_sync() as its first statement (a unit test scans for it).
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

__device__ __forceinline__ void grid_dependency_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace di
