// The on-disk tuning cache: for one GPU + software stack (the metadata below), every candidate
// config's measured time per (target, op, dtypes, shape bucket) and the winner chosen from them.
//
// Key (docs/caches.md): GPU name, compute capability, SM count, driver version, NVRTC
// version and kGeneratorVersion form the file's metadata; target name (e.g. "local", "sm_80" for
// that specialization's PTX run on this GPU), op, dtypes, shape bucket (ShapeBuckets.h) and the
// op's model dimensions (TuningDims.h: heads, index widths, block sizes, ...) key an entry inside
// it. Timings are stored per config string, so a new candidate is timed alone and
// the others keep their timings.
//
// Files: <BinaryCache dir>/tuning/<first 16 hex of sha256(metadata)>.json, JSON with a format
// tag, the metadata, the entries, the measured roofline and a SHA-256 of the content. Written by
// staging + fsync + atomic rename. Policy on read:
//   - corrupt (unparsable, bad hash, missing fields): a warning, treated as empty, replaced on save;
//   - a definite mismatch (another GPU, driver, NVRTC, generator version, or another format):
//     ignored with a warning and never overwritten (save refuses);
//   - unknown fields: ignored, and dropped when the file is next saved.
//
// Hysteresis: a challenger replaces the recorded winner only when its median is below the
// winner's median by more than `margin` (default 3%); near-ties keep the incumbent, so runs do
// not flip between two configs. A winner whose own timing is missing, failed its reference check
// or errored is replaced by the fastest passing candidate outright.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/TargetProfile.h"

namespace deepinfer {

// Bump whenever generated kernels change speed for the same config string (a template, a
// family's emission or launch plan, the meaning of a config knob) or the tuning key changes:
// tuning files written for an older value are then ignored (and left on disk) rather than
// reused. 2: entries keyed by the op's model dimensions too (TuningDims.h).
inline constexpr int kGeneratorVersion = 2;

struct TuningMetadata {
  std::string gpuName;
  int computeCapability = 0;  // 90 for 9.0
  int smCount = 0;
  std::string driverVersion;
  std::string nvrtcVersion;
  int generatorVersion = kGeneratorVersion;

  // The local GPU's metadata (profile from localGpu(): name, arch, SMs, driver; this NVRTC).
  static TuningMetadata forLocalGpu(const TargetProfile& local);
  // Fields that differ from `o`, e.g. {"gpu", "driver"} (empty: the same key).
  std::vector<std::string> differences(const TuningMetadata& o) const;
  // First 16 hex digits of the SHA-256 of the metadata: the file name.
  std::string hash() const;
  std::string describe() const;  // "NVIDIA H200 (cc 90, 132 SMs), driver 13.0, NVRTC 13.0, generator 1"
  bool operator==(const TuningMetadata& o) const { return differences(o).empty(); }
};

struct TuningKey {
  std::string target;  // "local" or a preset name ("sm_80", ...)
  std::string op;
  std::string dtypes;  // opDtypes(op)
  std::string bucket;  // ShapeBucket::label()
  std::string dims;    // tuningDims(desc), e.g. "H=64,Sq=1,swa_k=128,extra_k=512,swa_bs=64,extra_bs=64"
  std::string str() const;  // "local|sparse_mla_decode|BF16,...|B=5..8|H=64,..."
  bool operator<(const TuningKey& o) const { return str() < o.str(); }
};

struct CandidateTiming {
  double medianUs = 0, minUs = 0, p90Us = 0;
  int samples = 0;
  bool checked = false;  // compared with the C++ reference
  bool checkOk = false;  // and matched it
  std::string error;     // compile/launch failure or the failed check's detail
  std::string measuredAt;  // UTC, ISO 8601
  // May win: timed, checked against the reference and matching it, no error.
  bool eligible() const { return samples > 0 && checked && checkOk && error.empty(); }
};

struct TuningEntry {
  std::string defaultConfig;  // the family's default for the bucket's shape, as tuned
  std::string winner;         // "" until a candidate passed
  std::string shape;          // the shape it was tuned at, e.g. "B=8"
  double bytes = 0, flops = 0;  // the least the op moves / computes there (for roofline fractions)
  std::map<std::string, CandidateTiming> timings;  // by configToString
};

struct StoredRoofline {
  double copyGBs = 0;    // 0: not measured
  double mmaTflops = 0;  // mma.sync bf16, fp32 accumulate
  std::string measuredAt;
};

class TuningCache {
 public:
  // <BinaryCache::defaultDir()>/tuning.
  static std::string defaultDir();
  // Reads this metadata's file in `dir` (created 0700 if missing); never fails on a bad file:
  // `warnings` receive what was wrong and the cache starts empty. Fails only when the directory
  // cannot be created or is not ours.
  static Result<TuningCache> open(const TuningMetadata& md, const std::string& dir = defaultDir(),
                                  std::vector<std::string>* warnings = nullptr);

  const TuningMetadata& metadata() const { return md_; }
  const std::string& path() const { return path_; }
  // The file on disk belongs to another key (definite mismatch): save() refuses to touch it.
  bool foreignFile() const { return foreign_; }

  double margin() const { return margin_; }
  void setMargin(double m) { margin_ = m; }

  const TuningEntry* find(const TuningKey& k) const;
  const std::map<TuningKey, TuningEntry>& entries() const { return entries_; }
  // The configs of `candidates` that have no recorded timing for `k` (a new candidate is timed
  // alone).
  std::vector<std::string> untimed(const TuningKey& k, const std::vector<std::string>& candidates) const;
  void setDefault(const TuningKey& k, const std::string& config);
  // The entry for `k`, created empty when missing (record() keeps its winner up to date; set
  // timings through record()).
  TuningEntry& entry(const TuningKey& k) { return entries_[k]; }
  // Stores (replaces) one config's timing, then applies the hysteresis rule. Returns true when
  // the winner changed.
  bool record(const TuningKey& k, const std::string& config, const CandidateTiming& t);
  // The recorded winner's config string for `k`, if any.
  std::optional<std::string> winner(const TuningKey& k) const;

  const StoredRoofline& roofline() const { return roofline_; }
  void setRoofline(const StoredRoofline& r) { roofline_ = r; }

  // Writes the file atomically (stage in the directory, fsync, rename); refuses to overwrite a
  // foreign file.
  Status save() const;

  // The serialized file (what save() writes).
  std::string serialize() const;
  // The content hash a file must carry for the JSON text of its "content" member (canonical form:
  // keys sorted, numbers as written by the serializer). Errors on unparsable text.
  static Result<std::string> contentHash(const std::string& contentJson);
  // A file's metadata after checking its format and content hash (for import), or why not.
  static Result<TuningMetadata> inspect(const std::string& fileText);
  // Installs a tuning file into `dir` atomically after inspect(); `name` must be its key's file
  // name. An existing different file is kept unless `replace`. Returns whether it was written.
  static Result<bool> importFile(const std::string& dir, const std::string& name, const std::string& text,
                                 bool replace);
  // The tuning files (<16 hex>.json) in `dir`.
  static std::vector<std::string> listFiles(const std::string& dir);

 private:
  TuningMetadata md_;
  std::string dir_, path_;
  bool foreign_ = false;
  double margin_ = 0.03;
  std::map<TuningKey, TuningEntry> entries_;
  StoredRoofline roofline_;
  void chooseWinner(TuningEntry& e) const;
};

// Parses "a=1,b=2" (configToString's form) back into a config; nullopt on malformed text.
std::optional<std::map<std::string, int64_t>> parseConfigString(const std::string& s);

}  // namespace deepinfer
