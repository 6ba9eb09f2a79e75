// What a run produced and how it is shown: per-case results (every variant), the summary per
// shape (the sm_80 default as baseline, the sm_86 and local defaults, the tuned = best measured
// candidate), the readable table and the JSON file.
#pragma once
#include <string>
#include <vector>

#include "BenchCase.h"
#include "CaseRunner.h"
#include "Roofline.h"

namespace deepinfer::bench {

struct RunInfo {
  std::string gpuName, arch, driver, nvrtc, commit, date, mode;
  int smCount = 0;
  int64_t l2Bytes = 0, memoryBytes = 0, flushBytes = 0;
  int samples = 0, warmup = 0;
  double delayUs = 0;         // spin kernel before each sample (0: unavailable)
  std::string kernelsError;   // why the benchmark kernels could not be loaded
  uint64_t seed = 0;
  Ceilings ceilings;
  int compiles = 0;
  double seconds = 0;
  bool showCandidates = false;  // --knob: a row per candidate, not only the best
};

struct CaseReport {
  BenchSpec spec;
  double bytes = 0, flops = 0;
  CheckPlan check;
  bool checked = false;       // a reference was computed and outputs compared
  std::string checkNote;      // why not, or which rows
  double buildSeconds = 0, referenceSeconds = 0;
  std::string error;          // the case failed before any variant ran
  std::vector<VariantResult> variants;
};

// Per-row figures derived from the timing, the case and the ceilings (0 where not applicable):
// the floor is the case's bytes at the copy bandwidth or its FLOPs at the mma.sync rate,
// whichever takes longer (floor.bound() says which); rooflineFraction = floor / median.
struct Derived {
  double gbs = 0, tflops = 0, floorUs = 0, rooflineFraction = 0;
  RooflineFloor floor;
};
Derived derive(const CaseReport& c, const VariantResult& v, const Ceilings& ceil);

// The rows a shape's summary compares (null when absent or not timed).
struct CaseSummary {
  const VariantResult* sm80 = nullptr;
  const VariantResult* sm86 = nullptr;
  const VariantResult* local = nullptr;
  const VariantResult* tuned = nullptr;  // best passing candidate (marks it `tuned`)
  // The candidate with the local default's config: the same kernel timed twice, so
  // |difference| / faster is the noise floor below which two variants are not distinguishable.
  const VariantResult* localRepeat = nullptr;
  double repeatSpread = 0;
  int candidates = 0, failedChecks = 0, errors = 0;
};
CaseSummary summarizeCase(CaseReport& c);

bool rowUsable(const VariantResult& v);  // timed, and its check passed or was not run

void printTable(const RunInfo& run, std::vector<CaseReport>& cases);
std::string toJson(const RunInfo& run, std::vector<CaseReport>& cases);

}  // namespace deepinfer::bench
