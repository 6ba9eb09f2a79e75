// What a model of several stages and tensor ranks holds where (docs/parallelism.md §4): each
// rank's layers, GPU, weights and KV capacity, the same per GPU (ranks sharing one GPU add up),
// and in total. The capacity in tokens is the smallest rank's: every stage holds the whole
// context, and every tensor rank of a stage a whole copy of its caches (MLA has one kv head).
// Engine::describe() and `run`'s last line print it. No device code: CPU-tested.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpu/GpuModel.h"

namespace deepinfer {

struct GpuDeviceShare {
  int gpu = 0;
  int ranks = 0;                    // stage ranks on this GPU
  int64_t weightBytes = 0;          // their weights
  int64_t kvBytes = 0;              // their KV pools (GpuKvCapacity::totalBytes)
  int64_t tokens = 0;               // context tokens every rank here can hold (the smallest)
};

// One entry per GPU ordinal, in order of first appearance in `ranks` (stage-major).
std::vector<GpuDeviceShare> gpuShares(const std::vector<GpuStageReport>& ranks);

// "; 2 pipeline stages x 2 tensor ranks; stage 0 rank 0: ...; GPU 0: ...; in total ..." (empty
// for one stage of one rank without a collective).
std::string describeGpuStages(const std::vector<GpuStageReport>& ranks);

}  // namespace deepinfer
