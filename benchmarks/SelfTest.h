// `deepinfer-bench --self-test`: the benchmark's host side on a machine without a GPU. Builds
// every op's inputs, checks that they are what the benchmark claims (valid for the op, never all
// zeros, every row doing all its work as the reference shows), that each target has a kernel
// plan for them, and that a row-subset reference check agrees with the full one.
#pragma once
#include <vector>

#include "BenchCase.h"

namespace deepinfer::bench {

// 0 when every check passed, else 1 (each failure printed).
int runSelfTest(const std::vector<BenchSpec>& specs, uint64_t seed, bool fullSize);

}  // namespace deepinfer::bench
