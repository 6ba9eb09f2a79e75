// The tuner behind `deepinfer-jit tune`: every kernel op the model needs, over its shape buckets
// (its family's bucketAxis and tuneShapes), timed on the local GPU into the tuning cache the JIT
// consults.
//
// Per (op, bucket): the candidates that fit the target at the bucket's representative shape;
// those without a recorded timing for this key are compiled on CPU threads (through the JIT's
// pipeline, so the binary cache is filled with the same keys) while the GPU checks and times the
// ones already compiled. Each candidate is checked against the C++ reference before it is timed
// (only a passing candidate may win) and timed like deepinfer-bench (CUDA events, L2 flushed with
// 2x the L2 and a delay kernel before each sample, median). A warm re-run has nothing to time.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "BenchCase.h"
#include "deepinfer/Device.h"
#include "deepinfer/ShapeBuckets.h"
#include "deepinfer/TuningCache.h"

namespace deepinfer::bench {

// One (op, bucket) to tune: the op's description parameters at the bucket's representative and
// its benchmark inputs' parameters (both from KernelFamily::tuneShapes).
struct TuneItem {
  std::string op;
  ShapeBucket bucket;
  BenchSpec spec;
  ShapeParams shape;
};

// Every tunable op over its buckets, in registry order, kept when the op (and the bucket label)
// is in the filter (an empty filter keeps all).
std::vector<TuneItem> tunePlan(const ModelDims& m, const std::set<std::string>& ops = {},
                               const std::set<std::string>& buckets = {});

// The candidates of an item that fit the target, as config strings (the default too: first when
// the family's list lacks it); or why there are none.
struct TuneCandidates {
  std::optional<OpDesc> desc;
  std::string defaultConfig;
  std::vector<std::string> configs;
  std::string error;
};
TuneCandidates tuneCandidates(const TuneItem& it, const TargetProfile& target);

// Whether an item's benchmark inputs build and fall in its bucket: "" when they do, else why not.
std::string checkTuneInputs(const TuneItem& it);

struct TuneOptions {
  int samples = 30;              // timed runs per candidate (median)
  int warmup = 3;                // untimed runs first
  unsigned jobs = 1;             // CPU threads compiling candidates
  uint64_t seed = 0x5EED0B1C;    // input seed
  bool retime = false;           // time every candidate again
  bool remeasureRoofline = false;
};

// Where the tuner reports (the verb draws it).
class TuneProgress {
 public:
  virtual ~TuneProgress() = default;
  virtual void message(const std::string& line) = 0;  // a result line (stdout)
  virtual void warning(const std::string& line) = 0;  // stderr
  virtual void update(size_t i, const TuneItem& it, size_t done, size_t todo, const std::string& best) = 0;
  virtual void finish(size_t i, const TuneItem& it, const std::string& what) = 0;
};

struct TuneRow {
  std::string op, bucket, note;  // note: why the item was not tuned
  TuningKey key;
};

struct TuneResult {
  std::vector<TuneRow> rows;
  bool worked = false;    // anything was timed or measured (false: a full cache hit)
  size_t timed = 0;       // candidates timed this run
  int failed = 0;         // of them, failing their reference check or erroring (never winners)
  int compiles = 0;       // JIT compiles
  double seconds = 0;
  bool problems = false;  // some item could not be tuned
};

// The best recorded timing of a key ("-" when none), for progress lines.
std::string bestSoFar(const TuningCache& cache, const TuningKey& k);

// Tunes `items` for `target` on the device into `cache` (saved after every item). An error: the
// cache could not be saved, or a candidate broke the CUDA context (the timings so far are saved).
Result<TuneResult> runTuning(const std::shared_ptr<Device>& dev, const TargetProfile& target, TuningCache& cache,
                             const std::vector<TuneItem>& items, const TuneOptions& opts, TuneProgress& progress);

}  // namespace deepinfer::bench
