// Command line of deepinfer-model-bench.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/ProgrammaticLaunch.h"

namespace deepinfer::bench {

struct ModelBenchOptions {
  std::string model;                         // --model DIR (this or --synthetic)
  std::string synthetic;                     // --synthetic flash: the full-depth model, synthetic weights
  int experts = 0;                           // --experts N with --synthetic (0: as many as fit)
  std::string out;                           // JSON path (default benchmarks/results/model-<gpu>-<date>.json)
  std::string commit;                        // --commit, else $DI_GIT_COMMIT, else the build's git hash
  std::vector<int64_t> contexts{16384, 65536};
  std::vector<int> streams{1, 4, 12};
  int decodeSteps = 32;
  int64_t chunk = 1024;                      // prefill chunk tokens (GpuModelOptions::maxChunkTokens)
  int64_t promptTokens = 512;                // prompt of every decode stream
  int64_t kvBytes = 0;                       // KV cache budget; 0: what fits
  int repeats = 3;                           // timed repetitions of each decode measurement (median)
  uint64_t seed = 0x5EED70C5ull;
  bool quick = false, help = false;
  bool speculative = true;                   // --no-speculative skips the DSpark measurements
  bool pdl = programmaticLaunchDefault();    // --pdl on|off (JitOptions::programmaticLaunch)
  // --long-context N: instead of the contexts and streams above, one request prefilled to N tokens
  // with the KV cache sized for it (ModelLongContext.h): prefill per segment, time to first
  // token, single-stream decode at each decode context and at N.
  int64_t longContext = 0;
  std::vector<int64_t> decodeContexts{16384, 131072};  // --decode-contexts (each below N)
  int64_t segment = 131072;                  // --segment: prefill reported per this many positions
  int64_t timeBudget = 0;                    // --time-budget S: stop the long prefill after S s of the run (0: none)
  int tp = 1;                                // --tp N: tensor ranks (GpuModelOptions::tp), one GPU each when visible
  // Decode tokens of one decode measurement: 2 untimed steps, then repeats x decode-steps.
  int64_t decodeTokens() const { return 2 + int64_t(repeats) * decodeSteps; }
};

// Parses argv; --quick replaces the sizes the user did not set with small ones.
Result<ModelBenchOptions> parseModelBenchOptions(int argc, char** argv);
std::string modelBenchUsage();

}  // namespace deepinfer::bench
