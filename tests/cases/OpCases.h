// The GPU test cases of every kernel op. The GPU tests run each case through the generated
// kernel and through runReference (deepinfer/Reference.h) and compare with the library's rule
// for each output (cases/CompareOutputs.h).
//
// Cases are built from a seed (same seed, same bytes): random inputs of realistic scale, never
// all zeros; outputs that are in/out tensors (`k_cache`, `out`) arrive poisoned with random
// bytes so rows a kernel must not touch are checked too. `large` adds cases whose byte offsets
// pass 2^31 (caches of ~2.2 GB whose block tables point at the high pages); every other case
// stays well under 100 MB.
//
// These are test-support functions with no error channel in their signatures: an unknown op
// throws std::invalid_argument, and a case the reference rejects (a generator bug) throws
// std::runtime_error naming the case.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cases/CompareOutputs.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::testing {

struct OpCase {
  std::string name;  // short and unique within the op, e.g. "bs64_window_offset"
  std::string op;
  OpAttrs attrs;
  TensorMap inputs;  // every input, in/out tensors included (poisoned where they are outputs)
};

// Fresh random inputs for `op` (seeded), covering the edges listed in each generator.
std::vector<OpCase> casesFor(const std::string& op, uint64_t seed, bool large);

}  // namespace deepinfer::testing
