// The shapes deepinfer-bench measures (docs/ops.md §10) with the H200 targets, and the small
// shapes of its self-test.
#pragma once
#include <string>
#include <vector>

#include "BenchCase.h"

namespace deepinfer::bench {

// The benchmark shapes of docs/ops.md §10 with the H200 targets (BenchSpecs.cpp).
const std::vector<BenchSpec>& benchSpecs();
// The same ops at shapes small enough for the full CPU reference (the self-test).
std::vector<BenchSpec> selfTestSpecs();
// The ops that have benchmark shapes, in order.
std::vector<std::string> benchOps();

}  // namespace deepinfer::bench
