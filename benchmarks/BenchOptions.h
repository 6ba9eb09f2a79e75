// Command line of deepinfer-bench.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "BenchCase.h"

namespace deepinfer::bench {

struct BenchOptions {
  std::vector<std::string> ops;  // empty: every op
  std::vector<std::string> cases;  // --case: only these shapes (exact names, e.g. "wq_b M=1")
  // --knob KEY=VALUE: only the candidate configs with these knob values (values of one key are
  // alternatives, different keys must all match; the defaults always run), each candidate
  // printed as its own row.
  std::vector<std::pair<std::string, int64_t>> knobs;
  bool quick = false;            // fewer samples, no candidate sweep
  std::string out;               // JSON path (default benchmarks/results/<gpu-slug>-<date>.json)
  std::string commit;            // --commit, else $DI_GIT_COMMIT, else "unknown"
  int samples = -1;              // unset: 30 (10 with --quick)
  int warmup = -1;               // unset: 3 (2 with --quick)
  uint64_t seed = 0x5EED0B1Cull;
  bool selfTest = false, fullSize = false, list = false, help = false;
};

Result<BenchOptions> parseBenchOptions(int argc, char** argv);
std::string benchUsage();
// The specs selected by --op (every spec when none); an unknown op is an error listing the ops.
Result<std::vector<BenchSpec>> selectSpecs(const std::vector<BenchSpec>& all, const std::vector<std::string>& ops);
// The specs whose shape is one of `cases` (all when empty); a name no spec has is an error.
Result<std::vector<BenchSpec>> selectCases(const std::vector<BenchSpec>& specs, const std::vector<std::string>& cases);

}  // namespace deepinfer::bench
