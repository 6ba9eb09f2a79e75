// deepinfer-model-bench's speculative-decoding rows (DSpark, docs/dspark.md) without the GPU:
// what one measurement reports, the oracle's drafts and the check that every oracle step
// accepted exactly the forced number of drafts, the table and the JSON. ModelBenchSpec.cpp runs
// the measurements; this part is unit-tested.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::bench {

// One measurement at S streams (speculative requests stepped together, one GpuModel call per
// step), the median of `repeats` blocks of `steps` steps on fresh requests.
struct SpecRow {
  int streams = 0;
  std::string kind;          // "record" (the oracle's continuation: greedy speculative steps with the
                             // draft model's drafts, untimed), "plain" (no drafts: verify [next] only),
                             // "draft" (the draft pass alone), "oracle" (the recorded continuation as
                             // drafts, the one after `forced` made wrong), "model" (the draft model's drafts)
  int forced = -1;           // oracle: drafts accepted per step by construction (B: all); -1 otherwise
  int steps = 0;             // timed steps per repetition ("record": the steps it took)
  double stepMs = 0;         // per step ("model", "record": draft pass + verify; "oracle": verify only)
  double meanAccepted = 0;   // drafts accepted per step per stream, as measured
  int minAccepted = 0;       // the fewest and most one stream accepted in one step
  int maxAccepted = 0;
  int64_t mismatchedSteps = 0;  // oracle: stream-steps that accepted other than `forced` or emitted other
                                // tokens than the recorded continuation (any makes the row an error)
  double tokPerS = 0;        // streams x tokens per step / time per step ("oracle": + a draft pass)
  std::string error;
};

// Tokens of continuation per stream that `steps` oracle steps need when every draft is right:
// the first token (from the prompt's last row) and B + 1 per step (the drafts and the bonus).
int64_t oracleContinuationLength(int steps, int blockSize);

// The drafts of an oracle step whose anchor is continuation[at - 1]: continuation[at .. at+B),
// with the one at index `forced` made wrong ((id + 1) mod V) unless forced == B. Empty when the
// continuation is too short.
std::vector<int32_t> oracleDrafts(const std::vector<int32_t>& continuation, int64_t at, int forced, int blockSize,
                                  int64_t vocab);

// Empty when an oracle step accepted exactly `forced` drafts and emitted continuation[at ..
// at+forced] (the right drafts and the target's own token after them); otherwise what differs.
std::string oracleStepMismatch(const std::vector<int32_t>& continuation, int64_t at, int forced, int accepted,
                               const std::vector<int32_t>& emitted);

// Acceptance over the steps of one measurement.
class AcceptTally {
 public:
  void add(int accepted);                                   // one stream's timed step
  void mismatch(int stream, int step, const std::string& what);  // an oracle step that left the recording
  // Fills meanAccepted / minAccepted / maxAccepted / mismatchedSteps of `row` (S streams); an
  // oracle row whose steps did not all accept exactly `forced` gets an error saying so.
  void finish(SpecRow& row) const;

 private:
  int64_t steps_ = 0, accepted_ = 0, mismatched_ = 0;
  int min_ = 0, max_ = 0;
  std::string firstMismatch_;
};

void printSpecRows(const std::vector<SpecRow>& rows, int blockSize);
std::string specRowsJson(const std::vector<SpecRow>& rows);

}  // namespace deepinfer::bench
