#include "ModelBenchSpecRows.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ReportText.h"

namespace deepinfer::bench {
namespace {

// JSON numbers (non-finite: null) and errors.
std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }
std::string err(const std::string& e) { return e.empty() ? "null" : js(e); }

std::string rowName(const SpecRow& r) {
  if (r.kind == "oracle") return fmt::format("oracle a={}", r.forced);
  if (r.kind == "plain") return "plain (no drafts)";
  if (r.kind == "draft") return "draft pass alone";
  if (r.kind == "model") return "model drafts";
  if (r.kind == "record") return "oracle recording";
  return r.kind;
}

}  // namespace

int64_t oracleContinuationLength(int steps, int blockSize) { return 1 + int64_t(steps) * (blockSize + 1); }

std::vector<int32_t> oracleDrafts(const std::vector<int32_t>& continuation, int64_t at, int forced, int blockSize,
                                  int64_t vocab) {
  if (at < 1 || at + blockSize > int64_t(continuation.size())) return {};
  std::vector<int32_t> d(continuation.begin() + at, continuation.begin() + at + blockSize);
  if (forced < blockSize) d[size_t(forced)] = int32_t((int64_t(d[size_t(forced)]) + 1) % vocab);
  return d;
}

std::string oracleStepMismatch(const std::vector<int32_t>& continuation, int64_t at, int forced, int accepted,
                               const std::vector<int32_t>& emitted) {
  const int64_t end = at + forced + 1;
  if (at < 1 || end > int64_t(continuation.size()))
    return fmt::format("the recorded continuation ({} tokens) ends before position {}", continuation.size(), end);
  const std::vector<int32_t> want(continuation.begin() + at, continuation.begin() + end);
  if (accepted == forced && emitted == want) return "";
  return fmt::format("accepted {} of the forced {}, emitted [{}] where the recording has [{}]", accepted, forced,
                     fmt::join(emitted, ", "), fmt::join(want, ", "));
}

void AcceptTally::add(int accepted) {
  min_ = steps_ == 0 ? accepted : std::min(min_, accepted);
  max_ = steps_ == 0 ? accepted : std::max(max_, accepted);
  ++steps_;
  accepted_ += accepted;
}

void AcceptTally::mismatch(int stream, int step, const std::string& what) {
  if (mismatched_++ == 0) firstMismatch_ = fmt::format("stream {}, step {}: {}", stream, step, what);
}

void AcceptTally::finish(SpecRow& row) const {
  row.meanAccepted = steps_ > 0 ? double(accepted_) / double(steps_) : 0;
  row.minAccepted = min_;
  row.maxAccepted = max_;
  row.mismatchedSteps = mismatched_;
  if (row.kind != "oracle" || !row.error.empty()) return;
  if (mismatched_ > 0 || (steps_ > 0 && (min_ != row.forced || max_ != row.forced)))
    row.error = fmt::format(
        "oracle a={}: {} stream-step(s) left the recorded continuation (timed steps accepted {}..{}, mean {:.3f}); "
        "first: {}. The verify steps did not reproduce the recording's rows bit for bit, so this row does not "
        "measure acceptance length {}",
        row.forced, mismatched_, min_, max_, row.meanAccepted, firstMismatch_, row.forced);
}

void printSpecRows(const std::vector<SpecRow>& rows, int blockSize) {
  if (rows.empty()) return;
  std::map<int, double> plainMs;
  for (const SpecRow& r : rows)
    if (r.kind == "plain" && r.error.empty()) plainMs[r.streams] = r.stepMs;
  fmt::print("\nspeculative decoding (DSpark, block {}): per step of all streams\n", blockSize);
  fmt::print("{:>8} {:>20} {:>10} {:>7} {:>9} {:>9} {:>10} {:>9}\n", "streams", "step", "ms/step", "forced", "accepted",
             "min..max", "tok/s", "vs plain");
  for (const SpecRow& r : rows) {
    const std::string forced = r.kind == "oracle" ? fmt::format("{}", r.forced) : "-";
    const bool accepts = r.kind != "draft";
    const std::string range = accepts ? fmt::format("{}..{}", r.minAccepted, r.maxAccepted) : "-";
    const auto plain = plainMs.find(r.streams);
    const std::string vsPlain =
        plain != plainMs.end() && plain->second > 0 && r.stepMs > 0 ? fmt::format("{:.2f}x", r.stepMs / plain->second)
                                                                    : "-";
    if (r.stepMs > 0 || r.kind == "record")
      fmt::print("{:>8} {:>20} {:>10.2f} {:>7} {:>9} {:>9} {:>10} {:>9}\n", r.streams, rowName(r), r.stepMs, forced,
                 accepts ? fmt::format("{:.2f}", r.meanAccepted) : "-", range,
                 r.tokPerS > 0 ? fmt::format("{:.1f}", r.tokPerS) : "-", vsPlain);
    if (!r.error.empty()) fmt::print("{:>8} {:>20} ERROR {}\n", r.streams, rowName(r), r.error);
  }
  fmt::print("  oracle a: the target's own greedy continuation as drafts with draft a+1 wrong (a = {}: all right), "
             "recorded beforehand by greedy speculative steps at the same batch shape ('oracle recording', untimed "
             "but shown: its steps, draft pass + verify, include graph captures and first kernel compiles); every "
             "oracle step must accept "
             "exactly a (else the row is an error); its tok/s adds one draft pass per step. 'model drafts': the "
             "draft heads' own drafts (random weights: expect ~0 accepted).\n",
             blockSize);
}

std::string specRowsJson(const std::vector<SpecRow>& rows) {
  std::string o = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SpecRow& r = rows[i];
    o += fmt::format(
        "{}\n    {{\"streams\": {}, \"kind\": {}, \"forced_accepted\": {}, \"steps\": {}, \"step_ms\": {}, "
        "\"mean_accepted\": {}, \"min_accepted\": {}, \"max_accepted\": {}, \"mismatched_steps\": {}, \"tok_s\": {}, "
        "\"error\": {}}}",
        i ? "," : "", r.streams, js(r.kind), r.kind == "oracle" ? fmt::format("{}", r.forced) : "null", r.steps,
        num(r.stepMs), num(r.meanAccepted), r.minAccepted, r.maxAccepted, r.mismatchedSteps, num(r.tokPerS),
        err(r.error));
  }
  return o + "\n  ]";
}

}  // namespace deepinfer::bench
